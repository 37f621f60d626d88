/* The CPU run loop (see eng_run.h): one pass over a plan's steps with a
 * value table, each value released after its last reader. */
#include "eng_run.h"

#include <stdlib.h>
#include <string.h>
#include <threads.h>

#include "eng_profile.h"
#include "td_clock.h"

/* The run loop's value table lives in a per-thread scratch block that only
 * grows, so a warm run makes no allocation of its own (tensor buffers come
 * from eng_tensor's per-thread cache). A nested run on the same thread (a
 * While or If body run by its kernel) falls back to malloc. */
typedef struct run_scratch {
  void *p;
  size_t cap;
  bool busy;
} run_scratch;

static tss_t scratch_key;
static once_flag scratch_once = ONCE_FLAG_INIT;

static void scratch_free(void *arg) {
  run_scratch *rs = arg;
  if (rs) free(rs->p);
  free(rs);
}

static void scratch_init(void) { tss_create(&scratch_key, scratch_free); }

static run_scratch *scratch_take(size_t bytes) {
  call_once(&scratch_once, scratch_init);
  run_scratch *rs = tss_get(scratch_key);
  if (!rs) {
    rs = calloc(1, sizeof *rs);
    if (!rs || tss_set(scratch_key, rs) != thrd_success) {
      free(rs);
      return NULL;
    }
  }
  if (rs->busy) return NULL;
  if (rs->cap < bytes) {
    size_t cap = bytes < 4096 ? 4096 : bytes + bytes / 2;
    void *np = realloc(rs->p, cap);
    if (!np) return NULL;
    rs->p = np;
    rs->cap = cap;
  }
  rs->busy = true;
  return rs;
}

static void drop_use(eng_tensor *values, int *left, int v) {
  if (--left[v] <= 0) eng_tensor_release(&values[v]);
}

td_code eng_run_begin(eng_run *r, const eng_plan *p, const eng_tensor *in, td_err *err) {
  memset(r, 0, sizeof *r);
  r->p = p;
  size_t nv = (size_t)p->n_values + 1;
  r->g = eng_model_graph(p->m);
  size_t nn = (size_t)eng_graph_node_count(r->g) + 1;
  size_t bytes = nv * (sizeof(eng_tensor) + sizeof(int) + 2 * sizeof(bool)) + nn;
  run_scratch *rs = scratch_take(bytes);
  void *mem = rs ? rs->p : malloc(bytes);
  if (!mem) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  memset(mem, 0, bytes);
  r->scratch = rs;
  r->mem = mem;
  r->values = mem;
  r->left = (int *)(r->values + nv);
  r->fed = (bool *)(r->left + nv);
  r->dead = r->fed + nv;
  r->ndead = r->dead + nv;
  memcpy(r->left, p->uses, sizeof *r->left * (size_t)p->n_values);
  for (int i = 0; i < p->n_inputs; i++) {
    td_code rc = eng_plan_check_feed(p, i, &in[i], err);
    if (rc) return rc;
    eng_tensor_release(&r->values[p->in_value[i]]);
    r->values[p->in_value[i]] = eng_tensor_share(&in[i]);
    r->left[p->in_value[i]]++; /* fed values are never overwritten */
  }
  for (int i = 0; i < p->n_inputs; i++) r->fed[p->in_value[i]] = true;
  for (int i = 0; i < p->n_consts; i++)
    if (!r->fed[p->const_value[i]])
      r->values[p->const_value[i]] = eng_tensor_share(&p->const_tensor[i]);
  return TD_OK;
}

void eng_run_drop_inputs(eng_run *r, int s) {
  const eng_plan *p = r->p;
  const eng_node *nd = eng_graph_node(r->g, p->steps[s]);
  for (int k = 0; k < nd->n_in; k++) drop_use(r->values, r->left, p->base[nd->in[k].node] + nd->in[k].index);
  int ev = eng_epilogue_input(p->epi ? p->epi[s] : NULL);
  if (ev >= 0) drop_use(r->values, r->left, ev);
}

/* Ops that pass a tensor along (or store it) without reading its data. */
static bool moves_only(const eng_op_def *op) {
  return !strcmp(op->name, "Identity") || !strcmp(op->name, "IdentityN") ||
         !strcmp(op->name, "AssignVariableOp");
}

td_code eng_run_step_cpu(eng_run *r, int s, td_err *err) {
  const eng_plan *p = r->p;
  eng_tensor *values = r->values;
  int *left = r->left;
  const bool *fed = r->fed;
  td_code rc = TD_OK;
  eng_tensor inbuf[16], outbuf[16];
  int id = p->steps[s];
  const eng_node *nd = eng_graph_node(r->g, id);
  const eng_op_def *op = p->ops[s];
  eng_tensor *kin = nd->n_in <= 16 ? inbuf : calloc((size_t)nd->n_in, sizeof *kin);
  eng_tensor *kout = nd->n_out <= 16 ? outbuf : calloc((size_t)nd->n_out, sizeof *kout);
  if (!kin || !kout) {
    if (kin != inbuf) free(kin);
    if (kout != outbuf) free(kout);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  memset(kout, 0, sizeof *kout * (size_t)nd->n_out);
  /* TF1 control flow: a node with a dead input (a Merge: all of them) or a
   * dead control input does not run, and its outputs are dead. */
  bool flow = op->flags & ENG_OP_DEAD_FLOW, merge = flow && !strcmp(nd->op, "Merge");
  int n_dead = 0;
  for (int k = 0; k < nd->n_in; k++) n_dead += r->dead[p->base[nd->in[k].node] + nd->in[k].index];
  bool dead = merge ? n_dead == nd->n_in : n_dead > 0;
  for (int k = 0; k < nd->n_ctrl && !dead; k++) dead = r->ndead[nd->ctrl[k]];
  if (dead) {
    const eng_epilogue *epi = p->epi ? p->epi[s] : NULL;
    for (int o = 0; o < nd->n_out; o++) r->dead[o == 0 && epi ? epi->out_value : p->base[id] + o] = true;
    r->ndead[id] = true;
    eng_run_drop_inputs(r, s);
    if (kin != inbuf) free(kin);
    if (kout != outbuf) free(kout);
    return TD_OK;
  }
  for (int k = 0; k < nd->n_in && !rc; k++) {
    const eng_tensor *v = &values[p->base[nd->in[k].node] + nd->in[k].index];
    kin[k] = *v;
    if (merge && r->dead[p->base[nd->in[k].node] + nd->in[k].index]) continue; /* stays empty */
    if (!v->buf) {
      rc = td_err_set(err, TD_INTERNAL, "node '%s': input %d was not computed", nd->name, k);
    } else if (eng_tensor_hollow(v) && !(p->packed && p->packed[s]) && !moves_only(op)) {
      /* A weight kept only packed, or a checkpoint entry no plan needed
       * (eng_model.h): its bytes are gone. */
      rc = td_err_set(err, TD_INTERNAL, "node '%s': input %d is a weight the model does not hold",
                      nd->name, k);
    } else if (v->is_ref && !(k == 0 && (op->flags & ENG_OP_REF_INPUT0))) {
      /* A TF1 variable reference read by an ordinary op: pass its value. */
      rc = eng_model_slot_read(p->m, eng_tensor_handle(v), &kin[k], err);
      if (rc) {
        for (int j = 0; j < k; j++)
          if (kin[j].buf != values[p->base[nd->in[j].node] + nd->in[j].index].buf)
            eng_tensor_release(&kin[j]);
        kin[k].buf = NULL;
      }
    }
  }
  if (!rc) {
    const eng_epilogue *epi = p->epi ? p->epi[s] : NULL;
    /* A fused run-time addend, read as the inputs are. */
    int ev = eng_epilogue_input(epi);
    eng_tensor addend = ev >= 0 ? values[ev] : (eng_tensor){0};
    if (ev >= 0 && !addend.buf)
      rc = td_err_set(err, TD_INTERNAL, "node '%s': the fused add's operand was not computed",
                      nd->name);
    else if (ev >= 0 && addend.is_ref &&
             (rc = eng_model_slot_read(p->m, eng_tensor_handle(&values[ev]), &addend, err)))
      addend = (eng_tensor){0};
    eng_kctx ctx = {.node = nd,
                    .node_id = id,
                    .model = p->m,
                    .n_in = nd->n_in,
                    .in = kin,
                    .n_out = nd->n_out,
                    .out = kout,
                    .err = err,
                    .epi = epi,
                    .epi_in = ev >= 0 ? &addend : NULL,
                    .packed = p->packed ? p->packed[s] : NULL};
    struct eng_prof_live *prof = eng_profile_live(p->m);
    uint64_t t0 = prof ? td_now_ns() : 0;
    if (!rc) rc = op->cpu(&ctx);
    if (!rc && epi && !ctx.epi_done) rc = eng_epilogue_after(&ctx);
    if (rc && err && !strstr(err->msg, nd->name))
      td_err_prefix(err, "node '%s' (%s)", nd->name, nd->op);
    if (prof && !rc) eng_profile_count(prof, id, t0, kin, nd->n_in, &kout[0], epi ? epi->n : 0);
    for (int k = 0; k < nd->n_in; k++) {
      const eng_tensor *v = &values[p->base[nd->in[k].node] + nd->in[k].index];
      if (kin[k].buf != v->buf) eng_tensor_release(&kin[k]);
    }
    if (addend.buf && addend.buf != values[ev].buf) eng_tensor_release(&addend);
    for (int o = 0; o < nd->n_out; o++) {
      int vi = o == 0 && epi ? epi->out_value : p->base[id] + o;
      if (!rc && flow && !kout[o].buf) r->dead[vi] = true; /* Switch's untaken side */
      if (!rc && r->shapes && kout[o].buf) {
        r->shapes[vi] = kout[o].shape;
        r->dtypes[vi] = kout[o].dtype;
      }
      if (!rc && r->want && r->want[vi] && kout[o].buf && !r->kept[vi].buf)
        r->kept[vi] = eng_tensor_share(&kout[o]);
      if (rc || fed[vi] || left[vi] <= 0) {
        eng_tensor_release(&kout[o]);
      } else {
        values[vi] = kout[o];
      }
    }
    eng_run_drop_inputs(r, s);
  }
  if (kin != inbuf) free(kin);
  if (kout != outbuf) free(kout);
  return rc;
}

td_code eng_run_finish(eng_run *r, td_code rc, eng_tensor *out, td_err *err) {
  const eng_plan *p = r->p;
  eng_tensor *values = r->values;
  if (!values) return rc;
  for (int i = 0; out && i < p->n_outputs && !rc; i++) {
    const eng_tensor *v = &values[p->out_value[i]];
    if (!v->buf && r->dead[p->out_value[i]]) {
      rc = td_err_set(err, TD_INVALID_ARGUMENT,
                      "output %d comes from a branch of a conditional that was not taken", i);
    } else if (!v->buf || eng_tensor_hollow(v)) {
      rc = td_err_set(err, TD_INTERNAL, "output '%d' was not computed", i);
    } else if (v->is_ref) {
      rc = eng_model_slot_read(p->m, eng_tensor_handle(v), &out[i], err);
    } else {
      out[i] = eng_tensor_share(v);
    }
    if (rc)
      for (int j = 0; j < i; j++) eng_tensor_release(&out[j]);
  }
  for (int v = 0; v < p->n_values; v++) eng_tensor_release(&values[v]);
  run_scratch *rs = r->scratch;
  if (rs)
    rs->busy = false;
  else
    free(r->mem);
  r->values = NULL;
  return rc;
}

td_code eng_run_cpu(const eng_plan *p, const eng_tensor *in, eng_tensor *out, td_err *err) {
  eng_run r;
  td_code rc = eng_run_begin(&r, p, in, err);
  for (int s = 0; s < p->n_steps && !rc; s++) rc = eng_run_step_cpu(&r, s, err);
  return eng_run_finish(&r, rc, out, err);
}
