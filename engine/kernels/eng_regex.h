/* eng_regex: regular expressions in RE2's syntax (TensorFlow's regex ops
 * use RE2), behind a C interface. eng_regex.cc wraps Debian's libre2 and
 * is compiled in only when the build finds it (TD_HAVE_RE2); without it
 * eng_regex_available() is false, compiling fails with a message saying
 * so, and the regex ops fail the load of a version that needs them,
 * naming the node and the op.
 *
 * Patterns compile with RE2's defaults (UTF-8, leftmost-first), as
 * TensorFlow's kernels construct them, errors returned rather than
 * logged. A compiled pattern is immutable: any number of threads may
 * match with it at once.
 *
 * eng_regex_cached keeps compiled patterns for the process, keyed by
 * their text: the load-time checks of the static regex ops (whose pattern
 * is an attribute) compile it there once, and kernels find it at no
 * compile cost. Patterns that arrive as tensors go through the same cache
 * up to a bound (ENG_REGEX_CACHE_MAX distinct patterns); past it they are
 * compiled per call by the kernel. Cached patterns live until exit.
 *
 * Failures: NULL or -1 with a message in msg[cap] (bad pattern or rewrite,
 * out of memory, RE2 absent). */
#ifndef ENG_REGEX_H
#define ENG_REGEX_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ENG_REGEX_CACHE_MAX 4096

typedef struct eng_regex eng_regex;

bool eng_regex_available(void);
eng_regex *eng_regex_compile(const char *pattern, size_t len, char *msg, size_t cap);
void eng_regex_free(eng_regex *re);
/* 1 when the whole of s matches, 0 otherwise. */
int eng_regex_full_match(const eng_regex *re, const char *s, size_t n);
/* 0 when rewrite's \N references exist in re (RE2::CheckRewriteString), -1
 * with the reason. */
int eng_regex_check_rewrite(const eng_regex *re, const char *rw, size_t rwn, char *msg, size_t cap);
/* s with its first (or, global, every non-overlapping) match replaced by
 * rewrite (\0-\9 name groups); *out is malloc'd, owned by the caller.
 * -1 on out of memory. */
int eng_regex_replace(const eng_regex *re, const char *s, size_t n, const char *rw, size_t rwn,
                      bool global, char **out, size_t *out_len);

/* The process's compiled pattern for `pattern`, compiling it on first use;
 * NULL with msg on a bad pattern, or with *full set when the cache is at
 * its bound (the caller compiles and frees its own). Thread-safe. */
const eng_regex *eng_regex_cached(const char *pattern, size_t len, bool *full, char *msg,
                                  size_t cap);

#ifdef __cplusplus
}
#endif

#endif
