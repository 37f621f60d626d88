/* eng_unicode: the Unicode text primitives the string kernels share:
 * decoding and encoding code points in UTF-8, UTF-16 and UTF-32 (big- and
 * little-endian), and full case mapping with the Final_Sigma rule.
 *
 * Decoding follows the Unicode standard's "maximal subpart" practice (the
 * one TensorFlow's ICU converters follow): each ill-formed sequence is one
 * error, consumed up to the first byte that cannot continue it, so
 * "\xE2\x82x" is one error then 'x'. Surrogates and values past U+10FFFF
 * are errors in every encoding form; a trailing partial code unit is one
 * error.
 *
 * The case tables are generated (scripts/gen_unicase.py, eng_unicase.inc)
 * from the Unicode Character Database of the Python that ran the script;
 * ENG_UNICASE_VERSION names it (14.0 with Python 3.11; TensorFlow 2.19's
 * ICU has Unicode 13, so the 40 case pairs added in 14 - Vithkuqi,
 * U+2C2F / U+2C5F, U+A7C0.. - map here and not there). They cover every
 * code point, with the
 * unconditional SpecialCasing entries (U+00DF upper -> "SS", U+0130 lower
 * -> "i\u0307") and the language-independent Final_Sigma context; the
 * language-specific rules (Turkish, Lithuanian) are not applied, as in
 * TensorFlow's root-locale ICU calls.
 *
 * Pure functions over caller memory: thread-safe, no allocation. */
#ifndef ENG_UNICODE_H
#define ENG_UNICODE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
  ENG_UTF8,
  ENG_UTF16BE,
  ENG_UTF16LE,
  ENG_UTF32BE,
  ENG_UTF32LE,
} eng_uenc;

/* TensorFlow's encoding names ("UTF-8", "UTF-16-BE", ...; case and '-'
 * / '_' insensitive as ICU's aliases are); false for any other. */
bool eng_uenc_parse(const char *name, eng_uenc *out);

/* Valid scalar value: 0..U+10FFFF outside the surrogates. */
bool eng_uni_valid(int64_t cp);

/* Decodes the code point at s[*pos] (pos < n) and advances *pos past it;
 * -1 for an ill-formed sequence, *pos then past its maximal subpart. */
int32_t eng_utf_next(eng_uenc enc, const unsigned char *s, size_t n, size_t *pos);

/* Writes valid code point cp in enc into buf[4]; returns the byte count. */
size_t eng_utf_put(eng_uenc enc, uint32_t cp, char *buf);

/* Full case mapping of cp: writes 1 to 3 code points to out, returns the
 * count (cp itself when it has no mapping). Lower maps U+03A3 to the
 * non-final U+03C3; eng_unicase_final_sigma decides. */
int eng_unicase_lower(uint32_t cp, uint32_t out[3]);
int eng_unicase_upper(uint32_t cp, uint32_t out[3]);

/* Final_Sigma: whether the capital sigma at cps[i] is word-final (a cased
 * letter before it, none after it, case-ignorable ones skipped). */
bool eng_unicase_final_sigma(const int32_t *cps, size_t n, size_t i);

#endif
