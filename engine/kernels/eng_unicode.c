/* UTF codecs and case mapping (eng_unicode.h). The case tables are runs of
 * code points sharing a delta (stride 1, or 2 for the alternating upper /
 * lower pairs of the Latin and Cyrillic extensions), bisected by their
 * first code point. */
#include "eng_unicode.h"

#include <ctype.h>
#include <string.h>

typedef struct {
  uint32_t lo, hi;
  int stride;
  int32_t delta;
} eng_unicase_run;

typedef struct {
  uint32_t cp;
  int n;
  uint32_t to[3];
} eng_unicase_multi;

typedef struct {
  uint32_t lo, hi;
} eng_unicase_range;

#include "eng_unicase.inc"

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

bool eng_uenc_parse(const char *name, eng_uenc *out) {
  char k[16];
  size_t n = 0;
  for (const char *p = name; *p; p++) {
    if (*p == '-' || *p == '_') continue;
    if (n + 1 >= sizeof k) return false;
    k[n++] = (char)toupper((unsigned char)*p);
  }
  k[n] = 0;
  static const struct {
    const char *name;
    eng_uenc enc;
  } names[] = {{"UTF8", ENG_UTF8},
               {"UTF16BE", ENG_UTF16BE},
               {"UTF16LE", ENG_UTF16LE},
               {"UTF32BE", ENG_UTF32BE},
               {"UTF32LE", ENG_UTF32LE}};
  for (size_t i = 0; i < COUNT(names); i++)
    if (!strcmp(k, names[i].name)) {
      *out = names[i].enc;
      return true;
    }
  return false;
}

bool eng_uni_valid(int64_t cp) { return cp >= 0 && cp <= 0x10FFFF && (cp < 0xD800 || cp > 0xDFFF); }

static int32_t utf8_next(const unsigned char *s, size_t n, size_t *pos) {
  size_t i = *pos;
  unsigned b = s[i];
  if (b < 0x80) {
    *pos = i + 1;
    return (int32_t)b;
  }
  int need;
  unsigned lo = 0x80, hi = 0xBF; /* the second byte's range (Unicode table 3-7) */
  uint32_t cp;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1, cp = b & 0x1F;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2, cp = b & 0x0F;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3, cp = b & 0x07;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *pos = i + 1;
    return -1;
  }
  i++;
  for (int k = 0; k < need; k++, i++) {
    unsigned c = i < n ? s[i] : 0;
    if (i >= n || c < lo || c > hi) {
      *pos = i; /* the maximal subpart ends before the byte that broke it */
      return -1;
    }
    cp = cp << 6 | (c & 0x3F);
    lo = 0x80, hi = 0xBF;
  }
  *pos = i;
  return (int32_t)cp;
}

static uint32_t unit16(const unsigned char *p, bool be) {
  return be ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

int32_t eng_utf_next(eng_uenc enc, const unsigned char *s, size_t n, size_t *pos) {
  size_t i = *pos;
  switch (enc) {
    case ENG_UTF8:
      return utf8_next(s, n, pos);
    case ENG_UTF16BE:
    case ENG_UTF16LE: {
      bool be = enc == ENG_UTF16BE;
      if (n - i < 2) {
        *pos = n;
        return -1;
      }
      uint32_t u = unit16(s + i, be);
      *pos = i + 2;
      if (u < 0xD800 || u > 0xDFFF) return (int32_t)u;
      if (u >= 0xDC00 || n - i < 4) return -1;
      uint32_t v = unit16(s + i + 2, be);
      if (v < 0xDC00 || v > 0xDFFF) return -1;
      *pos = i + 4;
      return (int32_t)(0x10000 + ((u - 0xD800) << 10) + (v - 0xDC00));
    }
    default: {
      if (n - i < 4) {
        *pos = n;
        return -1;
      }
      const unsigned char *p = s + i;
      uint32_t u = enc == ENG_UTF32BE
                       ? (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]
                       : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
      *pos = i + 4;
      return eng_uni_valid(u) ? (int32_t)u : -1;
    }
  }
}

static void put16(char *b, uint32_t u, bool be) {
  b[be ? 0 : 1] = (char)(u >> 8);
  b[be ? 1 : 0] = (char)(u & 0xFF);
}

size_t eng_utf_put(eng_uenc enc, uint32_t cp, char *b) {
  switch (enc) {
    case ENG_UTF8:
      if (cp < 0x80) {
        b[0] = (char)cp;
        return 1;
      }
      if (cp < 0x800) {
        b[0] = (char)(0xC0 | cp >> 6);
        b[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
      }
      if (cp < 0x10000) {
        b[0] = (char)(0xE0 | cp >> 12);
        b[1] = (char)(0x80 | (cp >> 6 & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
      }
      b[0] = (char)(0xF0 | cp >> 18);
      b[1] = (char)(0x80 | (cp >> 12 & 0x3F));
      b[2] = (char)(0x80 | (cp >> 6 & 0x3F));
      b[3] = (char)(0x80 | (cp & 0x3F));
      return 4;
    case ENG_UTF16BE:
    case ENG_UTF16LE: {
      bool be = enc == ENG_UTF16BE;
      if (cp < 0x10000) {
        put16(b, cp, be);
        return 2;
      }
      put16(b, 0xD800 + ((cp - 0x10000) >> 10), be);
      put16(b + 2, 0xDC00 + ((cp - 0x10000) & 0x3FF), be);
      return 4;
    }
    default:
      for (int k = 0; k < 4; k++) b[enc == ENG_UTF32BE ? k : 3 - k] = (char)(cp >> (24 - 8 * k));
      return 4;
  }
}

static int map(uint32_t cp, const eng_unicase_run *runs, size_t nruns,
               const eng_unicase_multi *multi, size_t nmulti, uint32_t out[3]) {
  for (size_t i = 0; i < nmulti; i++)
    if (multi[i].cp == cp) {
      memcpy(out, multi[i].to, sizeof multi[i].to);
      return multi[i].n;
    }
  size_t a = 0, b = nruns; /* the last run with lo <= cp */
  while (b - a > 1) {
    size_t m = (a + b) / 2;
    if (runs[m].lo <= cp)
      a = m;
    else
      b = m;
  }
  out[0] = cp;
  if (nruns && runs[a].lo <= cp && cp <= runs[a].hi && (cp - runs[a].lo) % runs[a].stride == 0)
    out[0] = (uint32_t)((int64_t)cp + runs[a].delta);
  return 1;
}

int eng_unicase_lower(uint32_t cp, uint32_t out[3]) {
  if (cp < 0x80) {
    out[0] = cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
    return 1;
  }
  return map(cp, lower_runs, COUNT(lower_runs), lower_multi, COUNT(lower_multi), out);
}

int eng_unicase_upper(uint32_t cp, uint32_t out[3]) {
  if (cp < 0x80) {
    out[0] = cp >= 'a' && cp <= 'z' ? cp - 32 : cp;
    return 1;
  }
  return map(cp, upper_runs, COUNT(upper_runs), upper_multi, COUNT(upper_multi), out);
}

static bool in_ranges(int32_t cp, const eng_unicase_range *r, size_t n) {
  if (cp < 0) return false;
  size_t a = 0, b = n;
  while (a < b) {
    size_t m = (a + b) / 2;
    if ((uint32_t)cp > r[m].hi)
      a = m + 1;
    else if ((uint32_t)cp < r[m].lo)
      b = m;
    else
      return true;
  }
  return false;
}

static bool ignorable(int32_t cp) { return in_ranges(cp, case_ignorable, COUNT(case_ignorable)); }

bool eng_unicase_final_sigma(const int32_t *cps, size_t n, size_t i) {
  size_t j = i;
  while (j > 0 && ignorable(cps[j - 1])) j--;
  if (j == 0 || !in_ranges(cps[j - 1], cased, COUNT(cased))) return false;
  for (j = i + 1; j < n && ignorable(cps[j]); j++) {
  }
  return j == n || !in_ranges(cps[j], cased, COUNT(cased));
}
