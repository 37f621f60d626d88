/* SpaceToBatchND / BatchToSpaceND: the pair TensorFlow wraps around a
 * dilated convolution (Keras's grouped or dilated convs take this form
 * when exported through XLA's path). With M spatial dims of block b[k]:
 *   SpaceToBatchND: pad the spatial dims, split each into (dim / b, b),
 *     move the b parts in front of the batch: output batch
 *     ((i_1 * b_2 + i_2) ... ) * B + n, spatial o_k from padded o_k*b_k+i_k.
 *   BatchToSpaceND: the inverse, then crop.
 * The trailing dims move as one contiguous block; any fixed-size dtype. */
#include <string.h>

#include "eng_kernels.h"

typedef struct space_geom {
  int m;                        /* spatial dims */
  int64_t block[ENG_MAX_RANK];  /* b_k */
  int64_t before[ENG_MAX_RANK]; /* pad / crop at the start */
  int64_t after[ENG_MAX_RANK];  /* pad / crop at the end */
  int64_t nblocks;              /* product of the b_k */
} space_geom;

static td_code read_geom(eng_kctx *c, const char *what, space_geom *g) {
  const eng_tensor *x = &c->in[0];
  int64_t pads[2 * ENG_MAX_RANK];
  int nb, np;
  td_code rc = eng_karg_ints(c, 1, g->block, ENG_MAX_RANK, &nb);
  if (!rc) rc = eng_karg_ints(c, 2, pads, 2 * ENG_MAX_RANK, &np);
  if (rc) return rc;
  if (np != 2 * nb)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "%s should have shape [%d, 2]", what, nb);
  if (nb < 1 || x->shape.rank < nb + 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input rank should be >= %d instead of %d", nb + 1,
                     x->shape.rank);
  g->m = nb;
  g->nblocks = 1;
  for (int k = 0; k < nb; k++) {
    if (g->block[k] < 1)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "All values in block_shape must be positive");
    g->before[k] = pads[2 * k];
    g->after[k] = pads[2 * k + 1];
    if (g->before[k] < 0 || g->after[k] < 0)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "All values in %s must be non-negative", what);
    g->nblocks *= g->block[k];
  }
  return TD_OK;
}

/* The walk shared by both directions: for every element block of the
 * batched (space-to-batch output) layout, the matching position in the
 * spatial layout, or -1 inside the padding / crop. to_batch copies
 * spatial -> batched, else batched -> spatial. */
static void walk(const space_geom *g, const eng_shape *sp, const eng_shape *bt, size_t blk,
                 const char *src, char *dst, bool to_batch) {
  int64_t batch = sp->dim[0], sst[ENG_MAX_RANK], bst[ENG_MAX_RANK];
  eng_shape sps = *sp, bts = *bt;
  eng_contig_strides(&sps, sst);
  eng_contig_strides(&bts, bst);
  int64_t inner = sst[g->m]; /* elements per spatial position */
  int64_t total = bt->dim[0];
  for (int d = 1; d <= g->m; d++) total *= bt->dim[d];
  for (int64_t pos = 0; pos < total; pos++) {
    /* pos walks the batched layout's [batch', spatial'...] positions. */
    int64_t rem = pos, o[ENG_MAX_RANK];
    for (int d = g->m; d >= 1; d--) {
      o[d] = rem % bt->dim[d];
      rem /= bt->dim[d];
    }
    int64_t ob = rem, n = ob % batch, blockid = ob / batch, off = n * sst[0];
    bool inside = true;
    for (int d = g->m; d >= 1; d--) {
      int64_t i = blockid % g->block[d - 1];
      blockid /= g->block[d - 1];
      int64_t y = o[d] * g->block[d - 1] + i - g->before[d - 1];
      if (y < 0 || y >= sp->dim[d]) inside = false;
      off += y * sst[d];
    }
    char *bp = (to_batch ? dst : (char *)src) + (size_t)(pos * inner) * blk;
    if (to_batch) {
      if (inside)
        memcpy(bp, src + (size_t)off * blk, (size_t)inner * blk);
      else
        memset(bp, 0, (size_t)inner * blk);
    } else if (inside) {
      memcpy(dst + (size_t)off * blk, bp, (size_t)inner * blk);
    }
  }
}

td_code eng_k_space_to_batch_nd(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  space_geom g;
  td_code rc = read_geom(c, "paddings", &g);
  if (rc) return rc;
  eng_shape s = x->shape;
  s.dim[0] = x->shape.dim[0] * g.nblocks;
  for (int k = 0; k < g.m; k++) {
    int64_t padded = x->shape.dim[k + 1] + g.before[k] + g.after[k];
    if (padded % g.block[k])
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "padded_shape[%d]=%lld is not divisible by block_shape[%d]=%lld", k,
                       (long long)padded, k, (long long)g.block[k]);
    s.dim[k + 1] = padded / g.block[k];
  }
  if ((rc = eng_kout_raw(c, 0, x->dtype, &s))) return rc;
  if (eng_shape_numel(&s))
    walk(&g, &x->shape, &s, es, eng_tensor_data(x), eng_tensor_data(&c->out[0]), true);
  return TD_OK;
}

td_code eng_k_batch_to_space_nd(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  size_t es = eng_dtype_size(x->dtype);
  if (!es) return eng_kfail(c, TD_UNIMPLEMENTED, "%s input", eng_dtype_name(x->dtype));
  space_geom g;
  td_code rc = read_geom(c, "crops", &g);
  if (rc) return rc;
  if (x->shape.dim[0] % g.nblocks)
    return eng_kfail(
        c, TD_INVALID_ARGUMENT,
        "Input batch dimension (%lld) is not divisible by product of block sizes (%lld)",
        (long long)x->shape.dim[0], (long long)g.nblocks);
  eng_shape s = x->shape;
  s.dim[0] = x->shape.dim[0] / g.nblocks;
  for (int k = 0; k < g.m; k++) {
    int64_t full = x->shape.dim[k + 1] * g.block[k];
    if (g.before[k] + g.after[k] > full)
      return eng_kfail(c, TD_INVALID_ARGUMENT, "Cropped size must be non-negative");
    s.dim[k + 1] = full - g.before[k] - g.after[k];
  }
  if ((rc = eng_kout(c, 0, x->dtype, &s))) return rc;
  if (eng_shape_numel(&s))
    walk(&g, &s, &x->shape, es, eng_tensor_data(x), eng_tensor_data(&c->out[0]), false);
  return TD_OK;
}
