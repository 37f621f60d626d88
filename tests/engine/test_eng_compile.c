/* eng_compile: load-time folding and fusion give the same results as the
 * plain schedule, and do what eng_plan_get_info says: constant subgraphs
 * (variable reads included) leave the schedule, a MatMul/Conv2D followed
 * by bias, scale and ReLU runs them in place, a chain is cut where a value
 * has another reader or is fetched, a plan whose variables are not yet
 * set is left unfolded (the read fails when it runs, as before), and a
 * plan specialises itself per input shape, folding the shape arithmetic.
 * Kernels whose fast paths only a compiled plan reaches (Conv2D on packed
 * weights, dense BatchMatMul through a Reshape, Einsum in place, a Pad
 * folded into a depthwise convolution, the pools) are checked here against
 * plain loops, through whole plans; a fused LayerNorm against the same
 * graph run unfused, bit for bit. */
#include <check.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_isa.h"
#include "eng_model.h"
#include "eng_plan.h"
#include "eng_pool.h"
#include "eng_profile.h"
#include "td_opcase.h"

static eng_tensor tensor(int rank, const int64_t *dims, const float *v) {
  eng_shape s = eng_shape_make(rank, dims);
  eng_tensor t;
  ck_assert_int_eq(eng_tensor_alloc(&t, ENG_DT_FLOAT, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&t), v, sizeof *v * (size_t)eng_tensor_numel(&t));
  return t;
}

static void konst(eng_graph *g, const char *name, int rank, const int64_t *dims, const float *v) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  a->tensor = tensor(rank, dims, v);
}

static void placeholder(eng_graph *g, const char *name) {
  int id = td_opcase_vnode(g, name, "Placeholder", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
}

static void list_attr(eng_graph *g, int id, const char *name, int n, const int64_t *v) {
  eng_attr *a = eng_graph_add_attr(g, id, name);
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_I;
  a->n = n;
  a->li = calloc((size_t)n, sizeof *a->li);
  for (int i = 0; i < n; i++) a->li[i] = v[i];
}

/* A convolution's or pool's window attributes: NHWC strides and padding
 * ("VALID", "SAME", "EXPLICIT"). */
static void window(eng_graph *g, int id, int64_t sh, int64_t sw, const char *padding) {
  list_attr(g, id, "strides", 4, (int64_t[]){1, sh, sw, 1});
  eng_attr *a = eng_graph_add_attr(g, id, "padding");
  a->kind = ENG_ATTR_S;
  a->s.data = strdup(padding);
  a->s.len = strlen(padding);
}

/* Placeholder `name` declared NHWC with c channels, as Keras declares its
 * inputs. */
static void declare_channels(eng_graph *g, const char *name, int64_t c) {
  eng_attr *a = eng_graph_add_attr(g, eng_graph_find(g, name, strlen(name)), "shape");
  a->kind = ENG_ATTR_SHAPE;
  a->shape = eng_shape_make(4, (int64_t[]){-1, -1, -1, c});
}

/* A Pad's amounts: an int32 [4, 2] constant. */
static void pads_const(eng_graph *g, const char *name, const int32_t v[8]) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  eng_shape ps = eng_shape_make(2, (int64_t[]){4, 2});
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_INT32, &ps, NULL), TD_OK);
  memcpy(eng_tensor_data(&a->tensor), v, 8 * sizeof *v);
}

/* y = relu(x W + b) * s - t, with W, b, s, t constants: x [1,2], W [2,3]. */
/* g as a model, and its compiled serving plan from x:0 to `out`. */
static eng_plan *plan_of(eng_graph *g, const char *out, eng_model **m) {
  td_err err;
  ck_assert_msg(eng_model_create(g, NULL, NULL, m, &err) == TD_OK, "%s", err.msg);
  const char *in[] = {"x:0"}, *outs[] = {out};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(*m, 1, in, 1, outs, 0, NULL, &p, &err) == TD_OK, "%s", err.msg);
  return p;
}

static eng_graph *dense_graph(void) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  konst(g, "W", 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, -4, 5, -6});
  konst(g, "b", 1, (int64_t[]){3}, (float[]){0.5f, -20, 1});
  konst(g, "s", 0, NULL, (float[]){2});
  konst(g, "t3", 1, (int64_t[]){3}, (float[]){1, 1, 1});
  konst(g, "t", 1, (int64_t[]){3}, (float[]){0, 0, 0});
  td_opcase_vnode(g, "tt", "AddV2", 1, "t3", "t", NULL); /* folded: t = t3 + 0 */
  td_opcase_vnode(g, "mm", "MatMul", 1, "x", "W", NULL);
  td_opcase_vnode(g, "ba", "BiasAdd", 1, "mm", "b", NULL);
  td_opcase_vnode(g, "r", "Relu", 1, "ba", NULL);
  td_opcase_vnode(g, "m", "Mul", 1, "s", "r", NULL);
  td_opcase_vnode(g, "y", "Sub", 1, "m", "tt", NULL);
  return g;
}

static void run_dense(const char *const *outs, int n_out, eng_plan_info *info, float *y) {
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(dense_graph(), NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"x:0"};
  eng_plan *p;
  ck_assert_msg(eng_plan_create(m, 1, in, n_out, outs, 0, NULL, &p, &err) == TD_OK, "%s", err.msg);
  *info = eng_plan_get_info(p);
  eng_tensor x = tensor(2, (int64_t[]){1, 2}, (float[]){1, 2}), out[2] = {0};
  ck_assert_msg(eng_plan_run(p, &x, out, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(eng_tensor_numel(&out[0]), 3);
  memcpy(y, eng_tensor_data(&out[0]), 3 * sizeof *y);
  for (int i = 0; i < 2; i++) eng_tensor_release(&out[i]);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}

START_TEST(dense_chain_fuses) {
  eng_plan_info info;
  float y[3];
  run_dense((const char *[]){"y:0"}, 1, &info, y);
  /* x = [1,2]: xW = [-7, 12, -9], + b = [-6.5, -8, -8], relu = 0, * 2 = 0, - 1 */
  ck_assert_float_eq(y[0], -1);
  ck_assert_float_eq(y[1], -1);
  ck_assert_float_eq(y[2], -1);
  ck_assert_int_eq(info.fused_ops, 4); /* BiasAdd, Relu, Mul, Sub */
  ck_assert_int_eq(info.steps, 1);     /* only the MatMul runs */
  ck_assert_int_ge(info.consts, 4);    /* W, b, s, and t3 + t folded */
}
END_TEST

START_TEST(fetched_value_cuts_the_chain) {
  eng_plan_info info;
  float y[3];
  run_dense((const char *[]){"y:0", "ba:0"}, 2, &info, y);
  ck_assert_float_eq(y[0], -1);
  ck_assert_int_eq(info.fused_ops, 1); /* BiasAdd only: "ba" is fetched */
  ck_assert_int_eq(info.steps, 4);     /* MatMul(+BiasAdd), Relu, Mul, Sub */
}
END_TEST

/* A float resource variable named `name`; returns its node. */
static int float_var(eng_graph *g, const char *name) {
  int vh = td_opcase_vnode(g, name, "VarHandleOp", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, vh, "dtype");
  a->kind = ENG_ATTR_TYPE;
  a->type = ENG_DT_FLOAT;
  return vh;
}

START_TEST(variable_reads_fold_after_restore) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  int vh = float_var(g, "v");
  td_opcase_vnode(g, "read", "ReadVariableOp", 1, "v", NULL);
  td_opcase_vnode(g, "y", "Mul", 1, "x", "read", NULL);
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"x:0"}, *out[] = {"y:0"};
  /* Before the variable is set: not folded, the run fails as TF would. */
  eng_plan *early;
  ck_assert_int_eq(eng_plan_create(m, 1, in, 1, out, 0, NULL, &early, &err), TD_OK);
  ck_assert_int_eq(eng_plan_get_info(early).consts, 0);
  eng_tensor x = tensor(1, (int64_t[]){2}, (float[]){3, 4}), y = {0};
  ck_assert_int_eq(eng_plan_run(early, &x, &y, &err), TD_FAILED_PRECONDITION);
  eng_tensor val = tensor(0, NULL, (float[]){0.5f});
  ck_assert_int_eq(eng_model_slot_write(m, eng_model_node_slot(m, vh), &val, &err), TD_OK);
  /* The early plan now runs; a new plan folds the read. */
  ck_assert_int_eq(eng_plan_run(early, &x, &y, &err), TD_OK);
  ck_assert_float_eq(((float *)eng_tensor_data(&y))[1], 2);
  eng_tensor_release(&y);
  eng_plan *p;
  ck_assert_int_eq(eng_plan_create(m, 1, in, 1, out, 0, NULL, &p, &err), TD_OK);
  eng_plan_info info = eng_plan_get_info(p);
  ck_assert_int_eq(info.consts, 1);
  ck_assert_int_eq(info.steps, 1);
  ck_assert_int_eq(eng_plan_run(p, &x, &y, &err), TD_OK);
  ck_assert_float_eq(((float *)eng_tensor_data(&y))[0], 1.5f);
  eng_tensor_release(&y);
  eng_tensor_release(&x);
  eng_tensor_release(&val);
  eng_plan_destroy(p);
  eng_plan_destroy(early);
  eng_model_destroy(m);
}
END_TEST

START_TEST(conv_bias_relu6_fuses) {
  /* 1x1 conv over [1,1,2,2]: channels out = x . W columns. */
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  konst(g, "W", 4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 2, 3, 4});
  konst(g, "b", 4, (int64_t[]){1, 1, 1, 2}, (float[]){0.5f, -100});
  int c = td_opcase_vnode(g, "conv", "Conv2D", 1, "x", "W", NULL);
  window(g, c, 1, 1, "VALID");
  td_opcase_vnode(g, "add", "AddV2", 1, "b", "conv", NULL);
  td_opcase_vnode(g, "y", "Relu6", 1, "add", NULL);
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  ck_assert_int_eq(eng_plan_get_info(p).fused_ops, 2);
  eng_tensor x = tensor(4, (int64_t[]){1, 1, 2, 2}, (float[]){1, 1, 2, -1}), y = {0};
  ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
  const float *v = eng_tensor_data(&y);
  /* pixel 0: [1+3, 2+4] = [4, 6] + b = [4.5, -94] -> [4.5, 0]
   * pixel 1: [2-3, 4-4] = [-1, 0] + b = [-0.5, -100] -> [0, 0] */
  ck_assert_float_eq(v[0], 4.5f);
  ck_assert_float_eq(v[1], 0);
  ck_assert_float_eq(v[2], 0);
  ck_assert_float_eq(v[3], 0);
  /* A second run reuses recycled buffers and gives the same answer. */
  eng_tensor_release(&y);
  ck_assert_int_eq(eng_plan_run(p, &x, &y, &err), TD_OK);
  ck_assert_float_eq(((const float *)eng_tensor_data(&y))[0], 4.5f);
  eng_tensor_release(&y);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

static float cval(int64_t i, int salt) { return (float)((i * 29 + salt * 7) % 19) / 8.0f - 1.1f; }

/* One Conv2D (+ bias + ReLU, fused) through a compiled plan, where the
 * weights are packed and the input is read in place, against a double loop
 * with TF's window rules. pad: 0 VALID, 1 SAME, 2 EXPLICIT (2 top, 1 left,
 * 0 bottom, 3 right). */
static void conv_case_bn(int64_t n, int64_t h, int64_t w, int64_t cin, int64_t cout, int64_t kh,
                         int64_t kw, int64_t sh, int64_t sw, int64_t dh, int pad, bool bn) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  int64_t nf = kh * kw * cin * cout;
  float *f = malloc(sizeof *f * (size_t)nf), *b = malloc(sizeof *b * (size_t)cout);
  for (int64_t i = 0; i < nf; i++) f[i] = cval(i, 1);
  for (int64_t i = 0; i < cout; i++) b[i] = cval(i, 2);
  konst(g, "W", 4, (int64_t[]){kh, kw, cin, cout}, f);
  konst(g, "b", 1, (int64_t[]){cout}, b);
  int c = td_opcase_vnode(g, "conv", "Conv2D", 1, "x", "W", NULL);
  const char *pads[] = {"VALID", "SAME", "EXPLICIT"};
  window(g, c, sh, sw, pads[pad]);
  list_attr(g, c, "dilations", 4, (int64_t[]){1, dh, 1, 1});
  int64_t ep[8] = {0, 0, 2, 0, 1, 3, 0, 0};
  if (pad == 2) list_attr(g, c, "explicit_paddings", 8, ep);
  /* With bn, a batch-norm scale first (Mul by a per-channel constant),
   * which goes into the packed weights. */
  float *sc = malloc(sizeof *sc * (size_t)cout);
  for (int64_t i = 0; i < cout; i++) sc[i] = cval(i, 12) * 2;
  konst(g, "s", 1, (int64_t[]){cout}, sc);
  if (bn) td_opcase_vnode(g, "bn", "Mul", 1, "conv", "s", NULL);
  td_opcase_vnode(g, "ba", "BiasAdd", 1, bn ? "bn" : "conv", "b", NULL);
  td_opcase_vnode(g, "y", "Relu", 1, "ba", NULL);
  /* Geometry, as TF computes it. */
  int64_t effh = (kh - 1) * dh + 1, oh, ow, pt = 0, pl = 0;
  if (pad == 0) {
    oh = (h - effh + sh) / sh;
    ow = (w - kw + sw) / sw;
  } else if (pad == 1) {
    oh = (h + sh - 1) / sh;
    ow = (w + sw - 1) / sw;
    int64_t th = (oh - 1) * sh + effh - h, tw = (ow - 1) * sw + kw - w;
    pt = th > 0 ? th / 2 : 0;
    pl = tw > 0 ? tw / 2 : 0;
  } else {
    oh = (h + 2 - effh + sh) / sh;
    ow = (w + 4 - kw + sw) / sw;
    pt = 2;
    pl = 1;
  }
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  int64_t nx = n * h * w * cin;
  float *xv = malloc(sizeof *xv * (size_t)nx);
  for (int64_t i = 0; i < nx; i++) xv[i] = cval(i, 3);
  eng_tensor x = tensor(4, (int64_t[]){n, h, w, cin}, xv), y = {0};
  ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
  ck_assert_int_eq(y.shape.dim[1], oh);
  ck_assert_int_eq(y.shape.dim[2], ow);
  const float *yv = eng_tensor_data(&y);
  for (int64_t bi = 0; bi < n; bi++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++)
        for (int64_t o = 0; o < cout; o++) {
          double want = 0;
          for (int64_t u = 0; u < kh; u++)
            for (int64_t v = 0; v < kw; v++) {
              int64_t ih = i * sh - pt + u * dh, iw = j * sw - pl + v;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              for (int64_t k = 0; k < cin; k++)
                want += (double)xv[((bi * h + ih) * w + iw) * cin + k] *
                        f[((u * kw + v) * cin + k) * cout + o];
            }
          if (bn) want *= sc[o];
          want += b[o];
          want = want > 0 ? want : 0;
          float got = yv[((bi * oh + i) * ow + j) * cout + o];
          ck_assert_msg(fabs(got - want) <= 1e-5 * (1 + fabs(want)),
                        "n%lld %lldx%lldx%lld -> %lld, k%lldx%lld s%lld,%lld d%lld pad%d: "
                        "y[%lld,%lld,%lld,%lld] = %g, want %g",
                        (long long)n, (long long)h, (long long)w, (long long)cin,
                        (long long)cout, (long long)kh, (long long)kw, (long long)sh,
                        (long long)sw, (long long)dh, pad, (long long)bi, (long long)i,
                        (long long)j, (long long)o, got, want);
        }
  eng_tensor_release(&y);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  free(xv);
  free(f);
  free(b);
  free(sc);
}

static void conv_case(int64_t n, int64_t h, int64_t w, int64_t cin, int64_t cout, int64_t kh,
                      int64_t kw, int64_t sh, int64_t sw, int64_t dh, int pad) {
  conv_case_bn(n, h, w, cin, cout, kh, kw, sh, sw, dh, pad, (cin + cout + (int64_t)pad) % 2);
}

START_TEST(conv_in_place_matches_naive) {
  const int64_t cins[] = {1, 3, 5, 16}, couts[] = {1, 8, 13, 24, 40, 70};
  for (size_t i = 0; i < sizeof cins / sizeof *cins; i++)
    for (size_t o = 0; o < sizeof couts / sizeof *couts; o++)
      for (int pad = 0; pad < 3; pad++) {
        int64_t s = (i + o + (size_t)pad) % 2 + 1, n = o % 2 + 1;
        conv_case(n, 9, 11, cins[i], couts[o], 3, 3, s, s, 1, pad);
      }
  conv_case(1, 28, 28, 1, 8, 3, 3, 1, 1, 1, 1); /* the zoo CNN's first layer */
  conv_case(2, 7, 6, 3, 16, 3, 2, 2, 1, 2, 1);  /* dilated rows, odd window */
  conv_case(1, 5, 5, 4, 9, 1, 1, 2, 2, 1, 0);   /* strided 1x1 */
  conv_case(1, 4, 4, 2, 3, 5, 5, 1, 1, 1, 1);   /* window larger than the image */
  conv_case(1, 30, 30, 8, 12, 1, 1, 1, 1, 1, 2); /* 1x1 with explicit padding */
}
END_TEST


static void int_const(eng_graph *g, const char *name, int n, const int32_t *v) {
  int id = td_opcase_vnode(g, name, "Const", 1, NULL);
  eng_attr *a = eng_graph_add_attr(g, id, "value");
  a->kind = ENG_ATTR_TENSOR;
  int64_t d = n;
  eng_shape s = n ? eng_shape_make(1, &d) : eng_shape_scalar();
  ck_assert_int_eq(eng_tensor_alloc(&a->tensor, ENG_DT_INT32, &s, NULL), TD_OK);
  memcpy(eng_tensor_data(&a->tensor), v, sizeof *v * (size_t)(n ? n : 1));
}

/* x [2,3,4] -> BatchMatMulV2 with a constant [4,6] -> Reshape (constant
 * shape) -> AddV2 bias -> Relu. With the bias laid out on the reshaped
 * trailing dims the add and the ReLU fuse into the product (the Reshape
 * stays a step); otherwise nothing after the Reshape fuses. Same numbers
 * either way, as a double loop computes them. */
static void dense_reshape_case(int rank, const int32_t *shape, int brank, const int64_t *bdims,
                               int want_fused) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  float w[24], b[18], xv[24];
  for (int i = 0; i < 24; i++) w[i] = cval(i, 4), xv[i] = cval(i, 5);
  int64_t nb = 1;
  for (int i = 0; i < brank; i++) nb *= bdims[i];
  for (int i = 0; i < nb; i++) b[i] = cval(i, 6);
  konst(g, "W", 2, (int64_t[]){4, 6}, w);
  konst(g, "b", brank, bdims, b);
  int_const(g, "shape", rank, shape);
  td_opcase_vnode(g, "mm", "BatchMatMulV2", 1, "x", "W", NULL);
  td_opcase_vnode(g, "r", "Reshape", 1, "mm", "shape", NULL);
  td_opcase_vnode(g, "add", "AddV2", 1, "r", "b", NULL);
  td_opcase_vnode(g, "y", "Relu", 1, "add", NULL);
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  ck_assert_int_eq(eng_plan_get_info(p).fused_ops, want_fused);
  eng_tensor x = tensor(3, (int64_t[]){2, 3, 4}, xv), y = {0};
  for (int run = 0; run < 2; run++) { /* the second run on recycled buffers */
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(y.shape.rank, rank);
    for (int i = 0; i < rank; i++) ck_assert_int_eq(y.shape.dim[i], shape[i]);
    const float *yv = eng_tensor_data(&y);
    for (int r = 0; r < 6; r++)
      for (int j = 0; j < 6; j++) {
        double want = 0;
        for (int k = 0; k < 4; k++) want += (double)xv[r * 4 + k] * w[k * 6 + j];
        /* flat element r*6+j of y; the bias broadcasts over y's shape */
        int64_t flat = r * 6 + j, bi = 0, stride = 1, rem = flat;
        for (int d = rank - 1, e = brank - 1; d >= 0; d--, e--) {
          int64_t idx = rem % shape[d];
          rem /= shape[d];
          if (e >= 0 && bdims[e] != 1) bi += idx * stride;
          if (e >= 0) stride *= bdims[e];
        }
        want += b[bi];
        want = want > 0 ? want : 0;
        ck_assert_msg(fabs(yv[flat] - want) <= 1e-5 * (1 + fabs(want)), "y[%lld] = %g, want %g",
                      (long long)flat, yv[flat], want);
      }
    eng_tensor_release(&y);
  }
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}

START_TEST(dense_reshape_bias_fuses) {
  /* Keras's MultiHeadAttention projections: [2,3,6] -> [2,3,2,3] + bias [2,3]. */
  dense_reshape_case(4, (int32_t[]){2, 3, 2, 3}, 2, (int64_t[]){2, 3}, 2);
  /* Keras's Dense on 3-D input: [6,6] viewed as [2,3,6] + bias [6]. */
  dense_reshape_case(3, (int32_t[]){2, 3, 6}, 1, (int64_t[]){6}, 2);
  /* A bias across the rows, not the channels: [2,9,2] + [9,2] stays unfused. */
  dense_reshape_case(3, (int32_t[]){2, 9, 2}, 2, (int64_t[]){9, 2}, 0);
  /* Leading ones on the bias are fine: [2,3,3,2] + [1,1,3,2]. */
  dense_reshape_case(4, (int32_t[]){2, 3, 3, 2}, 4, (int64_t[]){1, 1, 3, 2}, 2);
  /* Right count, wrong layout (broadcast along a channel dim): [3,1,2]. */
  dense_reshape_case(4, (int32_t[]){2, 3, 3, 2}, 3, (int64_t[]){3, 1, 2}, 0);
}
END_TEST

/* Einsum of two fed operands against a loop over every label assignment.
 * dims: size of each label 'a'..'z' used. */
static void einsum_case(const char *eq, const int64_t *size) {
  char l0[8] = {0}, l1[8] = {0}, lo[8] = {0};
  int n0 = 0, n1 = 0, no = 0, part = 0;
  for (const char *q = eq; *q; q++) {
    if (*q == ',') part = 1;
    else if (*q == '-') part = 2, q++;
    else if (part == 0) l0[n0++] = *q;
    else if (part == 1) l1[n1++] = *q;
    else lo[no++] = *q;
  }
  int64_t d0[8], d1[8], dout[8], c0 = 1, c1 = 1, co = 1;
  for (int i = 0; i < n0; i++) c0 *= d0[i] = size[l0[i] - 'a'];
  for (int i = 0; i < n1; i++) c1 *= d1[i] = size[l1[i] - 'a'];
  for (int i = 0; i < no; i++) co *= dout[i] = size[lo[i] - 'a'];
  float *x0 = malloc(sizeof *x0 * (size_t)c0), *x1 = malloc(sizeof *x1 * (size_t)c1);
  for (int64_t i = 0; i < c0; i++) x0[i] = cval(i, 7);
  for (int64_t i = 0; i < c1; i++) x1[i] = cval(i, 8);
  eng_graph *g = eng_graph_create();
  placeholder(g, "a");
  placeholder(g, "b");
  int e = td_opcase_vnode(g, "e", "Einsum", 1, "a", "b", NULL);
  eng_attr *at = eng_graph_add_attr(g, e, "equation");
  at->kind = ENG_ATTR_S;
  at->s.data = strdup(eq);
  at->s.len = strlen(eq);
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"a:0", "b:0"}, *out[] = {"e:0"};
  eng_plan *p;
  ck_assert_int_eq(eng_plan_create(m, 2, in, 1, out, 0, NULL, &p, &err), TD_OK);
  eng_tensor x[2] = {tensor(n0, d0, x0), tensor(n1, d1, x1)}, y = {0};
  ck_assert_msg(eng_plan_run(p, x, &y, &err) == TD_OK, "%s: %s", eq, err.msg);
  ck_assert_int_eq(eng_tensor_numel(&y), co);
  const float *yv = eng_tensor_data(&y);
  /* Labels summed over: those of the inputs not in the output. */
  char all[16];
  int na = 0;
  for (int i = 0; i < n0 + n1; i++) {
    char l = i < n0 ? l0[i] : l1[i - n0];
    if (!memchr(all, l, (size_t)na)) all[na++] = l;
  }
  for (int64_t oi = 0; oi < co; oi++) {
    int64_t val[26] = {0}, r = oi;
    for (int i = no - 1; i >= 0; i--) val[lo[i] - 'a'] = r % dout[i], r /= dout[i];
    char sum[16];
    int ns = 0;
    int64_t cnt = 1;
    for (int i = 0; i < na; i++)
      if (!memchr(lo, all[i], (size_t)no)) cnt *= size[(sum[ns++] = all[i]) - 'a'];
    double want = 0;
    for (int64_t si = 0; si < cnt; si++) {
      int64_t q = si;
      for (int i = ns - 1; i >= 0; i--) val[sum[i] - 'a'] = q % size[sum[i] - 'a'], q /= size[sum[i] - 'a'];
      int64_t f0 = 0, f1 = 0;
      for (int i = 0; i < n0; i++) f0 = f0 * d0[i] + val[l0[i] - 'a'];
      for (int i = 0; i < n1; i++) f1 = f1 * d1[i] + val[l1[i] - 'a'];
      want += (double)x0[f0] * x1[f1];
    }
    ck_assert_msg(fabs(yv[oi] - want) <= 1e-5 * (1 + fabs(want)), "%s: y[%lld] = %g, want %g",
                  eq, (long long)oi, yv[oi], want);
  }
  eng_tensor_release(&y);
  eng_tensor_release(&x[0]);
  eng_tensor_release(&x[1]);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  free(x0);
  free(x1);
}

START_TEST(einsum_matches_naive) {
  /* sizes of labels a..z; attention's labels in capitals map to lower case */
  int64_t size[26];
  for (int i = 0; i < 26; i++) size[i] = 2 + (i * 5) % 7;
  const char *eqs[] = {
      "btnh,bsnh->bnts", /* attention scores, in place */
      "bnts,bsnh->btnh", /* attention context, in place */
      "ij,jk->ik",       "ij,kj->ik",  "ji,jk->ik", "ji,kj->ik", /* every transpose */
      "bij,bjk->bik",    "abc,cd->abd", "abc,cde->abde",
      "bij,bkj->bki",    /* output with B's free label first: the general path */
      "bij,jk->bki",     /* the same without a batch label */
  };
  for (size_t i = 0; i < sizeof eqs / sizeof *eqs; i++) einsum_case(eqs[i], size);
  size['s' - 'a'] = 1; /* a size-1 label */
  einsum_case("btnh,bsnh->bnts", size);
}
END_TEST

/* Pad (a Const amount on H and W) -> DepthwiseConv2dNative VALID -> Mul by
 * a per-channel constant: the Pad folded into the convolution's window when
 * it has no other reader (and the same numbers when it has one and is not
 * folded), the Mul into the filter; against a double loop over the
 * zero-padded input. */
static void pad_dw_case(int stride, bool second_reader) {
  const int64_t h = 7, w = 6, c = 5, pt = 0, pb = 1, pl = 2, pr = 1;
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  float f[45], xv[210];
  for (int i = 0; i < 45; i++) f[i] = cval(i, 9);
  for (int i = 0; i < 210; i++) xv[i] = cval(i, 10);
  konst(g, "W", 4, (int64_t[]){3, 3, c, 1}, f);
  int32_t pv[8] = {0, 0, (int32_t)pt, (int32_t)pb, (int32_t)pl, (int32_t)pr, 0, 0};
  pads_const(g, "pads", pv);
  td_opcase_vnode(g, "p", "Pad", 1, "x", "pads", NULL);
  int d = td_opcase_vnode(g, "dw", "DepthwiseConv2dNative", 1, "p", "W", NULL);
  window(g, d, stride, stride, "VALID");
  /* A batch-norm scale after the convolution, which moves into the filter. */
  float sc[5] = {0.5f, -2, 1.25f, 3, -0.75f};
  konst(g, "s", 1, (int64_t[]){c}, sc);
  td_opcase_vnode(g, "bn", "Mul", 1, "dw", "s", NULL);
  td_opcase_vnode(g, "y", "Relu", 1, "bn", NULL);
  if (second_reader) td_opcase_vnode(g, "z", "Relu", 1, "p", NULL);
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  const char *in[] = {"x:0"}, *out[] = {"y:0", "z:0"};
  eng_plan *p;
  ck_assert_int_eq(eng_plan_create(m, 1, in, second_reader ? 2 : 1, out, 0, NULL, &p, &err),
                   TD_OK);
  eng_tensor x = tensor(4, (int64_t[]){1, h, w, c}, xv), y[2] = {{0}};
  ck_assert_msg(eng_plan_run(p, &x, y, &err) == TD_OK, "%s", err.msg);
  int64_t hp = h + pt + pb, wp = w + pl + pr, oh = (hp - 3 + stride) / stride,
          ow = (wp - 3 + stride) / stride;
  ck_assert_int_eq(y[0].shape.dim[1], oh);
  ck_assert_int_eq(y[0].shape.dim[2], ow);
  const float *yv = eng_tensor_data(&y[0]);
  for (int64_t i = 0; i < oh; i++)
    for (int64_t j = 0; j < ow; j++)
      for (int64_t k = 0; k < c; k++) {
        double want = 0;
        for (int u = 0; u < 3; u++)
          for (int v = 0; v < 3; v++) {
            int64_t ih = i * stride + u - pt, iw = j * stride + v - pl;
            if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
            want += (double)xv[(ih * w + iw) * c + k] * f[(u * 3 + v) * c + k];
          }
        want *= sc[k];
        want = want > 0 ? want : 0;
        float got = yv[(i * ow + j) * c + k];
        ck_assert_msg(fabs(got - want) <= 1e-5 * (1 + fabs(want)),
                      "stride %d reader %d: y[%lld,%lld,%lld] = %g, want %g", stride,
                      second_reader, (long long)i, (long long)j, (long long)k, got, want);
      }
  if (second_reader) { /* the padded tensor itself, unchanged */
    ck_assert_int_eq(y[1].shape.dim[1], hp);
    ck_assert_int_eq(y[1].shape.dim[2], wp);
    ck_assert_float_eq(((const float *)eng_tensor_data(&y[1]))[0], 0);
  }
  for (int i = 0; i < 2; i++) eng_tensor_release(&y[i]);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}

START_TEST(pad_folds_into_depthwise) {
  pad_dw_case(2, false);
  pad_dw_case(1, false);
  pad_dw_case(2, true);
}
END_TEST

/* MaxPool / AvgPool against a loop over each window's valid cells (SAME
 * averages over those only), with channel counts that fill whole vectors,
 * leave a tail, or are smaller than one. */
static void pool_case(const char *op, int64_t n, int64_t h, int64_t w, int64_t c, int64_t k,
                      int64_t st, bool same) {
  bool is_max = !strcmp(op, "MaxPool");
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  int id = td_opcase_vnode(g, "y", op, 1, "x", NULL);
  list_attr(g, id, "ksize", 4, (int64_t[]){1, k, k, 1});
  window(g, id, st, st, same ? "SAME" : "VALID");
  int64_t oh = same ? (h + st - 1) / st : (h - k + st) / st;
  int64_t ow = same ? (w + st - 1) / st : (w - k + st) / st;
  int64_t th = (oh - 1) * st + k - h, tw = (ow - 1) * st + k - w;
  int64_t pt = same && th > 0 ? th / 2 : 0, pl = same && tw > 0 ? tw / 2 : 0;
  int64_t nx = n * h * w * c;
  float *xv = malloc(sizeof *xv * (size_t)nx);
  for (int64_t i = 0; i < nx; i++) xv[i] = cval(i, 11);
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  eng_tensor x = tensor(4, (int64_t[]){n, h, w, c}, xv), y = {0};
  ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
  const float *yv = eng_tensor_data(&y);
  for (int64_t b = 0; b < n; b++)
    for (int64_t i = 0; i < oh; i++)
      for (int64_t j = 0; j < ow; j++)
        for (int64_t ch = 0; ch < c; ch++) {
          double acc = is_max ? -INFINITY : 0;
          int cnt = 0;
          for (int64_t u = 0; u < k; u++)
            for (int64_t v = 0; v < k; v++) {
              int64_t ih = i * st - pt + u, iw = j * st - pl + v;
              if (ih < 0 || ih >= h || iw < 0 || iw >= w) continue;
              double e = xv[((b * h + ih) * w + iw) * c + ch];
              acc = is_max ? (e > acc ? e : acc) : acc + e;
              cnt++;
            }
          if (!is_max) acc /= cnt;
          float got = yv[((b * oh + i) * ow + j) * c + ch];
          ck_assert_msg(fabs(got - acc) <= 1e-6 * (1 + fabs(acc)),
                        "%s %lldx%lldx%lld k%lld s%lld %s: y[%lld,%lld,%lld,%lld] = %g, want %g",
                        op, (long long)h, (long long)w, (long long)c, (long long)k, (long long)st,
                        same ? "SAME" : "VALID", (long long)b, (long long)i, (long long)j,
                        (long long)ch, got, acc);
        }
  eng_tensor_release(&y);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  free(xv);
}

START_TEST(pools_match_naive) {
  const int64_t cs[] = {3, 8, 11, 16};
  for (int op = 0; op < 2; op++)
    for (size_t i = 0; i < sizeof cs / sizeof *cs; i++)
      for (int same = 0; same < 2; same++) {
        pool_case(op ? "AvgPool" : "MaxPool", 1 + (int64_t)(i % 2), 7, 9, cs[i], 3, 2, same);
        pool_case(op ? "AvgPool" : "MaxPool", 1, 6, 5, cs[i], 2, 1, same);
      }
}
END_TEST

/* Keras's Flatten of value v, doubled: y = Reshape(v, Pack(StridedSlice(
 * Shape(v), 0, 1), -1)) * 2, its shape arithmetic computed at run time. */
static void flatten_twice(eng_graph *g, const char *v) {
  td_opcase_vnode(g, "shape", "Shape", 1, v, NULL);
  int_const(g, "b", 1, (int32_t[]){0});
  int_const(g, "e", 1, (int32_t[]){1});
  int_const(g, "st", 1, (int32_t[]){1});
  int_const(g, "m1", 0, (int32_t[]){-1});
  td_opcase_node(g, "n", "StridedSlice", "shrink_axis_mask=i:1", 4,
                 (const char *[]){"shape", "b", "e", "st"});
  td_opcase_vnode(g, "dims", "Pack", 1, "n", "m1", NULL);
  td_opcase_vnode(g, "flat", "Reshape", 1, v, "dims", NULL);
  konst(g, "two", 0, NULL, (float[]){2});
  td_opcase_vnode(g, "y", "Mul", 1, "flat", "two", NULL);
}

START_TEST(shape_arithmetic_folds_per_input_shape) {
  /* Keras's Flatten: y = Reshape(x, Pack(StridedSlice(Shape(x), 0, 1), -1)) * 2 */
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  flatten_twice(g, "x");
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  ck_assert_int_eq(eng_plan_get_info(p).steps, 5); /* Shape, StridedSlice, Pack, Reshape, Mul */
  for (int round = 0; round < 3; round++) {
    int64_t d[3] = {2, round == 1 ? 3 : 1, round == 1 ? 1 : 3};
    eng_tensor x = tensor(3, d, (float[]){1, 2, 3, 4, 5, 6}), y = {0};
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(y.shape.rank, 2);
    ck_assert_int_eq(y.shape.dim[0], 2);
    ck_assert_int_eq(y.shape.dim[1], 3);
    ck_assert_float_eq(((float *)eng_tensor_data(&y))[5], 12);
    eng_tensor_release(&y);
    eng_tensor_release(&x);
  }
  eng_plan_info info = eng_plan_get_info(p);
  ck_assert_int_eq(info.shape_plans, 2);     /* [2,1,3] and [2,3,1] */
  ck_assert_int_eq(info.shape_plan_steps, 2); /* Reshape and Mul are left */
  /* A feed the plan rejects is reported as before, not specialised. */
  eng_tensor bad = tensor(1, (int64_t[]){1}, (float[]){1}), y = {0};
  bad.dtype = ENG_DT_INT32;
  ck_assert_int_eq(eng_plan_run(p, &bad, &y, &err), TD_INVALID_ARGUMENT);
  bad.dtype = ENG_DT_FLOAT;
  eng_tensor_release(&bad);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* The first run of a new input shape runs the general plan once, keeping
 * the values its shape plan folds, and builds that plan from them: the
 * layer before a Shape of an activation runs once per request, not once
 * more to compute the shape (the profile counts the MatMul's runs), and
 * every run answers the same. */
START_TEST(first_run_of_a_shape_builds_its_plan_from_that_run) {
  /* y = Reshape(h, Pack(Shape(h)[0], -1)) * 2 with h = x W. */
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  konst(g, "W", 2, (int64_t[]){2, 3}, (float[]){1, 2, 3, -1, 0, 4});
  td_opcase_vnode(g, "h", "MatMul", 1, "x", "W", NULL);
  flatten_twice(g, "h");
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  ck_assert_int_eq(eng_profile_begin(p, &err), TD_OK);
  const int batches[] = {2, 2, 3, 1, 1};
  for (int round = 0; round < 5; round++) {
    int64_t b = batches[round];
    float xv[6] = {1, 2, -3, 0.5f, 4, -1};
    eng_tensor x = tensor(2, (int64_t[]){b, 2}, xv), y = {0};
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(y.shape.rank, 2);
    ck_assert_int_eq(y.shape.dim[0], b);
    ck_assert_int_eq(y.shape.dim[1], 3);
    const float *yv = eng_tensor_data(&y);
    const float w[6] = {1, 2, 3, -1, 0, 4};
    for (int64_t r = 0; r < b; r++)
      for (int c = 0; c < 3; c++)
        ck_assert_float_eq(yv[r * 3 + c], 2 * (xv[r * 2] * w[c] + xv[r * 2 + 1] * w[3 + c]));
    eng_tensor_release(&y);
    eng_tensor_release(&x);
  }
  eng_profile *pf = eng_profile_end();
  ck_assert_ptr_nonnull(pf);
  ck_assert_int_eq(pf->node[eng_graph_find(pf->g, "h", 1)].calls, 5);
  eng_profile_free(pf);
  eng_plan_info info = eng_plan_get_info(p);
  ck_assert_int_eq(info.shape_plans, 3);      /* [2, 2], [3, 2], [1, 2] */
  ck_assert_int_eq(info.shape_plan_steps, 3); /* MatMul, Reshape, Mul */
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* Every batch size a server sees gets its shape plan while they hold
 * little (Keras's Flatten folds a shape vector): 40 sizes, the first 32
 * cached, and every run answers the same. */
START_TEST(each_small_shape_plan_is_cached_up_to_the_cap) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  flatten_twice(g, "x");
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  float xv[40 * 3];
  for (int i = 0; i < 40 * 3; i++) xv[i] = (float)i - 7;
  for (int pass = 0; pass < 2; pass++)
    for (int64_t b = 1; b <= 40; b++) {
      eng_tensor x = tensor(3, (int64_t[]){b, 3, 1}, xv), y = {0};
      ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
      ck_assert_int_eq(y.shape.dim[0], b);
      ck_assert_int_eq(y.shape.dim[1], 3);
      for (int64_t i = 0; i < b * 3; i++)
        ck_assert_float_eq(((float *)eng_tensor_data(&y))[i], 2 * xv[i]);
      eng_tensor_release(&y);
      eng_tensor_release(&x);
      int64_t cached = pass || b >= 32 ? 32 : b;
      ck_assert_int_eq(eng_plan_get_info(p).shape_plans, cached);
    }
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* A plan in which nothing follows from the input shapes (no Shape op)
 * looks for foldable steps once, not once per new shape. */
START_TEST(a_plan_with_nothing_to_fold_looks_once) {
  eng_graph *g = dense_graph();
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  ck_assert(p->can_specialise);
  for (int64_t b = 1; b <= 3; b++) {
    eng_tensor x = tensor(2, (int64_t[]){b, 2}, (float[]){1, 2, 3, 4, 5, 6}), y = {0};
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    eng_tensor_release(&y);
    eng_tensor_release(&x);
    ck_assert(p->spec_none);
    ck_assert_int_eq(p->n_specs, 0);
  }
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* Past the first four shapes, plans are cached while what they fold stays
 * within the budget (16 MiB): a Fill of the input's shape folds an
 * activation-sized constant, 1 MiB per example. Batches 1 to 4 (10 MiB)
 * are cached whatever they hold, 5 and 6 (11 MiB) within the budget; 7
 * would take it to 18 MiB, is refused, and closes the cache: 8 gets none,
 * while the cached shapes keep theirs. Every run answers x + 1. */
START_TEST(shape_plans_past_the_fourth_stay_within_a_budget) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  td_opcase_vnode(g, "shape", "Shape", 1, "x", NULL);
  konst(g, "one", 0, NULL, (float[]){1});
  td_opcase_vnode(g, "ones", "Fill", 1, "shape", "one", NULL);
  td_opcase_vnode(g, "y", "AddV2", 1, "x", "ones", NULL);
  eng_model *m;
  td_err err;
  eng_plan *p = plan_of(g, "y:0", &m);
  const int64_t row = 1 << 18; /* 1 MiB of floats */
  const int64_t batches[] = {1, 2, 3, 4, 5, 6, 7, 8, 1, 6};
  const int plans[] = {1, 2, 3, 4, 5, 6, 6, 6, 6, 6};
  float *xv = malloc(sizeof *xv * (size_t)(8 * row));
  ck_assert_ptr_nonnull(xv);
  for (int64_t i = 0; i < 8 * row; i++) xv[i] = (float)(i % 13) - 6;
  for (int r = 0; r < 10; r++) {
    int64_t b = batches[r];
    eng_tensor x = tensor(2, (int64_t[]){b, row}, xv), y = {0};
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(eng_tensor_numel(&y), b * row);
    const float *yv = eng_tensor_data(&y);
    for (int64_t i = 0; i < b * row; i += 4099) ck_assert_float_eq(yv[i], xv[i] + 1);
    ck_assert_float_eq(yv[b * row - 1], xv[b * row - 1] + 1);
    eng_tensor_release(&y);
    eng_tensor_release(&x);
    ck_assert_int_eq(eng_plan_get_info(p).shape_plans, plans[r]);
  }
  free(xv);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* A freshly loaded version builds its batch-1 shape plan ahead of the first
 * request (eng_plan_prepare), and a shape plan uses the weights its model
 * packed once instead of packing them again. The dense graph's output goes
 * through Keras's Flatten (out = Reshape(y, Pack(Shape(x)[0], -1))), which
 * gives the shape plan something to fold. */
START_TEST(prepare_builds_the_batch1_plan_sharing_packed_weights) {
  for (int declared = 0; declared < 2; declared++) {
    eng_graph *g = dense_graph();
    td_opcase_vnode(g, "xs", "Shape", 1, "x", NULL);
    int_const(g, "i0", 1, (int32_t[]){0});
    int_const(g, "i1", 1, (int32_t[]){1});
    int_const(g, "minus1", 0, (int32_t[]){-1});
    td_opcase_node(g, "rows", "StridedSlice", "shrink_axis_mask=i:1", 4,
                   (const char *[]){"xs", "i0", "i1", "i1"});
    td_opcase_vnode(g, "dims", "Pack", 1, "rows", "minus1", NULL);
    td_opcase_vnode(g, "out", "Reshape", 1, "y", "dims", NULL);
    if (declared) {
      eng_attr *a = eng_graph_add_attr(g, 0, "shape"); /* x: [-1, 2] */
      a->kind = ENG_ATTR_SHAPE;
      a->shape = eng_shape_make(2, (int64_t[]){-1, 2});
    }
    eng_model *m;
    td_err err;
    eng_plan *p = plan_of(g, "out:0", &m);
    ck_assert_int_eq(eng_plan_get_info(p).shape_plans, 0);
    eng_plan_prepare(p, 1);
    /* Without a declared shape there is nothing to build ahead. */
    ck_assert_int_eq(eng_plan_get_info(p).shape_plans, declared ? 1 : 0);
    eng_tensor x = tensor(2, (int64_t[]){1, 2}, (float[]){2, 1}), y = {0};
    ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
    const float want[] = {-1, -1, 1}; /* relu([2,1] W + b) * 2 - 1 */
    for (int i = 0; i < 3; i++) ck_assert_float_eq(((float *)eng_tensor_data(&y))[i], want[i]);
    eng_tensor_release(&y);
    ck_assert_int_eq(eng_plan_get_info(p).shape_plans, 1); /* the run found it built */
    const eng_plan *sp = eng_plan_specialised(p, &x);
    ck_assert_ptr_nonnull(sp);
    int shared = 0;
    for (int a = 0; sp->packed && a < sp->n_steps; a++) {
      if (!sp->packed[a]) continue;
      bool found = false;
      for (int b = 0; p->packed && b < p->n_steps; b++) found |= p->packed[b] == sp->packed[a];
      ck_assert_msg(found, "step %d packed its weight again", a);
      shared++;
    }
    /* eng_gemm packs on machines with AVX2 or AVX-512; elsewhere BLAS runs. */
    int general = 0;
    for (int b = 0; p->packed && b < p->n_steps; b++) general += p->packed[b] != NULL;
    ck_assert_int_eq(shared, general);
    eng_tensor_release(&x);
    eng_plan_destroy(p);
    eng_model_destroy(m);
  }
}
END_TEST

/* A shape plan built after the model freed a weight's original (kept only
 * packed): the Shape of the product is computed by running the product,
 * which then reads the general plan's packed weight. */
START_TEST(shape_plan_after_release_reads_the_packed_weight) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  int vh = float_var(g, "v");
  td_opcase_vnode(g, "W", "ReadVariableOp", 1, "v", NULL);
  konst(g, "s", 0, NULL, (float[]){2});
  td_opcase_vnode(g, "mm", "MatMul", 1, "x", "W", NULL);
  td_opcase_vnode(g, "sh", "Shape", 1, "mm", NULL);
  td_opcase_vnode(g, "r", "Reshape", 1, "mm", "sh", NULL);
  td_opcase_vnode(g, "y", "Mul", 1, "r", "s", NULL);
  eng_model *m;
  td_err err;
  ck_assert_int_eq(eng_model_create(g, NULL, NULL, &m, &err), TD_OK);
  eng_tensor w = tensor(2, (int64_t[]){2, 3}, (float[]){1, 2, 3, -4, 5, -6});
  ck_assert_int_eq(eng_model_slot_write(m, eng_model_node_slot(m, vh), &w, &err), TD_OK);
  eng_tensor_release(&w);
  const char *in[] = {"x:0"}, *out[] = {"y:0"};
  eng_plan *p;
  ck_assert_int_eq(eng_plan_create(m, 1, in, 1, out, 0, NULL, &p, &err), TD_OK);
  size_t freed = eng_model_release_packed_sources(m, 1, &p);
  eng_tensor x = tensor(2, (int64_t[]){1, 2}, (float[]){1, 2}), y = {0};
  ck_assert_msg(eng_plan_run(p, &x, &y, &err) == TD_OK, "%s", err.msg);
  const float want[] = {-14, 24, -18}; /* ([1,2] W) * 2 */
  for (int i = 0; i < 3; i++) ck_assert_float_eq(((float *)eng_tensor_data(&y))[i], want[i]);
  /* Packed (AVX2 or AVX-512): freed, and the shape plan was still built. */
  ck_assert_int_eq(freed > 0, eng_isa_active() != ENG_ISA_GENERIC);
  if (freed) {
    eng_plan_info info = eng_plan_get_info(p);
    ck_assert_int_eq(info.shape_plans, 1);
    ck_assert_int_lt(info.shape_plan_steps, info.steps);
  }
  eng_tensor_release(&y);
  eng_tensor_release(&x);
  eng_plan_destroy(p);
  eng_model_destroy(m);
}
END_TEST

/* Keras's LayerNormalization as its graph computes it over x [n, t, c]
 * (eng_merge_layer_norms), gamma and beta shaped [c] or, as
 * Keras reshapes them, [1, 1, c]; the axis -1 or 2; with or without the
 * StopGradient. */
static eng_graph *ln_graph(int64_t c, int axis, bool stop, bool reshaped, const float *gamma,
                           const float *beta) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  int_const(g, "ax", 1, (int32_t[]){axis});
  int64_t gd[3] = {1, 1, c};
  konst(g, "gamma", reshaped ? 3 : 1, reshaped ? gd : &c, gamma);
  konst(g, "beta", reshaped ? 3 : 1, reshaped ? gd : &c, beta);
  konst(g, "eps", 0, NULL, (float[]){1e-3f});
  td_opcase_node(g, "mean", "Mean", "keep_dims=b:1", 2, (const char *[]){"x", "ax"});
  if (stop) td_opcase_vnode(g, "sg", "StopGradient", 1, "mean", NULL);
  td_opcase_vnode(g, "sqd", "SquaredDifference", 1, "x", stop ? "sg" : "mean", NULL);
  td_opcase_node(g, "var", "Mean", "keep_dims=b:1", 2, (const char *[]){"sqd", "ax"});
  td_opcase_vnode(g, "add", "AddV2", 1, "var", "eps", NULL);
  td_opcase_vnode(g, "rs", "Rsqrt", 1, "add", NULL);
  td_opcase_vnode(g, "mul", "Mul", 1, "rs", "gamma", NULL);
  td_opcase_vnode(g, "neg", "Neg", 1, "mean", NULL);
  td_opcase_vnode(g, "mul_1", "Mul", 1, "neg", "mul", NULL);
  td_opcase_vnode(g, "add_1", "AddV2", 1, "mul_1", "beta", NULL);
  td_opcase_vnode(g, "mul_2", "Mul", 1, "x", "mul", NULL);
  td_opcase_vnode(g, "y", "AddV2", 1, "mul_2", "add_1", NULL);
  return g;
}

static void layer_norm_case(int64_t n, int64_t tt, int64_t c, int axis, bool stop, bool reshaped) {
  float *gamma = malloc(sizeof *gamma * (size_t)c), *beta = malloc(sizeof *beta * (size_t)c);
  int64_t xd[3] = {n, tt, c}, total = n * tt * c;
  float *xv = malloc(sizeof *xv * (size_t)total), *got[2];
  for (int64_t j = 0; j < c; j++) {
    gamma[j] = cval(j, 3) + 1.5f;
    beta[j] = cval(j, 4);
  }
  for (int64_t i = 0; i < total; i++) xv[i] = cval(i, 5) * (float)(1 + i % 7) + 3.0f;
  eng_tensor x = tensor(3, xd, xv);
  for (int fused = 1; fused >= 0; fused--) {
    eng_model *m;
    td_err err;
    ck_assert_int_eq(
        eng_model_create(ln_graph(c, axis, stop, reshaped, gamma, beta), NULL, NULL, &m, &err),
        TD_OK);
    const char *in[] = {"x:0"}, *outs[] = {"y:0", "mul:0"};
    eng_plan *p;
    ck_assert_msg(eng_plan_create(m, 1, in, fused ? 1 : 2, outs, 0, NULL, &p, &err) == TD_OK, "%s",
                  err.msg);
    eng_plan_info info = eng_plan_get_info(p);
    eng_tensor out[2] = {0};
    ck_assert_msg(eng_plan_run(p, &x, out, &err) == TD_OK, "%s", err.msg);
    ck_assert_int_eq(eng_tensor_numel(&out[0]), total);
    got[fused] = malloc(sizeof *got[fused] * (size_t)total);
    memcpy(got[fused], eng_tensor_data(&out[0]), sizeof *got[fused] * (size_t)total);
    int ops = stop ? 11 : 10;
    /* Fused: the _LayerNorm step alone. Fetching the scale cuts it. */
    ck_assert_int_eq(info.steps, fused ? 1 : ops + 1);
    ck_assert_int_eq(info.fused_ops, fused ? ops : 0);
    for (int i = 0; i < 2; i++) eng_tensor_release(&out[i]);
    eng_plan_destroy(p);
    eng_model_destroy(m);
  }
  ck_assert_int_eq(memcmp(got[0], got[1], sizeof *got[0] * (size_t)total), 0);
  for (int64_t r = 0; r < n * tt; r++) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < c; j++) mean += xv[r * c + j];
    mean /= (double)c;
    for (int64_t j = 0; j < c; j++) var += (xv[r * c + j] - mean) * (xv[r * c + j] - mean);
    var /= (double)c;
    for (int64_t j = 0; j < c; j++) {
      double want = (xv[r * c + j] - mean) / sqrt(var + 1e-3) * gamma[j] + beta[j];
      ck_assert_msg(fabs(got[1][r * c + j] - want) <= 1e-4 * (fabs(want) > 1 ? fabs(want) : 1),
                    "row %lld col %lld: %g, want %g", (long long)r, (long long)j, got[1][r * c + j],
                    want);
    }
  }
  eng_tensor_release(&x);
  free(got[0]);
  free(got[1]);
  free(xv);
  free(gamma);
  free(beta);
}

START_TEST(layer_norm_fuses_with_the_same_bits) {
  layer_norm_case(2, 5, 37, -1, true, true);
  layer_norm_case(3, 7, 768, 2, true, false);
  layer_norm_case(1, 1, 16, -1, false, false);
  layer_norm_case(64, 33, 129, -1, true, true); /* above the pool's split size */
}
END_TEST

/* An inverted residual block's head as Keras exports it: x -> Conv2D 1x1
 * -> batch norm (Mul, AddV2) -> Relu6 -> [Pad ->] DepthwiseConv2dNative
 * (SAME at stride 1, or VALID at stride 2 after ZeroPadding2D's Pad) ->
 * batch norm -> Relu6 as y; "e" names the expansion's Relu6. */
static eng_graph *exp_dw_graph(int64_t cin, int64_t ce, int stride) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  declare_channels(g, "x", cin); /* not a grouped 1x1 */
  float *w = malloc(sizeof *w * (size_t)(cin * ce)), f[9 * 64], k[4][64];
  for (int64_t i = 0; i < cin * ce; i++) w[i] = cval(i, 11) * 0.4f;
  for (int i = 0; i < 9 * ce; i++) f[i] = cval(i, 12) * 0.3f;
  for (int j = 0; j < 4; j++)
    for (int64_t i = 0; i < ce; i++)
      k[j][i] = cval(i, 13 + j) * (j % 2 ? 0.2f : 0.5f) + (j % 2 ? 0 : 1);
  konst(g, "W", 4, (int64_t[]){1, 1, cin, ce}, w);
  konst(g, "F", 4, (int64_t[]){3, 3, ce, 1}, f);
  const char *kn[4] = {"s1", "t1", "s2", "t2"};
  for (int j = 0; j < 4; j++) konst(g, kn[j], 1, (int64_t[]){ce}, k[j]);
  int c = td_opcase_vnode(g, "conv", "Conv2D", 1, "x", "W", NULL);
  window(g, c, 1, 1, "VALID");
  td_opcase_vnode(g, "m1", "Mul", 1, "conv", "s1", NULL);
  td_opcase_vnode(g, "a1", "AddV2", 1, "m1", "t1", NULL);
  td_opcase_vnode(g, "e", "Relu6", 1, "a1", NULL);
  const char *dwin = "e";
  if (stride == 2) {
    pads_const(g, "pads", (const int32_t[]){0, 0, 0, 1, 0, 1, 0, 0});
    td_opcase_vnode(g, "p", "Pad", 1, "e", "pads", NULL);
    dwin = "p";
  }
  int d = td_opcase_vnode(g, "dw", "DepthwiseConv2dNative", 1, dwin, "F", NULL);
  window(g, d, stride, stride, stride == 2 ? "VALID" : "SAME");
  td_opcase_vnode(g, "m2", "Mul", 1, "dw", "s2", NULL);
  td_opcase_vnode(g, "a2", "AddV2", 1, "m2", "t2", NULL);
  td_opcase_vnode(g, "y", "Relu6", 1, "a2", NULL);
  free(w);
  return g;
}

/* Fused (y fetched alone: one _ExpandDepthwise step for the eleven or
 * twelve ops) against apart (the expansion's output fetched too, which
 * keeps it), bit for bit, on images from a few rows to many L2-sized
 * bands, at one and two threads. */
static void exp_dw_case(int64_t n, int64_t h, int64_t w, int64_t cin, int64_t ce, int stride) {
  int64_t total = n * h * w * cin;
  float *xv = malloc(sizeof *xv * (size_t)total), *got[2] = {NULL, NULL};
  for (int64_t i = 0; i < total; i++) xv[i] = cval(i, 17) * 0.9f;
  eng_tensor x = tensor(4, (int64_t[]){n, h, w, cin}, xv);
  int64_t ny = 0;
  for (int fused = 1; fused >= 0; fused--) {
    eng_model *m;
    td_err err;
    ck_assert_int_eq(eng_model_create(exp_dw_graph(cin, ce, stride), NULL, NULL, &m, &err), TD_OK);
    const char *in[] = {"x:0"}, *outs[] = {"y:0", "e:0"};
    eng_plan *p;
    ck_assert_msg(eng_plan_create(m, 1, in, fused ? 1 : 2, outs, 0, NULL, &p, &err) == TD_OK, "%s",
                  err.msg);
    eng_plan_info info = eng_plan_get_info(p);
    /* Fused where the weights pack (not on the generic kernels): besides
     * the 1x1 conv, its three ops, [the Pad,] the depthwise layer and its
     * two (its Mul went into the filter). */
    if (fused && eng_isa_active() != ENG_ISA_GENERIC) {
      ck_assert_int_eq(info.steps, 1);
      ck_assert_int_eq(info.fused_ops, stride == 2 ? 7 : 6);
    } else {
      ck_assert_int_gt(info.steps, 1);
    }
    eng_tensor out[2] = {0};
    ck_assert_msg(eng_plan_run(p, &x, out, &err) == TD_OK, "%s", err.msg);
    ny = eng_tensor_numel(&out[0]);
    ck_assert_int_eq(out[0].shape.dim[1], stride == 2 ? (h + 1 - 3) / 2 + 1 : h);
    got[fused] = malloc(sizeof *got[fused] * (size_t)ny);
    memcpy(got[fused], eng_tensor_data(&out[0]), sizeof *got[fused] * (size_t)ny);
    for (int i = 0; i < 2; i++) eng_tensor_release(&out[i]);
    eng_plan_destroy(p);
    eng_model_destroy(m);
  }
  for (int64_t i = 0; i < ny; i++)
    if (memcmp(&got[0][i], &got[1][i], sizeof(float)))
      ck_abort_msg("n%lld %lldx%lld s%d: y[%lld] fused %a, apart %a", (long long)n, (long long)h,
                   (long long)w, stride, (long long)i, got[1][i], got[0][i]);
  eng_tensor_release(&x);
  free(got[0]);
  free(got[1]);
  free(xv);
}

START_TEST(expansion_and_depthwise_fuse_with_the_same_bits) {
  int64_t tall = 3 * eng_isa_l2_bytes() / (20 * 48 * 4) + 3;
  for (int threads = 1; threads <= 2; threads++) {
    eng_pool_set_threads(threads);
    exp_dw_case(1, tall, 20, 8, 48, 1);
    exp_dw_case(2, tall, 20, 8, 48, 2);
    exp_dw_case(3, 5, 7, 6, 20, 1);
    exp_dw_case(1, 6, 9, 6, 20, 2);
  }
  eng_pool_set_threads(1);
}
END_TEST

/* Squeeze-and-excitation before a projection: x [n, h, w, c] -> Mean over
 * [1, 2] (kept) -> Sigmoid -> Mul(x, gate) -> 1x1 Conv2D to p channels ->
 * Mul, AddV2 (the batch norm) [-> AddV2 x, a residual, when p == c]. With
 * `full`, the Mul multiplies x by x instead (no per-channel gate: the fused
 * step then runs the Mul kernel into a temporary). */
static eng_graph *se_graph(int64_t c, int64_t p, bool residual, bool full) {
  eng_graph *g = eng_graph_create();
  placeholder(g, "x");
  declare_channels(g, "x", c);
  float *w = malloc(sizeof *w * (size_t)(c * p)), k[2][64];
  for (int64_t i = 0; i < c * p; i++) w[i] = cval(i, 21) * 0.4f;
  for (int j = 0; j < 2; j++)
    for (int64_t i = 0; i < p; i++) k[j][i] = cval(i, 22 + j) * (j ? 0.2f : 0.5f) + (j ? 0 : 1);
  konst(g, "W", 4, (int64_t[]){1, 1, c, p}, w);
  konst(g, "s", 1, (int64_t[]){p}, k[0]);
  konst(g, "t", 1, (int64_t[]){p}, k[1]);
  int_const(g, "ax", 2, (const int32_t[]){1, 2});
  td_opcase_node(g, "mean", "Mean", "keep_dims=b:1", 2, (const char *[]){"x", "ax"});
  td_opcase_vnode(g, "gate", "Sigmoid", 1, "mean", NULL);
  td_opcase_vnode(g, "sc", "Mul", 1, "x", full ? "x" : "gate", NULL);
  int cv = td_opcase_vnode(g, "conv", "Conv2D", 1, "sc", "W", NULL);
  window(g, cv, 1, 1, "SAME");
  td_opcase_vnode(g, "m", "Mul", 1, "conv", "s", NULL);
  td_opcase_vnode(g, residual ? "a" : "y", "AddV2", 1, "m", "t", NULL);
  if (residual) td_opcase_vnode(g, "y", "AddV2", 1, "a", "x", NULL);
  free(w);
  return g;
}

/* Fused (y fetched alone: the Mul and the Conv2D one _ScaledConv1x1 step)
 * against apart (the Mul's product fetched too, which keeps it), bit for
 * bit. */
static void se_case(int64_t n, int64_t h, int64_t w, int64_t c, int64_t p, bool residual,
                    bool full) {
  int64_t total = n * h * w * c;
  float *xv = malloc(sizeof *xv * (size_t)total), *got[2] = {NULL, NULL};
  for (int64_t i = 0; i < total; i++) xv[i] = cval(i, 19) * 0.9f;
  eng_tensor x = tensor(4, (int64_t[]){n, h, w, c}, xv);
  int64_t ny = 0;
  int steps[2] = {0}, fused_ops[2] = {0};
  for (int fused = 1; fused >= 0; fused--) {
    eng_model *m;
    td_err err;
    ck_assert_int_eq(eng_model_create(se_graph(c, p, residual, full), NULL, NULL, &m, &err), TD_OK);
    const char *in[] = {"x:0"}, *outs[] = {"y:0", "sc:0"};
    eng_plan *pl;
    ck_assert_msg(eng_plan_create(m, 1, in, fused ? 1 : 2, outs, 0, NULL, &pl, &err) == TD_OK, "%s",
                  err.msg);
    eng_plan_info info = eng_plan_get_info(pl);
    steps[fused] = info.steps;
    fused_ops[fused] = info.fused_ops;
    eng_tensor out[2] = {0};
    ck_assert_msg(eng_plan_run(pl, &x, out, &err) == TD_OK, "%s", err.msg);
    ny = eng_tensor_numel(&out[0]);
    ck_assert_int_eq(ny, n * h * w * p);
    got[fused] = malloc(sizeof *got[fused] * (size_t)ny);
    memcpy(got[fused], eng_tensor_data(&out[0]), sizeof *got[fused] * (size_t)ny);
    for (int i = 0; i < 2; i++) eng_tensor_release(&out[i]);
    eng_plan_destroy(pl);
    eng_model_destroy(m);
  }
  /* Where the weights pack (not on the generic kernels) the Conv2D's step
   * goes into the Mul's. */
  bool packs = eng_isa_active() != ENG_ISA_GENERIC;
  ck_assert_int_eq(steps[1], steps[0] - packs);
  ck_assert_int_eq(fused_ops[1], fused_ops[0] + packs);
  for (int64_t i = 0; i < ny; i++)
    if (memcmp(&got[0][i], &got[1][i], sizeof(float)))
      ck_abort_msg("n%lld %lldx%lld c%lld p%lld: y[%lld] fused %a, apart %a", (long long)n,
                   (long long)h, (long long)w, (long long)c, (long long)p, (long long)i, got[1][i],
                   got[0][i]);
  eng_tensor_release(&x);
  free(got[0]);
  free(got[1]);
  free(xv);
}

START_TEST(scale_and_projection_fuse_with_the_same_bits) {
  for (int threads = 1; threads <= 2; threads++) {
    eng_pool_set_threads(threads);
    se_case(1, 9, 7, 16, 24, false, false);
    se_case(3, 5, 6, 8, 8, true, false);      /* a residual added in the epilogue */
    se_case(2, 20, 21, 12, 40, false, false); /* several row blocks per image */
    se_case(2, 6, 5, 8, 12, false, true);     /* not a per-channel scale */
  }
  eng_pool_set_threads(1);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_compile");
  TCase *tc = tcase_create("compile");
  tcase_add_test(tc, dense_chain_fuses);
  tcase_add_test(tc, fetched_value_cuts_the_chain);
  tcase_add_test(tc, variable_reads_fold_after_restore);
  tcase_add_test(tc, conv_bias_relu6_fuses);
  tcase_add_test(tc, conv_in_place_matches_naive);
  tcase_add_test(tc, dense_reshape_bias_fuses);
  tcase_add_test(tc, einsum_matches_naive);
  tcase_add_test(tc, pad_folds_into_depthwise);
  tcase_add_test(tc, pools_match_naive);
  tcase_add_test(tc, shape_arithmetic_folds_per_input_shape);
  tcase_add_test(tc, first_run_of_a_shape_builds_its_plan_from_that_run);
  tcase_add_test(tc, each_small_shape_plan_is_cached_up_to_the_cap);
  tcase_add_test(tc, shape_plans_past_the_fourth_stay_within_a_budget);
  tcase_add_test(tc, a_plan_with_nothing_to_fold_looks_once);
  tcase_add_test(tc, prepare_builds_the_batch1_plan_sharing_packed_weights);
  tcase_add_test(tc, shape_plan_after_release_reads_the_packed_weight);
  tcase_add_test(tc, layer_norm_fuses_with_the_same_bits);
  tcase_add_test(tc, expansion_and_depthwise_fuse_with_the_same_bits);
  tcase_add_test(tc, scale_and_projection_fuse_with_the_same_bits);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
