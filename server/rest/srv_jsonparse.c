/* srv_jsonparse: rapidjson's JSON grammar into a cJSON tree (contract in
 * srv_jsonparse.h).
 *
 * Design notes.
 * - The parser is ours, not cJSON_Parse: cJSON keeps numbers as doubles only,
 *   so it cannot tell 1 from 1.0 (int32 inputs must reject 1.0) nor keep int64
 *   exact, and it rejects NaN/Infinity, which TF Serving accepts. We follow
 *   rapidjson's grammar and messages (TF Serving's parser) and still build a
 *   cJSON tree. The extra facts live where cJSON does not look: integer
 *   literals carry private type bits above cJSON's 0xFF type byte (every cJSON
 *   function masks with 0xFF); integers beyond 2^53 keep their digits in
 *   valuestring; string nodes keep their byte length in valueint, unused by
 *   cJSON for strings.
 * - Every node and string of a document comes from a few slabs owned by the
 *   document (jdoc), freed together by srv_json_free: one allocation per
 *   slab instead of one or two per value, and a body's numbers end up next
 *   to each other in memory for the decoder's walk. The root node is the
 *   document's first member, so the root pointer finds its document. */
#include "srv_jsonparse.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define F_INT (1 << 12)  /* integer literal within int64 */
#define F_UINT (1 << 13) /* integer literal within (INT64_MAX, UINT64_MAX] */
#define EXACT_INT (1ULL << 53) /* integers up to here are exact doubles */

/* ================================ parser ================================== */

typedef struct jslab {
  struct jslab *next;
  size_t used, cap;
  max_align_t data[];
} jslab;

typedef struct jdoc {
  cJSON root; /* first: srv_json_free finds the document from it */
  jslab *slabs;
} jdoc;

#define JP_SLAB_MIN ((size_t)4 << 10)
#define JP_SLAB_MAX ((size_t)64 << 10) /* below the mmap threshold: heap memory reused */

typedef struct jparser {
  const unsigned char *s;
  size_t n, i;
  td_code code; /* of the first failure */
  td_err *err;
  jdoc *doc;
} jparser;

static void doc_free(jdoc *d) {
  for (jslab *s = d->slabs, *next; s; s = next) {
    next = s->next;
    free(s);
  }
  free(d);
}

static int jp_peek(const jparser *p) { return p->i < p->n ? p->s[p->i] : 0; }

static void jp_ws(jparser *p) {
  while (p->i < p->n) {
    unsigned char c = p->s[p->i];
    if (c != ' ' && c != '\n' && c != '\r' && c != '\t') break;
    p->i++;
  }
}

static cJSON *jp_fail(jparser *p, const char *what, size_t off) {
  p->code = TD_INVALID_ARGUMENT;
  td_err_set(p->err, TD_INVALID_ARGUMENT, "JSON Parse error: %s at offset: %zu", what, off);
  return NULL;
}

static cJSON *jp_oom(jparser *p) {
  p->code = TD_RESOURCE_EXHAUSTED;
  td_err_set(p->err, TD_RESOURCE_EXHAUSTED, "out of memory parsing the JSON body");
  return NULL;
}

/* n bytes from the document's slabs (NULL when out of memory). Slabs grow
 * from JP_SLAB_MIN to JP_SLAB_MAX; a larger request gets a slab of its own,
 * linked behind the current one, which keeps serving small requests. */
static void *jp_alloc(jparser *p, size_t n) {
  const size_t align = sizeof(max_align_t);
  n = (n + align - 1) / align * align;
  jslab *s = p->doc->slabs;
  if (s && s->cap - s->used >= n) {
    void *r = (char *)s->data + s->used;
    s->used += n;
    return r;
  }
  size_t cap = s ? s->cap * 2 : JP_SLAB_MIN;
  if (cap > JP_SLAB_MAX) cap = JP_SLAB_MAX;
  bool own = n > cap;
  if (own) cap = n;
  jslab *ns = malloc(sizeof *ns + cap);
  if (!ns) return NULL;
  ns->cap = cap;
  ns->used = n;
  if (own && s) {
    ns->next = s->next;
    s->next = ns;
  } else {
    ns->next = s;
    p->doc->slabs = ns;
  }
  return ns->data;
}

static cJSON *jp_node(jparser *p, int type) {
  cJSON *v = jp_alloc(p, sizeof *v);
  if (!v) return jp_oom(p);
  memset(v, 0, sizeof *v);
  v->type = type;
  return v;
}

static cJSON *jp_value(jparser *p, int depth, bool root);

static cJSON *jp_literal(jparser *p, const char *word, int type) {
  for (size_t k = 0; word[k]; k++, p->i++)
    if (jp_peek(p) != word[k]) return jp_fail(p, "Invalid value.", p->i);
  return jp_node(p, type);
}

static int jp_hex4(jparser *p) {
  unsigned v = 0;
  for (int k = 0; k < 4; k++, p->i++) {
    int c = jp_peek(p);
    if (c >= '0' && c <= '9')
      v = v << 4 | (unsigned)(c - '0');
    else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
      v = v << 4 | (unsigned)((c | 0x20) - 'a' + 10);
    else
      return -1;
  }
  return (int)v;
}

/* Reads a string at p->i (on the opening quote) into the document's memory. */
static char *jp_string(jparser *p, size_t *out_len) {
  size_t start = ++p->i, j = start;
  while (j < p->n && p->s[j] != '"' && p->s[j] != 0) j += p->s[j] == '\\' ? 2 : 1;
  size_t cap = (j < p->n ? j : p->n) - start + 1;
  char *buf = jp_alloc(p, cap);
  if (!buf) return (char *)jp_oom(p);
  size_t o = 0;
  const char *bad = NULL;
  size_t bad_at = 0;
  for (;;) {
    int c = jp_peek(p);
    char enc[4];
    size_t en = 1;
    if (c == '"') {
      p->i++;
      break;
    }
    if (c == '\\') {
      size_t esc = p->i++;
      int e = jp_peek(p);
      const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
      const char *hit = e ? strchr(from, e) : NULL;
      if (hit) {
        enc[0] = to[hit - from];
        p->i++;
      } else if (e == 'u') {
        p->i++;
        int cp = jp_hex4(p);
        if (cp < 0) {
          bad = "Incorrect hex digit after \\u escape in string.", bad_at = esc;
          break;
        }
        if (cp >= 0xD800 && cp <= 0xDBFF) {
          int lo = -1;
          if (jp_peek(p) == '\\' && (p->i++, jp_peek(p) == 'u')) {
            p->i++;
            lo = jp_hex4(p);
            if (lo < 0) {
              bad = "Incorrect hex digit after \\u escape in string.", bad_at = esc;
              break;
            }
          }
          if (lo < 0xDC00 || lo > 0xDFFF) {
            bad = "The surrogate pair in string is invalid.", bad_at = esc;
            break;
          }
          cp = (((cp - 0xD800) << 10) | (lo - 0xDC00)) + 0x10000;
        }
        if (cp < 0x80) {
          enc[0] = (char)cp;
        } else if (cp < 0x800) {
          enc[0] = (char)(0xC0 | cp >> 6), enc[1] = (char)(0x80 | (cp & 63)), en = 2;
        } else if (cp < 0x10000) {
          enc[0] = (char)(0xE0 | cp >> 12), enc[1] = (char)(0x80 | ((cp >> 6) & 63));
          enc[2] = (char)(0x80 | (cp & 63)), en = 3;
        } else {
          enc[0] = (char)(0xF0 | cp >> 18), enc[1] = (char)(0x80 | ((cp >> 12) & 63));
          enc[2] = (char)(0x80 | ((cp >> 6) & 63)), enc[3] = (char)(0x80 | (cp & 63)), en = 4;
        }
      } else {
        bad = "Invalid escape character in string.", bad_at = esc;
        break;
      }
    } else if (c < 0x20) {
      bad = c == 0 ? "Missing a closing quotation mark in string." : "Invalid encoding in string.";
      bad_at = p->i;
      break;
    } else {
      enc[0] = (char)c;
      p->i++;
    }
    /* An escape never grows its text, so cap (the raw length) suffices;
     * the check keeps that a property we do not have to trust. */
    if (o + en >= cap) {
      bad = "Invalid encoding in string.", bad_at = p->i;
      break;
    }
    memcpy(buf + o, enc, en);
    o += en;
  }
  if (bad) return (char *)jp_fail(p, bad, bad_at);
  buf[o] = '\0';
  *out_len = o;
  return buf;
}

static cJSON *jp_string_node(jparser *p) {
  size_t len;
  char *s = jp_string(p, &len);
  if (!s) return NULL;
  cJSON *v = jp_node(p, cJSON_String);
  if (!v) return NULL;
  v->valuestring = s;
  v->valueint = len <= INT_MAX ? (int)len : -1;
  return v;
}

static bool is_digit(int c) { return c >= '0' && c <= '9'; }

/* A number node as cJSON_CreateNumber makes one (valueint saturated);
 * digits (len > 0) are kept for integers beyond 2^53. */
static cJSON *jp_number_value(jparser *p, double d, int flags, const char *digits, size_t len) {
  cJSON *v = jp_node(p, cJSON_Number | flags);
  if (!v) return NULL;
  v->valuedouble = d;
  v->valueint = d >= INT_MAX ? INT_MAX : d <= (double)INT_MIN ? INT_MIN : isnan(d) ? 0 : (int)d;
  if (len) {
    if (!(v->valuestring = jp_alloc(p, len + 1))) return jp_oom(p);
    memcpy(v->valuestring, digits, len + 1);
  }
  return v;
}

/* A number node; digits (len > 0) are kept for integers beyond 2^53. */
static cJSON *jp_number_node(jparser *p, double d, int flags, const char *digits, size_t len,
                             size_t start) {
  if (isinf(d)) return jp_fail(p, "Number too big to be stored in double.", start);
  return jp_number_value(p, d, flags, digits, len);
}

/* m / 10^k, correctly rounded to double, for m < 2^64 and 1 <= k <= 21 (the
 * 17-digit decimals that clients print, which miss the Clinger fast path):
 * the 128-bit quotient of m (shifted up to bit 63) * 2^64 by 10^k keeps at
 * least 57 significant bits, and the remainder tells whether anything was
 * cut, so rounding to 53 bits (to nearest, ties to even) is exact. */
static double div_pow10(uint64_t m, int k) {
  if (!m) return 0.0;
  int lz = __builtin_clzll(m);
  unsigned __int128 num = (unsigned __int128)(m << lz) << 64, den = 1;
  for (int i = 0; i < k; i++) den *= 10;
  unsigned __int128 q = num / den, r = num % den;
  uint64_t hi64 = (uint64_t)(q >> 64);
  int top = hi64 ? 127 - __builtin_clzll(hi64) : 63 - __builtin_clzll((uint64_t)q);
  int shift = top - 52; /* >= 4: q >= 2^127 / 10^21 */
  uint64_t mant = (uint64_t)(q >> shift);
  bool half = (q >> (shift - 1)) & 1;
  bool rest = r != 0 || (q & (((unsigned __int128)1 << (shift - 1)) - 1)) != 0;
  if (half && (rest || (mant & 1)) && ++mant >> 53) {
    mant >>= 1;
    shift++;
  }
  return ldexp((double)mant, shift - 64 - lz); /* a normal double: exact */
}

static cJSON *jp_number(jparser *p) {
  size_t start = p->i;
  bool minus = jp_peek(p) == '-';
  if (minus) p->i++;
  int c = jp_peek(p);
  if (c == 'N' || c == 'I') {
    const char *word = c == 'N' ? "NaN" : "Inf";
    for (int k = 0; k < 3; k++, p->i++)
      if (jp_peek(p) != word[k]) return jp_fail(p, "Invalid value.", p->i);
    if (c == 'I' && jp_peek(p) == 'i') {
      for (const char *w = "inity"; *w; w++, p->i++)
        if (jp_peek(p) != *w) return jp_fail(p, "Invalid value.", p->i);
    }
    return jp_number_value(p, c == 'N' ? NAN : minus ? -INFINITY : INFINITY, 0, NULL, 0);
  }
  uint64_t mag = 0;
  bool overflow = false;
  if (c == '0') {
    p->i++;
  } else if (c >= '1' && c <= '9') {
    for (; is_digit(jp_peek(p)); p->i++) {
      unsigned d = (unsigned)(jp_peek(p) - '0');
      if (mag > (UINT64_MAX - d) / 10) overflow = true;
      mag = mag * 10 + d;
    }
  } else {
    return jp_fail(p, "Invalid value.", p->i);
  }
  /* Decimals: mantissa m and exponent e10 for the exact fast paths
   * (Clinger: m <= 2^53 and |e10| <= 22 make m * 10^e10 one correctly
   * rounded operation; then div_pow10 for up to 18 digits over a negative
   * power of ten); anything else goes to strtod. */
  bool integer = true, exact = !overflow;
  uint64_t m = mag;
  int e10 = 0;
  if (jp_peek(p) == '.') {
    p->i++;
    if (!is_digit(jp_peek(p))) return jp_fail(p, "Miss fraction part in number.", p->i);
    for (; is_digit(jp_peek(p)); p->i++) {
      if (m >= 100000000000000000ULL) {
        exact = false;
        continue;
      }
      m = m * 10 + (unsigned)(jp_peek(p) - '0');
      e10--;
    }
    integer = false;
  }
  if (jp_peek(p) == 'e' || jp_peek(p) == 'E') {
    p->i++;
    bool eminus = jp_peek(p) == '-';
    if (jp_peek(p) == '+' || jp_peek(p) == '-') p->i++;
    if (!is_digit(jp_peek(p))) return jp_fail(p, "Miss exponent in number.", p->i);
    int ex = 0;
    for (; is_digit(jp_peek(p)); p->i++)
      if (ex < 100000) ex = ex * 10 + (jp_peek(p) - '0');
    e10 += eminus ? -ex : ex;
    integer = false;
  }
  size_t len = p->i - start;
  char small[64];
  char *text = small;
  int flags = 0;
  double d;
  bool fast = !integer && exact && m <= (1ULL << 53) && e10 >= -22 && e10 <= 22;
  if (fast) {
    static const double p10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    d = e10 >= 0 ? (double)m * p10[e10] : (double)m / p10[-e10];
    if (minus) d = -d;
    return jp_number_node(p, d, 0, NULL, 0, start);
  }
  if (!integer && exact && e10 >= -21 && e10 <= -1) {
    d = div_pow10(m, -e10);
    if (minus) d = -d;
    return jp_number_node(p, d, 0, NULL, 0, start);
  }
  text = len < sizeof small ? small : malloc(len + 1);
  if (!text) return jp_oom(p);
  memcpy(text, p->s + start, len);
  text[len] = '\0';
  if (integer && !overflow && !minus) {
    flags = mag <= INT64_MAX ? F_INT : F_UINT;
    d = (double)mag;
  } else if (integer && !overflow && mag <= (uint64_t)INT64_MAX + 1) {
    flags = F_INT;
    d = mag ? -(double)mag : 0.0; /* rapidjson reads "-0" as the integer 0 */
  } else {
    d = strtod(text, NULL);
  }
  cJSON *v = jp_number_node(p, d, flags, text, flags && mag > EXACT_INT ? len : 0, start);
  if (text != small) free(text);
  return v;
}

static void jp_append(cJSON *parent, cJSON **tail, cJSON *v) {
  if (*tail) {
    (*tail)->next = v;
    v->prev = *tail;
  } else {
    parent->child = v;
  }
  *tail = v;
  parent->child->prev = v;
}

static cJSON *jp_container(jparser *p, int depth, bool array) {
  if (depth >= SRV_JSON_MAX_DEPTH) {
    char what[96];
    snprintf(what, sizeof what, "The document is nested more than %d levels deep.",
             SRV_JSON_MAX_DEPTH);
    return jp_fail(p, what, p->i);
  }
  cJSON *c = jp_node(p, array ? cJSON_Array : cJSON_Object);
  if (!c) return NULL;
  cJSON *tail = NULL;
  p->i++;
  jp_ws(p);
  if (jp_peek(p) == (array ? ']' : '}')) {
    p->i++;
    return c;
  }
  for (;;) {
    char *key = NULL;
    if (!array) {
      size_t klen;
      if (jp_peek(p) != '"') {
        jp_fail(p, "Missing a name for object member.", p->i);
        return NULL; /* on failure, what was built goes with the document */
      }
      if (!(key = jp_string(p, &klen))) return NULL;
      jp_ws(p);
      if (jp_peek(p) != ':') {
        jp_fail(p, "Missing a colon after a name of object member.", p->i);
        return NULL;
      }
      p->i++;
      jp_ws(p);
    }
    cJSON *v = jp_value(p, depth + 1, false);
    if (!v) return NULL;
    v->string = key;
    jp_append(c, &tail, v);
    jp_ws(p);
    int ch = jp_peek(p);
    if (ch == ',') {
      p->i++;
      jp_ws(p);
    } else if (ch == (array ? ']' : '}')) {
      p->i++;
      return c;
    } else {
      jp_fail(p,
              array ? "Missing a comma or ']' after an array element."
                    : "Missing a comma or '}' after an object member.",
              p->i);
      return NULL;
    }
  }
}

static cJSON *jp_value(jparser *p, int depth, bool root) {
  switch (jp_peek(p)) {
    case 'n': return jp_literal(p, "null", cJSON_NULL);
    case 't': return jp_literal(p, "true", cJSON_True);
    case 'f': return jp_literal(p, "false", cJSON_False);
    case '"': return jp_string_node(p);
    case '{': return jp_container(p, depth, false);
    case '[': return jp_container(p, depth, true);
    case 0: case '}': case ']': case ',': case ':':
      /* rapidjson's iterative parser reports these by state */
      return jp_fail(p, root ? "The document is empty." : "Invalid value.", p->i);
    default: return jp_number(p);
  }
}

/* ================================ entry =================================== */

td_code srv_json_parse(const char *text, size_t len, cJSON **out, td_err *err) {
  jdoc *d = calloc(1, sizeof *d);
  if (!d) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory parsing the JSON body");
  jparser p = {.s = (const unsigned char *)text, .n = len, .err = err, .doc = d};
  /* rapidjson's EncodedInputStream<UTF8> drops a byte-order mark, byte by
   * byte; offsets still count from the first byte. */
  static const unsigned char bom[3] = {0xEF, 0xBB, 0xBF};
  for (int k = 0; k < 3; k++)
    if (jp_peek(&p) == bom[k]) p.i++;
  jp_ws(&p);
  cJSON *root = jp_value(&p, 0, true);
  if (!root) {
    doc_free(d);
    return p.code;
  }
  d->root = *root; /* nothing points at a root node: it may move */
  *out = &d->root;
  return TD_OK;
}

void srv_json_free(cJSON *root) {
  if (!root) return;
  doc_free((jdoc *)root); /* root is the document's first member */
}

/* ============================ value accessors ============================= */

srv_json_numkind srv_json_number(const cJSON *v, int64_t *i, uint64_t *u) {
  if (!cJSON_IsNumber(v) || !(v->type & (F_INT | F_UINT))) return SRV_JSON_NUM_DOUBLE;
  bool big = v->valuestring != NULL;
  if (v->type & F_UINT) {
    if (u) *u = big ? strtoull(v->valuestring, NULL, 10) : (uint64_t)v->valuedouble;
    return SRV_JSON_NUM_UINT64;
  }
  if (i) *i = big ? strtoll(v->valuestring, NULL, 10) : (int64_t)v->valuedouble;
  return SRV_JSON_NUM_INT64;
}

size_t srv_json_string_len(const cJSON *v) {
  if (!cJSON_IsString(v) || !v->valuestring) return 0;
  return v->valueint > 0 ? (size_t)v->valueint : strlen(v->valuestring);
}

bool srv_json_is_b64_object(const cJSON *v) {
  return cJSON_IsObject(v) && v->child && !v->child->next && v->child->string &&
         strcmp(v->child->string, "b64") == 0 && cJSON_IsString(v->child);
}

const char *srv_json_type_name(const cJSON *v) {
  switch (v->type & 0xFF) {
    case cJSON_NULL: return "Null";
    case cJSON_False: return "False";
    case cJSON_True: return "True";
    case cJSON_Object: return "Object";
    case cJSON_Array: return "Array";
    case cJSON_String: return "String";
    default: return "Number";
  }
}

/* ================================ base64 ================================== */

static const signed char unb64[256] = {
    ['A'] = 1,  ['B'] = 2,  ['C'] = 3,  ['D'] = 4,  ['E'] = 5,  ['F'] = 6,  ['G'] = 7,
    ['H'] = 8,  ['I'] = 9,  ['J'] = 10, ['K'] = 11, ['L'] = 12, ['M'] = 13, ['N'] = 14,
    ['O'] = 15, ['P'] = 16, ['Q'] = 17, ['R'] = 18, ['S'] = 19, ['T'] = 20, ['U'] = 21,
    ['V'] = 22, ['W'] = 23, ['X'] = 24, ['Y'] = 25, ['Z'] = 26, ['a'] = 27, ['b'] = 28,
    ['c'] = 29, ['d'] = 30, ['e'] = 31, ['f'] = 32, ['g'] = 33, ['h'] = 34, ['i'] = 35,
    ['j'] = 36, ['k'] = 37, ['l'] = 38, ['m'] = 39, ['n'] = 40, ['o'] = 41, ['p'] = 42,
    ['q'] = 43, ['r'] = 44, ['s'] = 45, ['t'] = 46, ['u'] = 47, ['v'] = 48, ['w'] = 49,
    ['x'] = 50, ['y'] = 51, ['z'] = 52, ['0'] = 53, ['1'] = 54, ['2'] = 55, ['3'] = 56,
    ['4'] = 57, ['5'] = 58, ['6'] = 59, ['7'] = 60, ['8'] = 61, ['9'] = 62, ['+'] = 63,
    ['/'] = 64,
}; /* value + 1; 0 = not in the alphabet */

static bool b64_space(unsigned char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

bool srv_json_b64_decode(const char *src, size_t n, char *dst, size_t *out_len) {
  const unsigned char *s = (const unsigned char *)src;
  size_t i = 0, o = 0;
  unsigned acc = 0;
  int state = 0;
  for (; i < n; i++) {
    unsigned char c = s[i];
    if (unb64[c]) {
      acc = (acc << 6) | (unsigned)(unb64[c] - 1);
      if (++state == 4) {
        if (dst) {
          dst[o] = (char)(acc >> 16);
          dst[o + 1] = (char)(acc >> 8);
          dst[o + 2] = (char)acc;
        }
        o += 3;
        state = 0;
        acc = 0;
      }
    } else if (c == '=' || c == '.') {
      break;
    } else if (!b64_space(c)) {
      return false;
    }
  }
  int expected_pad = 0;
  if (state == 1) return false;
  if (state == 2) {
    if (dst) dst[o] = (char)(acc >> 4);
    o += 1;
    expected_pad = 2;
  } else if (state == 3) {
    if (dst) {
      dst[o] = (char)(acc >> 10);
      dst[o + 1] = (char)(acc >> 2);
    }
    o += 2;
    expected_pad = 1;
  }
  int pad = 0;
  for (; i < n; i++) {
    if (s[i] == '=' || s[i] == '.')
      pad++;
    else if (!b64_space(s[i]))
      return false;
  }
  if (pad != 0 && pad != expected_pad) return false;
  if (out_len) *out_len = o;
  return true;
}
