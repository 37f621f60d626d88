/* S3: endpoint and credentials from the environment as the SDKs read them,
 * SigV4 signing, ListObjectsV2 (XML, read with a few string searches: the
 * elements S3 answers with are flat and fixed) and signed GETs. */
#include "ldr_s3.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ldr_http.h"
#include "ldr_sha256.h"
#include "td_buf.h"
#include "td_clock.h"
#include "td_log.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define META_RETRY_NS (300ull * 1000000000ull)
#define REFRESH_EARLY_S 300

/* --- endpoint ----------------------------------------------------------------- */

typedef struct endpoint {
  char base[1024]; /* scheme://host[:port][/path], no trailing slash */
  char host[512];  /* the Host header */
  char path[512];  /* the base's path part ("" or "/x") */
  bool path_style;
  bool insecure;
  char region[64];
} endpoint;

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static void split_base(endpoint *e) {
  const char *h = strstr(e->base, "://");
  h = h ? h + 3 : e->base;
  const char *slash = strchr(h, '/');
  size_t hl = slash ? (size_t)(slash - h) : strlen(h);
  snprintf(e->host, sizeof e->host, "%.*s", (int)hl, h);
  snprintf(e->path, sizeof e->path, "%s", slash ? slash : "");
  size_t pl = strlen(e->path);
  while (pl && e->path[pl - 1] == '/') e->path[--pl] = 0;
}

static void get_endpoint(const char *bucket, endpoint *e) {
  *e = (endpoint){0};
  const char *r = env("AWS_REGION");
  if (!r) r = env("AWS_DEFAULT_REGION");
  snprintf(e->region, sizeof e->region, "%s", r ? r : "us-east-1");
  const char *v = env("S3_VERIFY_SSL");
  e->insecure = v && (!strcmp(v, "0") || !strcasecmp(v, "false"));
  const char *u = env("AWS_ENDPOINT_URL_S3");
  if (!u) u = env("AWS_ENDPOINT_URL");
  const char *tf = u ? NULL : env("S3_ENDPOINT");
  if (u || tf) {
    if (tf && !strstr(tf, "://")) {
      const char *https = env("S3_USE_HTTPS");
      bool tls = !https || !(strcmp(https, "0") == 0 || !strcasecmp(https, "false"));
      snprintf(e->base, sizeof e->base, "%s://%s", tls ? "https" : "http", tf);
    } else {
      snprintf(e->base, sizeof e->base, "%s", u ? u : tf);
    }
    size_t bl = strlen(e->base);
    while (bl && e->base[bl - 1] == '/') e->base[--bl] = 0;
    e->path_style = true;
  } else if (strchr(bucket, '.')) {
    snprintf(e->base, sizeof e->base, "https://s3.%s.amazonaws.com", e->region);
    e->path_style = true;
  } else {
    snprintf(e->base, sizeof e->base, "https://%s.s3.%s.amazonaws.com", bucket, e->region);
  }
  split_base(e);
}

/* --- signing ------------------------------------------------------------------ */

static void uri_encode(td_buf *b, const char *s, bool keep_slash) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~' || (keep_slash && c == '/')) {
      td_buf_putc(b, (char)c);
    } else {
      td_buf_putc(b, '%');
      td_buf_putc(b, hex[c >> 4]);
      td_buf_putc(b, hex[c & 15]);
    }
  }
}

int ldr_s3_sign(const ldr_s3_key *k, const char *region, const char *method, const char *host,
                const char *canonical_uri, const char *canonical_query, const char *amz_date,
                char **hdr) {
  char date[9];
  snprintf(date, sizeof date, "%.8s", amz_date);
  bool tok = k->token[0] != 0;
  td_buf cr;
  td_buf_init(&cr);
  td_buf_printf(&cr, "%s\n%s\n%s\n", method, canonical_uri, canonical_query);
  td_buf_printf(&cr, "host:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n", host, EMPTY_SHA256,
                amz_date);
  if (tok) td_buf_printf(&cr, "x-amz-security-token:%s\n", k->token);
  const char *signed_headers = tok ? "host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
                                   : "host;x-amz-content-sha256;x-amz-date";
  td_buf_printf(&cr, "\n%s\n%s", signed_headers, EMPTY_SHA256);
  uint8_t h[LDR_SHA256_LEN];
  char hx[2 * LDR_SHA256_LEN + 1];
  ldr_sha256_digest(cr.data ? cr.data : "", cr.len, h);
  ldr_hex(h, sizeof h, hx);
  td_buf_free(&cr);
  char scope[160], sts[512];
  snprintf(scope, sizeof scope, "%s/%s/s3/aws4_request", date, region);
  snprintf(sts, sizeof sts, "AWS4-HMAC-SHA256\n%s\n%s\n%s", amz_date, scope, hx);
  char kk[300];
  snprintf(kk, sizeof kk, "AWS4%s", k->secret);
  uint8_t kd[32], kr[32], ks[32], kq[32], sig[32];
  ldr_hmac_sha256(kk, strlen(kk), date, strlen(date), kd);
  ldr_hmac_sha256(kd, 32, region, strlen(region), kr);
  ldr_hmac_sha256(kr, 32, "s3", 2, ks);
  ldr_hmac_sha256(ks, 32, "aws4_request", 12, kq);
  ldr_hmac_sha256(kq, 32, sts, strlen(sts), sig);
  memset(kk, 0, sizeof kk);
  char sighex[65];
  ldr_hex(sig, 32, sighex);
  int n = 0;
  td_buf b;
  td_buf_init(&b);
  td_buf_printf(&b,
                "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s, SignedHeaders=%s, "
                "Signature=%s",
                k->id, scope, signed_headers, sighex);
  hdr[n++] = td_buf_take(&b, NULL);
  td_buf_printf(&b, "x-amz-date: %s", amz_date);
  hdr[n++] = td_buf_take(&b, NULL);
  td_buf_printf(&b, "x-amz-content-sha256: %s", EMPTY_SHA256);
  hdr[n++] = td_buf_take(&b, NULL);
  if (tok) {
    td_buf_printf(&b, "x-amz-security-token: %s", k->token);
    hdr[n++] = td_buf_take(&b, NULL);
  }
  return n;
}

/* --- credentials --------------------------------------------------------------- */

static pthread_mutex_t key_mu = PTHREAD_MUTEX_INITIALIZER;
static ldr_s3_key meta_key;
static bool meta_have;
static time_t meta_expires;    /* wall clock, from the endpoint's Expiration */
static uint64_t meta_retry_ns; /* no endpoint answered: not before */

static void trim(char *s) {
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) *--e = 0;
  char *b = s;
  while (*b == ' ' || *b == '\t') b++;
  memmove(s, b, strlen(b) + 1);
}

static bool from_file(ldr_s3_key *k) {
  const char *path = env("AWS_SHARED_CREDENTIALS_FILE");
  char def[1024];
  if (!path) {
    const char *home = env("HOME");
    if (!home) return false;
    snprintf(def, sizeof def, "%s/.aws/credentials", home);
    path = def;
  }
  FILE *f = fopen(path, "r");
  if (!f) return false;
  const char *profile = env("AWS_PROFILE");
  if (!profile) profile = "default";
  char line[4608];
  bool in = false;
  *k = (ldr_s3_key){0};
  while (fgets(line, sizeof line, f)) {
    trim(line);
    if (line[0] == '#' || line[0] == ';' || !line[0]) continue;
    if (line[0] == '[') {
      char *e = strchr(line, ']');
      if (e) *e = 0;
      char *name = line + 1;
      trim(name);
      in = !strcmp(name, profile);
      continue;
    }
    char *eq = strchr(line, '=');
    if (!in || !eq) continue;
    *eq = 0;
    char *key = line, *val = eq + 1;
    trim(key);
    trim(val);
    if (!strcmp(key, "aws_access_key_id")) snprintf(k->id, sizeof k->id, "%s", val);
    if (!strcmp(key, "aws_secret_access_key")) snprintf(k->secret, sizeof k->secret, "%s", val);
    if (!strcmp(key, "aws_session_token")) snprintf(k->token, sizeof k->token, "%s", val);
  }
  memset(line, 0, sizeof line);
  fclose(f);
  return k->id[0] && k->secret[0];
}

/* "2026-12-01T22:00:00Z" -> time_t (UTC). */
static time_t parse_iso(const char *s) {
  struct tm tm = {0};
  if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec) != 6)
    return 0;
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  return timegm(&tm);
}

/* {"AccessKeyId", "SecretAccessKey", "Token", "Expiration"} */
static bool parse_meta(const char *json, ldr_s3_key *k, time_t *exp) {
  cJSON *j = cJSON_Parse(json);
  const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "AccessKeyId"));
  const char *sec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "SecretAccessKey"));
  const char *tok = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Token"));
  const char *ex = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "Expiration"));
  bool ok = id && sec;
  if (ok) {
    snprintf(k->id, sizeof k->id, "%s", id);
    snprintf(k->secret, sizeof k->secret, "%s", sec);
    snprintf(k->token, sizeof k->token, "%s", tok ? tok : "");
    *exp = parse_iso(ex);
  }
  cJSON_Delete(j);
  return ok;
}

static bool meta_get(const char *url, const char **hdrs, int nh, const char *method, td_buf *out) {
  /* One short try, as the SDKs do: off EC2 nothing answers, and the scan
   * thread waits for it (a failure is remembered for 5 minutes). */
  ldr_http_req r = {
      .method = method, .url = url, .headers = hdrs, .n_headers = nh, .timeout_ms = 1000};
  long st = 0;
  td_err e;
  td_buf_reset(out);
  return !ldr_http_do(&r, 0, &st, out, &e) && st == 200 && out->data;
}

static bool from_container(ldr_s3_key *k, time_t *exp) {
  const char *rel = env("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
  const char *full = env("AWS_CONTAINER_CREDENTIALS_FULL_URI");
  if (!rel && !full) return false;
  char url[2048], auth[4200] = "";
  if (rel)
    snprintf(url, sizeof url, "http://169.254.170.2%s", rel);
  else
    snprintf(url, sizeof url, "%s", full);
  const char *tok = env("AWS_CONTAINER_AUTHORIZATION_TOKEN");
  char tokbuf[4096] = "";
  const char *tf = env("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE");
  if (!tok && tf) {
    FILE *f = fopen(tf, "r");
    if (f) {
      size_t r = fread(tokbuf, 1, sizeof tokbuf - 1, f);
      tokbuf[r] = 0;
      fclose(f);
      trim(tokbuf);
      tok = tokbuf;
    }
  }
  const char *h[1];
  int nh = 0;
  if (tok) {
    snprintf(auth, sizeof auth, "Authorization: %s", tok);
    h[nh++] = auth;
  }
  td_buf b;
  td_buf_init(&b);
  bool ok = meta_get(url, h, nh, "GET", &b) && parse_meta(b.data, k, exp);
  td_buf_free(&b);
  memset(auth, 0, sizeof auth);
  return ok;
}

static bool from_instance(ldr_s3_key *k, time_t *exp) {
  const char *dis = env("AWS_EC2_METADATA_DISABLED");
  if (dis && !strcasecmp(dis, "true")) return false;
  const char *ep = env("AWS_EC2_METADATA_SERVICE_ENDPOINT");
  if (!ep) ep = "http://169.254.169.254";
  size_t el = strlen(ep);
  while (el && ep[el - 1] == '/') el--;
  char url[2048], tokhdr[4200];
  td_buf b;
  td_buf_init(&b);
  bool ok = false;
  snprintf(url, sizeof url, "%.*s/latest/api/token", (int)el, ep);
  const char *th[1] = {"X-aws-ec2-metadata-token-ttl-seconds: 21600"};
  if (!meta_get(url, th, 1, "PUT", &b)) goto out;
  snprintf(tokhdr, sizeof tokhdr, "X-aws-ec2-metadata-token: %s", b.data);
  const char *h[1] = {tokhdr};
  snprintf(url, sizeof url, "%.*s/latest/meta-data/iam/security-credentials/", (int)el, ep);
  if (!meta_get(url, h, 1, "GET", &b)) goto out;
  char role[256];
  snprintf(role, sizeof role, "%s", b.data);
  char *nl = strchr(role, '\n');
  if (nl) *nl = 0;
  trim(role);
  snprintf(url, sizeof url, "%.*s/latest/meta-data/iam/security-credentials/%s", (int)el, ep, role);
  ok = meta_get(url, h, 1, "GET", &b) && parse_meta(b.data, k, exp);
out:
  memset(tokhdr, 0, sizeof tokhdr);
  td_buf_free(&b);
  return ok;
}

/* false: no credentials anywhere (unsigned requests). */
static bool get_key(ldr_s3_key *k) {
  const char *id = env("AWS_ACCESS_KEY_ID"), *sec = env("AWS_SECRET_ACCESS_KEY");
  if (id && sec) {
    snprintf(k->id, sizeof k->id, "%s", id);
    snprintf(k->secret, sizeof k->secret, "%s", sec);
    const char *t = env("AWS_SESSION_TOKEN");
    snprintf(k->token, sizeof k->token, "%s", t ? t : "");
    return true;
  }
  if (from_file(k)) return true;
  pthread_mutex_lock(&key_mu);
  bool ok = false;
  if (meta_have && (!meta_expires || time(NULL) < meta_expires - REFRESH_EARLY_S)) {
    *k = meta_key;
    ok = true;
  } else if (td_now_ns() >= meta_retry_ns) {
    time_t exp = 0;
    ok = from_container(k, &exp) || from_instance(k, &exp);
    meta_have = ok;
    if (ok) {
      meta_key = *k;
      meta_expires = exp;
    } else {
      meta_retry_ns = td_now_ns() + META_RETRY_NS;
    }
  }
  pthread_mutex_unlock(&key_mu);
  return ok;
}

/* --- requests ------------------------------------------------------------------ */

/* Builds URL and headers for GET bucket/key?query (query: encoded, sorted). */
static td_code prepare(const char *bucket, const char *key, const char *query, ldr_os_get *g,
                       td_err *err) {
  endpoint e;
  get_endpoint(bucket, &e);
  td_buf uri;
  td_buf_init(&uri);
  td_buf_puts(&uri, e.path);
  if (e.path_style) {
    td_buf_putc(&uri, '/');
    uri_encode(&uri, bucket, false);
  }
  /* A bucket's own URL is /bucket path-style (as the SDKs send it), / for
   * a virtual host. */
  if (*key || !e.path_style) td_buf_putc(&uri, '/');
  uri_encode(&uri, key, true);
  if (!uri.len) td_buf_putc(&uri, '/');
  td_buf url;
  td_buf_init(&url);
  const char *h = strstr(e.base, "://");
  td_buf_printf(&url, "%.*s://%s%s%s%s", (int)(h - e.base), e.base, e.host, uri.data,
                *query ? "?" : "", query);
  *g = (ldr_os_get){.insecure = e.insecure};
  if (uri.oom || url.oom) {
    td_buf_free(&uri);
    td_buf_free(&url);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  g->url = td_buf_take(&url, NULL);
  td_buf hb;
  td_buf_init(&hb);
  td_buf_printf(&hb, "Host: %s", e.host);
  g->headers[g->n_headers++] = td_buf_take(&hb, NULL);
  ldr_s3_key k;
  if (get_key(&k)) {
    char amz[32];
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(amz, sizeof amz, "%Y%m%dT%H%M%SZ", &tm);
    g->n_headers +=
        ldr_s3_sign(&k, e.region, "GET", e.host, uri.data, query, amz, g->headers + g->n_headers);
    memset(&k, 0, sizeof k);
  }
  td_buf_free(&uri);
  return TD_OK;
}

static td_code s3_prepare_get(const char *bucket, const char *key, ldr_os_get *out, td_err *err) {
  return prepare(bucket, key, "", out, err);
}

/* The text of <tag>...</tag> after *from, XML entities decoded; advances
 * *from past it. NULL when absent. */
static char *xml_text(const char **from, const char *end, const char *tag) {
  char open[64], close[64];
  snprintf(open, sizeof open, "<%s>", tag);
  snprintf(close, sizeof close, "</%s>", tag);
  const char *a = strstr(*from, open);
  if (!a || (end && a >= end)) return NULL;
  a += strlen(open);
  const char *b = strstr(a, close);
  if (!b) return NULL;
  *from = b + strlen(close);
  char *s = malloc((size_t)(b - a) + 1), *w = s;
  if (!s) return NULL;
  static const struct {
    const char *ent;
    char c;
  } ents[] = {{"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
  for (const char *p = a; p < b;) {
    bool done = false;
    if (*p == '&') {
      for (size_t i = 0; i < sizeof ents / sizeof *ents && !done; i++)
        if (!strncmp(p, ents[i].ent, strlen(ents[i].ent))) {
          *w++ = ents[i].c;
          p += strlen(ents[i].ent);
          done = true;
        }
      if (!done && p[1] == '#') {
        char *e;
        long c = p[2] == 'x' ? strtol(p + 3, &e, 16) : strtol(p + 2, &e, 10);
        if (*e == ';' && c > 0 && c < 128) {
          *w++ = (char)c;
          p = e + 1;
          done = true;
        }
      }
    }
    if (!done) *w++ = *p++;
  }
  *w = 0;
  return s;
}

static td_code s3_error(const char *bucket, const char *prefix, long st, const char *body,
                        td_err *err) {
  const char *p = body ? body : "";
  char *code = xml_text(&p, NULL, "Code");
  p = body ? body : "";
  char *msg = xml_text(&p, NULL, "Message");
  td_code c = st == 404                ? TD_NOT_FOUND
              : st == 403              ? TD_PERMISSION_DENIED
              : st == 401              ? TD_UNAUTHENTICATED
              : st == 400              ? TD_INVALID_ARGUMENT
              : st == 429 || st >= 500 ? TD_UNAVAILABLE
                                       : TD_UNKNOWN;
  td_err_set(err, c, "s3://%s/%s: HTTP %ld%s%s%s%s%s", bucket, prefix, st, code ? " " : "",
             code ? code : "", msg ? " (" : "", msg ? msg : "", msg ? ")" : "");
  free(code);
  free(msg);
  return c;
}

static td_code s3_list(const char *bucket, const char *prefix, ldr_obj **out, int *n_out,
                       td_err *err) {
  ldr_obj *o = NULL;
  int n = 0, cap = 0;
  char *token = NULL;
  td_code rc = TD_OK;
  td_buf body;
  td_buf_init(&body);
  for (;;) {
    td_buf q;
    td_buf_init(&q);
    if (token) {
      td_buf_puts(&q, "continuation-token=");
      uri_encode(&q, token, false);
      td_buf_putc(&q, '&');
    }
    td_buf_puts(&q, "list-type=2&prefix=");
    uri_encode(&q, prefix, false);
    ldr_os_get g;
    rc = q.oom ? td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory")
               : prepare(bucket, "", q.data, &g, err);
    td_buf_free(&q);
    if (rc) break;
    ldr_http_req r = {.url = g.url,
                      .headers = (const char *const *)g.headers,
                      .n_headers = g.n_headers,
                      .insecure = g.insecure,
                      .timeout_ms = 30000};
    long st = 0;
    td_buf_reset(&body);
    rc = ldr_http_do(&r, 2, &st, &body, err);
    ldr_os_get_free(&g);
    if (!rc && st != 200) rc = s3_error(bucket, prefix, st, body.data, err);
    if (rc) break;
    const char *p = body.data ? body.data : "";
    for (;;) {
      const char *c = strstr(p, "<Contents>");
      if (!c) break;
      const char *end = strstr(c, "</Contents>");
      if (!end) break;
      const char *q2 = c;
      char *key = xml_text(&q2, end, "Key");
      q2 = c;
      char *size = xml_text(&q2, end, "Size");
      if (key && size) {
        if (n == cap) {
          cap = cap ? cap * 2 : 64;
          ldr_obj *no = realloc(o, sizeof *no * (size_t)cap);
          if (!no) {
            free(key);
            free(size);
            rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
            break;
          }
          o = no;
        }
        o[n++] = (ldr_obj){.key = key, .size = strtoll(size, NULL, 10)};
        key = NULL;
      }
      free(key);
      free(size);
      p = end + 11;
    }
    if (rc) break;
    p = body.data ? body.data : "";
    char *trunc = xml_text(&p, NULL, "IsTruncated");
    bool more = trunc && !strcmp(trunc, "true");
    free(trunc);
    free(token);
    p = body.data ? body.data : "";
    token = more ? xml_text(&p, NULL, "NextContinuationToken") : NULL;
    if (!token) break;
  }
  free(token);
  td_buf_free(&body);
  if (rc) {
    ldr_obj_free(o, n);
    return rc;
  }
  *out = o;
  *n_out = n;
  return TD_OK;
}

const ldr_os_backend ldr_s3_backend = {"s3", s3_list, s3_prepare_get};
