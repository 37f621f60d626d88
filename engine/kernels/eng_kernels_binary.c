/* Elementwise binary arithmetic with NumPy broadcasting.
 *
 * Equal shapes and a single-element side take one flat loop; so does a
 * side that is a block of the output's trailing dims (an image's
 * per-channel mean and scale, a squeeze-and-excitation gate of one
 * example), against a copy of it repeated to a few KiB so that the loop
 * runs long rows even over three channels. Everything else (a per-row
 * scale, masks) walks the output a row at a time with eng_bcast (dims
 * merged where both inputs allow; in a row each input is contiguous or one
 * repeated element). Large outputs are split over the engine's pool in
 * ranges of elements (whole rows when broadcasting). */
#include <complex.h>
#include <math.h>
#include <string.h>

#include "eng_kernels.h"
#include "eng_pool.h"

typedef enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MAX, OP_MIN } binop;

td_code eng_broadcast_shape(const eng_shape *a, const eng_shape *b, eng_shape *out, td_err *err) {
  if (a->rank < 0 || b->rank < 0) {
    *out = eng_shape_unknown();
    return TD_OK;
  }
  int r = a->rank > b->rank ? a->rank : b->rank;
  out->rank = r;
  for (int i = 0; i < r; i++) {
    int ia = i - (r - a->rank), ib = i - (r - b->rank);
    int64_t da = ia >= 0 ? a->dim[ia] : 1, db = ib >= 0 ? b->dim[ib] : 1;
    int64_t d;
    if (da == db)
      d = da;
    else if (da == 1)
      d = db;
    else if (db == 1)
      d = da;
    else if (da < 0 || db < 0)
      d = da < 0 ? db : da; /* unknown vs known (not 1): the known one, if it runs at all */
    else {
      char sa[128], sb[128];
      return td_err_set(err, TD_INVALID_ARGUMENT, "Incompatible shapes: %s vs. %s",
                        eng_shape_str(a, sa, sizeof sa), eng_shape_str(b, sb, sizeof sb));
    }
    out->dim[i] = d;
  }
  return TD_OK;
}

td_code eng_s_binary(const eng_node *n, const eng_shape *in, eng_shape *out, td_err *err) {
  return eng_broadcast_shape(&in[0], &in[1], &out[0], err);
}

#define APPLY(op, x, y)                      \
  ((op) == OP_ADD   ? (x) + (y)              \
   : (op) == OP_SUB ? (x) - (y)              \
   : (op) == OP_MUL ? (x) * (y)              \
   : (op) == OP_DIV ? (x) / (y)              \
   : (op) == OP_MAX ? ((x) > (y) ? (x) : (y)) \
                    : ((x) < (y) ? (x) : (y)))

/* One loop, as the pool's chunks see it: the output's elements [e0, e1)
 * (whole broadcast rows in the row-at-a-time mode). */
enum { FLAT, B_ONE, A_ONE, TILE_B, TILE_A, ROWS };
typedef struct bin_job bin_job;
typedef void (*bin_range)(const bin_job *j, int64_t e0, int64_t e1);
struct bin_job {
  const eng_tensor *a, *b;
  eng_tensor *o;
  int mode;
  eng_bcast it0;
  int64_t n, len, per; /* len: ROWS' row length, or TILE's period */
  bool ra, rb;         /* ROWS: whether a / b advance along the row */
  bin_range fn;
  const void *tile;    /* TILE_B / TILE_A: the small side, repeated to len elements */
};

/* Bytes of the small side's repeated copy (on the stack of run_loop). */
#define TILE_REP_BYTES 4096

/* One function per (type, op): op is a constant inside, so APPLY folds to
 * one operation and the flat loops vectorize. */
#define DEFINE_LOOP(T, NAME, OPC) DEFINE_LOOP_WITH(T, NAME, OPC, APPLY)
#define DEFINE_LOOP_WITH(T, NAME, OPC, APPLYF)                                                           \
  static void NAME(const bin_job *j, int64_t e0, int64_t e1) {                              \
    const binop op = OPC;                                                                   \
    const T *x = eng_tensor_data(j->a), *y = eng_tensor_data(j->b);                         \
    T *z = eng_tensor_data(j->o);                                                           \
    if (j->mode == FLAT) {                                                                  \
      for (int64_t i = e0; i < e1; i++) z[i] = APPLYF(op, x[i], y[i]);                       \
      return;                                                                               \
    }                                                                                       \
    if (j->mode == B_ONE) {                                                                 \
      T v = y[0];                                                                           \
      for (int64_t i = e0; i < e1; i++) z[i] = APPLYF(op, x[i], v);                          \
      return;                                                                               \
    }                                                                                       \
    if (j->mode == A_ONE) {                                                                 \
      T v = x[0];                                                                           \
      for (int64_t i = e0; i < e1; i++) z[i] = APPLYF(op, v, y[i]);                          \
      return;                                                                               \
    }                                                                                       \
    if (j->mode == TILE_B || j->mode == TILE_A) {                                           \
      const T *t = j->tile, *f = j->mode == TILE_B ? x : y;                                 \
      for (int64_t i = e0; i < e1;) {                                                       \
        int64_t o = i % j->len, cnt = j->len - o < e1 - i ? j->len - o : e1 - i;            \
        const T *fr = f + i, *tr = t + o;                                                   \
        T *zr = z + i;                                                                      \
        if (j->mode == TILE_B)                                                              \
          for (int64_t k = 0; k < cnt; k++) zr[k] = APPLYF(op, fr[k], tr[k]);               \
        else                                                                                \
          for (int64_t k = 0; k < cnt; k++) zr[k] = APPLYF(op, tr[k], fr[k]);               \
        i += cnt;                                                                           \
      }                                                                                     \
      return;                                                                               \
    }                                                                                       \
    /* General broadcasting, a row (the innermost merged dim) at a time. */                \
    int64_t len = j->len;                                                                   \
    eng_bcast it = j->it0;                                                                  \
    for (int64_t r = 0; r < e0 / len; r++) eng_bcast_next_row(&it);                         \
    for (int64_t i = e0; i < e1; i += len, eng_bcast_next_row(&it)) {                       \
      const T *xr = x + it.off[0], *yr = y + it.off[1];                                     \
      T *zr = z + i;                                                                        \
      if (j->ra && j->rb) {                                                                 \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, xr[k], yr[k]);                  \
      } else if (j->ra) {                                                                   \
        T v = yr[0];                                                                        \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, xr[k], v);                      \
      } else if (j->rb) {                                                                   \
        T u = xr[0];                                                                        \
        for (int64_t k = 0; k < len; k++) zr[k] = APPLYF(op, u, yr[k]);                      \
      } else {                                                                              \
        T w = APPLYF(op, xr[0], yr[0]);                                                      \
        for (int64_t k = 0; k < len; k++) zr[k] = w;                                        \
      }                                                                                     \
    }                                                                                       \
  }

static void bin_chunk(void *arg, int64_t c) {
  const bin_job *j = arg;
  int64_t e0 = c * j->per, e1 = e0 + j->per < j->n ? e0 + j->per : j->n;
  j->fn(j, e0, e1);
}

/* Elements below which a loop runs on one thread (a memory pass this
 * short costs less than waking a helper). */
#define PAR_MIN_ELEMS (1 << 16)

/* Whether element i of out reads element i % numel(t) of t: t's dims,
 * after its leading 1s, are out's last dims. */
static bool trailing_block(const eng_shape *t, const eng_shape *out) {
  if (t->rank > out->rank) return false;
  int i = 0;
  while (i < t->rank && t->dim[i] == 1) i++;
  for (int k = i; k < t->rank; k++)
    if (t->dim[k] != out->dim[out->rank - t->rank + k]) return false;
  return true;
}

/* TILE mode's small side: t repeated into rep (TILE_REP_BYTES) when that
 * holds at least two copies, else t itself. */
static void tile_of(bin_job *j, const eng_tensor *t, unsigned char *rep) {
  size_t es = eng_dtype_size(t->dtype), nt = (size_t)eng_tensor_numel(t);
  j->tile = eng_tensor_data(t);
  j->len = (int64_t)nt;
  if (2 * nt * es > TILE_REP_BYTES) return;
  size_t copies = TILE_REP_BYTES / (nt * es);
  for (size_t i = 0; i < copies; i++) memcpy(rep + i * nt * es, j->tile, nt * es);
  j->tile = rep;
  j->len = (int64_t)(copies * nt);
}

/* Picks the loop's mode and runs fn over the output, split over the
 * engine's pool when it is large: each element is computed the same way
 * at any thread count. */
static void run_loop(const eng_tensor *a, const eng_tensor *b, eng_tensor *o, bin_range fn) {
  bin_job j = {.a = a, .b = b, .o = o, .fn = fn, .n = eng_tensor_numel(o)};
  _Alignas(64) unsigned char rep[TILE_REP_BYTES];
  int64_t na = eng_tensor_numel(a), nb = eng_tensor_numel(b);
  if (j.n <= 0) return;
  if (na == j.n && nb == j.n && eng_shape_equal(&a->shape, &b->shape))
    j.mode = FLAT;
  else if (nb == 1 && na == j.n)
    j.mode = B_ONE;
  else if (na == 1 && nb == j.n)
    j.mode = A_ONE;
  else if (na == j.n && nb > 0 && trailing_block(&b->shape, &o->shape)) {
    j.mode = TILE_B;
    tile_of(&j, b, rep);
  } else if (nb == j.n && na > 0 && trailing_block(&a->shape, &o->shape)) {
    j.mode = TILE_A;
    tile_of(&j, a, rep);
  } else {
    j.mode = ROWS;
    const eng_shape *in[2] = {&a->shape, &b->shape};
    eng_bcast_init(&j.it0, &o->shape, 2, in);
    j.len = eng_bcast_row_len(&j.it0);
    j.ra = eng_bcast_row_stride(&j.it0, 0) != 0;
    j.rb = eng_bcast_row_stride(&j.it0, 1) != 0;
  }
  int64_t threads = eng_pool_threads(NULL);
  if (threads < 2 || j.n < PAR_MIN_ELEMS || (j.mode == ROWS && j.len <= 0)) {
    fn(&j, 0, j.n);
    return;
  }
  int64_t want = 4 * threads;
  j.per = (j.n + want - 1) / want;
  if (j.mode == ROWS)
    j.per = (j.per + j.len - 1) / j.len * j.len; /* whole rows */
  else
    j.per = (j.per + 15) / 16 * 16; /* whole cache lines of floats, mostly */
  eng_pool_run(NULL, (j.n + j.per - 1) / j.per, bin_chunk, &j);
}

#define DEFINE_TYPE(T, NAME)                                                                  \
  DEFINE_LOOP(T, NAME##_add, OP_ADD)                                                          \
  DEFINE_LOOP(T, NAME##_sub, OP_SUB)                                                          \
  DEFINE_LOOP(T, NAME##_mul, OP_MUL)                                                          \
  DEFINE_LOOP(T, NAME##_div, OP_DIV)                                                          \
  DEFINE_LOOP(T, NAME##_max, OP_MAX)                                                          \
  DEFINE_LOOP(T, NAME##_min, OP_MIN)                                                          \
  static void NAME(binop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) {       \
    switch (op) {                                                                             \
      case OP_ADD: run_loop(a, b, o, NAME##_add); break;                                      \
      case OP_SUB: run_loop(a, b, o, NAME##_sub); break;                                      \
      case OP_MUL: run_loop(a, b, o, NAME##_mul); break;                                      \
      case OP_DIV: run_loop(a, b, o, NAME##_div); break;                                      \
      case OP_MAX: run_loop(a, b, o, NAME##_max); break;                                      \
      default: run_loop(a, b, o, NAME##_min); break;                                          \
    }                                                                                         \
  }

/* Complex operands (Add/Sub/Mul/RealDiv; TensorFlow has no complex Maximum
 * or Minimum): the same loops with C99 complex arithmetic. */
#define APPLY_CX(op, x, y) \
  ((op) == OP_ADD ? (x) + (y) : (op) == OP_SUB ? (x) - (y) : (op) == OP_MUL ? (x) * (y) : (x) / (y))
#define DEFINE_CX(T, NAME)                                                              \
  DEFINE_LOOP_WITH(T, NAME##_add, OP_ADD, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_sub, OP_SUB, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_mul, OP_MUL, APPLY_CX)                                     \
  DEFINE_LOOP_WITH(T, NAME##_div, OP_DIV, APPLY_CX)                                     \
  static void NAME(binop op, const eng_tensor *a, const eng_tensor *b, eng_tensor *o) { \
    switch (op) {                                                                       \
      case OP_ADD: run_loop(a, b, o, NAME##_add); break;                                \
      case OP_SUB: run_loop(a, b, o, NAME##_sub); break;                                \
      case OP_MUL: run_loop(a, b, o, NAME##_mul); break;                                \
      default: run_loop(a, b, o, NAME##_div); break;                                    \
    }                                                                                   \
  }

DEFINE_CX(float complex, loop_c64)
DEFINE_CX(double complex, loop_c128)

DEFINE_TYPE(float, loop_f32)
DEFINE_TYPE(double, loop_f64)
DEFINE_TYPE(int32_t, loop_i32)
DEFINE_TYPE(int64_t, loop_i64)

static td_code run_binary(eng_kctx *c, binop op) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (a->dtype != b->dtype)
    return td_err_set(c->err, TD_INVALID_ARGUMENT, "node '%s' (%s): operands are %s and %s",
                      c->node->name, c->node->op, eng_dtype_name(a->dtype),
                      eng_dtype_name(b->dtype));
  eng_shape s;
  td_code rc = eng_broadcast_shape(&a->shape, &b->shape, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  bool int_div = op == OP_DIV && (a->dtype == ENG_DT_INT32 || a->dtype == ENG_DT_INT64);
  bool cx = a->dtype == ENG_DT_COMPLEX64 || a->dtype == ENG_DT_COMPLEX128;
  if (int_div || (cx && (op == OP_MAX || op == OP_MIN)) ||
      (!cx && a->dtype != ENG_DT_FLOAT && a->dtype != ENG_DT_DOUBLE && a->dtype != ENG_DT_INT32 &&
       a->dtype != ENG_DT_INT64))
    return td_err_set(c->err, TD_UNIMPLEMENTED, "node '%s' (%s): %s operands are not supported",
                      c->node->name, c->node->op, eng_dtype_name(a->dtype));
  rc = eng_tensor_alloc_raw(&c->out[0], a->dtype, &s, c->err);
  if (rc) return rc;
  switch (a->dtype) {
    case ENG_DT_FLOAT: loop_f32(op, a, b, &c->out[0]); break;
    case ENG_DT_DOUBLE: loop_f64(op, a, b, &c->out[0]); break;
    case ENG_DT_INT32: loop_i32(op, a, b, &c->out[0]); break;
    case ENG_DT_COMPLEX64: loop_c64(op, a, b, &c->out[0]); break;
    case ENG_DT_COMPLEX128: loop_c128(op, a, b, &c->out[0]); break;
    default: loop_i64(op, a, b, &c->out[0]); break;
  }
  return TD_OK;
}

td_code eng_k_add(eng_kctx *c) { return run_binary(c, OP_ADD); }
td_code eng_k_sub(eng_kctx *c) { return run_binary(c, OP_SUB); }
td_code eng_k_mul(eng_kctx *c) { return run_binary(c, OP_MUL); }
td_code eng_k_real_div(eng_kctx *c) { return run_binary(c, OP_DIV); }
td_code eng_k_maximum(eng_kctx *c) { return run_binary(c, OP_MAX); }
td_code eng_k_minimum(eng_kctx *c) { return run_binary(c, OP_MIN); }
