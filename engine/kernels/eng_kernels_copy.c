/* eng_copy_nd: the n-dimensional strided copy behind Transpose, Pad,
 * Slice, StridedSlice, ConcatV2, Tile, BroadcastTo and the layout moves of
 * other kernels. The copy is a walk over rows (the innermost dim) in the
 * destination's order; a large copy splits its rows into ranges over the
 * engine's pool (eng_pool_for), each range seeking its first row's offsets
 * and then walking as the serial loop does. A copy moves bytes and sums
 * nothing, so a split cannot change them; it stays serial when two rows
 * could write the same element (a destination stride of 0). */
#include <stddef.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_pool.h"

/* Below this many bytes a copy runs on one thread: waking a helper costs
 * about as much as copying them. Ranges are at least half of it. */
#define PAR_MIN_BYTES ((int64_t)256 << 10)

typedef struct copy_args {
  int rank;
  const int64_t *dims, *sst, *dstst;
  size_t es;
  const char *src;
  char *dst;
} copy_args;

/* Rows [r0, r1) of the walk; a row is dims[rank - 1] elements. */
static void copy_rows(void *arg, int64_t r0, int64_t r1) {
  const copy_args *a = arg;
  int rank = a->rank;
  const int64_t *dims = a->dims, *sst = a->sst, *dstst = a->dstst;
  size_t es = a->es;
  const char *src = a->src;
  char *dst = a->dst;
  int64_t inner = dims[rank - 1], is = sst[rank - 1], id = dstst[rank - 1];
  int64_t idx[ENG_MAX_RANK] = {0};
  int64_t so = 0, doff = 0;
  /* The odometer at row r0: its digits are dims[0 .. rank - 2]. */
  int64_t r = r0;
  for (int d = rank - 2; d >= 0; d--) {
    idx[d] = r % dims[d];
    r /= dims[d];
    so += idx[d] * sst[d];
    doff += idx[d] * dstst[d];
  }
  for (int64_t row = r0; row < r1; row++) {
    /* Offsets are signed (a reversed slice walks its source backwards from
     * the far end), so they stay ptrdiff_t: adding a negative offset cast
     * to size_t wraps the pointer, which is undefined. */
    if (is == 1 && id == 1) {
      memcpy(dst + (ptrdiff_t)doff * (ptrdiff_t)es, src + (ptrdiff_t)so * (ptrdiff_t)es,
             (size_t)inner * es);
    } else if (es == 4) {
      const uint32_t *s = (const uint32_t *)src + so;
      uint32_t *t = (uint32_t *)dst + doff;
      for (int64_t k = 0; k < inner; k++) t[k * id] = s[k * is];
    } else {
      for (int64_t k = 0; k < inner; k++)
        memcpy(dst + (ptrdiff_t)(doff + k * id) * (ptrdiff_t)es,
               src + (ptrdiff_t)(so + k * is) * (ptrdiff_t)es, es);
    }
    for (int d = rank - 2; d >= 0; d--) {
      if (++idx[d] < dims[d]) {
        so += sst[d];
        doff += dstst[d];
        break;
      }
      so -= sst[d] * (idx[d] - 1);
      doff -= dstst[d] * (idx[d] - 1);
      idx[d] = 0;
    }
  }
}

void eng_copy_nd(int rank, const int64_t *dims, size_t es, const char *src, const int64_t *sst,
                 char *dst, const int64_t *dstst) {
  int64_t total = 1;
  for (int d = 0; d < rank; d++) total *= dims[d];
  if (total == 0) return;
  if (rank == 0) {
    memcpy(dst, src, es);
    return;
  }
  /* Dims of 1 go, and a dim that both sides step through as one run with
   * the dim inside it merges into it (an image's width and channels under
   * a Pad of its height and width, a transpose's untouched inner dims):
   * fewer, longer rows, the same bytes. */
  int64_t md[ENG_MAX_RANK], ms[ENG_MAX_RANK], mt[ENG_MAX_RANK];
  int mr = 0;
  for (int d = 0; d < rank; d++) {
    if (dims[d] == 1) continue;
    if (mr && ms[mr - 1] == sst[d] * dims[d] && mt[mr - 1] == dstst[d] * dims[d]) {
      md[mr - 1] *= dims[d];
      ms[mr - 1] = sst[d];
      mt[mr - 1] = dstst[d];
      continue;
    }
    md[mr] = dims[d];
    ms[mr] = sst[d];
    mt[mr] = dstst[d];
    mr++;
  }
  if (!mr) { /* one element */
    memcpy(dst, src, es);
    return;
  }
  rank = mr;
  dims = md;
  sst = ms;
  dstst = mt;
  copy_args a = {rank, dims, sst, dstst, es, src, dst};
  int64_t rows = total / dims[rank - 1];
  bool disjoint = true;
  for (int d = 0; d < rank - 1; d++) disjoint &= dims[d] == 1 || dstst[d] != 0;
  int64_t row_bytes = dims[rank - 1] * (int64_t)es;
  if (!disjoint || total * (int64_t)es < PAR_MIN_BYTES) {
    copy_rows(&a, 0, rows);
    return;
  }
  int64_t grain = (PAR_MIN_BYTES / 2 + row_bytes - 1) / row_bytes;
  eng_pool_for(NULL, rows, grain, 1, copy_rows, &a);
}

void eng_contig_strides(const eng_shape *s, int64_t *st) {
  int64_t v = 1;
  for (int d = s->rank - 1; d >= 0; d--) {
    st[d] = v;
    v *= s->dim[d];
  }
}
