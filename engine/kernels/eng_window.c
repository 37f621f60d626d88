/* Window geometry (see eng_window.h). */
#include "eng_window.h"

#include <string.h>

bool eng_pad_hw(const eng_graph *g, const eng_node *pad, int64_t out[4]) {
  if (strcmp(pad->op, "Pad") || pad->n_in != 2) return false;
  const eng_node *k = eng_graph_node(g, pad->in[1].node);
  const eng_attr *a = strcmp(k->op, "Const") ? NULL : eng_node_attr(k, "value");
  if (!a || a->kind != ENG_ATTR_TENSOR) return false;
  const eng_tensor *t = &a->tensor;
  if (t->shape.rank != 2 || t->shape.dim[0] != 4 || t->shape.dim[1] != 2) return false;
  int64_t v[8];
  for (int i = 0; i < 8; i++) {
    if (t->dtype == ENG_DT_INT32) v[i] = ((const int32_t *)eng_tensor_data(t))[i];
    else if (t->dtype == ENG_DT_INT64) v[i] = ((const int64_t *)eng_tensor_data(t))[i];
    else return false;
    if (v[i] < 0) return false;
  }
  if (v[0] || v[1] || v[6] || v[7]) return false;
  for (int i = 0; i < 4; i++) out[i] = v[2 + i];
  return true;
}
