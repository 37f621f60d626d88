/* A recursive-descent parser over a small tokenizer. Values are written
 * straight into the protobuf-c message through the field descriptors
 * (offset, quantifier_offset, type), so the result is an ordinary message
 * that protobuf_c_message_free_unpacked can free, also after an error. */
#include "cfg_pbtxt.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "google/protobuf/any.pb-c.h"
#include "td_file.h"

#define MAX_DEPTH 100
#define MAX_FILE_BYTES ((size_t)64 << 20)

typedef enum { T_EOF, T_IDENT, T_NUMBER, T_STRING, T_PUNCT } tok_kind;

typedef struct token {
  tok_kind kind;
  const char *s;
  size_t len;
  int line, col;
} token;

typedef struct parser {
  const char *p, *end;
  int line, col;
  token tok;
  td_err *err;
  unsigned flags; /* CFG_PBTXT_* */
} parser;

static td_code fail(parser *ps, const token *t, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static td_code fail(parser *ps, const token *t, const char *fmt, ...) {
  char msg[TD_ERR_MSG_MAX];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  return td_err_set(ps->err, TD_INVALID_ARGUMENT, "line %d column %d: %s", t->line, t->col, msg);
}

static void advance_char(parser *ps) {
  if (*ps->p == '\n') {
    ps->line++;
    ps->col = 1;
  } else {
    ps->col++;
  }
  ps->p++;
}

/* Reads the next token into ps->tok. */
static td_code next(parser *ps) {
  for (;;) {
    while (ps->p < ps->end && isspace((unsigned char)*ps->p)) advance_char(ps);
    if (ps->p < ps->end && *ps->p == '#') {
      while (ps->p < ps->end && *ps->p != '\n') advance_char(ps);
      continue;
    }
    break;
  }
  token *t = &ps->tok;
  t->s = ps->p;
  t->line = ps->line;
  t->col = ps->col;
  if (ps->p >= ps->end) {
    t->kind = T_EOF;
    t->len = 0;
    return TD_OK;
  }
  char c = *ps->p;
  if (isalpha((unsigned char)c) || c == '_') {
    while (ps->p < ps->end && (isalnum((unsigned char)*ps->p) || *ps->p == '_' || *ps->p == '.'))
      advance_char(ps);
    t->kind = T_IDENT;
  } else if (isdigit((unsigned char)c) || c == '-' || c == '+' ||
             (c == '.' && ps->p + 1 < ps->end && isdigit((unsigned char)ps->p[1]))) {
    char prev = 0;
    advance_char(ps);
    prev = c;
    while (ps->p < ps->end) {
      char d = *ps->p;
      bool exp_sign = (d == '+' || d == '-') && (prev == 'e' || prev == 'E') &&
                      !(t->len > 1 && (t->s[1] == 'x' || t->s[1] == 'X'));
      if (!(isalnum((unsigned char)d) || d == '.' || d == '_' || exp_sign)) break;
      prev = d;
      advance_char(ps);
    }
    t->kind = T_NUMBER;
  } else if (c == '"' || c == '\'') {
    advance_char(ps);
    while (ps->p < ps->end && *ps->p != c) {
      if (*ps->p == '\n') break;
      if (*ps->p == '\\' && ps->p + 1 < ps->end) advance_char(ps);
      advance_char(ps);
    }
    if (ps->p >= ps->end || *ps->p != c) return fail(ps, t, "unterminated string");
    advance_char(ps);
    t->kind = T_STRING;
  } else if (strchr("{}<>:[],;", c)) {
    advance_char(ps);
    t->kind = T_PUNCT;
  } else {
    return fail(ps, t, "unexpected character '%c'", c);
  }
  t->len = (size_t)(ps->p - t->s);
  return TD_OK;
}

static bool is_punct(const token *t, char c) { return t->kind == T_PUNCT && t->s[0] == c; }

static bool tok_eq(const token *t, const char *s) {
  return strlen(s) == t->len && !strncmp(t->s, s, t->len);
}

/* --- scalar values ------------------------------------------------------ */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

static size_t put_utf8(char *o, unsigned cp) {
  if (cp < 0x80) {
    o[0] = (char)cp;
    return 1;
  }
  if (cp < 0x800) {
    o[0] = (char)(0xC0 | (cp >> 6));
    o[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  o[0] = (char)(0xE0 | (cp >> 12));
  o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
  o[2] = (char)(0x80 | (cp & 0x3F));
  return 3;
}

/* Decodes one quoted token, appending to *buf. */
static td_code unquote(parser *ps, const token *t, char **buf, size_t *len) {
  const char *s = t->s + 1, *e = t->s + t->len - 1;
  char *o = realloc(*buf, *len + (size_t)(e - s) + 1);
  if (!o) return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  *buf = o;
  o += *len;
  while (s < e) {
    if (*s != '\\') {
      *o++ = *s++;
      continue;
    }
    s++;
    char c = *s++;
    switch (c) {
      case 'n': *o++ = '\n'; break;
      case 't': *o++ = '\t'; break;
      case 'r': *o++ = '\r'; break;
      case 'a': *o++ = '\a'; break;
      case 'b': *o++ = '\b'; break;
      case 'f': *o++ = '\f'; break;
      case 'v': *o++ = '\v'; break;
      case '\\': case '\'': case '"': case '?': *o++ = c; break;
      case 'x': case 'X': {
        int v = 0, n = 0;
        while (n < 2 && s < e && hexval(*s) >= 0) v = v * 16 + hexval(*s++), n++;
        if (!n) return fail(ps, t, "bad \\x escape");
        *o++ = (char)v;
        break;
      }
      case 'u': {
        unsigned v = 0;
        for (int n = 0; n < 4; n++) {
          if (s >= e || hexval(*s) < 0) return fail(ps, t, "bad \\u escape");
          v = v * 16 + (unsigned)hexval(*s++);
        }
        o += put_utf8(o, v); /* at most 3 bytes for 6 source characters */
        break;
      }
      default:
        if (c >= '0' && c <= '7') {
          int v = c - '0', n = 1;
          while (n < 3 && s < e && *s >= '0' && *s <= '7') v = v * 8 + (*s++ - '0'), n++;
          *o++ = (char)v;
        } else {
          return fail(ps, t, "unknown escape '\\%c'", c);
        }
    }
  }
  *len = (size_t)(o - *buf);
  return TD_OK;
}

/* One or more adjacent string tokens. */
static td_code parse_string(parser *ps, char **out, size_t *out_len) {
  if (ps->tok.kind != T_STRING) return fail(ps, &ps->tok, "expected a string");
  char *buf = NULL;
  size_t len = 0;
  while (ps->tok.kind == T_STRING) {
    td_code rc = unquote(ps, &ps->tok, &buf, &len);
    if (!rc) rc = next(ps);
    if (rc) {
      free(buf);
      return rc;
    }
  }
  char *z = realloc(buf, len + 1);
  if (!z) {
    free(buf);
    return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  z[len] = '\0';
  *out = z;
  *out_len = len;
  return TD_OK;
}

static td_code parse_int(parser *ps, bool is_signed, int bits, void *slot) {
  token t = ps->tok;
  if (t.kind != T_NUMBER) return fail(ps, &t, "expected an integer");
  char tmp[80];
  if (t.len >= sizeof tmp) return fail(ps, &t, "integer too long");
  memcpy(tmp, t.s, t.len);
  tmp[t.len] = '\0';
  char *end;
  errno = 0;
  if (is_signed) {
    long long v = strtoll(tmp, &end, 0);
    long long lo = bits == 32 ? INT32_MIN : INT64_MIN, hi = bits == 32 ? INT32_MAX : INT64_MAX;
    if (*end || errno || v < lo || v > hi) return fail(ps, &t, "'%s' is not a valid int%d", tmp, bits);
    if (bits == 32)
      *(int32_t *)slot = (int32_t)v;
    else
      *(int64_t *)slot = v;
  } else {
    if (tmp[0] == '-') return fail(ps, &t, "'%s' is not a valid uint%d", tmp, bits);
    unsigned long long v = strtoull(tmp, &end, 0);
    if (*end || errno || (bits == 32 && v > UINT32_MAX))
      return fail(ps, &t, "'%s' is not a valid uint%d", tmp, bits);
    if (bits == 32)
      *(uint32_t *)slot = (uint32_t)v;
    else
      *(uint64_t *)slot = v;
  }
  return next(ps);
}

static td_code parse_real(parser *ps, double *out) {
  token t = ps->tok;
  char tmp[80];
  if ((t.kind != T_NUMBER && t.kind != T_IDENT) || t.len >= sizeof tmp)
    return fail(ps, &t, "expected a number");
  memcpy(tmp, t.s, t.len);
  tmp[t.len] = '\0';
  const char *s = tmp;
  bool neg = *s == '-';
  if (*s == '-' || *s == '+') s++;
  if (!strcasecmp(s, "inf") || !strcasecmp(s, "infinity")) {
    *out = neg ? -INFINITY : INFINITY;
  } else if (!strcasecmp(s, "nan")) {
    *out = NAN;
  } else {
    if (t.kind != T_NUMBER) return fail(ps, &t, "expected a number, got '%s'", tmp);
    size_t n = strlen(tmp);
    if (n > 1 && (tmp[n - 1] == 'f' || tmp[n - 1] == 'F') &&
        !(tmp[1] == 'x' || tmp[1] == 'X'))
      tmp[n - 1] = '\0';
    char *end;
    errno = 0;
    *out = strtod(tmp, &end);
    if (*end || end == tmp) return fail(ps, &t, "'%.*s' is not a number", (int)t.len, t.s);
  }
  return next(ps);
}

/* --- messages ----------------------------------------------------------- */

static size_t elem_size(ProtobufCType type) {
  switch (type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32: case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_ENUM:
      return 4;
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64: case PROTOBUF_C_TYPE_DOUBLE:
      return 8;
    case PROTOBUF_C_TYPE_BOOL: return sizeof(protobuf_c_boolean);
    case PROTOBUF_C_TYPE_STRING: return sizeof(char *);
    case PROTOBUF_C_TYPE_BYTES: return sizeof(ProtobufCBinaryData);
    case PROTOBUF_C_TYPE_MESSAGE: return sizeof(ProtobufCMessage *);
  }
  return 0;
}

static td_code parse_message(parser *ps, ProtobufCMessage *m, char close, int depth);

static ProtobufCMessage *new_message(const ProtobufCMessageDescriptor *d) {
  ProtobufCMessage *m = malloc(d->sizeof_message);
  if (m) protobuf_c_message_init(d, m);
  return m;
}

/* Parses one value of field f into slot (a scalar, pointer or struct). */
static td_code parse_value(parser *ps, const ProtobufCFieldDescriptor *f, void *slot, int depth) {
  token t = ps->tok;
  switch (f->type) {
    case PROTOBUF_C_TYPE_INT32: case PROTOBUF_C_TYPE_SINT32: case PROTOBUF_C_TYPE_SFIXED32:
      return parse_int(ps, true, 32, slot);
    case PROTOBUF_C_TYPE_INT64: case PROTOBUF_C_TYPE_SINT64: case PROTOBUF_C_TYPE_SFIXED64:
      return parse_int(ps, true, 64, slot);
    case PROTOBUF_C_TYPE_UINT32: case PROTOBUF_C_TYPE_FIXED32:
      return parse_int(ps, false, 32, slot);
    case PROTOBUF_C_TYPE_UINT64: case PROTOBUF_C_TYPE_FIXED64:
      return parse_int(ps, false, 64, slot);
    case PROTOBUF_C_TYPE_FLOAT:
    case PROTOBUF_C_TYPE_DOUBLE: {
      double v = 0;
      td_code rc = parse_real(ps, &v);
      if (rc) return rc;
      if (f->type == PROTOBUF_C_TYPE_FLOAT)
        *(float *)slot = (float)v;
      else
        *(double *)slot = v;
      return TD_OK;
    }
    case PROTOBUF_C_TYPE_BOOL: {
      bool v;
      if (tok_eq(&t, "true") || tok_eq(&t, "t") || tok_eq(&t, "True") || tok_eq(&t, "1"))
        v = true;
      else if (tok_eq(&t, "false") || tok_eq(&t, "f") || tok_eq(&t, "False") || tok_eq(&t, "0"))
        v = false;
      else
        return fail(ps, &t, "'%.*s' is not a bool for field '%s'", (int)t.len, t.s, f->name);
      *(protobuf_c_boolean *)slot = v;
      return next(ps);
    }
    case PROTOBUF_C_TYPE_ENUM: {
      const ProtobufCEnumDescriptor *ed = f->descriptor;
      const ProtobufCEnumValue *ev = NULL;
      if (t.kind == T_IDENT) {
        char name[256];
        if (t.len < sizeof name) {
          memcpy(name, t.s, t.len);
          name[t.len] = '\0';
          ev = protobuf_c_enum_descriptor_get_value_by_name(ed, name);
        }
      } else if (t.kind == T_NUMBER) {
        int32_t num;
        td_code rc = parse_int(ps, true, 32, &num);
        if (rc) return rc;
        ev = protobuf_c_enum_descriptor_get_value(ed, num);
        if (!ev) return fail(ps, &t, "%d is not a value of enum %s", num, ed->name);
        *(int *)slot = ev->value;
        return TD_OK;
      }
      if (!ev)
        return fail(ps, &t, "unknown value '%.*s' for enum %s (field '%s')", (int)t.len, t.s,
                    ed->name, f->name);
      *(int *)slot = ev->value;
      return next(ps);
    }
    case PROTOBUF_C_TYPE_STRING: {
      char *s;
      size_t len;
      td_code rc = parse_string(ps, &s, &len);
      if (rc) return rc;
      *(char **)slot = s;
      return TD_OK;
    }
    case PROTOBUF_C_TYPE_BYTES: {
      char *s;
      size_t len;
      td_code rc = parse_string(ps, &s, &len);
      if (rc) return rc;
      ProtobufCBinaryData *b = slot;
      b->data = (uint8_t *)s;
      b->len = len;
      return TD_OK;
    }
    case PROTOBUF_C_TYPE_MESSAGE: {
      char close;
      if (is_punct(&t, '{'))
        close = '}';
      else if (is_punct(&t, '<'))
        close = '>';
      else
        return fail(ps, &t, "expected '{' for message field '%s'", f->name);
      ProtobufCMessage *sub = new_message(f->descriptor);
      if (!sub) return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
      *(ProtobufCMessage **)slot = sub; /* owned by the parent from here on */
      td_code rc = next(ps);
      if (!rc) rc = parse_message(ps, sub, close, depth + 1);
      return rc;
    }
  }
  return fail(ps, &t, "unsupported field type");
}

/* Appends one element to a repeated field and parses it. */
static td_code parse_repeated_one(parser *ps, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
                                  int depth) {
  char *base = (char *)m;
  size_t *n = (size_t *)(base + f->quantifier_offset);
  void **arr = (void **)(base + f->offset);
  size_t es = elem_size(f->type);
  char *grown = realloc(*arr, (*n + 1) * es);
  if (!grown) return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  *arr = grown;
  void *slot = grown + *n * es;
  memset(slot, 0, es);
  td_code rc = parse_value(ps, f, slot, depth);
  /* Count the element even on failure when it owns memory, so the message
   * free releases it. */
  bool owns = f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING ||
              f->type == PROTOBUF_C_TYPE_BYTES;
  if (!rc || (owns && *(void **)slot)) (*n)++;
  return rc;
}

/* Skips an extension or Any type name, "[type.googleapis.com/pkg.Msg]":
 * the current token is its '['; the name may hold '/', which is no token,
 * so it is passed over character by character. */
static td_code skip_bracket_name(parser *ps) {
  token open = ps->tok;
  while (ps->p < ps->end && *ps->p != ']' && *ps->p != '\n') advance_char(ps);
  if (ps->p >= ps->end || *ps->p != ']') return fail(ps, &open, "unterminated '['");
  advance_char(ps);
  return next(ps);
}

/* Skips one value of a field the descriptor does not know: a scalar (or
 * adjacent strings), a `{ }` / `< >` block, or a `[ ]` list of either. */
static td_code skip_value(parser *ps, int depth) {
  if (depth > MAX_DEPTH) return fail(ps, &ps->tok, "messages nest more than %d deep", MAX_DEPTH);
  td_code rc;
  if (is_punct(&ps->tok, '{') || is_punct(&ps->tok, '<')) {
    char close = ps->tok.s[0] == '{' ? '}' : '>';
    if ((rc = next(ps))) return rc;
    while (!is_punct(&ps->tok, close)) {
      if (ps->tok.kind == T_EOF) return fail(ps, &ps->tok, "unexpected end of input: expected '%c'", close);
      /* A field: its name (or [extension]), an optional ':', its value. */
      if (is_punct(&ps->tok, '[')) {
        if ((rc = skip_bracket_name(ps))) return rc;
      } else if (ps->tok.kind != T_IDENT) {
        return fail(ps, &ps->tok, "expected a field name");
      } else if ((rc = next(ps))) {
        return rc;
      }
      if (is_punct(&ps->tok, ':') && (rc = next(ps))) return rc;
      if ((rc = skip_value(ps, depth + 1))) return rc;
      if ((is_punct(&ps->tok, ',') || is_punct(&ps->tok, ';')) && (rc = next(ps))) return rc;
    }
    return next(ps);
  }
  if (is_punct(&ps->tok, '[')) {
    if ((rc = next(ps))) return rc;
    while (!is_punct(&ps->tok, ']')) {
      if (ps->tok.kind == T_EOF) return fail(ps, &ps->tok, "unterminated list");
      if ((rc = skip_value(ps, depth + 1))) return rc;
      if (is_punct(&ps->tok, ',') && (rc = next(ps))) return rc;
    }
    return next(ps);
  }
  if (ps->tok.kind == T_STRING) {
    while (ps->tok.kind == T_STRING)
      if ((rc = next(ps))) return rc;
    return TD_OK;
  }
  if (ps->tok.kind == T_IDENT || ps->tok.kind == T_NUMBER) return next(ps);
  return fail(ps, &ps->tok, "expected a value");
}

/* Skips a whole unknown field (its name is the current token). */
static td_code skip_field(parser *ps) {
  td_code rc = is_punct(&ps->tok, '[') ? skip_bracket_name(ps) : next(ps);
  if (rc) return rc;
  if (is_punct(&ps->tok, ':') && (rc = next(ps))) return rc;
  return skip_value(ps, 0);
}

/* Types an Any may hold in expanded form, and messages whose unknown
 * fields are skipped (cfg_pbtxt_register_*): filled before any parse. */
#define MAX_REGISTERED 16
static const ProtobufCMessageDescriptor *any_types[MAX_REGISTERED], *lenient_types[MAX_REGISTERED];
static int n_any_types, n_lenient_types;

void cfg_pbtxt_register_any_type(const ProtobufCMessageDescriptor *d) {
  for (int i = 0; i < n_any_types; i++)
    if (any_types[i] == d) return;
  if (n_any_types < MAX_REGISTERED) any_types[n_any_types++] = d;
}

void cfg_pbtxt_register_lenient(const ProtobufCMessageDescriptor *d) {
  for (int i = 0; i < n_lenient_types; i++)
    if (lenient_types[i] == d) return;
  if (n_lenient_types < MAX_REGISTERED) lenient_types[n_lenient_types++] = d;
}

static bool is_lenient(const ProtobufCMessageDescriptor *d) {
  for (int i = 0; i < n_lenient_types; i++)
    if (lenient_types[i] == d) return true;
  return false;
}

/* `[type.googleapis.com/pkg.Msg] { ... }` inside a google.protobuf.Any:
 * the message is parsed with its registered descriptor and packed into
 * the Any's value, its URL into type_url. The current token is the '['. */
static td_code parse_any_expansion(parser *ps, ProtobufCMessage *m, bool *seen, int depth) {
  token open = ps->tok;
  const char *start = ps->p;
  while (ps->p < ps->end && *ps->p != ']' && *ps->p != '\n') advance_char(ps);
  if (ps->p >= ps->end || *ps->p != ']') return fail(ps, &open, "unterminated '['");
  size_t len = (size_t)(ps->p - start);
  while (len && isspace((unsigned char)start[len - 1])) len--;
  while (len && isspace((unsigned char)*start)) start++, len--;
  advance_char(ps);
  char url[512];
  if (len >= sizeof url) return fail(ps, &open, "type URL too long");
  memcpy(url, start, len);
  url[len] = '\0';
  const char *slash = strrchr(url, '/');
  const char *type = slash ? slash + 1 : url;
  const ProtobufCMessageDescriptor *d = NULL;
  for (int i = 0; i < n_any_types && !d; i++)
    if (!strcmp(any_types[i]->name, type)) d = any_types[i];
  if (!d) return fail(ps, &open, "Any holds an unknown type '%s'", url);
  if (seen[0] || seen[1]) return fail(ps, &open, "the Any is given twice");
  td_code rc = next(ps);
  if (rc) return rc;
  if (is_punct(&ps->tok, ':') && (rc = next(ps))) return rc;
  if (!is_punct(&ps->tok, '{') && !is_punct(&ps->tok, '<'))
    return fail(ps, &ps->tok, "expected '{' after [%s]", url);
  char close = ps->tok.s[0] == '{' ? '}' : '>';
  if ((rc = next(ps))) return rc;
  ProtobufCMessage *sub = new_message(d);
  if (!sub) return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  rc = parse_message(ps, sub, close, depth + 1);
  Google__Protobuf__Any *any = (Google__Protobuf__Any *)m;
  if (!rc) {
    size_t n = protobuf_c_message_get_packed_size(sub);
    uint8_t *buf = malloc(n ? n : 1);
    char *u = strdup(url);
    if (!buf || !u) {
      free(buf);
      free(u);
      rc = td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
    } else {
      protobuf_c_message_pack(sub, buf);
      any->type_url = u;
      any->value.data = buf;
      any->value.len = n;
      seen[0] = seen[1] = true;
    }
  }
  protobuf_c_message_free_unpacked(sub, NULL);
  return rc;
}

static td_code parse_field(parser *ps, ProtobufCMessage *m, bool *seen, int depth) {
  token name = ps->tok;
  const ProtobufCMessageDescriptor *d = m->descriptor;
  bool lenient = (ps->flags & CFG_PBTXT_SKIP_UNKNOWN) || is_lenient(d);
  if (name.kind == T_PUNCT && name.s[0] == '[') {
    if (d == &google__protobuf__any__descriptor && n_any_types)
      return parse_any_expansion(ps, m, seen, depth);
    if (lenient) return skip_field(ps);
    return fail(ps, &name, "extensions and Any expansion are not supported");
  }
  if (name.kind != T_IDENT) return fail(ps, &name, "expected a field name");
  char fname[256];
  if (name.len >= sizeof fname) return fail(ps, &name, "field name too long");
  memcpy(fname, name.s, name.len);
  fname[name.len] = '\0';
  const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(d, fname);
  if (!f && lenient) return skip_field(ps);
  if (!f) return fail(ps, &name, "message %s has no field named \"%s\"", d->name, fname);
  td_code rc = next(ps);
  if (rc) return rc;
  bool colon = is_punct(&ps->tok, ':');
  if (colon && (rc = next(ps))) return rc;
  if (f->type != PROTOBUF_C_TYPE_MESSAGE && !colon)
    return fail(ps, &ps->tok, "expected ':' after field \"%s\"", fname);

  if (f->label == PROTOBUF_C_LABEL_REPEATED) {
    if (is_punct(&ps->tok, '[')) {
      if ((rc = next(ps))) return rc;
      if (is_punct(&ps->tok, ']')) return next(ps);
      for (;;) {
        if ((rc = parse_repeated_one(ps, m, f, depth))) return rc;
        if (is_punct(&ps->tok, ']')) return next(ps);
        if (!is_punct(&ps->tok, ',')) return fail(ps, &ps->tok, "expected ',' or ']' in list");
        if ((rc = next(ps))) return rc;
      }
    }
    return parse_repeated_one(ps, m, f, depth);
  }
  size_t idx = (size_t)(f - d->fields);
  char *base = (char *)m;
  if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
    uint32_t *which = (uint32_t *)(base + f->quantifier_offset);
    if (*which) {
      const ProtobufCFieldDescriptor *other = protobuf_c_message_descriptor_get_field(d, *which);
      return fail(ps, &name, "field \"%s\" and field \"%s\" are members of the same oneof",
                  fname, other ? other->name : "?");
    }
  } else if (seen[idx]) {
    return fail(ps, &name, "non-repeated field \"%s\" is specified multiple times", fname);
  }
  seen[idx] = true;
  void *slot = base + f->offset;
  if (f->type == PROTOBUF_C_TYPE_STRING) *(char **)slot = NULL;
  rc = parse_value(ps, f, slot, depth);
  if (f->type == PROTOBUF_C_TYPE_STRING && !*(char **)slot) {
    /* Restore the descriptor's default so the free routine stays happy. */
    *(const void **)slot = f->default_value;
  }
  bool stored = !rc || (f->type == PROTOBUF_C_TYPE_MESSAGE && *(void **)slot) ||
                f->type == PROTOBUF_C_TYPE_STRING;
  if (stored) {
    if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
      *(uint32_t *)(base + f->quantifier_offset) = f->id;
    else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset &&
             f->type != PROTOBUF_C_TYPE_MESSAGE && f->type != PROTOBUF_C_TYPE_STRING)
      *(protobuf_c_boolean *)(base + f->quantifier_offset) = 1;
  }
  return rc;
}

static td_code parse_message(parser *ps, ProtobufCMessage *m, char close, int depth) {
  if (depth > MAX_DEPTH) return fail(ps, &ps->tok, "messages nest more than %d deep", MAX_DEPTH);
  bool *seen = calloc(m->descriptor->n_fields + 1, sizeof *seen);
  if (!seen) return td_err_set(ps->err, TD_RESOURCE_EXHAUSTED, "out of memory");
  td_code rc = TD_OK;
  for (;;) {
    if (close ? is_punct(&ps->tok, close) : ps->tok.kind == T_EOF) {
      if (close) rc = next(ps);
      break;
    }
    if (ps->tok.kind == T_EOF) {
      rc = fail(ps, &ps->tok, "unexpected end of input: expected '%c'", close);
      break;
    }
    if ((rc = parse_field(ps, m, seen, depth))) break;
    if ((is_punct(&ps->tok, ',') || is_punct(&ps->tok, ';')) && (rc = next(ps))) break;
  }
  free(seen);
  return rc;
}

td_code cfg_pbtxt_parse(const char *text, size_t len, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **out, td_err *err) {
  return cfg_pbtxt_parse_flags(text, len, desc, 0, out, err);
}

td_code cfg_pbtxt_parse_flags(const char *text, size_t len, const ProtobufCMessageDescriptor *desc,
                              unsigned flags, ProtobufCMessage **out, td_err *err) {
  parser ps = {.p = text, .end = text + len, .line = 1, .col = 1, .err = err, .flags = flags};
  ProtobufCMessage *m = new_message(desc);
  if (!m) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  td_code rc = next(&ps);
  if (!rc) rc = parse_message(&ps, m, 0, 0);
  if (rc) {
    protobuf_c_message_free_unpacked(m, NULL);
    return rc;
  }
  *out = m;
  return TD_OK;
}

td_code cfg_pbtxt_parse_file(const char *path, const ProtobufCMessageDescriptor *desc,
                             ProtobufCMessage **out, td_err *err) {
  return cfg_pbtxt_parse_file_flags(path, desc, 0, MAX_FILE_BYTES, out, err);
}

td_code cfg_pbtxt_parse_file_flags(const char *path, const ProtobufCMessageDescriptor *desc,
                                   unsigned flags, size_t max_bytes, ProtobufCMessage **out,
                                   td_err *err) {
  uint8_t *text;
  size_t n;
  td_code rc = td_file_read(path, max_bytes, &text, &n, err);
  if (rc) return rc;
  rc = cfg_pbtxt_parse_flags((const char *)text, n, desc, flags, out, err);
  free(text);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}
