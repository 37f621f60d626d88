/* Plan queries and schedule rewrites for the compiler's passes (see
 * eng_pass.h). The queries scan the schedule; plans have at most a few
 * thousand steps, and each pass runs once per load. */
#include "eng_pass.h"

#include <stdlib.h>
#include <string.h>

#include "eng_device.h"

bool eng_pass_is_fed(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_inputs; i++)
    if (p->in_value[i] == v) return true;
  return false;
}

bool eng_pass_is_fetched(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_outputs; i++)
    if (p->out_value[i] == v) return true;
  return false;
}

const eng_tensor *eng_pass_const(const eng_plan *p, int v) {
  for (int i = 0; i < p->n_consts; i++)
    if (p->const_value[i] == v) return &p->const_tensor[i];
  return NULL;
}

int eng_pass_in(const eng_plan *p, int s, int k) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  return p->base[nd->in[k].node] + nd->in[k].index;
}

bool eng_pass_step_is(const eng_plan *p, int s, const char *op, int n_in) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  return !strcmp(p->ops[s]->name, op) && nd->n_in == n_in && nd->n_out == 1;
}

bool eng_pass_reads_both(const eng_plan *p, int s, const char *op, int a, int b) {
  if (!eng_pass_step_is(p, s, op, 2)) return false;
  int v0 = eng_pass_in(p, s, 0), v1 = eng_pass_in(p, s, 1);
  return (v0 == a && v1 == b) || (v0 == b && v1 == a);
}

const eng_tensor *eng_pass_scalar_beside(const eng_plan *p, int s, int v) {
  const eng_node *nd = eng_graph_node(eng_model_graph(p->m), p->steps[s]);
  if (nd->n_in != 2 || nd->n_out != 1) return NULL;
  int v0 = eng_pass_in(p, s, 0), v1 = eng_pass_in(p, s, 1);
  if ((v0 == v) == (v1 == v)) return NULL;
  const eng_tensor *k = eng_pass_const(p, v0 == v ? v1 : v0);
  return k && k->dtype == ENG_DT_FLOAT && k->shape.rank == 0 ? k : NULL;
}

bool eng_pass_dense_bmm(const eng_node *nd) {
  bool v3 = !strcmp(nd->op, "BatchMatMulV3");
  if (!v3 && strcmp(nd->op, "BatchMatMulV2") && strcmp(nd->op, "BatchMatMul")) return false;
  if (v3 && eng_node_attr_type(nd, "Tout", ENG_DT_FLOAT) != ENG_DT_FLOAT) return false;
  return !eng_node_attr_bool(nd, "adj_x", false);
}

void eng_pass_count_readers(const eng_plan *p, int *readers, int *reader) {
  const eng_graph *g = eng_model_graph(p->m);
  memset(readers, 0, sizeof *readers * (size_t)p->n_values);
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    for (int k = 0; k <= nd->n_in; k++) {
      int v = k < nd->n_in ? p->base[nd->in[k].node] + nd->in[k].index
                           : eng_epilogue_input(p->epi ? p->epi[s] : NULL);
      if (v < 0) continue;
      readers[v]++;
      if (reader) reader[v] = s;
    }
  }
}

int eng_pass_readers_of(const eng_plan *p, int v, int *out, int max) {
  const eng_graph *g = eng_model_graph(p->m);
  int n = 0;
  for (int s = 0; s < p->n_steps; s++) {
    const eng_node *nd = eng_graph_node(g, p->steps[s]);
    bool reads = eng_epilogue_input(p->epi ? p->epi[s] : NULL) == v;
    for (int k = 0; k < nd->n_in && !reads; k++)
      reads = p->base[nd->in[k].node] + nd->in[k].index == v;
    if (reads) {
      if (n < max) out[n] = s;
      n++;
    }
  }
  return n;
}

int eng_pass_sole_reader(const eng_plan *p, int v) {
  int r;
  if (eng_pass_is_fetched(p, v) || eng_pass_is_fed(p, v) || eng_pass_readers_of(p, v, &r, 1) != 1)
    return -1;
  return r;
}

void eng_pass_drop_steps(eng_plan *p, const bool *gone) {
  int k = 0;
  for (int s = 0; s < p->n_steps; s++) {
    if (gone[s]) continue;
    p->steps[k] = p->steps[s];
    p->ops[k] = p->ops[s];
    if (p->epi) p->epi[k] = p->epi[s];
    if (p->packed) p->packed[k] = p->packed[s];
    k++;
  }
  p->n_steps = k;
}

void eng_pass_rewrite(eng_plan *p, const char *op_name, bool packed, eng_pass_at at) {
  const eng_op_def *op = eng_op_find(op_name);
  if (!op || !p->epi || (packed && !p->packed) || eng_device_active()) return;
  bool *gone = calloc((size_t)p->n_steps + 1, sizeof *gone);
  if (!gone) return;
  bool any = false;
  for (int s = 0; s < p->n_steps; s++) {
    if (gone[s]) continue;
    int r = at(p, s, op, gone);
    if (r < 0) break;
    any |= r > 0;
  }
  if (any) eng_pass_drop_steps(p, gone);
  free(gone);
}
