/* Kernels that move values rather than compute them: constants,
 * placeholders, identities, variables, and checkpoint restore. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_model.h"
#include "eng_pool.h"

td_code eng_s_const(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  const eng_attr *v = eng_node_attr(n, "value");
  if (!v || v->kind != ENG_ATTR_TENSOR)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Const '%s' has no value", n->name);
  out[0] = v->tensor.shape;
  return TD_OK;
}

td_code eng_s_placeholder(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  const eng_attr *s = eng_node_attr(n, "shape");
  out[0] = s && s->kind == ENG_ATTR_SHAPE ? s->shape : eng_shape_unknown();
  return TD_OK;
}

td_code eng_s_identity(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  for (int i = 0; i < n->n_out && i < n->n_in; i++) out[i] = in[i];
  return TD_OK;
}

td_code eng_s_scalar(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  out[0] = eng_shape_scalar();
  return TD_OK;
}

td_code eng_k_const(eng_kctx *c) {
  const eng_attr *v = eng_node_attr(c->node, "value");
  if (!v || v->kind != ENG_ATTR_TENSOR)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "Const '%s' has no value", c->node->name);
  c->out[0] = eng_tensor_share(&v->tensor);
  return TD_OK;
}

td_code eng_k_placeholder(eng_kctx *c) {
  /* Reached only when the plan did not feed it: TensorFlow's error. */
  eng_dtype dt = eng_node_attr_type(c->node, "dtype", ENG_DT_INVALID);
  return td_err_set(c->err, TD_INVALID_ARGUMENT,
                    "You must feed a value for placeholder tensor '%s' with dtype %s",
                    c->node->name, eng_dtype_name(dt));
}

td_code eng_k_identity(eng_kctx *c) {
  c->out[0] = eng_tensor_share(&c->in[0]);
  return TD_OK;
}

td_code eng_k_identity_n(eng_kctx *c) {
  for (int i = 0; i < c->n_out && i < c->n_in; i++) c->out[i] = eng_tensor_share(&c->in[i]);
  return TD_OK;
}

td_code eng_k_noop(eng_kctx *c) { return TD_OK; }

td_code eng_k_var_handle(eng_kctx *c) {
  return eng_tensor_alloc_handle(&c->out[0], eng_model_node_slot(c->model, c->node_id), false,
                                 c->err);
}

td_code eng_k_variable_v2(eng_kctx *c) {
  return eng_tensor_alloc_handle(&c->out[0], eng_model_node_slot(c->model, c->node_id), true,
                                 c->err);
}

static td_code want_handle(eng_kctx *c, int i) {
  if (c->in[i].dtype != ENG_DT_RESOURCE)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "node '%s': input %d is %s, not a variable",
                      c->node->name, i, eng_dtype_name(c->in[i].dtype));
  return TD_OK;
}

td_code eng_k_read_variable(eng_kctx *c) {
  td_code rc = want_handle(c, 0);
  if (rc) return rc;
  int64_t slot = eng_tensor_handle(&c->in[0]);
  rc = eng_model_slot_read(c->model, slot, &c->out[0], c->err);
  if (rc) return rc;
  eng_dtype want = eng_node_attr_type(c->node, "dtype", ENG_DT_INVALID);
  if (want != ENG_DT_INVALID && c->out[0].dtype != want) {
    eng_tensor_release(&c->out[0]);
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "variable '%s' holds %s, read as %s",
                      eng_model_slot_name(c->model, slot), eng_dtype_name(c->out[0].dtype),
                      eng_dtype_name(want));
  }
  return TD_OK;
}

td_code eng_k_assign_variable(eng_kctx *c) {
  td_code rc = want_handle(c, 0);
  if (rc) return rc;
  return eng_model_slot_write(c->model, eng_tensor_handle(&c->in[0]), &c->in[1], c->err);
}

td_code eng_k_assign(eng_kctx *c) {
  if (!c->in[0].is_ref)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "Assign '%s': input 0 is not a variable",
                      c->node->name);
  int64_t slot = eng_tensor_handle(&c->in[0]);
  if (eng_node_attr_bool(c->node, "validate_shape", true) &&
      eng_model_slot_initialized(c->model, slot)) {
    eng_tensor cur;
    td_code rc = eng_model_slot_read(c->model, slot, &cur, c->err);
    if (rc) return rc;
    bool same = eng_shape_equal(&cur.shape, &c->in[1].shape);
    eng_tensor_release(&cur);
    if (!same)
      return td_err_set(c->err, TD_INVALID_ARGUMENT, "Assign '%s': shape mismatch for '%s'",
                        c->node->name, eng_model_slot_name(c->model, slot));
  }
  td_code rc = eng_model_slot_write(c->model, slot, &c->in[1], c->err);
  if (rc) return rc;
  c->out[0] = eng_tensor_share(&c->in[0]);
  return TD_OK;
}

td_code eng_k_var_is_initialized(eng_kctx *c) {
  td_code rc = want_handle(c, 0);
  if (rc) return rc;
  eng_shape s = eng_shape_scalar();
  rc = eng_tensor_alloc(&c->out[0], ENG_DT_BOOL, &s, c->err);
  if (rc) return rc;
  *(bool *)eng_tensor_data(&c->out[0]) =
      eng_model_slot_initialized(c->model, eng_tensor_handle(&c->in[0]));
  return TD_OK;
}

/* RestoreV2(prefix, tensor_names, shape_and_slices) -> tensors (dtypes).
 * The entries are read on the intra-op pool: reading a checkpoint is
 * copying from the page cache, first touches of new buffers and CRC32C,
 * all of which scale with cores. The entries are cut into runs of
 * consecutive ones, each a chunk of eng_pool_try that stops at its first
 * failure, so the error reported is the first failing entry's, as in a
 * serial loop. */
#define RESTORE_RUNS 64

typedef struct restore_job {
  eng_kctx *c;
  const char *pfx;
  const eng_str *nm;
  const eng_attr *dt;
  const bool *skip; /* per entry: only an unneeded variable takes it */
  int64_t n, runs;
} restore_job;

static td_code restore_entry(const restore_job *j, int64_t i, td_err *err) {
  eng_kctx *c = j->c;
  eng_dtype want = j->dt->ltype[i];
  if (!j->skip[i]) return eng_model_restore(c->model, j->pfx, j->nm[i].data, want, &c->out[i], err);
  /* Checked, not kept. */
  eng_dtype got;
  eng_shape shape;
  td_code rc = eng_model_verify(c->model, j->pfx, j->nm[i].data, want, &got, &shape, err);
  if (!rc && got != ENG_DT_STRING && eng_dtype_size(got))
    return eng_tensor_alloc_hollow(&c->out[i], got, &shape, err);
  if (!rc) rc = eng_model_restore(c->model, j->pfx, j->nm[i].data, want, &c->out[i], err);
  return rc;
}

static td_code restore_run(void *arg, int64_t r, td_err *err) {
  const restore_job *j = arg;
  int64_t lo = j->n * r / j->runs, hi = j->n * (r + 1) / j->runs;
  td_code rc = TD_OK;
  for (int64_t i = lo; i < hi && !rc; i++) rc = restore_entry(j, i, err);
  return rc;
}

td_code eng_k_restore_v2(eng_kctx *c) {
  const eng_tensor *prefix = &c->in[0], *names = &c->in[1], *slices = &c->in[2];
  if (prefix->dtype != ENG_DT_STRING || eng_tensor_numel(prefix) != 1 ||
      names->dtype != ENG_DT_STRING || slices->dtype != ENG_DT_STRING)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "RestoreV2 '%s': malformed inputs",
                      c->node->name);
  const eng_attr *dt = eng_node_attr(c->node, "dtypes");
  int64_t n = eng_tensor_numel(names);
  if (!dt || dt->kind != ENG_ATTR_LIST || dt->n != n || n != c->n_out ||
      eng_tensor_numel(slices) != n)
    return td_err_set(c->err, TD_INVALID_ARGUMENT,
                      "RestoreV2 '%s': %lld names, but dtypes and outputs disagree", c->node->name,
                      (long long)n);
  const eng_str *nm = eng_tensor_strs(names), *sl = eng_tensor_strs(slices);
  for (int64_t i = 0; i < n; i++)
    if (sl[i].len)
      return td_err_set(c->err, TD_UNIMPLEMENTED,
                        "RestoreV2 '%s': restoring a slice of '%s' is not supported",
                        c->node->name, nm[i].data);
  if (n <= 0) return TD_OK;
  bool *skip = calloc((size_t)n, sizeof *skip);
  if (!skip)
    return td_err_set(c->err, TD_RESOURCE_EXHAUSTED,
                      "RestoreV2 '%s': out of memory for %lld entries", c->node->name,
                      (long long)n);
  /* The model builds its skip table lazily: ask on this thread. */
  for (int64_t i = 0; i < n; i++)
    skip[i] = dt->ltype[i] != ENG_DT_STRING && eng_model_restore_skips(c->model, c->node_id, (int)i);
  restore_job j = {.c = c,
                   .pfx = eng_tensor_strs(prefix)[0].data,
                   .nm = nm,
                   .dt = dt,
                   .skip = skip,
                   .n = n,
                   .runs = n < RESTORE_RUNS ? n : RESTORE_RUNS};
  td_code rc = eng_pool_try(NULL, j.runs, restore_run, &j, c->err);
  free(skip);
  return rc;
}
