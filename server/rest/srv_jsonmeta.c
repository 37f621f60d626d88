/* Protobuf-printer layout (contract in srv_jsonmeta.h). A tiny writer keeps
 * one "has members" bit per level: a member is preceded by ",\n" or "\n" and
 * the level's indent; a closing bracket gets a newline only when the level
 * had members, which yields "[]" and "{}" for empty ones. */
#include "srv_jsonmeta.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "srv_jsonwrite.h"

#define PB_DEPTH 32

typedef struct pbw {
  td_buf *b;
  int depth;
  bool has[PB_DEPTH];
} pbw;

static void pb_indent(pbw *w) {
  td_buf_putc(w->b, '\n');
  for (int i = 0; i < w->depth; i++) td_buf_putc(w->b, ' ');
}

/* Prefix of a member (key may be NULL inside arrays and for the root). */
static void pb_member(pbw *w, const char *key) {
  if (w->depth > 0) {
    if (w->has[w->depth]) td_buf_putc(w->b, ',');
    w->has[w->depth] = true;
    pb_indent(w);
  }
  if (key) {
    srv_json_append_string(w->b, key, strlen(key));
    td_buf_puts(w->b, ": ");
  }
}

static void pb_open(pbw *w, const char *key, char bracket) {
  pb_member(w, key);
  td_buf_putc(w->b, bracket);
  if (w->depth + 1 < PB_DEPTH) w->depth++;
  w->has[w->depth] = false;
}

static void pb_close(pbw *w, char bracket) {
  bool had = w->has[w->depth];
  if (w->depth > 0) w->depth--;
  if (had) pb_indent(w);
  td_buf_putc(w->b, bracket);
}

static void pb_str(pbw *w, const char *key, const char *s) {
  pb_member(w, key);
  srv_json_append_string(w->b, s ? s : "", s ? strlen(s) : 0);
}

static void pb_int64(pbw *w, const char *key, int64_t v) {
  pb_member(w, key);
  td_buf_printf(w->b, "\"%" PRId64 "\"", v);
}

static void pb_raw(pbw *w, const char *key, const char *text) {
  pb_member(w, key);
  td_buf_puts(w->b, text);
}

static void pb_root_end(pbw *w) {
  pb_close(w, '}');
  td_buf_putc(w->b, '\n');
}

/* --- status ------------------------------------------------------------ */

static void version_status_list(pbw *w, const ldr_version_status *st, int n) {
  pb_open(w, "model_version_status", '[');
  for (int i = 0; i < n; i++) {
    pb_open(w, NULL, '{');
    pb_int64(w, "version", st[i].version);
    pb_str(w, "state", ldr_state_name(st[i].state));
    pb_open(w, "status", '{');
    pb_str(w, "error_code", td_code_name(st[i].status.code));
    pb_str(w, "error_message", st[i].status.msg);
    pb_close(w, '}');
    pb_close(w, '}');
  }
  pb_close(w, ']');
}

void srv_json_encode_status(const ldr_version_status *st, int n, td_buf *out) {
  pbw w = {.b = out};
  pb_open(&w, NULL, '{');
  version_status_list(&w, st, n);
  pb_root_end(&w);
}

/* --- metadata ---------------------------------------------------------- */

static void tensor_info(pbw *w, const ldr_tensor_info *t) {
  pb_open(w, t->alias, '{');
  if (t->dtype_name) {
    pb_str(w, "dtype", t->dtype_name);
  } else {
    char num[16];
    snprintf(num, sizeof num, "%d", t->tf_dtype);
    pb_raw(w, "dtype", num);
  }
  if (t->has_shape) {
    pb_open(w, "tensor_shape", '{');
    pb_open(w, "dim", '[');
    for (int d = 0; d < t->shape.rank; d++) {
      pb_open(w, NULL, '{');
      pb_int64(w, "size", t->shape.dim[d]);
      pb_str(w, "name", t->dim_names ? t->dim_names[d] : "");
      pb_close(w, '}');
    }
    pb_close(w, ']');
    pb_raw(w, "unknown_rank", t->shape.rank < 0 ? "true" : "false");
    pb_close(w, '}');
  }
  pb_str(w, "name", t->name);
  pb_close(w, '}');
}

static void signature_def(pbw *w, const ldr_signature *s) {
  pb_open(w, s->key, '{');
  pb_open(w, "inputs", '{');
  for (int i = 0; i < s->n_inputs; i++) tensor_info(w, &s->inputs[i]);
  pb_close(w, '}');
  pb_open(w, "outputs", '{');
  for (int i = 0; i < s->n_outputs; i++) tensor_info(w, &s->outputs[i]);
  pb_close(w, '}');
  pb_str(w, "method_name", s->method_name);
  pb_open(w, "defaults", '{');
  pb_close(w, '}');
  pb_close(w, '}');
}

void srv_json_encode_metadata(const char *model_name, int64_t version, const ldr_servable *sv,
                              td_buf *out) {
  /* TF Serving prints ModelSpec and SignatureDefMap separately and joins
   * them by hand; the joints below are its bytes. */
  td_buf_puts(out, "{\n\"model_spec\":");
  pbw w = {.b = out};
  pb_open(&w, NULL, '{');
  pb_str(&w, "name", model_name);
  pb_str(&w, "signature_name", "");
  pb_int64(&w, "version", version);
  pb_root_end(&w);
  td_buf_puts(out, ",\n\"metadata\": {\"signature_def\": ");
  w = (pbw){.b = out};
  pb_open(&w, NULL, '{');
  pb_open(&w, "signature_def", '{');
  int n = ldr_servable_signature_count(sv);
  for (int i = 0; i < n; i++) signature_def(&w, ldr_servable_signature_at(sv, i));
  pb_close(&w, '}');
  pb_root_end(&w);
  td_buf_puts(out, "}\n}\n");
}

/* --- tensord's own: list and probes --------------------------------------- */

void srv_json_encode_model_list(const srv_json_model_status *models, int n, td_buf *out) {
  pbw w = {.b = out};
  pb_open(&w, NULL, '{');
  pb_open(&w, "models", '[');
  for (int i = 0; i < n; i++) {
    pb_open(&w, NULL, '{');
    pb_str(&w, "name", models[i].name);
    version_status_list(&w, models[i].versions, models[i].n_versions);
    pb_close(&w, '}');
  }
  pb_close(&w, ']');
  pb_root_end(&w);
}

void srv_json_encode_health(td_buf *out) {
  pbw w = {.b = out};
  pb_open(&w, NULL, '{');
  pb_str(&w, "status", "alive");
  pb_root_end(&w);
}

void srv_json_encode_ready(bool ready, const char *const *not_ready, int n, td_buf *out) {
  pbw w = {.b = out};
  pb_open(&w, NULL, '{');
  pb_raw(&w, "ready", ready ? "true" : "false");
  pb_open(&w, "models_not_ready", '[');
  for (int i = 0; i < n; i++) pb_str(&w, NULL, not_ready[i]);
  pb_close(&w, ']');
  pb_root_end(&w);
}
