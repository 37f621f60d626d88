/* String tensors through the element-moving kernels (Tile, GatherV2,
 * ConcatV2, Transpose, ...): those kernels copy fixed-size elements, and a
 * string element is a length and a pointer into its tensor's buffer. So
 * each string input is replaced by an int64 tensor of its element numbers
 * (inputs numbered one after another), the numeric kernel moves those, and
 * each output's numbers are turned back into a string tensor holding
 * copies of the strings they name. The kernel's own checks and errors
 * (shapes, indices, axes) are therefore exactly the numeric ones. */
#include <stdlib.h>
#include <string.h>

#include "eng_kernels.h"

/* Which input (by first element number) element number id belongs to. */
static int source_of(const int64_t *first, int n, int64_t id) {
  int lo = 0, hi = n - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (first[mid] <= id)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

static td_code strings_back(eng_kctx *c, eng_tensor *t, const eng_tensor *const *src,
                            const int64_t *first, int nsrc) {
  int64_t n = eng_tensor_numel(t);
  size_t *lens = malloc(sizeof *lens * (size_t)(n + 1));
  if (!lens) return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  const int64_t *ids = eng_tensor_data(t);
  for (int64_t i = 0; i < n; i++) {
    int k = source_of(first, nsrc, ids[i]);
    lens[i] = eng_tensor_strs(src[k])[ids[i] - first[k]].len;
  }
  eng_tensor s = {0};
  td_code rc = eng_tensor_alloc_strings(&s, &t->shape, lens, c->err);
  for (int64_t i = 0; !rc && i < n; i++) {
    int k = source_of(first, nsrc, ids[i]);
    if (lens[i])
      memcpy(eng_tensor_str_bytes(&s, i), eng_tensor_strs(src[k])[ids[i] - first[k]].data, lens[i]);
  }
  free(lens);
  if (rc) return rc;
  eng_tensor_release(t);
  *t = s;
  return TD_OK;
}

td_code eng_kmove_strings(eng_kctx *c, eng_kernel_fn numeric) {
  int nsrc = 0;
  for (int i = 0; i < c->n_in; i++) nsrc += c->in[i].dtype == ENG_DT_STRING;
  if (!nsrc) return numeric(c);
  eng_tensor *in = calloc((size_t)c->n_in, sizeof *in);
  const eng_tensor **src = malloc(sizeof *src * (size_t)nsrc);
  int64_t *first = malloc(sizeof *first * (size_t)nsrc);
  td_code rc = in && src && first ? TD_OK : eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory");
  int64_t next = 0;
  int k = 0;
  for (int i = 0; !rc && i < c->n_in; i++) {
    if (c->in[i].dtype != ENG_DT_STRING) {
      in[i] = c->in[i]; /* borrowed: not released below */
      continue;
    }
    rc = eng_tensor_alloc_raw(&in[i], ENG_DT_INT64, &c->in[i].shape, c->err);
    int64_t n = rc ? 0 : eng_tensor_numel(&in[i]), *d = rc ? NULL : eng_tensor_data(&in[i]);
    for (int64_t j = 0; j < n; j++) d[j] = next + j;
    src[k] = &c->in[i];
    first[k++] = next;
    next += n;
  }
  if (!rc) {
    eng_kctx sub = *c;
    sub.in = in;
    rc = numeric(&sub);
    c->epi_done = sub.epi_done;
  }
  for (int o = 0; !rc && o < c->n_out; o++)
    if (c->out[o].buf && c->out[o].dtype == ENG_DT_INT64)
      rc = strings_back(c, &c->out[o], src, first, nsrc);
  for (int i = 0; in && i < c->n_in; i++)
    if (c->in[i].dtype == ENG_DT_STRING) eng_tensor_release(&in[i]);
  free(in);
  free(src);
  free(first);
  return rc;
}

#define MOVE_STRINGS(name, numeric) \
  td_code name(eng_kctx *c) { return eng_kmove_strings(c, numeric); }

MOVE_STRINGS(eng_k_tile_any, eng_k_tile)
MOVE_STRINGS(eng_k_gather_v2_any, eng_k_gather_v2)
MOVE_STRINGS(eng_k_concat_v2_any, eng_k_concat_v2)
MOVE_STRINGS(eng_k_pack_any, eng_k_pack)
MOVE_STRINGS(eng_k_unpack_any, eng_k_unpack)
MOVE_STRINGS(eng_k_slice_any, eng_k_slice)
MOVE_STRINGS(eng_k_strided_slice_any, eng_k_strided_slice)
MOVE_STRINGS(eng_k_transpose_any, eng_k_transpose)
MOVE_STRINGS(eng_k_split_any, eng_k_split)
MOVE_STRINGS(eng_k_split_v_any, eng_k_split_v)
MOVE_STRINGS(eng_k_broadcast_to_any, eng_k_broadcast_to)
MOVE_STRINGS(eng_k_select_v2_any, eng_k_select_v2)
MOVE_STRINGS(eng_k_select_any, eng_k_select)
