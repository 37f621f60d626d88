/* Regex ops over RE2 (eng_regex.h): StaticRegexReplace and
 * StaticRegexFullMatch, whose pattern is an attribute, compiled by the
 * load-time check (a bad pattern or rewrite fails the load naming the
 * node), and RegexReplace / RegexFullMatch, whose pattern is a scalar
 * input (a constant in the graphs tf.strings makes), compiled once per
 * distinct pattern through the cache. Without RE2 in the build, every
 * one of them fails its check: the load reports the node and the op.
 *
 * The cache of eng_regex.h lives here, in C: an open-addressing table of
 * pattern text -> compiled pattern under one C11 mutex, never shrunk. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_kernels.h"
#include "eng_regex.h"

#ifndef TD_HAVE_RE2
bool eng_regex_available(void) { return false; }
eng_regex *eng_regex_compile(const char *pattern, size_t len, char *msg, size_t cap) {
  (void)pattern, (void)len;
  if (msg && cap) snprintf(msg, cap, "this build of tensord has no RE2, which regex ops need");
  return NULL;
}
void eng_regex_free(eng_regex *re) { (void)re; }
int eng_regex_full_match(const eng_regex *re, const char *s, size_t n) {
  (void)re, (void)s, (void)n;
  return 0;
}
int eng_regex_check_rewrite(const eng_regex *re, const char *rw, size_t rwn, char *msg,
                            size_t cap) {
  (void)re, (void)rw, (void)rwn, (void)msg, (void)cap;
  return -1;
}
int eng_regex_replace(const eng_regex *re, const char *s, size_t n, const char *rw, size_t rwn,
                      bool global, char **out, size_t *out_len) {
  (void)re, (void)s, (void)n, (void)rw, (void)rwn, (void)global, (void)out, (void)out_len;
  return -1;
}
#endif

/* --- the cache ---------------------------------------------------------- */

#define CACHE_CELLS (2 * ENG_REGEX_CACHE_MAX) /* a power of two */

static struct cell {
  char *pattern;
  size_t len;
  eng_regex *re;
} cache[CACHE_CELLS];
static int cache_used;
static mtx_t cache_lock;
static once_flag cache_once = ONCE_FLAG_INIT;

static void cache_init(void) { mtx_init(&cache_lock, mtx_plain); }

static size_t pattern_hash(const char *p, size_t n) {
  uint64_t h = 1469598103934665603ull; /* FNV-1a */
  for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)p[i]) * 1099511628211ull;
  return (size_t)(h ^ h >> 32);
}

const eng_regex *eng_regex_cached(const char *pattern, size_t len, bool *full, char *msg,
                                  size_t cap) {
  call_once(&cache_once, cache_init);
  *full = false;
  mtx_lock(&cache_lock);
  size_t at = pattern_hash(pattern, len) & (CACHE_CELLS - 1);
  for (; cache[at].pattern; at = (at + 1) & (CACHE_CELLS - 1))
    if (cache[at].len == len && !memcmp(cache[at].pattern, pattern, len)) {
      eng_regex *re = cache[at].re;
      mtx_unlock(&cache_lock);
      return re;
    }
  eng_regex *re = NULL;
  if (cache_used >= ENG_REGEX_CACHE_MAX) {
    *full = true;
  } else if ((re = eng_regex_compile(pattern, len, msg, cap))) {
    char *copy = malloc(len + 1);
    if (copy) {
      memcpy(copy, pattern, len);
      copy[len] = 0;
      cache[at] = (struct cell){copy, len, re};
      cache_used++;
    } else {
      eng_regex_free(re);
      re = NULL;
      if (msg && cap) snprintf(msg, cap, "out of memory");
    }
  }
  mtx_unlock(&cache_lock);
  return re;
}

/* --- checks ------------------------------------------------------------- */

static td_code need_re2(const eng_node *n, td_err *err) {
  if (eng_regex_available()) return TD_OK;
  return td_err_set(err, TD_UNIMPLEMENTED,
                    "node '%s' (%s): regex ops need RE2, and this build of tensord has none",
                    n->name, n->op);
}

/* The attribute pattern's compiled form (cached), or an error naming n. */
static td_code static_pattern(const eng_node *n, const eng_regex **re, td_err *err) {
  td_code rc = need_re2(n, err);
  if (rc) return rc;
  const eng_attr *a = eng_node_attr(n, "pattern");
  if (!a || a->kind != ENG_ATTR_S)
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): no pattern attribute", n->name,
                      n->op);
  char msg[256] = "";
  bool full;
  *re = eng_regex_cached(a->s.data, a->s.len, &full, msg, sizeof msg);
  if (!*re)
    return td_err_set(err, full ? TD_RESOURCE_EXHAUSTED : TD_INVALID_ARGUMENT, "node '%s' (%s): %s",
                      n->name, n->op,
                      full ? "too many distinct regex patterns in this process" : msg);
  return TD_OK;
}

td_code eng_c_static_regex(const eng_node *n, td_err *err) {
  const eng_regex *re;
  td_code rc = static_pattern(n, &re, err);
  if (rc || strcmp(n->op, "StaticRegexReplace")) return rc;
  const eng_attr *rw = eng_node_attr(n, "rewrite");
  char msg[256] = "";
  if (eng_regex_check_rewrite(re, rw && rw->kind == ENG_ATTR_S ? rw->s.data : "",
                              rw && rw->kind == ENG_ATTR_S ? rw->s.len : 0, msg, sizeof msg))
    return td_err_set(err, TD_INVALID_ARGUMENT, "node '%s' (%s): %s", n->name, n->op, msg);
  return TD_OK;
}

td_code eng_c_regex(const eng_node *n, td_err *err) { return need_re2(n, err); }

/* --- kernels ------------------------------------------------------------ */

/* Pattern input i (a scalar string): cached, or *own compiled for this call. */
static td_code input_pattern(eng_kctx *c, int i, const eng_regex **re, eng_regex **own) {
  td_code rc = need_re2(c->node, c->err);
  if (rc) return rc;
  const eng_tensor *t = &c->in[i];
  if (t->dtype != ENG_DT_STRING || eng_tensor_numel(t) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d (the pattern) must be a scalar string", i);
  eng_str p = eng_tensor_strs(t)[0];
  char msg[256] = "";
  bool full;
  *own = NULL;
  *re = eng_regex_cached(p.data, p.len, &full, msg, sizeof msg);
  if (!*re && full) *re = *own = eng_regex_compile(p.data, p.len, msg, sizeof msg);
  if (!*re) return eng_kfail(c, TD_INVALID_ARGUMENT, "%s", msg);
  return TD_OK;
}

static td_code full_match(eng_kctx *c, const eng_regex *re) {
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc || (rc = eng_kout_raw(c, 0, ENG_DT_BOOL, &c->in[0].shape))) return rc;
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  bool *out = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) out[i] = eng_regex_full_match(re, s[i].data, s[i].len);
  return TD_OK;
}

static td_code replace(eng_kctx *c, const eng_regex *re, const char *rw, size_t rwn) {
  td_code rc = eng_kwant(c, 0, ENG_DT_STRING);
  if (rc) return rc;
  bool global = eng_node_attr_bool(c->node, "replace_global", true);
  int64_t n = eng_tensor_numel(&c->in[0]);
  const eng_str *s = eng_tensor_strs(&c->in[0]);
  eng_strbuild b = {0};
  for (int64_t i = 0; !rc && i < n; i++) {
    char *out = NULL;
    size_t len = 0;
    if (eng_regex_replace(re, s[i].data, s[i].len, rw, rwn, global, &out, &len))
      rc = eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
    else
      rc = eng_strbuild_add(c, &b, out, len);
    free(out);
  }
  if (rc) {
    eng_strbuild_free(&b);
    return rc;
  }
  return eng_strbuild_finish(c, &b, 0, &c->in[0].shape);
}

td_code eng_k_static_regex_full_match(eng_kctx *c) {
  const eng_regex *re;
  td_code rc = static_pattern(c->node, &re, c->err);
  return rc ? rc : full_match(c, re);
}

td_code eng_k_static_regex_replace(eng_kctx *c) {
  const eng_regex *re;
  td_code rc = static_pattern(c->node, &re, c->err);
  if (rc) return rc;
  const eng_attr *rw = eng_node_attr(c->node, "rewrite");
  bool have = rw && rw->kind == ENG_ATTR_S;
  return replace(c, re, have ? rw->s.data : "", have ? rw->s.len : 0);
}

td_code eng_k_regex_full_match(eng_kctx *c) {
  const eng_regex *re;
  eng_regex *own;
  td_code rc = input_pattern(c, 1, &re, &own);
  if (!rc) rc = full_match(c, re);
  eng_regex_free(own);
  return rc;
}

td_code eng_k_regex_replace(eng_kctx *c) {
  const eng_regex *re;
  eng_regex *own = NULL;
  const eng_tensor *rw = &c->in[2];
  if (rw->dtype != ENG_DT_STRING || eng_tensor_numel(rw) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input 2 (the rewrite) must be a scalar string");
  td_code rc = input_pattern(c, 1, &re, &own);
  if (rc) return rc;
  eng_str r = eng_tensor_strs(rw)[0];
  char msg[256] = "";
  if (eng_regex_check_rewrite(re, r.data, r.len, msg, sizeof msg))
    rc = eng_kfail(c, TD_INVALID_ARGUMENT, "%s", msg);
  else
    rc = replace(c, re, r.data, r.len);
  eng_regex_free(own);
  return rc;
}
