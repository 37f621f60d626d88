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

td_code srv_route_parse(const char *method, const char *path, srv_route *r, td_err *err) {
  memset(r, 0, sizeof *r);
  if (strncasecmp(path, "/v1/", 4)) {
    r->kind = SRV_ROUTE_NOT_V1;
    return TD_OK;
  }
  r->kind = SRV_ROUTE_MALFORMED; /* until a form below matches */
  bool get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
  if (strlen(path) >= sizeof r->buf) return malformed(r, method, path, err);
  const char *p = path + 4;
  if (strncasecmp(p, "models", 6)) return malformed(r, method, path, err);
  p += 6;
  if (!*p && get)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Missing model name in request.");
  if (*p != '/') return malformed(r, method, path, err);
  p++;
  size_t n = segment(p);
  if (!n) return malformed(r, method, path, err);
  char *w = r->buf;
  memcpy(w, p, n);
  w[n] = '\0';
  r->name = w;
  w += n + 1;
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
    memcpy(w, p, k);
    w[k] = '\0';
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
