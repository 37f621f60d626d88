/* Control flow and TensorLists: what a TF2 export of a Keras RNN holds.
 *
 * While / StatelessWhile run their cond and body subgraph plans
 * (eng_model_subplan) until cond answers false: loop variables in, loop
 * variables out. If / StatelessIf run one branch. A predicate is true when
 * it is a non-zero scalar, or a non-scalar with elements (TensorFlow's
 * rule). A loop stops with RESOURCE_EXHAUSTED after ENG_MAX_LOOP_STEPS
 * iterations rather than hold a worker forever.
 *
 * A TensorList is a scalar DT_VARIANT whose payload holds the element
 * dtype, the element shape as declared (dims may be unknown) and n element
 * tensors, each shared, or empty until set. Lists are values: SetItem makes
 * a new list sharing the other elements. GetItem and Stack of an element
 * never set give zeros of the declared shape, and fail when that shape is
 * not fully known, as TensorFlow does. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_model.h"

#define ENG_MAX_LOOP_STEPS 100000000LL

/* --- predicates and subgraph runs ------------------------------------------ */

static td_code truth(eng_kctx *c, const eng_tensor *t, bool *out) {
  int64_t n = eng_tensor_numel(t);
  if (t->shape.rank != 0) {
    *out = n > 0;
    return TD_OK;
  }
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_BOOL: *out = *(const uint8_t *)d != 0; return TD_OK;
    case ENG_DT_FLOAT: *out = *(const float *)d != 0; return TD_OK;
    case ENG_DT_DOUBLE: *out = *(const double *)d != 0; return TD_OK;
    case ENG_DT_INT32: *out = *(const int32_t *)d != 0; return TD_OK;
    case ENG_DT_INT64: *out = *(const int64_t *)d != 0; return TD_OK;
    default:
      return eng_kfail(c, TD_INVALID_ARGUMENT, "a %s predicate cannot be tested",
                       eng_dtype_name(t->dtype));
  }
}

td_code eng_k_while(eng_kctx *c) {
  const eng_plan *cond, *body;
  td_code rc = eng_model_subplan(c->model, c->node_id, "cond", &cond, c->err);
  if (!rc) rc = eng_model_subplan(c->model, c->node_id, "body", &body, c->err);
  if (rc) return rc;
  int n = c->n_in;
  if (c->n_out != n)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "%d loop variables but %d outputs", n, c->n_out);
  eng_tensor *vars = calloc((size_t)n + 1, sizeof *vars), *next = calloc((size_t)n + 1, sizeof *next);
  if (!vars || !next) {
    free(vars);
    free(next);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (int i = 0; i < n; i++) vars[i] = eng_tensor_share(&c->in[i]);
  for (long long step = 0;; step++) {
    eng_tensor pred = {0};
    bool go = false;
    rc = eng_plan_run(cond, vars, &pred, c->err);
    if (!rc) rc = truth(c, &pred, &go);
    eng_tensor_release(&pred);
    if (rc || !go) break;
    if (step >= ENG_MAX_LOOP_STEPS) {
      rc = eng_kfail(c, TD_RESOURCE_EXHAUSTED, "the loop ran %lld iterations without ending",
                     step);
      break;
    }
    rc = eng_plan_run(body, vars, next, c->err);
    if (rc) break;
    for (int i = 0; i < n; i++) {
      eng_tensor_release(&vars[i]);
      vars[i] = next[i];
      next[i] = (eng_tensor){0};
    }
  }
  for (int i = 0; i < n; i++) {
    if (!rc)
      c->out[i] = vars[i];
    else
      eng_tensor_release(&vars[i]);
  }
  free(vars);
  free(next);
  return rc;
}

td_code eng_k_if(eng_kctx *c) {
  if (c->n_in < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "If takes a predicate");
  bool yes = false;
  td_code rc = truth(c, &c->in[0], &yes);
  const eng_plan *branch;
  if (!rc) rc = eng_model_subplan(c->model, c->node_id, yes ? "then" : "else", &branch, c->err);
  if (!rc) rc = eng_plan_run(branch, c->in + 1, c->out, c->err);
  return rc;
}

/* --- TF1 Switch / Merge ------------------------------------------------------ */

/* Switch(data, pred): output 1 (output_true) when pred holds, else output 0
 * (output_false); the other stays empty, which the run loop marks dead. */
td_code eng_k_switch(eng_kctx *c) {
  bool yes = false;
  td_code rc = truth(c, &c->in[1], &yes);
  if (rc) return rc;
  if (c->in[1].shape.rank != 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "the predicate must be a scalar");
  c->out[yes ? 1 : 0] = eng_tensor_share(&c->in[0]);
  return TD_OK;
}

/* Merge(inputs...): the first live input, and its index. */
td_code eng_k_merge(eng_kctx *c) {
  for (int k = 0; k < c->n_in; k++) {
    if (!c->in[k].buf) continue;
    c->out[0] = eng_tensor_share(&c->in[k]);
    if (c->n_out > 1) {
      td_code rc = eng_kout(c, 1, ENG_DT_INT32, &(eng_shape){.rank = 0});
      if (rc) return rc;
      *(int32_t *)eng_tensor_data(&c->out[1]) = k;
    }
    return TD_OK;
  }
  return eng_kfail(c, TD_INTERNAL, "no live input");
}

/* --- TensorList -------------------------------------------------------------- */

typedef struct tlist {
  eng_dtype dtype;
  eng_shape elem; /* as declared: rank or dims may be unknown (-1) */
  int64_t n;
  eng_tensor *items;
} tlist;

static void tlist_free(void *p) {
  tlist *l = p;
  for (int64_t i = 0; i < l->n; i++) eng_tensor_release(&l->items[i]);
  free(l->items);
}

static td_code new_list(eng_kctx *c, eng_dtype dt, const eng_shape *elem, int64_t n, eng_tensor *out,
                        tlist **l) {
  if (n < 0 || n > ((int64_t)1 << 32))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "a list of %lld elements", (long long)n);
  td_code rc = eng_tensor_alloc_variant(out, sizeof(tlist), tlist_free, c->err);
  if (rc) return rc;
  *l = eng_tensor_data(out);
  (*l)->items = calloc((size_t)(n ? n : 1), sizeof(eng_tensor));
  if (!(*l)->items) {
    eng_tensor_release(out);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  (*l)->dtype = dt;
  (*l)->elem = *elem;
  (*l)->n = n;
  return TD_OK;
}

static td_code get_list(eng_kctx *c, int i, const tlist **l) {
  const eng_tensor *t = &c->in[i];
  if (t->dtype != ENG_DT_VARIANT || t->shape.rank != 0 || !t->buf)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input %d is not a TensorList", i);
  *l = eng_tensor_data(t);
  return TD_OK;
}

/* An element_shape input: -1 (scalar) for an unknown rank, else a vector
 * with -1 for unknown dims. */
static td_code shape_arg(eng_kctx *c, int i, eng_shape *s) {
  int64_t d[ENG_MAX_RANK];
  int n = 0;
  if (c->in[i].shape.rank == 0) {
    td_code rc = eng_karg_int(c, i, d);
    if (rc) return rc;
    *s = eng_shape_unknown();
    return TD_OK;
  }
  td_code rc = eng_karg_ints(c, i, d, ENG_MAX_RANK, &n);
  if (rc) return rc;
  *s = (eng_shape){.rank = n};
  for (int k = 0; k < n; k++) s->dim[k] = d[k] < 0 ? -1 : d[k];
  return TD_OK;
}

static td_code list_index(eng_kctx *c, const tlist *l, int i, int64_t *idx) {
  td_code rc = eng_karg_int(c, i, idx);
  if (rc) return rc;
  if (*idx < 0 || *idx >= l->n)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Trying to access element %lld in a list with %lld "
                     "elements.", (long long)*idx, (long long)l->n);
  return TD_OK;
}

/* Element i, or zeros of the declared (or requested) shape if never set. */
static td_code element(eng_kctx *c, const tlist *l, int64_t i, const eng_shape *want,
                       eng_tensor *out) {
  if (l->items[i].buf) {
    *out = eng_tensor_share(&l->items[i]);
    return TD_OK;
  }
  const eng_shape *s = eng_shape_numel(&l->elem) >= 0 ? &l->elem : want;
  if (!s || eng_shape_numel(s) < 0)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "element %lld was never set and its shape is not "
                     "fully defined", (long long)i);
  return eng_tensor_alloc(out, l->dtype, s, c->err);
}

td_code eng_k_tensor_list_reserve(eng_kctx *c) {
  eng_shape elem;
  int64_t n;
  td_code rc = shape_arg(c, 0, &elem);
  if (!rc) rc = eng_karg_int(c, 1, &n);
  if (rc) return rc;
  tlist *l;
  return new_list(c, eng_node_attr_type(c->node, "element_dtype", ENG_DT_INVALID), &elem, n,
                  &c->out[0], &l);
}

td_code eng_k_tensor_list_from_tensor(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  eng_shape declared;
  td_code rc = shape_arg(c, 1, &declared);
  if (rc) return rc;
  if (x->shape.rank < 1) return eng_kfail(c, TD_INVALID_ARGUMENT, "the tensor must be at least a vector");
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "lists of %s", eng_dtype_name(x->dtype));
  eng_shape elem = eng_shape_make(x->shape.rank - 1, x->shape.dim + 1);
  if (!eng_shape_fits(&declared, &elem))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "the tensor's elements do not fit element_shape");
  tlist *l;
  int64_t n = x->shape.dim[0];
  if ((rc = new_list(c, x->dtype, &elem, n, &c->out[0], &l))) return rc;
  size_t bytes = (size_t)eng_shape_numel(&elem) * es;
  for (int64_t i = 0; i < n && !rc; i++) {
    rc = eng_tensor_alloc_raw(&l->items[i], x->dtype, &elem, c->err);
    if (!rc && bytes) memcpy(eng_tensor_data(&l->items[i]), (const char *)eng_tensor_data(x) + i * bytes, bytes);
  }
  if (rc) eng_tensor_release(&c->out[0]);
  return rc;
}

td_code eng_k_tensor_list_get_item(eng_kctx *c) {
  const tlist *l = NULL;
  int64_t i;
  eng_shape want;
  td_code rc = get_list(c, 0, &l);
  if (!rc) rc = list_index(c, l, 1, &i);
  if (!rc) rc = shape_arg(c, 2, &want);
  if (rc) return rc;
  return element(c, l, i, &want, &c->out[0]);
}

td_code eng_k_tensor_list_set_item(eng_kctx *c) {
  const tlist *l = NULL;
  int64_t i;
  td_code rc = get_list(c, 0, &l);
  if (!rc) rc = list_index(c, l, 1, &i);
  if (rc) return rc;
  const eng_tensor *item = &c->in[2];
  if (item->dtype != l->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "a %s item for a list of %s", eng_dtype_name(item->dtype),
                     eng_dtype_name(l->dtype));
  if (!eng_shape_fits(&l->elem, &item->shape))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "the item's shape does not fit the list's element shape");
  tlist *nl;
  if ((rc = new_list(c, l->dtype, &l->elem, l->n, &c->out[0], &nl))) return rc;
  for (int64_t k = 0; k < l->n; k++) nl->items[k] = eng_tensor_share(k == i ? item : &l->items[k]);
  return TD_OK;
}

td_code eng_k_tensor_list_stack(eng_kctx *c) {
  const tlist *l = NULL;
  eng_shape want;
  td_code rc = get_list(c, 0, &l);
  if (!rc) rc = shape_arg(c, 1, &want);
  if (rc) return rc;
  int64_t expect = eng_node_attr_int(c->node, "num_elements", -1);
  if (expect >= 0 && expect != l->n)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "the list has %lld elements, not %lld",
                     (long long)l->n, (long long)expect);
  /* The element shape: a set element's, else the declared one. */
  eng_shape elem = l->elem;
  for (int64_t i = 0; i < l->n; i++)
    if (l->items[i].buf) {
      elem = l->items[i].shape;
      break;
    }
  if (eng_shape_numel(&elem) < 0) elem = want;
  if (eng_shape_numel(&elem) < 0 || elem.rank + 1 > ENG_MAX_RANK)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "cannot stack a list whose element shape is not "
                     "fully defined");
  int64_t dims[ENG_MAX_RANK];
  dims[0] = l->n;
  memcpy(dims + 1, elem.dim, sizeof(int64_t) * (size_t)elem.rank);
  eng_shape os = eng_shape_make(elem.rank + 1, dims);
  if ((rc = eng_kout(c, 0, l->dtype, &os))) return rc;
  size_t bytes = (size_t)eng_shape_numel(&elem) * eng_dtype_size(l->dtype);
  for (int64_t i = 0; i < l->n; i++) {
    const eng_tensor *it = &l->items[i];
    if (!it->buf) continue; /* zeros */
    if (!eng_shape_equal(&it->shape, &elem))
      return eng_kfail(c, TD_INVALID_ARGUMENT, "list elements differ in shape");
    if (bytes) memcpy((char *)eng_tensor_data(&c->out[0]) + (size_t)i * bytes, eng_tensor_data(it), bytes);
  }
  return TD_OK;
}

td_code eng_k_tensor_list_length(eng_kctx *c) {
  const tlist *l = NULL;
  td_code rc = get_list(c, 0, &l);
  if (!rc) rc = eng_kout(c, 0, ENG_DT_INT32, &(eng_shape){.rank = 0});
  if (!rc) *(int32_t *)eng_tensor_data(&c->out[0]) = (int32_t)l->n;
  return rc;
}
