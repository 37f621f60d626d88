/* GCS: the JSON API through libcurl and cJSON, with a cached OAuth token. */
#include "ldr_gcs.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ldr_http.h"
#include "ldr_rsa.h"
#include "td_buf.h"
#include "td_clock.h"

#define RETRY_NS (300ull * 1000000000ull)
#define REFRESH_EARLY_NS (300ull * 1000000000ull)

static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && *v ? v : NULL;
}

static void base_url(char *out, size_t cap) {
  const char *e = env("STORAGE_EMULATOR_HOST");
  if (!e) {
    snprintf(out, cap, "https://storage.googleapis.com");
    return;
  }
  snprintf(out, cap, "%s%s", strstr(e, "://") ? "" : "http://", e);
  size_t n = strlen(out);
  while (n && out[n - 1] == '/') out[--n] = 0;
}

static void url_encode(td_buf *b, const char *s) {
  static const char hex[] = "0123456789ABCDEF";
  for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
    unsigned char c = *p;
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
        c == '_' || c == '.' || c == '~') {
      td_buf_putc(b, (char)c);
    } else {
      td_buf_putc(b, '%');
      td_buf_putc(b, hex[c >> 4]);
      td_buf_putc(b, hex[c & 15]);
    }
  }
}

/* --- tokens ---------------------------------------------------------------------- */

static pthread_mutex_t tok_mu = PTHREAD_MUTEX_INITIALIZER;
static char tok[4096];
static uint64_t tok_until_ns, meta_retry_ns;

/* {"access_token": ..., "expires_in": seconds} */
static bool take_token(const char *json) {
  cJSON *j = cJSON_Parse(json);
  const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "access_token"));
  cJSON *ex = cJSON_GetObjectItemCaseSensitive(j, "expires_in");
  bool ok = t && strlen(t) < sizeof tok;
  if (ok) {
    snprintf(tok, sizeof tok, "%s", t);
    double s = cJSON_IsNumber(ex) ? ex->valuedouble : 3600;
    uint64_t life = (uint64_t)(s * 1e9);
    tok_until_ns = td_now_ns() + (life > REFRESH_EARLY_NS ? life - REFRESH_EARLY_NS : life / 2);
  }
  cJSON_Delete(j);
  return ok;
}

/* Trades a form body at token_uri for an access token. */
static td_code exchange(const char *uri, td_buf *form, td_err *err) {
  td_buf resp;
  td_buf_init(&resp);
  const char *h[1] = {"Content-Type: application/x-www-form-urlencoded"};
  ldr_http_req r = {.method = "POST",
                    .url = uri,
                    .headers = h,
                    .n_headers = 1,
                    .body = form->data,
                    .body_len = form->len,
                    .timeout_ms = 10000};
  long st = 0;
  td_code rc = form->oom ? td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory")
                         : ldr_http_do(&r, 2, &st, &resp, err);
  if (!rc && (st != 200 || !take_token(resp.data)))
    rc = td_err_set(err, TD_UNAUTHENTICATED, "%s refused the credentials (HTTP %ld)", uri, st);
  if (form->data) memset(form->data, 0, form->len);
  td_buf_free(&resp);
  return rc;
}

/* A service-account key: an RS256-signed JWT asserting the account, for
 * read access to storage, traded at token_uri. */
static td_code from_service_account(const char *path, cJSON *j, td_err *err) {
  const char *email = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "client_email"));
  const char *key = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "private_key"));
  const char *uri = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "token_uri"));
  if (!uri) uri = "https://oauth2.googleapis.com/token";
  if (!email || !key)
    return td_err_set(err, TD_UNAUTHENTICATED,
                      "GOOGLE_APPLICATION_CREDENTIALS %s: client_email or private_key missing",
                      path);
  cJSON *claims = cJSON_CreateObject();
  long now = (long)time(NULL);
  cJSON_AddStringToObject(claims, "iss", email);
  cJSON_AddStringToObject(claims, "scope", "https://www.googleapis.com/auth/devstorage.read_only");
  cJSON_AddStringToObject(claims, "aud", uri);
  cJSON_AddNumberToObject(claims, "iat", (double)now);
  cJSON_AddNumberToObject(claims, "exp", (double)(now + 3600));
  char *cl = cJSON_PrintUnformatted(claims);
  cJSON_Delete(claims);
  static const char hdr[] = "{\"alg\":\"RS256\",\"typ\":\"JWT\"}";
  size_t cn = cl ? strlen(cl) : 0;
  char *jwt = malloc(4 * (sizeof hdr + cn) / 3 + 1024);
  td_code rc = TD_OK;
  if (!cl || !jwt) {
    rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  } else {
    ldr_base64url_encode((const uint8_t *)hdr, sizeof hdr - 1, jwt);
    size_t o = strlen(jwt);
    jwt[o++] = '.';
    ldr_base64url_encode((const uint8_t *)cl, cn, jwt + o);
    o += strlen(jwt + o);
    uint8_t *sig = NULL;
    size_t sl = 0;
    rc = ldr_rsa_sign_sha256(key, jwt, o, &sig, &sl, err);
    if (rc) {
      char why[TD_ERR_MSG_MAX];
      snprintf(why, sizeof why, "%s", err->msg);
      rc = td_err_set(err, TD_UNAUTHENTICATED, "GOOGLE_APPLICATION_CREDENTIALS %s: %s", path, why);
    } else {
      jwt[o++] = '.';
      ldr_base64url_encode(sig, sl, jwt + o);
      free(sig);
      td_buf form;
      td_buf_init(&form);
      td_buf_puts(&form,
                  "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
                  "&assertion=");
      td_buf_puts(&form, jwt);
      rc = exchange(uri, &form, err);
      td_buf_free(&form);
    }
  }
  free(cl);
  free(jwt);
  return rc;
}

static td_code from_key_file(const char *path, td_err *err) {
  FILE *f = fopen(path, "r");
  if (!f)
    return td_err_set(err, TD_UNAUTHENTICATED, "GOOGLE_APPLICATION_CREDENTIALS %s cannot be read",
                      path);
  td_buf b;
  td_buf_init(&b);
  char chunk[4096];
  size_t r;
  while ((r = fread(chunk, 1, sizeof chunk, f)) > 0) td_buf_append(&b, chunk, r);
  fclose(f);
  cJSON *j = cJSON_Parse(b.data ? b.data : "");
  td_buf_free(&b);
  const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "type"));
  td_code rc = TD_OK;
  if (!type) {
    rc = td_err_set(err, TD_UNAUTHENTICATED, "GOOGLE_APPLICATION_CREDENTIALS %s: not a key file",
                    path);
  } else if (!strcmp(type, "service_account")) {
    rc = from_service_account(path, j, err);
  } else if (!strcmp(type, "authorized_user")) {
    const char *id = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "client_id"));
    const char *sec = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "client_secret"));
    const char *ref = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "refresh_token"));
    const char *uri = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "token_uri"));
    if (!id || !sec || !ref) {
      rc = td_err_set(err, TD_UNAUTHENTICATED,
                      "GOOGLE_APPLICATION_CREDENTIALS %s: client_id, client_secret or "
                      "refresh_token missing",
                      path);
    } else {
      td_buf form;
      td_buf_init(&form);
      td_buf_puts(&form, "grant_type=refresh_token&client_id=");
      url_encode(&form, id);
      td_buf_puts(&form, "&client_secret=");
      url_encode(&form, sec);
      td_buf_puts(&form, "&refresh_token=");
      url_encode(&form, ref);
      rc = exchange(uri ? uri : "https://oauth2.googleapis.com/token", &form, err);
      td_buf_free(&form);
    }
  } else {
    rc = td_err_set(err, TD_UNIMPLEMENTED,
                    "GOOGLE_APPLICATION_CREDENTIALS %s: credentials of type %s are not supported",
                    path, type);
  }
  cJSON_Delete(j);
  return rc;
}

static bool from_metadata(void) {
  const char *host = env("GCE_METADATA_HOST");
  char url[1024];
  snprintf(url, sizeof url, "http://%s/computeMetadata/v1/instance/service-accounts/default/token",
           host ? host : "metadata.google.internal");
  const char *h[1] = {"Metadata-Flavor: Google"};
  ldr_http_req r = {.url = url, .headers = h, .n_headers = 1, .timeout_ms = 2000};
  td_buf b;
  td_buf_init(&b);
  long st = 0;
  td_err e;
  bool ok = !ldr_http_do(&r, 1, &st, &b, &e) && st == 200 && take_token(b.data);
  td_buf_free(&b);
  return ok;
}

/* Writes "Authorization: Bearer ..." into *hdr (malloced), or leaves it
 * NULL for anonymous access. */
static td_code auth_header(char **hdr, td_err *err) {
  *hdr = NULL;
  td_code rc = TD_OK;
  pthread_mutex_lock(&tok_mu);
  uint64_t now = td_now_ns();
  if (!(tok[0] && now < tok_until_ns)) {
    tok[0] = 0;
    const char *file = env("GOOGLE_APPLICATION_CREDENTIALS");
    if (file)
      rc = from_key_file(file, err);
    else if ((env("GCE_METADATA_HOST") || !env("STORAGE_EMULATOR_HOST")) && now >= meta_retry_ns &&
             !from_metadata())
      meta_retry_ns = now + RETRY_NS;
  }
  if (!rc && tok[0]) {
    size_t n = strlen(tok) + 32;
    if ((*hdr = malloc(n))) snprintf(*hdr, n, "Authorization: Bearer %s", tok);
  }
  pthread_mutex_unlock(&tok_mu);
  return rc;
}

/* --- requests -------------------------------------------------------------------- */

static td_code gcs_prepare(td_buf *url, ldr_os_get *g, td_err *err) {
  *g = (ldr_os_get){0};
  char *auth = NULL;
  td_code rc = auth_header(&auth, err);
  if (rc) {
    td_buf_free(url);
    return rc;
  }
  if (url->oom) {
    free(auth);
    td_buf_free(url);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  g->url = td_buf_take(url, NULL);
  if (auth) g->headers[g->n_headers++] = auth;
  return TD_OK;
}

static td_code gcs_prepare_get(const char *bucket, const char *key, ldr_os_get *out, td_err *err) {
  char base[1024];
  base_url(base, sizeof base);
  td_buf u;
  td_buf_init(&u);
  td_buf_printf(&u, "%s/storage/v1/b/", base);
  url_encode(&u, bucket);
  td_buf_puts(&u, "/o/");
  url_encode(&u, key);
  td_buf_puts(&u, "?alt=media");
  return gcs_prepare(&u, out, err);
}

static td_code gcs_error(const char *bucket, const char *prefix, long st, const char *body,
                         td_err *err) {
  cJSON *j = cJSON_Parse(body ? body : "");
  const char *msg = cJSON_GetStringValue(
      cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "error"), "message"));
  td_code c = st == 404                ? TD_NOT_FOUND
              : st == 403              ? TD_PERMISSION_DENIED
              : st == 401              ? TD_UNAUTHENTICATED
              : st == 400              ? TD_INVALID_ARGUMENT
              : st == 429 || st >= 500 ? TD_UNAVAILABLE
                                       : TD_UNKNOWN;
  td_err_set(err, c, "gs://%s/%s: HTTP %ld%s%.300s%s", bucket, prefix, st, msg ? " (" : "",
             msg ? msg : "", msg ? ")" : "");
  cJSON_Delete(j);
  return c;
}

/* GCS lists crc32c as the base64 of its 4 big-endian bytes. */
static bool parse_crc(const char *s, uint32_t *out) {
  static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  if (!s || strlen(s) != 8 || strcmp(s + 6, "==")) return false;
  uint64_t bits = 0;
  for (int i = 0; i < 6; i++) {
    const char *p = strchr(al, s[i]);
    if (!p || !s[i]) return false;
    bits = bits << 6 | (uint64_t)(p - al);
  }
  *out = (uint32_t)(bits >> 4); /* 36 bits carry the 32 */
  return true;
}

static td_code gcs_list(const char *bucket, const char *prefix, ldr_obj **out, int *n_out,
                        td_err *err) {
  char base[1024];
  base_url(base, sizeof base);
  ldr_obj *o = NULL;
  int n = 0, cap = 0;
  char *page = NULL;
  td_code rc = TD_OK;
  td_buf body;
  td_buf_init(&body);
  for (;;) {
    td_buf u;
    td_buf_init(&u);
    td_buf_printf(&u, "%s/storage/v1/b/", base);
    url_encode(&u, bucket);
    td_buf_puts(&u, "/o?fields=items(name,size,crc32c),nextPageToken&prefix=");
    url_encode(&u, prefix);
    if (page) {
      td_buf_puts(&u, "&pageToken=");
      url_encode(&u, page);
    }
    ldr_os_get g;
    if ((rc = gcs_prepare(&u, &g, err))) break;
    ldr_http_req r = {.url = g.url,
                      .headers = (const char *const *)g.headers,
                      .n_headers = g.n_headers,
                      .timeout_ms = 30000};
    long st = 0;
    td_buf_reset(&body);
    rc = ldr_http_do(&r, 2, &st, &body, err);
    ldr_os_get_free(&g);
    if (!rc && st != 200) rc = gcs_error(bucket, prefix, st, body.data, err);
    if (rc) break;
    cJSON *j = cJSON_Parse(body.data ? body.data : "");
    if (!j) {
      rc = td_err_set(err, TD_UNAVAILABLE, "gs://%s/%s: the listing is not JSON", bucket, prefix);
      break;
    }
    cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(j, "items")) {
      const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "name"));
      cJSON *sz = cJSON_GetObjectItemCaseSensitive(it, "size");
      if (!name) continue;
      if (n == cap) {
        cap = cap ? cap * 2 : 64;
        ldr_obj *no = realloc(o, sizeof *no * (size_t)cap);
        if (!no) {
          rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
          break;
        }
        o = no;
      }
      ldr_obj *x = &o[n];
      *x = (ldr_obj){.key = strdup(name)};
      if (!x->key) {
        rc = td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
        break;
      }
      x->size = cJSON_IsString(sz)   ? strtoll(sz->valuestring, NULL, 10)
                : cJSON_IsNumber(sz) ? (int64_t)sz->valuedouble
                                     : 0;
      x->has_crc32c = parse_crc(
          cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(it, "crc32c")), &x->crc32c);
      n++;
    }
    const char *next = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(j, "nextPageToken"));
    free(page);
    page = !rc && next && *next ? strdup(next) : NULL;
    cJSON_Delete(j);
    if (rc || !page) break;
  }
  free(page);
  td_buf_free(&body);
  if (rc) {
    ldr_obj_free(o, n);
    return rc;
  }
  *out = o;
  *n_out = n;
  return TD_OK;
}

const ldr_os_backend ldr_gcs_backend = {"gs", gcs_list, gcs_prepare_get};
