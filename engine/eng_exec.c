/* The executor: where and how one run of a plan goes (eng_plan_run).
 *
 * A serving plan on the CPU whose batch is large may run as slices of the
 * batch (eng_slice.h), once one full run at that plan has shown that no op
 * mixes examples (the slices run on the engine's pool, one per thread at a
 * time); each run, whole or slice, takes the plan specialised to
 * its input shapes (eng_compile.c) when there is one, then runs on the
 * model's device (device/eng_gpu.h) or the CPU loop (eng_run.h). A plan
 * with a tail (eng_slice.h: a classifier after its pooling) runs the steps
 * before it as slices and the tail once over the whole batch. */
#include <stdlib.h>
#include <string.h>

#include "eng_gpu.h"
#include "eng_plan.h"
#include "eng_pool.h"
#include "eng_run.h"
#include "eng_slice.h"

/* The common dim 0 of numeric inputs of rank >= 1, or 0. */
static int64_t batch_of(const eng_plan *p, const eng_tensor *in) {
  int64_t b = -1;
  for (int i = 0; i < p->n_inputs; i++) {
    if (in[i].shape.rank < 1 || !eng_dtype_size(in[i].dtype)) /* numeric only */
      return 0;
    if (b >= 0 && in[i].shape.dim[0] != b) return 0;
    b = in[i].shape.dim[0];
  }
  return b > 0 ? b : 0;
}

/* One run of p, whole or a slice: its shape-specialised plan when there is
 * one, on the model's device or the CPU. On the CPU, the first run of a
 * new shape runs p itself and keeps the values the specialisation folds,
 * which is then built from them (eng_plan_spec_find). decide > 0 (CPU
 * only): the run is of p itself, not a specialisation (whose constants
 * may have been folded from this batch's size, which a slice's would not
 * share), records every value's shape and dtype, and decides from them
 * whether p may run as slices of that batch. */
static td_code run_once(const eng_plan *p, const eng_tensor *in, eng_tensor *out, int64_t decide,
                        td_err *err) {
  const eng_plan *rp = p;
  eng_dev_model *dev = eng_model_dev(p->m);
  eng_spec_build *build = NULL;
  if (p->can_specialise && dev) {
    const eng_plan *sp = eng_plan_specialised((eng_plan *)p, in);
    if (sp) rp = sp;
  } else if (p->can_specialise) {
    const eng_plan *sp = eng_plan_spec_find((eng_plan *)p, in, &build);
    if (sp && !decide) rp = sp;
  }
  if (dev) return eng_gpu_run(dev, rp, in, out, err);
  if (!decide && !build) return eng_run_cpu(rp, in, out, err);
  eng_run r;
  td_code rc = eng_run_begin(&r, rp, in, err);
  if (!rc && build) {
    r.want = build->want;
    r.kept = build->kept;
  }
  if (!rc && decide) {
    r.shapes = calloc((size_t)rp->n_values + 1, sizeof *r.shapes);
    r.dtypes = calloc((size_t)rp->n_values + 1, sizeof *r.dtypes);
    for (int i = 0; r.shapes && r.dtypes && i < rp->n_inputs; i++) {
      r.shapes[rp->in_value[i]] = in[i].shape;
      r.dtypes[rp->in_value[i]] = in[i].dtype;
    }
    for (int i = 0; r.shapes && r.dtypes && i < rp->n_consts; i++) {
      r.shapes[rp->const_value[i]] = rp->const_tensor[i].shape;
      r.dtypes[rp->const_value[i]] = rp->const_tensor[i].dtype;
    }
    if (!r.shapes || !r.dtypes) {
      free(r.shapes);
      free(r.dtypes);
      r.shapes = NULL;
      r.dtypes = NULL;
    }
  }
  for (int s = 0; s < rp->n_steps && !rc; s++) rc = eng_run_step_cpu(&r, s, err);
  if (r.shapes) {
    int64_t bytes = 0;
    if (!rc) {
      int cut = rp->n_steps;
      bool ok = eng_slice_separable(rp, r.shapes, r.dtypes, decide, &bytes, &cut);
      long long each = ok ? (long long)eng_slice_size(bytes, eng_slice_weight_bytes(rp)) : -1LL;
      atomic_store(&((eng_plan *)p)->slice_cut, ok && cut < rp->n_steps ? cut : 0);
      atomic_store(&((eng_plan *)p)->slice_each, each);
    }
    free(r.shapes);
    free(r.dtypes);
    r.shapes = NULL;
    r.dtypes = NULL;
  }
  rc = eng_run_finish(&r, rc, out, err);
  if (build) eng_plan_spec_finish((eng_plan *)p, in, build, rc == TD_OK);
  return rc;
}

/* Rows [r0, r0 + n) of a dense tensor whose dim 0 is the batch. */
static td_code slice_rows(const eng_tensor *t, int64_t r0, int64_t n, eng_tensor *out,
                          td_err *err) {
  eng_shape s = t->shape;
  int64_t rows = s.dim[0];
  s.dim[0] = n;
  td_code rc = eng_tensor_alloc_raw(out, t->dtype, &s, err);
  if (rc) return rc;
  size_t row = rows ? eng_tensor_nbytes(t) / (size_t)rows : 0;
  if (row && n)
    memcpy(eng_tensor_data(out), (const char *)eng_tensor_data(t) + row * (size_t)r0,
           row * (size_t)n);
  return TD_OK;
}

/* A batch's slices as chunks of the pool: slice s runs rows [s * chunk,
 * s * chunk + chunk) of every input on whichever thread claims it: through
 * run_once into its own outputs (cout[s * n_outputs ...]), or, for a plan
 * with a tail (cut > 0, run_split), through the steps before cut only,
 * keeping the nf values fv the tail reads (cout[s * nf ...]). */
typedef struct slice_job {
  const eng_plan *p;
  const eng_tensor *in;
  int64_t batch, chunk;
  int cut, nf;
  const int *fv;
  eng_tensor *cout;
} slice_job;

/* The head of j's plan on one slice's inputs; keep gets its frontier. */
static td_code run_head(const slice_job *j, const eng_tensor *ci, eng_tensor *keep, td_err *err) {
  eng_run r;
  td_code rc = eng_run_begin(&r, j->p, ci, err);
  for (int t = 0; t < j->cut && !rc; t++) rc = eng_run_step_cpu(&r, t, err);
  for (int f = 0; f < j->nf && !rc; f++) {
    const eng_tensor *v = &r.values[j->fv[f]];
    if (!v->buf || v->is_ref)
      rc = td_err_set(err, TD_INTERNAL, "a batch slice did not compute value %d", j->fv[f]);
    else
      keep[f] = eng_tensor_share(v);
  }
  return eng_run_finish(&r, rc, NULL, err);
}

static td_code slice_chunk(void *arg, int64_t s, td_err *err) {
  const slice_job *j = arg;
  const eng_plan *p = j->p;
  int ni = p->n_inputs;
  int64_t r0 = s * j->chunk, n = j->batch - r0 < j->chunk ? j->batch - r0 : j->chunk;
  eng_tensor cin[16] = {0}, *ci = ni <= 16 ? cin : calloc((size_t)ni, sizeof *ci);
  td_code rc = ci ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < ni && !rc; i++) rc = slice_rows(&j->in[i], r0, n, &ci[i], err);
  if (!rc)
    rc = j->cut > 0 ? run_head(j, ci, &j->cout[s * j->nf], err)
                    : run_once(p, ci, &j->cout[s * p->n_outputs], 0, err);
  for (int i = 0; ci && i < ni; i++) eng_tensor_release(&ci[i]);
  if (ci != cin) free(ci);
  return rc;
}

/* Stacks tensor o of every slice (parts[k * no + o], each with dim 0 its
 * slice's rows) into out, a tensor with dim 0 the whole batch. */
static td_code stack_output(const eng_tensor *parts, int no, int64_t batch, int64_t chunk,
                            int64_t nslices, int o, eng_tensor *out, td_err *err) {
  const eng_tensor *c0 = &parts[o];
  eng_shape s = c0->shape;
  if (s.rank < 1 || !eng_dtype_size(c0->dtype))
    return td_err_set(err, TD_INTERNAL, "a batch slice gave output %d of another shape", o);
  s.dim[0] = batch;
  td_code rc = eng_tensor_alloc_raw(out, c0->dtype, &s, err);
  char *dst = rc ? NULL : eng_tensor_data(out);
  for (int64_t k = 0; k < nslices && !rc; k++) {
    const eng_tensor *c = &parts[k * no + o];
    int64_t r0 = k * chunk, n = batch - r0 < chunk ? batch - r0 : chunk;
    eng_shape cs = c->shape;
    if (cs.rank >= 1) cs.dim[0] = batch;
    if (c->shape.rank < 1 || c->shape.dim[0] != n || c->dtype != c0->dtype ||
        !eng_shape_equal(&cs, &s)) {
      rc = td_err_set(err, TD_INTERNAL, "batch slices gave output %d different shapes", o);
      break;
    }
    size_t row = eng_tensor_nbytes(c) / (size_t)n;
    if (row) memcpy(dst + row * (size_t)r0, eng_tensor_data(c), row * (size_t)n);
  }
  if (rc) eng_tensor_release(out);
  return rc;
}

/* Runs p on slices of `chunk` examples of in and stacks the outputs into
 * out. The slices are the pool's chunks (eng_pool.h): with N threads, N
 * slices run at once, each on one thread from start to end, so a slice's
 * activations stay in the cache of the core that made them and its ops
 * run without a fork and join each (an op inside a slice finds the pool
 * busy and runs on its slice's thread). Each slice computes exactly what a
 * serial run of it computes, so the thread count changes no bits. */
static td_code run_slices(const eng_plan *p, const eng_tensor *in, eng_tensor *out, int64_t batch,
                          int64_t chunk, td_err *err) {
  int no = p->n_outputs;
  int64_t nslices = (batch + chunk - 1) / chunk;
  slice_job j = {.p = p,
                 .in = in,
                 .batch = batch,
                 .chunk = chunk,
                 .cout = calloc((size_t)(nslices * no) + 1, sizeof *j.cout)};
  for (int i = 0; i < no; i++) out[i] = (eng_tensor){0};
  /* The first failed slice in batch order, whichever thread ran it. */
  td_code rc = j.cout ? eng_pool_try(NULL, nslices, slice_chunk, &j, err)
                      : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int o = 0; o < no && !rc; o++)
    rc = stack_output(j.cout, no, batch, chunk, nslices, o, &out[o], err);
  if (rc)
    for (int o = 0; o < no; o++) eng_tensor_release(&out[o]);
  if (j.cout)
    for (int64_t k = 0; k < nslices * no; k++) eng_tensor_release(&j.cout[k]);
  free(j.cout);
  return rc;
}

/* A plan with a tail (eng_slice.h): its steps before `cut` as slices of
 * `chunk` examples (on the pool, as run_slices), each slice keeping the
 * values the tail reads (the frontier, eng_slice_frontier); then those
 * stacked, and the tail once over the whole batch. Both run p itself, not
 * a shape specialisation: the head's would fold constants from a slice's
 * size, which the tail would then read at the batch's. */
static td_code run_split(const eng_plan *p, const eng_tensor *in, eng_tensor *out, int64_t batch,
                         int64_t chunk, int cut, td_err *err) {
  int64_t nslices = (batch + chunk - 1) / chunk;
  int *fv = malloc(sizeof *fv * ((size_t)p->n_values + 1));
  int nf = fv ? eng_slice_frontier(p, cut, fv) : -1;
  slice_job j = {.p = p, .in = in, .batch = batch, .chunk = chunk, .cut = cut, .nf = nf, .fv = fv};
  if (nf >= 0) j.cout = calloc((size_t)(nslices * nf) + 1, sizeof *j.cout);
  eng_tensor *stacked = nf >= 0 ? calloc((size_t)nf + 1, sizeof *stacked) : NULL;
  td_code rc = j.cout && stacked ? eng_pool_try(NULL, nslices, slice_chunk, &j, err)
                                 : td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int f = 0; f < nf && !rc; f++)
    rc = stack_output(j.cout, nf, batch, chunk, nslices, f, &stacked[f], err);
  for (int64_t k = 0; j.cout && k < nslices * nf; k++) eng_tensor_release(&j.cout[k]);
  if (!rc) {
    eng_run r;
    rc = eng_run_begin(&r, p, in, err);
    for (int f = 0; f < nf && !rc; f++) { /* the table takes them over */
      eng_tensor_release(&r.values[fv[f]]);
      r.values[fv[f]] = stacked[f];
      stacked[f] = (eng_tensor){0};
    }
    for (int t = cut; t < p->n_steps && !rc; t++) rc = eng_run_step_cpu(&r, t, err);
    rc = eng_run_finish(&r, rc, out, err);
  }
  for (int f = 0; stacked && f < nf; f++) eng_tensor_release(&stacked[f]);
  free(stacked);
  free(j.cout);
  free(fv);
  return rc;
}

td_code eng_plan_run(const eng_plan *p, const eng_tensor *in, eng_tensor *out, td_err *err) {
  int64_t batch = p->can_specialise && !eng_model_dev(p->m) ? batch_of(p, in) : 0;
  if (batch < 2) return run_once(p, in, out, 0, err);
  long long each = atomic_load(&((eng_plan *)p)->slice_each);
  int cut = atomic_load(&((eng_plan *)p)->slice_cut);
  if (each > 0 && each < batch && cut > 0) return run_split(p, in, out, batch, each, cut, err);
  if (each > 0 && each < batch) return run_slices(p, in, out, batch, each, err);
  return run_once(p, in, out, each == 0 ? batch : 0, err);
}

bool eng_plan_on_host(const eng_plan *p) { return !eng_model_dev(p->m); }
