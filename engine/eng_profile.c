/* Per-node time of CPU runs (see eng_profile.h). The live profile is one
 * process-wide pointer that the run loop reads once per step; its counters
 * are atomics because batch slices of one plan run on several threads, and
 * a node's shapes are written only by the run that took its first count. */
#include "eng_profile.h"

#include <stdatomic.h>
#include <stdlib.h>

#include "eng_plan.h"
#include "td_clock.h"

typedef struct eng_prof_live {
  const eng_model *m;
  int n;
  atomic_llong *ns, *calls;
  eng_profile_node *node;
} eng_prof_live;

static _Atomic(eng_prof_live *) live;

static void live_free(eng_prof_live *pf) {
  if (!pf) return;
  free(pf->ns);
  free(pf->calls);
  free(pf->node);
  free(pf);
}

td_code eng_profile_begin(const eng_plan *p, td_err *err) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = eng_graph_node_count(g);
  eng_prof_live *pf = calloc(1, sizeof *pf);
  if (pf) {
    pf->m = p->m;
    pf->n = n;
    pf->ns = calloc((size_t)n + 1, sizeof *pf->ns);
    pf->calls = calloc((size_t)n + 1, sizeof *pf->calls);
    pf->node = calloc((size_t)n + 1, sizeof *pf->node);
  }
  if (!pf || !pf->ns || !pf->calls || !pf->node) {
    live_free(pf);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  eng_prof_live *none = NULL;
  if (!atomic_compare_exchange_strong(&live, &none, pf)) {
    live_free(pf);
    return td_err_set(err, TD_FAILED_PRECONDITION, "a profile is already running");
  }
  return TD_OK;
}

eng_profile *eng_profile_end(void) {
  eng_prof_live *pf = atomic_exchange(&live, NULL);
  if (!pf) return NULL;
  eng_profile *out = malloc(sizeof *out);
  if (out) {
    out->g = eng_model_graph(pf->m);
    out->n_nodes = pf->n;
    out->node = pf->node;
    pf->node = NULL;
    for (int i = 0; i < pf->n; i++) {
      out->node[i].ns = atomic_load(&pf->ns[i]);
      out->node[i].calls = atomic_load(&pf->calls[i]);
    }
  }
  live_free(pf);
  return out;
}

void eng_profile_free(eng_profile *pf) {
  if (!pf) return;
  free(pf->node);
  free(pf);
}

eng_prof_live *eng_profile_live(const eng_model *m) {
  eng_prof_live *pf = atomic_load_explicit(&live, memory_order_acquire);
  return pf && pf->m == m ? pf : NULL;
}

void eng_profile_count(eng_prof_live *pf, int node, uint64_t t0, const eng_tensor *in, int n_in,
                       const eng_tensor *out, int fused) {
  if (node < 0 || node >= pf->n) return;
  atomic_fetch_add_explicit(&pf->ns[node], (long long)(td_now_ns() - t0), memory_order_relaxed);
  if (atomic_fetch_add_explicit(&pf->calls[node], 1, memory_order_relaxed)) return;
  eng_profile_node *r = &pf->node[node];
  r->fused = fused;
  r->in0.rank = n_in > 0 && in[0].buf ? in[0].shape.rank : -1;
  if (r->in0.rank >= 0) r->in0 = in[0].shape;
  r->in1.rank = n_in > 1 && in[1].buf ? in[1].shape.rank : -1;
  if (r->in1.rank >= 0) r->in1 = in[1].shape;
  r->out.rank = out && out->buf ? out->shape.rank : -1;
  if (r->out.rank >= 0) r->out = out->shape;
}
