#include "srv_route.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static td_code malformed(srv_route *r, const char *method, const char *path, td_err *err) {
  r->kind = SRV_ROUTE_MALFORMED;
  return td_err_set(err, TD_INVALID_ARGUMENT, "Malformed request: %s %s", method, path);
}

/* One path segment: no '/' and no ':'. Returns its length. */
static size_t segment(const char *p) {
  size_t n = 0;
  while (p[n] && p[n] != '/' && p[n] != ':') n++;
  return n;
}

static int hex(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Percent-decodes src[0..n) into w (NUL-terminated; never longer than the
 * source). '%' not followed by two hex digits stays literal, as in curl.
 * Returns false for an encoded NUL, which a C string cannot carry. */
static bool decode(const char *src, size_t n, char *w) {
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (src[i] == '%' && i + 2 < n && (hi = hex(src[i + 1])) >= 0 &&
        (lo = hex(src[i + 2])) >= 0) {
      if (!hi && !lo) return false;
      *w++ = (char)(hi * 16 + lo);
      i += 2;
    } else {
      *w++ = src[i];
    }
  }
  *w = '\0';
  return true;
}

td_code srv_route_parse(const char *method, const char *path, srv_route *r, td_err *err) {
  memset(r, 0, sizeof *r);
  bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if ((get || !strcmp(method, "HEAD")) && (!strcmp(path, "/healthz") || !strcmp(path, "/readyz"))) {
    r->kind = path[1] == 'h' ? SRV_ROUTE_HEALTH : SRV_ROUTE_READY;
    return TD_OK;
  }
  if (!strncmp(path, "/v2", 3) && (!path[3] || path[3] == '/')) {
    r->kind = SRV_ROUTE_V2;
    return TD_OK;
  }
  if (strncasecmp(path, "/v1/", 4)) {
    r->kind = SRV_ROUTE_NOT_V1;
    return TD_OK;
  }
  if (!strcmp(method, "OPTIONS")) {
    r->kind = SRV_ROUTE_PREFLIGHT;
    return TD_OK;
  }
  r->kind = SRV_ROUTE_MALFORMED; /* until a form below matches */
  if (strlen(path) >= sizeof r->buf) return malformed(r, method, path, err);
  const char *p = path + 4;
  if (strncasecmp(p, "models", 6)) return malformed(r, method, path, err);
  p += 6;
  if (!*p && get) {
    r->kind = SRV_ROUTE_LIST;
    return TD_OK;
  }
  if (*p != '/') return malformed(r, method, path, err);
  p++;
  size_t n = segment(p);
  if (!n) return malformed(r, method, path, err);
  char *w = r->buf;
  if (!decode(p, n, w))
    return td_err_set(err, TD_INVALID_ARGUMENT, "Failed to decode model name:%.*s", (int)n, p);
  r->name = w;
  w += strlen(w) + 1;
  p += n;

  if (!strncasecmp(p, "/versions/", 10)) {
    p += 10;
    size_t k = segment(p);
    if (!k) return malformed(r, method, path, err);
    for (size_t i = 0; i < k; i++)
      if (!isdigit((unsigned char)p[i])) return malformed(r, method, path, err);
    int64_t v = 0;
    for (size_t i = 0; i < k; i++) {
      if (v > (INT64_MAX - (p[i] - '0')) / 10)
        return td_err_set(err, TD_INVALID_ARGUMENT, "Failed to convert version: %.*s to numeric.",
                          (int)k, p);
      v = v * 10 + (p[i] - '0');
    }
    r->has_version = true;
    r->version = v;
    p += k;
  } else if (!strncasecmp(p, "/labels/", 8)) {
    p += 8;
    size_t k = segment(p);
    if (!k) return malformed(r, method, path, err);
    if (!decode(p, k, w))
      return td_err_set(err, TD_INVALID_ARGUMENT, "Failed to decode model version label:%.*s",
                        (int)k, p);
    r->label = w;
    p += k;
  }

  if (get) {
    if (!*p) {
      r->kind = SRV_ROUTE_STATUS;
      return TD_OK;
    }
    if (!strcasecmp(p, "/metadata")) {
      r->kind = SRV_ROUTE_METADATA;
      return TD_OK;
    }
    return malformed(r, method, path, err);
  }
  if (post && *p == ':') {
    p++;
    if (!strcmp(p, "predict"))
      r->kind = SRV_ROUTE_PREDICT;
    else if (!strcmp(p, "classify"))
      r->kind = SRV_ROUTE_CLASSIFY;
    else if (!strcmp(p, "regress"))
      r->kind = SRV_ROUTE_REGRESS;
    else
      return malformed(r, method, path, err);
    return TD_OK;
  }
  return malformed(r, method, path, err);
}
