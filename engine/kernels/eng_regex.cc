// RE2 behind eng_regex.h's C interface: the one C++ file of the engine,
// compiled in when the build finds libre2. No exception crosses into C:
// allocation failures are caught and reported as errors.
#include "eng_regex.h"

#include <re2/re2.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

struct eng_regex {
  RE2 re;
  eng_regex(const char *p, size_t n, const RE2::Options &o) : re(re2::StringPiece(p, n), o) {}
};

static void put_msg(char *msg, size_t cap, const std::string &s) {
  if (!msg || !cap) return;
  size_t n = s.size() < cap - 1 ? s.size() : cap - 1;
  std::memcpy(msg, s.data(), n);
  msg[n] = 0;
}

extern "C" bool eng_regex_available(void) { return true; }

extern "C" eng_regex *eng_regex_compile(const char *pattern, size_t len, char *msg, size_t cap) {
  try {
    RE2::Options o;
    o.set_log_errors(false);
    eng_regex *r = new eng_regex(pattern, len, o);
    if (!r->re.ok()) {
      put_msg(msg, cap, "invalid pattern: " + r->re.error());
      delete r;
      return nullptr;
    }
    return r;
  } catch (const std::bad_alloc &) {
    put_msg(msg, cap, "out of memory compiling a pattern");
    return nullptr;
  }
}

extern "C" void eng_regex_free(eng_regex *re) { delete re; }

extern "C" int eng_regex_full_match(const eng_regex *re, const char *s, size_t n) {
  return RE2::FullMatch(re2::StringPiece(s, n), re->re) ? 1 : 0;
}

extern "C" int eng_regex_check_rewrite(const eng_regex *re, const char *rw, size_t rwn, char *msg,
                                       size_t cap) {
  try {
    std::string why;
    if (re->re.CheckRewriteString(re2::StringPiece(rw, rwn), &why)) return 0;
    put_msg(msg, cap, "invalid rewrite: " + why);
  } catch (const std::bad_alloc &) {
    put_msg(msg, cap, "out of memory");
  }
  return -1;
}

extern "C" int eng_regex_replace(const eng_regex *re, const char *s, size_t n, const char *rw,
                                 size_t rwn, bool global, char **out, size_t *out_len) {
  try {
    std::string buf(s, n);
    re2::StringPiece rewrite(rw, rwn);
    if (global)
      RE2::GlobalReplace(&buf, re->re, rewrite);
    else
      RE2::Replace(&buf, re->re, rewrite);
    char *p = static_cast<char *>(std::malloc(buf.size() + 1));
    if (!p) return -1;
    std::memcpy(p, buf.data(), buf.size());
    *out = p;
    *out_len = buf.size();
    return 0;
  } catch (const std::bad_alloc &) {
    return -1;
  }
}
