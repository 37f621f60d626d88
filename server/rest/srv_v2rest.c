/* v2 REST routing and the answers that need no model run. The inference
 * codec is in srv_v2restinfer.c. JSON is written compactly with the
 * srv_jsonwrite helpers for strings and numbers. */
#include "srv_v2rest.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ldr_registry.h"
#include "srv_json.h"
#include "srv_stats.h"
#include "srv_v2.h"
#include "srv_v2repo.h"

#ifndef TENSORD_VERSION
#define TENSORD_VERSION "unknown"
#endif

/* --- routing ----------------------------------------------------------- */

static int hexval(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

/* Copies one path segment (percent-decoded) into w; returns the bytes of
 * the source consumed, 0 for an empty segment or an encoded NUL. */
static size_t take_segment(const char *p, char **w, const char **out) {
  size_t n = 0;
  while (p[n] && p[n] != '/') n++;
  if (!n) return 0;
  char *d = *w, *start = d;
  for (size_t i = 0; i < n; i++) {
    int hi, lo;
    if (p[i] == '%' && i + 2 < n + 1 && (hi = hexval(p[i + 1])) >= 0 &&
        (lo = hexval(p[i + 2])) >= 0) {
      if (!hi && !lo) return 0;
      *d++ = (char)(hi * 16 + lo);
      i += 2;
    } else {
      *d++ = p[i];
    }
  }
  *d++ = '\0';
  *w = d;
  *out = start;
  return n;
}

bool srv_v2rest_route(const char *method, const char *path, srv_v2_route *r) {
  if (strncmp(path, "/v2", 3) || (path[3] && path[3] != '/')) return false;
  r->kind = SRV_V2_NOT_FOUND;
  r->name = NULL;
  r->version = "";
  bool get = !strcmp(method, "GET") || !strcmp(method, "HEAD"), post = !strcmp(method, "POST");
  if (strlen(path) >= sizeof r->buf) return true;
  const char *p = path + 3;
  char *w = r->buf;
  if (!*p || !strcmp(p, "/")) {
    if (get) r->kind = SRV_V2_SERVER_META;
    return true;
  }
  if (!strcmp(p, "/health/live")) {
    if (get) r->kind = SRV_V2_LIVE;
    return true;
  }
  if (!strcmp(p, "/health/ready")) {
    if (get) r->kind = SRV_V2_READY;
    return true;
  }
  if (!strcmp(p, "/repository/index")) {
    if (post) r->kind = SRV_V2_REPO_INDEX;
    return true;
  }
  if (!strncmp(p, "/repository/models/", 19)) {
    p += 19;
    size_t n = take_segment(p, &w, &r->name);
    if (!n) return true;
    p += n;
    if (post && !strcmp(p, "/load"))
      r->kind = SRV_V2_REPO_LOAD;
    else if (post && !strcmp(p, "/unload"))
      r->kind = SRV_V2_REPO_UNLOAD;
    return true;
  }
  if (!strcmp(p, "/models/stats")) {
    if (get) r->kind = SRV_V2_STATS;
    return true;
  }
  if (strncmp(p, "/models/", 8)) return true;
  p += 8;
  size_t n = take_segment(p, &w, &r->name);
  if (!n) return true;
  p += n;
  if (!strncmp(p, "/versions/", 10)) {
    p += 10;
    size_t k = take_segment(p, &w, &r->version);
    if (!k) return true;
    p += k;
  }
  if (get && !*p)
    r->kind = SRV_V2_MODEL_META;
  else if (get && !strcmp(p, "/ready"))
    r->kind = SRV_V2_MODEL_READY;
  else if (get && !strcmp(p, "/config"))
    r->kind = SRV_V2_MODEL_CONFIG;
  else if (get && !strcmp(p, "/stats"))
    r->kind = SRV_V2_STATS;
  else if (post && !strcmp(p, "/infer"))
    r->kind = SRV_V2_INFER;
  return true;
}

bool srv_v2rest_blocking(const srv_v2_route *r) { return r->kind >= SRV_V2_REPO_INDEX; }

/* --- replies ------------------------------------------------------------ */

static void reply_init(srv_v2_reply *out, int status) {
  out->status = status;
  td_buf_init(&out->body);
  out->header_len = 0;
  out->binary = false;
}

void srv_v2rest_error(const td_err *e, srv_v2_reply *out) {
  reply_init(out, td_code_http(e->code));
  td_buf_puts(&out->body, "{\"error\":");
  srv_json_append_string(&out->body, e->msg, strlen(e->msg));
  td_buf_putc(&out->body, '}');
}

static void str(td_buf *b, const char *s) { srv_json_append_string(b, s, strlen(s)); }

static void server_meta(srv_v2_reply *out) {
  reply_init(out, 200);
  td_buf_puts(&out->body, "{\"name\":");
  str(&out->body, SRV_V2_SERVER_NAME);
  td_buf_puts(&out->body, ",\"version\":");
  str(&out->body, TENSORD_VERSION);
  td_buf_puts(&out->body,
              ",\"extensions\":[\"binary_tensor_data\",\"model_repository\",\"statistics\"]}");
}

/* A held servable and the signature v2 shows for it. */
static void tensors_meta(td_buf *b, const ldr_tensor_info *t, int n) {
  td_buf_putc(b, '[');
  for (int i = 0; i < n; i++) {
    int64_t dims[ENG_MAX_RANK];
    int rank = srv_v2_tensor_shape(&t[i], dims);
    const char *dt = srv_v2_datatype(t[i].dtype);
    td_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    str(b, t[i].alias);
    td_buf_puts(b, ",\"datatype\":");
    str(b, dt ? dt : "");
    td_buf_puts(b, ",\"shape\":[");
    for (int k = 0; k < rank; k++) td_buf_printf(b, "%s%lld", k ? "," : "", (long long)dims[k]);
    td_buf_puts(b, "]}");
  }
  td_buf_putc(b, ']');
}

static void model_meta(srv_api *api, const srv_v2_route *r, srv_v2_reply *out) {
  ldr_servable *sv;
  const ldr_signature *sig;
  td_err err;
  if (srv_v2_acquire(api, r->name, r->version, &sv, &sig, &err)) {
    srv_v2rest_error(&err, out);
    return;
  }
  reply_init(out, 200);
  td_buf *b = &out->body;
  td_buf_puts(b, "{\"name\":");
  str(b, r->name);
  td_buf_puts(b, ",\"versions\":[");
  int64_t *v = NULL;
  int n = srv_v2_available_versions(api, r->name, &v);
  for (int i = 0; i < n; i++) td_buf_printf(b, "%s\"%lld\"", i ? "," : "", (long long)v[i]);
  free(v);
  td_buf_puts(b, "],\"platform\":");
  str(b, SRV_V2_PLATFORM);
  td_buf_puts(b, ",\"inputs\":");
  tensors_meta(b, sig->inputs, sig->n_inputs);
  td_buf_puts(b, ",\"outputs\":");
  tensors_meta(b, sig->outputs, sig->n_outputs);
  td_buf_putc(b, '}');
  ldr_servable_unref(sv);
}

static void tensors_config(td_buf *b, const ldr_tensor_info *t, int n, bool drop_batch) {
  td_buf_putc(b, '[');
  for (int i = 0; i < n; i++) {
    int64_t dims[ENG_MAX_RANK];
    int rank = srv_v2_tensor_shape(&t[i], dims);
    td_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    str(b, t[i].alias);
    td_buf_printf(b, ",\"data_type\":\"%s\",\"dims\":[", srv_v2_config_type(t[i].dtype));
    for (int k = drop_batch ? 1 : 0, j = 0; k < rank; k++, j++)
      td_buf_printf(b, "%s%lld", j ? "," : "", (long long)dims[k]);
    td_buf_puts(b, "]}");
  }
  td_buf_putc(b, ']');
}

static void model_config(srv_api *api, const srv_v2_route *r, srv_v2_reply *out) {
  ldr_servable *sv;
  const ldr_signature *sig;
  td_err err;
  if (srv_v2_acquire(api, r->name, r->version, &sv, &sig, &err)) {
    srv_v2rest_error(&err, out);
    return;
  }
  int maxb = srv_v2_max_batch(sig);
  reply_init(out, 200);
  td_buf *b = &out->body;
  td_buf_puts(b, "{\"name\":");
  str(b, r->name);
  td_buf_puts(b, ",\"platform\":");
  str(b, SRV_V2_PLATFORM);
  td_buf_printf(b, ",\"backend\":\"tensord\",\"max_batch_size\":%d,\"input\":", maxb);
  tensors_config(b, sig->inputs, sig->n_inputs, maxb > 0);
  td_buf_puts(b, ",\"output\":");
  tensors_config(b, sig->outputs, sig->n_outputs, maxb > 0);
  td_buf_putc(b, '}');
  ldr_servable_unref(sv);
}

static void duration(td_buf *b, const char *key, uint64_t count, uint64_t ns) {
  td_buf_printf(b, "\"%s\":{\"count\":%llu,\"ns\":%llu}", key, (unsigned long long)count,
                (unsigned long long)ns);
}

static void stats(srv_api *api, const srv_v2_route *r, srv_v2_reply *out) {
  td_err err;
  bool has = false;
  int64_t v = -1;
  td_code rc = srv_v2_parse_version(r->version, &has, &v, &err);
  if (!rc && r->name) {
    ldr_version_status *st = NULL;
    int k = 0;
    rc = ldr_registry_status(api->registry, r->name, has ? v : -1, &st, &k, &err);
    free(st);
  }
  if (rc) {
    srv_v2rest_error(&err, out);
    return;
  }
  srv_stats_entry *e = NULL;
  int n = srv_v2_stats(api, r->name, has ? v : -1, &e);
  reply_init(out, 200);
  td_buf *b = &out->body;
  td_buf_puts(b, "{\"model_stats\":[");
  for (int i = 0; i < n; i++) {
    td_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
    str(b, e[i].model);
    td_buf_printf(b,
                  ",\"version\":\"%lld\",\"last_inference\":%llu,\"inference_count\":%llu,"
                  "\"execution_count\":%llu,\"inference_stats\":{",
                  (long long)e[i].version, (unsigned long long)e[i].last_ms,
                  (unsigned long long)e[i].inference_count,
                  (unsigned long long)e[i].execution_count);
    duration(b, "success", e[i].success_count, e[i].success_ns);
    td_buf_putc(b, ',');
    duration(b, "fail", e[i].fail_count, e[i].fail_ns);
    td_buf_putc(b, ',');
    /* Each successful run counts once in every phase (srv_stats.h). */
    duration(b, "queue", e[i].success_count, e[i].queue_ns);
    td_buf_putc(b, ',');
    duration(b, "compute_input", e[i].success_count, e[i].compute_input_ns);
    td_buf_putc(b, ',');
    duration(b, "compute_infer", e[i].success_count, e[i].compute_infer_ns);
    td_buf_putc(b, ',');
    duration(b, "compute_output", e[i].success_count, e[i].compute_output_ns);
    td_buf_puts(b, "},\"batch_stats\":[]}");
  }
  td_buf_puts(b, "]}");
  srv_stats_snapshot_free(e, n);
}

void srv_v2rest_answer(srv_api *api, const srv_v2_route *r, srv_v2_reply *out) {
  td_err err;
  switch (r->kind) {
    case SRV_V2_SERVER_META:
      server_meta(out);
      return;
    case SRV_V2_LIVE:
      reply_init(out, 200);
      return;
    case SRV_V2_READY:
      reply_init(out, ldr_registry_ready(api->registry) ? 200 : 503);
      return;
    case SRV_V2_MODEL_META:
      model_meta(api, r, out);
      return;
    case SRV_V2_MODEL_READY: {
      ldr_servable *sv;
      const ldr_signature *sig;
      if (srv_v2_acquire(api, r->name, r->version, &sv, &sig, &err)) {
        srv_v2rest_error(&err, out);
        return;
      }
      ldr_servable_unref(sv);
      reply_init(out, 200);
      return;
    }
    case SRV_V2_MODEL_CONFIG:
      model_config(api, r, out);
      return;
    case SRV_V2_STATS:
      stats(api, r, out);
      return;
    default:
      td_err_set(&err, TD_NOT_FOUND, "no such v2 endpoint");
      srv_v2rest_error(&err, out);
  }
}

/* --- repository ----------------------------------------------------------- */

void srv_v2rest_repository(srv_api *api, const srv_v2_route *r, const char *body, size_t len,
                           srv_v2_reply *out) {
  td_err err;
  if (!api->repo) {
    td_err_set(&err, TD_UNIMPLEMENTED, "the model repository extension is not available");
    srv_v2rest_error(&err, out);
    return;
  }
  cJSON *root = NULL;
  if (len && srv_json_parse(body, len, &root, &err)) {
    srv_v2rest_error(&err, out);
    return;
  }
  if (root && !cJSON_IsObject(root)) {
    srv_json_free(root);
    td_err_set(&err, TD_INVALID_ARGUMENT, "the request body must be a JSON object");
    srv_v2rest_error(&err, out);
    return;
  }
  td_code rc = TD_OK;
  if (r->kind == SRV_V2_REPO_INDEX) {
    const cJSON *ready = cJSON_GetObjectItemCaseSensitive(root, "ready");
    if (ready && !cJSON_IsBool(ready)) {
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "'ready' must be true or false");
    } else {
      srv_v2repo_entry *e = NULL;
      int n = srv_v2repo_index(api->repo, cJSON_IsTrue(ready), &e);
      reply_init(out, 200);
      td_buf *b = &out->body;
      td_buf_putc(b, '[');
      for (int i = 0; i < n; i++) {
        td_buf_puts(b, i ? ",{\"name\":" : "{\"name\":");
        str(b, e[i].name);
        if (e[i].has_version) td_buf_printf(b, ",\"version\":\"%lld\"", (long long)e[i].version);
        td_buf_printf(b, ",\"state\":\"%s\",\"reason\":", e[i].state);
        str(b, e[i].reason);
        td_buf_putc(b, '}');
      }
      td_buf_putc(b, ']');
      srv_v2repo_index_free(e, n);
    }
  } else {
    const char *base_path = NULL;
    const cJSON *params = cJSON_GetObjectItemCaseSensitive(root, "parameters");
    const cJSON *bp = cJSON_GetObjectItemCaseSensitive(params, "base_path");
    if (params && !cJSON_IsObject(params))
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "'parameters' must be an object");
    else if (bp && !cJSON_IsString(bp))
      rc = td_err_set(&err, TD_INVALID_ARGUMENT, "parameter 'base_path' must be a string");
    else if (bp && r->kind == SRV_V2_REPO_LOAD)
      base_path = bp->valuestring;
    if (!rc)
      rc = r->kind == SRV_V2_REPO_LOAD ? srv_v2repo_load(api->repo, r->name, base_path, &err)
                                       : srv_v2repo_unload(api->repo, r->name, &err);
    if (!rc) reply_init(out, 200);
  }
  srv_json_free(root);
  if (rc) srv_v2rest_error(&err, out);
}
