/* Fourier transforms and complex numbers: FFT / IFFT (1-3 D), RFFT / IRFFT
 * (1-3 D), Complex, Real, Imag, ComplexAbs, Conj, Angle, and the complex
 * side of Cast and of the elementwise math ops (Exp, Log, Sqrt, ...). An fft_length of 0 gives an
 * empty (IRFFT) or zero (RFFT) result rather than TensorFlow's abort.
 *
 * Every transform copies its input into one double-precision complex work
 * array shaped like the (cropped or zero-padded) signal and runs eng_fft
 * line by line along each transformed axis, so float32 results carry only
 * the final rounding. RFFT transforms the full complex signal and keeps the
 * non-negative frequencies of the last axis. IRFFT inverts the outer axes
 * on the half spectrum, then rebuilds each last-axis line by Hermitian
 * symmetry (X[L - j] = conj(X[j])) and keeps the real part of its inverse:
 * as TensorFlow's c2r transform, the imaginary parts of the DC and Nyquist
 * terms do not reach the result. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_fft.h"
#include "eng_kernels.h"

static bool is_cx(eng_dtype t) { return t == ENG_DT_COMPLEX64 || t == ENG_DT_COMPLEX128; }
static bool is_re(eng_dtype t) { return t == ENG_DT_FLOAT || t == ENG_DT_DOUBLE; }

static double complex get_c(const void *p, eng_dtype t, int64_t i) {
  if (t == ENG_DT_COMPLEX64) {
    const float *f = p;
    return eng_cx(f[2 * i], f[2 * i + 1]);
  }
  const double *d = p;
  return eng_cx(d[2 * i], d[2 * i + 1]);
}

static void put_c(void *p, eng_dtype t, int64_t i, double complex v) {
  if (t == ENG_DT_COMPLEX64) {
    float *f = p;
    f[2 * i] = (float)creal(v), f[2 * i + 1] = (float)cimag(v);
  } else {
    double *d = p;
    d[2 * i] = creal(v), d[2 * i + 1] = cimag(v);
  }
}

static double get_r(const void *p, eng_dtype t, int64_t i) {
  return t == ENG_DT_FLOAT ? ((const float *)p)[i] : ((const double *)p)[i];
}

static void put_r(void *p, eng_dtype t, int64_t i, double v) {
  if (t == ENG_DT_FLOAT)
    ((float *)p)[i] = (float)v;
  else
    ((double *)p)[i] = v;
}

/* The real dtype of a complex one's parts, and back. */
static eng_dtype part_of(eng_dtype t) {
  return t == ENG_DT_COMPLEX64 ? ENG_DT_FLOAT : ENG_DT_DOUBLE;
}
static eng_dtype complex_of(eng_dtype t) {
  return t == ENG_DT_FLOAT ? ENG_DT_COMPLEX64 : ENG_DT_COMPLEX128;
}

/* --- the transforms -------------------------------------------------------- */

/* Transforms axis `axis` of the work array w (row-major, dims[rank]). */
static td_code run_axis(eng_kctx *c, double complex *w, int rank, const int64_t *dims, int axis,
                        bool inverse) {
  int64_t len = dims[axis], outer = 1, inner = 1;
  for (int d = 0; d < axis; d++) outer *= dims[d];
  for (int d = axis + 1; d < rank; d++) inner *= dims[d];
  if (len <= 1 || !outer || !inner) return TD_OK;
  eng_fft_plan *p = eng_fft_plan_create(len, inverse);
  if (!p)
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory planning an FFT of %lld",
                     (long long)len);
  for (int64_t o = 0; o < outer; o++)
    for (int64_t i = 0; i < inner; i++) eng_fft_run(p, w + o * len * inner + i, inner);
  eng_fft_plan_destroy(p);
  return TD_OK;
}

static double complex *work_alloc(eng_kctx *c, int64_t n) {
  double complex *w = calloc((size_t)(n ? n : 1), sizeof *w);
  if (!w)
    eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for an FFT of %lld values", (long long)n);
  return w;
}

static td_code want_rank(eng_kctx *c, const eng_tensor *x, int k) {
  if (x->shape.rank < k)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "input must have rank at least %d but got: %d", k,
                     x->shape.rank);
  return TD_OK;
}

/* FFT, FFT2D, FFT3D and the inverses: complex to complex over the last k axes. */
static td_code run_fft(eng_kctx *c, int k, bool inverse) {
  const eng_tensor *x = &c->in[0];
  if (!is_cx(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = want_rank(c, x, k);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  if ((rc = eng_kout_raw(c, 0, x->dtype, &x->shape))) return rc;
  double complex *w = work_alloc(c, n);
  if (!w) return TD_RESOURCE_EXHAUSTED;
  const void *src = eng_tensor_data(x);
  for (int64_t i = 0; i < n; i++) w[i] = get_c(src, x->dtype, i);
  int rank = x->shape.rank;
  double count = 1;
  for (int a = rank - k; a < rank && !rc; a++) {
    rc = run_axis(c, w, rank, x->shape.dim, a, inverse);
    count *= (double)x->shape.dim[a];
  }
  double scale = inverse && count > 0 ? 1.0 / count : 1.0;
  void *dst = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n && !rc; i++) put_c(dst, x->dtype, i, w[i] * scale);
  free(w);
  return rc;
}

td_code eng_k_fft(eng_kctx *c) { return run_fft(c, 1, false); }
td_code eng_k_fft2d(eng_kctx *c) { return run_fft(c, 2, false); }
td_code eng_k_fft3d(eng_kctx *c) { return run_fft(c, 3, false); }
td_code eng_k_ifft(eng_kctx *c) { return run_fft(c, 1, true); }
td_code eng_k_ifft2d(eng_kctx *c) { return run_fft(c, 2, true); }
td_code eng_k_ifft3d(eng_kctx *c) { return run_fft(c, 3, true); }

/* Reads fft_length (input 1): k non-negative lengths. */
static td_code fft_lengths(eng_kctx *c, int k, int64_t *len) {
  int got = 0;
  td_code rc = eng_karg_ints(c, 1, len, 3, &got);
  if (rc) return rc;
  if (got != k)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "fft_length must have %d elements, got %d", k, got);
  for (int i = 0; i < k; i++)
    if (len[i] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "fft_length must be non-negative");
  return TD_OK;
}

/* As TensorFlow: the signal holds at least fft_length values along each
 * transformed axis (the last: want_last of them); longer ones are cropped.
 * tf.signal's Python wrappers pad short signals before the op runs. */
static td_code want_lengths(eng_kctx *c, const eng_tensor *x, int k, const int64_t *len,
                            int64_t want_last) {
  int rank = x->shape.rank;
  for (int i = 0; i < k; i++) {
    int d = rank - k + i;
    int64_t need = i == k - 1 ? want_last : len[i];
    if (x->shape.dim[d] < need)
      return eng_kfail(c, TD_INVALID_ARGUMENT,
                       "Input dimension %d must have length of at least %lld but got: %lld", d,
                       (long long)need, (long long)x->shape.dim[d]);
  }
  return TD_OK;
}

/* Copies src (shape sdims) into dst (shape ddims, same rank), cropping
 * where src is longer; a complex or a real source. */
static void copy_fit(double complex *dst, const int64_t *ddims, const void *src, eng_dtype st,
                     const int64_t *sdims, int rank) {
  int64_t fit[ENG_MAX_RANK], idx[ENG_MAX_RANK] = {0}, total = 1;
  for (int d = 0; d < rank; d++) {
    fit[d] = sdims[d] < ddims[d] ? sdims[d] : ddims[d];
    total *= fit[d];
  }
  for (int64_t t = 0; t < total; t++) {
    int64_t so = 0, doff = 0;
    for (int d = 0; d < rank; d++) so = so * sdims[d] + idx[d], doff = doff * ddims[d] + idx[d];
    dst[doff] = is_cx(st) ? get_c(src, st, so) : get_r(src, st, so);
    for (int d = rank - 1; d >= 0; d--) {
      if (++idx[d] < fit[d]) break;
      idx[d] = 0;
    }
  }
}

static td_code run_rfft(eng_kctx *c, int k) {
  const eng_tensor *x = &c->in[0];
  if (!is_re(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  eng_dtype to = eng_node_attr_type(c->node, "Tcomplex", complex_of(x->dtype));
  if (!is_cx(to))
    return eng_kfail(c, TD_UNIMPLEMENTED, "Tcomplex %s is not supported", eng_dtype_name(to));
  int64_t len[3];
  td_code rc = want_rank(c, x, k);
  if (rc || (rc = fft_lengths(c, k, len)) || (rc = want_lengths(c, x, k, len, len[k - 1])))
    return rc;
  int rank = x->shape.rank;
  eng_shape full = x->shape, os = x->shape;
  for (int i = 0; i < k; i++) full.dim[rank - k + i] = os.dim[rank - k + i] = len[i];
  int64_t last = len[k - 1];
  os.dim[rank - 1] = last / 2 + 1;
  int64_t nf = eng_shape_numel(&full), no = eng_shape_numel(&os);
  if ((rc = eng_kout(c, 0, to, &os))) return rc;
  if (!nf) return TD_OK; /* an empty signal: a zero spectrum */
  double complex *w = work_alloc(c, nf);
  if (!w) return TD_RESOURCE_EXHAUSTED;
  copy_fit(w, full.dim, eng_tensor_data(x), x->dtype, x->shape.dim, rank);
  for (int a = rank - k; a < rank && !rc; a++) rc = run_axis(c, w, rank, full.dim, a, false);
  void *dst = eng_tensor_data(&c->out[0]);
  int64_t half = os.dim[rank - 1];
  for (int64_t i = 0; i < no && !rc; i++) put_c(dst, to, i, w[(i / half) * last + i % half]);
  free(w);
  return rc;
}

td_code eng_k_rfft(eng_kctx *c) { return run_rfft(c, 1); }
td_code eng_k_rfft2d(eng_kctx *c) { return run_rfft(c, 2); }
td_code eng_k_rfft3d(eng_kctx *c) { return run_rfft(c, 3); }

static td_code run_irfft(eng_kctx *c, int k) {
  const eng_tensor *x = &c->in[0];
  if (!is_cx(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  eng_dtype to = eng_node_attr_type(c->node, "Treal", part_of(x->dtype));
  if (!is_re(to))
    return eng_kfail(c, TD_UNIMPLEMENTED, "Treal %s is not supported", eng_dtype_name(to));
  int64_t len[3];
  td_code rc = want_rank(c, x, k);
  if (rc || (rc = fft_lengths(c, k, len)) ||
      (rc = want_lengths(c, x, k, len, len[k - 1] ? len[k - 1] / 2 + 1 : 0)))
    return rc;
  int rank = x->shape.rank;
  eng_shape half = x->shape, os = x->shape;
  for (int i = 0; i < k; i++) half.dim[rank - k + i] = os.dim[rank - k + i] = len[i];
  int64_t last = len[k - 1], h = last / 2 + 1;
  half.dim[rank - 1] = h;
  int64_t nh = eng_shape_numel(&half), no = eng_shape_numel(&os);
  if ((rc = eng_kout(c, 0, to, &os))) return rc;
  if (!no) return TD_OK;
  double complex *w = work_alloc(c, nh);
  double complex *line = work_alloc(c, last);
  eng_fft_plan *p = eng_fft_plan_create(last, true);
  if (!w || !line || !p) {
    free(w), free(line), eng_fft_plan_destroy(p);
    return eng_kfail(c, TD_RESOURCE_EXHAUSTED, "out of memory for an inverse real FFT");
  }
  copy_fit(w, half.dim, eng_tensor_data(x), x->dtype, x->shape.dim, rank);
  for (int a = rank - k; a < rank - 1 && !rc; a++) rc = run_axis(c, w, rank, half.dim, a, true);
  double count = 1;
  for (int i = 0; i < k; i++) count *= (double)len[i];
  void *dst = eng_tensor_data(&c->out[0]);
  for (int64_t r = 0; r < no / last && !rc; r++) {
    const double complex *hw = w + r * h;
    for (int64_t j = 0; j < h; j++) line[j] = hw[j];
    for (int64_t j = h; j < last; j++) line[j] = conj(hw[last - j]);
    eng_fft_run(p, line, 1);
    for (int64_t j = 0; j < last; j++) put_r(dst, to, r * last + j, creal(line[j]) / count);
  }
  eng_fft_plan_destroy(p);
  free(line);
  free(w);
  return rc;
}

td_code eng_k_irfft(eng_kctx *c) { return run_irfft(c, 1); }
td_code eng_k_irfft2d(eng_kctx *c) { return run_irfft(c, 2); }
td_code eng_k_irfft3d(eng_kctx *c) { return run_irfft(c, 3); }

/* --- elementwise complex ops ------------------------------------------------ */

td_code eng_k_complex(eng_kctx *c) {
  const eng_tensor *a = &c->in[0], *b = &c->in[1];
  if (!is_re(a->dtype) || a->dtype != b->dtype)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "parts are %s and %s, want two float32 or float64",
                     eng_dtype_name(a->dtype), eng_dtype_name(b->dtype));
  eng_dtype to = eng_node_attr_type(c->node, "Tout", complex_of(a->dtype));
  if (to != complex_of(a->dtype))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Tout %s does not match %s parts", eng_dtype_name(to),
                     eng_dtype_name(a->dtype));
  eng_shape s;
  td_code rc = eng_broadcast_shape(&a->shape, &b->shape, &s, c->err);
  if (rc) return td_err_prefix(c->err, "node '%s' (%s)", c->node->name, c->node->op);
  if ((rc = eng_kout_raw(c, 0, to, &s))) return rc;
  eng_bcast it;
  const eng_shape *in[2] = {&a->shape, &b->shape};
  eng_bcast_init(&it, &s, 2, in);
  const void *x = eng_tensor_data(a), *y = eng_tensor_data(b);
  void *z = eng_tensor_data(&c->out[0]);
  int64_t n = eng_shape_numel(&s);
  for (int64_t i = 0; i < n; i++, eng_bcast_next(&it))
    put_c(z, to, i, eng_cx(get_r(x, a->dtype, it.off[0]), get_r(y, b->dtype, it.off[1])));
  return TD_OK;
}

typedef enum { PART_REAL, PART_IMAG, PART_ABS, PART_ANGLE } part_op;

static td_code run_part(eng_kctx *c, part_op op) {
  const eng_tensor *x = &c->in[0];
  if (!is_cx(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  eng_dtype to = eng_node_attr_type(c->node, "Tout", part_of(x->dtype));
  if (to != part_of(x->dtype))
    return eng_kfail(c, TD_INVALID_ARGUMENT, "Tout %s does not match a %s input",
                     eng_dtype_name(to), eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, to, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  const void *s = eng_tensor_data(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    double complex v = get_c(s, x->dtype, i);
    double r = op == PART_REAL   ? creal(v)
               : op == PART_IMAG ? cimag(v)
               : op == PART_ABS  ? hypot(creal(v), cimag(v))
                                 : atan2(cimag(v), creal(v));
    put_r(d, to, i, r);
  }
  return TD_OK;
}

td_code eng_k_real(eng_kctx *c) { return run_part(c, PART_REAL); }
td_code eng_k_imag(eng_kctx *c) { return run_part(c, PART_IMAG); }
td_code eng_k_complex_abs(eng_kctx *c) { return run_part(c, PART_ABS); }
td_code eng_k_angle(eng_kctx *c) { return run_part(c, PART_ANGLE); }

td_code eng_k_conj(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  if (!is_cx(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  const void *s = eng_tensor_data(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) put_c(d, x->dtype, i, conj(get_c(s, x->dtype, i)));
  return TD_OK;
}

/* --- complex math for the elementwise unary ops ----------------------------- */

static double complex cx_neg(double complex z) { return -z; }
static double complex cx_expm1(double complex z) { return cexp(z) - 1.0; }
static double complex cx_log1p(double complex z) { return clog(1.0 + z); }
static double complex cx_rsqrt(double complex z) { return 1.0 / csqrt(z); }
static double complex cx_square(double complex z) { return z * z; }
static double complex cx_reciprocal(double complex z) { return 1.0 / z; }
static double complex cx_sign(double complex z) { return z == 0 ? 0 : z / cabs(z); }
static double complex cx_sigmoid(double complex z) { return 1.0 / (1.0 + cexp(-z)); }

/* Sorted by name. */
static const struct {
  const char *op;
  double complex (*fn)(double complex);
} cx_unops[] = {
    {"Cos", ccos},
    {"Exp", cexp},
    {"Expm1", cx_expm1},
    {"Log", clog},
    {"Log1p", cx_log1p},
    {"Neg", cx_neg},
    {"Reciprocal", cx_reciprocal},
    {"Rsqrt", cx_rsqrt},
    {"Sigmoid", cx_sigmoid},
    {"Sign", cx_sign},
    {"Sin", csin},
    {"Sqrt", csqrt},
    {"Square", cx_square},
    {"Tanh", ctanh},
};

static double complex (*cx_unop(const char *op))(double complex) {
  for (size_t i = 0; i < sizeof cx_unops / sizeof *cx_unops; i++)
    if (!strcmp(cx_unops[i].op, op)) return cx_unops[i].fn;
  return NULL;
}

td_code eng_unary_complex(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  double complex (*fn)(double complex) = cx_unop(c->node->op);
  if (!fn || !is_cx(x->dtype))
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s input is not supported", eng_dtype_name(x->dtype));
  td_code rc = eng_kout_raw(c, 0, x->dtype, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  const void *s = eng_tensor_data(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) put_c(d, x->dtype, i, fn(get_c(s, x->dtype, i)));
  return TD_OK;
}

/* --- Cast ------------------------------------------------------------------- */

bool eng_cast_complex_handles(eng_dtype from, eng_dtype to) {
  return (is_cx(from) || is_cx(to)) &&
         (is_cx(from) || is_re(from) || from == ENG_DT_INT32 || from == ENG_DT_INT64) &&
         (is_cx(to) || is_re(to) || to == ENG_DT_INT32 || to == ENG_DT_INT64);
}

static double cast_in(const void *p, eng_dtype t, int64_t i) {
  switch (t) {
    case ENG_DT_INT32:
      return ((const int32_t *)p)[i];
    case ENG_DT_INT64:
      return (double)((const int64_t *)p)[i];
    default:
      return get_r(p, t, i);
  }
}

/* Complex to real keeps the real part, as TensorFlow's Cast does; to an
 * integer it truncates toward zero, saturating (NaN to 0). */
td_code eng_cast_complex(eng_kctx *c, eng_dtype to) {
  const eng_tensor *x = &c->in[0];
  td_code rc = eng_kout_raw(c, 0, to, &x->shape);
  if (rc) return rc;
  int64_t n = eng_tensor_numel(x);
  const void *s = eng_tensor_data(x);
  void *d = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < n; i++) {
    double complex v = is_cx(x->dtype) ? get_c(s, x->dtype, i) : cast_in(s, x->dtype, i);
    if (is_cx(to)) {
      put_c(d, to, i, v);
    } else if (is_re(to)) {
      put_r(d, to, i, creal(v));
    } else {
      double r = creal(v);
      int64_t q = r != r                        ? 0
                  : r >= 9223372036854775807.0  ? INT64_MAX
                  : r <= -9223372036854775808.0 ? INT64_MIN
                                                : (int64_t)r;
      if (to == ENG_DT_INT32)
        ((int32_t *)d)[i] = (int32_t)q;
      else
        ((int64_t *)d)[i] = q;
    }
  }
  return TD_OK;
}

/* --- load-time checks (eng_op.h) -------------------------------------------- */

static td_code refuse(const eng_node *n, td_err *err, const char *attr, eng_dtype t) {
  return td_err_set(err, TD_UNIMPLEMENTED, "node '%s' (%s): %s %s is not supported by its kernel",
                    n->name, n->op, attr, eng_dtype_name(t));
}

/* The type attribute `attr`, when present, passes `ok`. */
static td_code want(const eng_node *n, const char *attr, bool (*ok)(eng_dtype), td_err *err) {
  const eng_attr *a = eng_node_attr(n, attr);
  if (!a || a->kind != ENG_ATTR_TYPE || ok(a->type)) return TD_OK;
  return refuse(n, err, attr, a->type);
}

td_code eng_c_fft(const eng_node *n, td_err *err) { return want(n, "Tcomplex", is_cx, err); }

td_code eng_c_rfft(const eng_node *n, td_err *err) {
  td_code rc = want(n, "Treal", is_re, err);
  return rc ? rc : want(n, "Tcomplex", is_cx, err);
}

td_code eng_c_complex(const eng_node *n, td_err *err) {
  td_code rc = want(n, "T", is_re, err);
  return rc ? rc : want(n, "Tout", is_cx, err);
}

td_code eng_c_complex_part(const eng_node *n, td_err *err) {
  td_code rc = want(n, "T", is_cx, err);
  return rc ? rc : want(n, "Tout", is_re, err);
}

td_code eng_c_conj(const eng_node *n, td_err *err) { return want(n, "T", is_cx, err); }
