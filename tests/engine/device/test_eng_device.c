/* eng_device and the GPU executor: backend consistency.
 *
 * Every op with a device lowering runs on each device under test and is
 * compared: TensorFlow's own cases (op_cases.inc) against TensorFlow's
 * numbers, and random inputs of odd sizes (batch 1, sizes that are not a
 * multiple of any vector or warp width, broadcasts, strides, dilations,
 * SAME/VALID/EXPLICIT padding, constant weights, fused epilogues) against
 * the CPU engine. Each case must really have run on the device (the
 * reference device counts its primitive calls).
 *
 * Devices: the reference device (eng_devref.c, host memory) always; the
 * CUDA backend when the plug-in built beside this tree (or the one named by
 * TENSORD_CUDA_PLUGIN) finds a GPU. On a
 * machine without one the CUDA part prints why and is skipped; with
 * TENSORD_REQUIRE_GPU=1 in the environment (the device check) a missing
 * GPU is a failure instead. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_device.h"
#include "eng_devref.h"
#include "eng_gpu.h"
#include "eng_op.h"
#include "td_opcase.h"
#include "td_testcheck.h"

#define PLUGIN TD_BUILD_DIR "/libtensord_cuda.so"

static bool select_mode(eng_device_mode mode, double fraction, char *why, size_t wl) {
  const char *plugin = getenv("TENSORD_CUDA_PLUGIN");
  eng_device_opts o = {.mode = mode, .memory_fraction = fraction, .plugin = plugin ? plugin : PLUGIN};
  char note[512];
  td_err err;
  td_err_clear(&err);
  if (eng_device_select(&o, note, sizeof note, &err)) {
    snprintf(why, wl, "%.500s", err.msg);
    return false;
  }
  if (mode != ENG_DEVICE_CPU && !eng_device_active()) {
    snprintf(why, wl, "%s", note);
    return false;
  }
  return true;
}

/* --- one-op models ----------------------------------------------------------- */

typedef struct one_op {
  eng_model *m;
  eng_plan *p;
  int n_fed;
  eng_tensor fed[5];
} one_op;

/* Builds `op` over inputs in[]: those marked konst become Const nodes
 * (weights, folded and cached on the device), the others Placeholders fed
 * at run time. */
static void build(one_op *b, const char *op, const char *attrs, int n_in, const eng_tensor *in,
                  const bool *konst, int n_out) {
  td_err err;
  td_err_clear(&err);
  eng_graph *g = eng_graph_create();
  const char *names[5];
  char buf[5][16];
  b->n_fed = 0;
  for (int i = 0; i < n_in; i++) {
    snprintf(buf[i], sizeof buf[i], "in%d", i);
    int id = eng_graph_add_node(g, buf[i], konst && konst[i] ? "Const" : "Placeholder", NULL);
    eng_graph_node(g, id)->n_out = 1;
    if (konst && konst[i]) {
      eng_attr *a = eng_graph_add_attr(g, id, "value");
      a->kind = ENG_ATTR_TENSOR;
      a->tensor = eng_tensor_share(&in[i]);
    } else {
      names[b->n_fed] = buf[i];
      b->fed[b->n_fed++] = eng_tensor_share(&in[i]);
    }
  }
  int id = eng_graph_add_node(g, "n", op, NULL);
  eng_graph_node(g, id)->n_out = n_out;
  td_opcase_attrs(g, id, attrs);
  for (int i = 0; i < n_in; i++) ck_ok(eng_graph_add_input(g, id, (eng_edge){i, 0}, &err), err);
  char outs[3][16];
  const char *onames[3];
  for (int o = 0; o < n_out; o++) {
    snprintf(outs[o], sizeof outs[o], "n:%d", o);
    onames[o] = outs[o];
  }
  ck_ok(eng_model_create(g, NULL, NULL, &b->m, &err), err);
  ck_ok(eng_plan_create(b->m, b->n_fed, names, n_out, onames, 0, NULL, &b->p, &err), err);
  ck_ok(eng_device_attach(b->m, 1, &b->p, &err), err);
}

static void unbuild(one_op *b) {
  for (int i = 0; i < b->n_fed; i++) eng_tensor_release(&b->fed[i]);
  eng_plan_destroy(b->p);
  eng_model_destroy(b->m);
}

/* --- TensorFlow's cases on the device ---------------------------------------- */

static bool has_lowering(const char *op) {
  for (int i = 0; i < eng_gpu_op_count(); i++)
    if (!strcmp(eng_gpu_op_name(i), op)) return true;
  return false;
}

/* Runs every TensorFlow case of an op with a lowering on the selected
 * device; returns how many ran. */
static int tf_cases_on_device(const char *dev) {
  int ran = 0;
  eng_gpu_set_host_small(0); /* send everything a lowering takes */
  for (int k = 0; k < td_n_opcases; k++) {
    const td_opcase *kc = &td_opcases[k];
    if (!has_lowering(kc->op)) continue;
    eng_tensor in[5] = {{0}}, out[3] = {{0}};
    for (int i = 0; i < kc->n_in; i++) td_opcase_tensor(&kc->in[i], &in[i]);
    one_op b;
    build(&b, kc->op, kc->attrs, kc->n_in, in, NULL, kc->n_out);
    td_err err;
    td_err_clear(&err);
    ck_assert_msg(eng_plan_run(b.p, b.fed, out, &err) == TD_OK, "%s: case %d (%s %s): %s", dev, k,
                  kc->op, kc->attrs, err.msg);
    for (int o = 0; o < kc->n_out; o++) {
      const td_tv *want = &kc->out[o];
      char sb[128];
      eng_shape ws = eng_shape_make(want->rank, want->dim);
      ck_assert_msg(out[o].dtype == want->dt && eng_shape_equal(&out[o].shape, &ws),
                    "%s: case %d (%s): output %d is %s %s", dev, k, kc->op, o,
                    eng_dtype_name(out[o].dtype), eng_shape_str(&out[o].shape, sb, sizeof sb));
      for (int i = 0; i < want->n; i++) {
        double got = td_opcase_elem(&out[o], i);
        ck_assert_msg(td_opcase_close(want->dt, got, want->v[i], 1e-5),
                      "%s: case %d (%s %s): output %d element %d is %.9g, TensorFlow says %.9g",
                      dev, k, kc->op, kc->attrs, o, i, got, want->v[i]);
      }
    }
    for (int i = 0; i < 5; i++) eng_tensor_release(&in[i]);
    for (int o = 0; o < 3; o++) eng_tensor_release(&out[o]);
    unbuild(&b);
    ran++;
  }
  eng_gpu_set_host_small(4096);
  return ran;
}

/* --- random cases against the CPU engine ------------------------------------- */

enum { R_RAND, R_POS, R_INTS };

typedef struct rin {
  int kind; /* R_RAND: uniform [-1, 1); R_POS: [0.5, 2); R_INTS: the values given */
  eng_dtype dt;
  int rank;
  int64_t dim[ENG_MAX_RANK];
  int64_t ints[16];
  bool konst;
} rin;

typedef struct rcase {
  const char *op;
  const char *attrs;
  int n_in;
  rin in[4];
  const char *post; /* optional ops chained after (fused at load): "BiasAdd,Relu6" */
  int64_t ch;       /* channels of the op's output, for post's constant bias */
} rcase;

#define F(...) {R_RAND, ENG_DT_FLOAT, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), {__VA_ARGS__}, {0}, false}
#define P(...) {R_POS, ENG_DT_FLOAT, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), {__VA_ARGS__}, {0}, false}
#define W(...) {R_RAND, ENG_DT_FLOAT, (int)(sizeof((int64_t[]){__VA_ARGS__}) / 8), {__VA_ARGS__}, {0}, true}
#define I1(n, ...) {R_INTS, ENG_DT_INT32, 1, {n}, {__VA_ARGS__}, true}
#define I2(a, b, ...) {R_INTS, ENG_DT_INT32, 2, {a, b}, {__VA_ARGS__}, true}

static const rcase rcases[] = {
    {"MatMul", "", 2, {F(1, 17), W(17, 5)}, NULL, 0},
    {"MatMul", "", 2, {F(7, 33), F(33, 65)}, NULL, 0},
    {"MatMul", "transpose_a=b:1;transpose_b=b:1", 2, {F(33, 7), F(65, 33)}, NULL, 0},
    {"MatMul", "transpose_b=b:1", 2, {F(3, 129), W(10, 129)}, "BiasAdd,Relu", 10},
    {"BatchMatMulV2", "", 2, {F(2, 3, 4, 5), F(2, 3, 5, 6)}, NULL, 0},
    {"BatchMatMulV2", "adj_x=b:1;adj_y=b:1", 2, {F(3, 5, 4), F(3, 6, 5)}, NULL, 0},
    {"BatchMatMulV2", "", 2, {F(2, 3, 4, 5), W(5, 6)}, NULL, 0},
    {"BatchMatMulV2", "", 2, {F(1, 4, 5), F(3, 5, 2)}, NULL, 0},
    {"BatchMatMulV2", "", 2, {F(2, 1, 4, 5), F(1, 3, 5, 2)}, NULL, 0}, /* the CPU takes it */
    {"Einsum", "equation=s:abc,cde->abde", 2, {F(2, 7, 16), W(16, 4, 8)}, NULL, 0},
    {"Einsum", "equation=s:aecd,abcd->acbe", 2, {F(2, 5, 4, 8), F(2, 6, 4, 8)}, NULL, 0},
    {"Einsum", "equation=s:acbe,aecd->abcd", 2, {F(2, 4, 6, 5), F(2, 5, 4, 8)}, NULL, 0},
    {"Einsum", "equation=s:ij,jk->ik", 2, {F(3, 9), F(9, 2)}, NULL, 0},
    {"Conv2D", "strides=li:1,2,2,1;padding=s:SAME", 2, {F(2, 9, 11, 3), W(3, 3, 3, 8)}, NULL, 0},
    {"Conv2D", "strides=li:1,1,1,1;dilations=li:1,2,2,1;padding=s:VALID", 2,
     {F(1, 10, 9, 4), W(3, 2, 4, 5)}, NULL, 0},
    {"Conv2D", "strides=li:1,1,1,1;padding=s:VALID", 2, {F(3, 5, 5, 4), W(1, 1, 4, 7)},
     "BiasAdd,Relu6", 7},
    {"Conv2D", "strides=li:1,2,1,1;padding=s:EXPLICIT;explicit_paddings=li:0,0,1,2,0,1,0,0", 2,
     {F(1, 7, 6, 2), W(3, 3, 2, 3)}, NULL, 0},
    {"DepthwiseConv2dNative", "strides=li:1,2,2,1;padding=s:SAME", 2, {F(1, 8, 7, 5), W(3, 3, 5, 2)},
     "BiasAdd,Relu6", 10},
    {"DepthwiseConv2dNative", "strides=li:1,1,1,1;padding=s:VALID", 2, {F(2, 6, 6, 3), W(3, 3, 3, 1)},
     NULL, 0},
    {"MaxPool", "ksize=li:1,3,3,1;strides=li:1,2,2,1;padding=s:SAME", 1, {F(2, 7, 7, 3)}, NULL, 0},
    {"AvgPool", "ksize=li:1,3,3,1;strides=li:1,2,2,1;padding=s:SAME", 1, {F(2, 7, 8, 3)}, NULL, 0},
    {"AvgPool", "ksize=li:1,2,2,1;strides=li:1,2,2,1;padding=s:VALID", 1, {F(1, 5, 5, 1)}, NULL, 0},
    {"Softmax", "", 1, {F(3, 11)}, NULL, 0},
    {"Softmax", "", 1, {F(2, 1000)}, NULL, 0},
    {"LogSoftmax", "", 1, {F(4, 7)}, NULL, 0},
    {"Mean", "keep_dims=b:1", 2, {F(2, 5, 6, 3), I1(2, 1, 2)}, NULL, 0},
    {"Sum", "", 2, {F(4, 9), I1(1, -1)}, NULL, 0},
    {"Max", "", 2, {F(4, 9, 2), I1(1, 0)}, NULL, 0},
    {"Min", "", 2, {F(4, 9, 2), I1(1, 1)}, NULL, 0},
    {"Prod", "", 2, {P(3, 4), I1(1, 1)}, NULL, 0},
    {"Mean", "", 2, {F(2, 3, 4), I1(2, 0, 2)}, NULL, 0}, /* not contiguous: the CPU takes it */
    {"Transpose", "", 2, {F(2, 3, 4, 5), I1(4, 0, 2, 1, 3)}, NULL, 0},
    {"Transpose", "", 2, {F(7, 3), I1(2, 1, 0)}, NULL, 0},
    {"GatherV2", "", 3, {W(11, 6), I2(2, 3, 0, 10, 3, 3, 7, 1), {R_INTS, ENG_DT_INT32, 0, {0}, {0}, true}},
     NULL, 0},
    {"GatherV2", "", 3, {F(2, 5, 3), I1(4, 4, 0, 2, 2), {R_INTS, ENG_DT_INT32, 0, {0}, {1}, true}},
     NULL, 0},
    {"ConcatV2", "N=i:2", 3, {F(2, 3, 4), F(2, 1, 4), {R_INTS, ENG_DT_INT32, 0, {0}, {1}, true}},
     NULL, 0},
    {"Pack", "N=i:3;axis=i:1", 3, {F(3, 4), F(3, 4), F(3, 4)}, NULL, 0},
    {"Slice", "", 3, {F(4, 6), I1(2, 1, 2), I1(2, 2, -1)}, NULL, 0},
    {"Pad", "", 2, {F(2, 3), I2(2, 2, 1, 0, 2, 1)}, NULL, 0},
    {"Reshape", "", 2, {F(4, 6), I1(3, 2, -1, 3)}, NULL, 0},
    {"ExpandDims", "", 2, {F(4, 6), {R_INTS, ENG_DT_INT32, 0, {0}, {1}, true}}, NULL, 0},
    {"Squeeze", "squeeze_dims=li:1", 1, {F(4, 1, 6)}, NULL, 0},
    {"Cast", "DstT=t:1", 1, {F(4, 6)}, NULL, 0},
    {"StridedSlice", "shrink_axis_mask=i:2", 4, {F(3, 7, 5), I1(3, 0, 3, 1), I1(3, 3, 4, 5), I1(3, 1, 1, 2)},
     NULL, 0},
    {"StridedSlice", "begin_mask=i:1;end_mask=i:1;new_axis_mask=i:4", 4,
     {F(6, 5), I1(3, 0, 4, 0), I1(3, 0, 0, 0), I1(3, -2, -1, 1)}, NULL, 0},
    {"Add", "", 2, {F(8, 16, 40), F(40)}, NULL, 0},
    {"AddV2", "", 2, {F(1), F(5, 3)}, NULL, 0},
    {"Mul", "", 2, {F(2, 1, 4), F(3, 1)}, NULL, 0},
    {"Sub", "", 2, {F(6, 7), W(7)}, NULL, 0},
    {"RealDiv", "", 2, {F(6, 7), P(6, 1)}, NULL, 0},
    {"Maximum", "", 2, {F(6, 7), F(6, 7)}, NULL, 0},
    {"Minimum", "", 2, {F(6, 7), F(1, 7)}, NULL, 0},
    {"SquaredDifference", "", 2, {F(5, 4), F(4)}, NULL, 0},
    {"Pow", "", 2, {P(5, 4), F(4)}, NULL, 0},
    {"BiasAdd", "", 2, {F(2, 3, 5), W(5)}, NULL, 0},
    {"Relu", "", 1, {F(4999)}, NULL, 0},
    {"Relu6", "", 1, {F(3, 7)}, NULL, 0},
    {"Sigmoid", "", 1, {F(3, 7)}, NULL, 0},
    {"Tanh", "", 1, {F(3, 7)}, NULL, 0},
    {"Erf", "", 1, {F(3, 7)}, NULL, 0},
    {"Erfc", "", 1, {F(3, 7)}, NULL, 0},
    {"Exp", "", 1, {F(3, 7)}, NULL, 0},
    {"Log", "", 1, {P(3, 7)}, NULL, 0},
    {"Rsqrt", "", 1, {P(3, 7)}, NULL, 0},
    {"Sqrt", "", 1, {P(3, 7)}, NULL, 0},
    {"Softplus", "", 1, {F(3, 7)}, NULL, 0},
    {"Elu", "", 1, {F(3, 7)}, NULL, 0},
    {"Selu", "", 1, {F(3, 7)}, NULL, 0},
    {"LeakyRelu", "alpha=f:0.3", 1, {F(3, 7)}, NULL, 0},
    {"Square", "", 1, {F(3, 7)}, NULL, 0},
    {"Neg", "", 1, {F(3, 7)}, NULL, 0},
};
#define N_RCASES ((int)(sizeof rcases / sizeof rcases[0]))

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float frand(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return (float)((rng >> 40) & 0xFFFFFF) / (float)(1 << 24);
}

static void make_input(const rin *r, eng_tensor *t) {
  eng_shape s = eng_shape_make(r->rank, r->dim);
  ck_assert_int_eq(eng_tensor_alloc(t, r->dt, &s, NULL), TD_OK);
  int64_t n = eng_tensor_numel(t);
  if (r->kind == R_INTS) {
    for (int64_t i = 0; i < n; i++) ((int32_t *)eng_tensor_data(t))[i] = (int32_t)r->ints[i];
    return;
  }
  float *d = eng_tensor_data(t);
  for (int64_t i = 0; i < n; i++) d[i] = r->kind == R_POS ? 0.5f + 1.5f * frand() : 2 * frand() - 1;
}

/* Builds a random case, optionally with the chain `post` after the op
 * (BiasAdd with a constant bias, then activations), and runs it. */
static td_code run_rcase(const rcase *rc, const eng_tensor *in, eng_tensor *out, td_err *err) {
  td_err e;
  eng_graph *g = eng_graph_create();
  const char *names[4];
  char buf[4][16];
  eng_tensor fed[4];
  int n_fed = 0;
  for (int i = 0; i < rc->n_in; i++) {
    snprintf(buf[i], sizeof buf[i], "in%d", i);
    int id = eng_graph_add_node(g, buf[i], rc->in[i].konst ? "Const" : "Placeholder", NULL);
    eng_graph_node(g, id)->n_out = 1;
    if (rc->in[i].konst) {
      eng_attr *a = eng_graph_add_attr(g, id, "value");
      a->kind = ENG_ATTR_TENSOR;
      a->tensor = eng_tensor_share(&in[i]);
    } else {
      names[n_fed] = buf[i];
      fed[n_fed++] = in[i];
    }
  }
  int id = eng_graph_add_node(g, "n", rc->op, NULL);
  eng_graph_node(g, id)->n_out = 1;
  td_opcase_attrs(g, id, rc->attrs);
  for (int i = 0; i < rc->n_in; i++) eng_graph_add_input(g, id, (eng_edge){i, 0}, NULL);
  char last[32] = "n:0";
  if (rc->post) {
    char chain[64];
    snprintf(chain, sizeof chain, "%s", rc->post);
    int prev = id, k = 0;
    for (char *save = NULL, *op = strtok_r(chain, ",", &save); op; op = strtok_r(NULL, ",", &save)) {
      char nm[24];
      snprintf(nm, sizeof nm, "post%d", k++);
      int bias = -1;
      if (!strcmp(op, "BiasAdd")) {
        rin br = W(1);
        br.dim[0] = rc->ch;
        eng_tensor bt;
        make_input(&br, &bt);
        bias = eng_graph_add_node(g, "bias", "Const", NULL);
        eng_graph_node(g, bias)->n_out = 1;
        eng_attr *a = eng_graph_add_attr(g, bias, "value");
        a->kind = ENG_ATTR_TENSOR;
        a->tensor = bt;
      }
      int pid = eng_graph_add_node(g, nm, op, NULL);
      eng_graph_node(g, pid)->n_out = 1;
      eng_graph_add_input(g, pid, (eng_edge){prev, 0}, NULL);
      if (bias >= 0) eng_graph_add_input(g, pid, (eng_edge){bias, 0}, NULL);
      prev = pid;
      snprintf(last, sizeof last, "%s:0", nm);
    }
  }
  const char *lastp = last;
  eng_model *m = NULL;
  eng_plan *p = NULL;
  td_err_clear(&e);
  td_code r = eng_model_create(g, NULL, NULL, &m, &e);
  if (!r) r = eng_plan_create(m, n_fed, names, 1, &lastp, 0, NULL, &p, &e);
  if (!r) r = eng_device_attach(m, 1, &p, &e);
  if (!r) r = eng_plan_run(p, fed, out, &e);
  if (err) *err = e;
  eng_plan_destroy(p);
  eng_model_destroy(m);
  return r;
}

/* Runs every random case on the CPU and on the selected device (the bias
 * of a fused chain is drawn again for each run, so the generator is
 * rewound to the same point). */
static void random_cases_on(eng_device_mode mode, const char *dev, bool count_calls) {
  char why[512];
  eng_gpu_set_host_small(0);
  for (int k = 0; k < N_RCASES; k++) {
    const rcase *rc = &rcases[k];
    eng_tensor in[4] = {{0}}, want = {0}, got = {0};
    for (int i = 0; i < rc->n_in; i++) make_input(&rc->in[i], &in[i]);
    uint64_t seed = rng;
    td_err err;
    ck_assert(select_mode(ENG_DEVICE_CPU, 0, why, sizeof why));
    ck_assert_msg(run_rcase(rc, in, &want, &err) == TD_OK, "cpu: %s %s: %s", rc->op, rc->attrs,
                  err.msg);
    rng = seed;
    ck_assert_msg(select_mode(mode, 0, why, sizeof why), "%s", why);
    long before = eng_devref_calls();
    ck_assert_msg(run_rcase(rc, in, &got, &err) == TD_OK, "%s: %s %s: %s", dev, rc->op, rc->attrs,
                  err.msg);
    /* The two cases marked "the CPU takes it" are declined by design: a
     * reduction over non-adjacent axes and a batch broadcast of [2,1] by
     * [1,3]. */
    bool declined = (!strcmp(rc->op, "Mean") && rc->in[1].ints[0] == 0 && rc->in[1].ints[1] == 2) ||
                    (!strcmp(rc->op, "BatchMatMulV2") && rc->in[0].rank == 4 && rc->in[0].dim[1] == 1);
    if (count_calls && !declined)
      ck_assert_msg(eng_devref_calls() > before, "%s: %s %s never reached the device", dev, rc->op,
                    rc->attrs);
    char s1[128], s2[128];
    ck_assert_msg(eng_shape_equal(&want.shape, &got.shape), "%s: %s: shape %s, the CPU gives %s",
                  dev, rc->op, eng_shape_str(&got.shape, s1, sizeof s1),
                  eng_shape_str(&want.shape, s2, sizeof s2));
    int64_t n = eng_tensor_numel(&want);
    const float *w = eng_tensor_data(&want), *g = eng_tensor_data(&got);
    for (int64_t i = 0; i < n; i++)
      ck_assert_msg(td_opcase_close(ENG_DT_FLOAT, g[i], w[i], 1e-4),
                    "%s: %s %s: element %lld is %.9g, the CPU gives %.9g", dev, rc->op, rc->attrs,
                    (long long)i, g[i], w[i]);
    for (int i = 0; i < 4; i++) eng_tensor_release(&in[i]);
    eng_tensor_release(&want);
    eng_tensor_release(&got);
  }
  eng_gpu_set_host_small(4096);
  ck_assert(select_mode(ENG_DEVICE_CPU, 0, why, sizeof why));
}

/* --- tests ----------------------------------------------------------------------- */

START_TEST(lowerings_are_sorted_engine_ops) {
  for (int i = 0; i < eng_gpu_op_count(); i++) {
    /* "_" names are the plan-internal ops eng_merge.c substitutes. */
    ck_assert_msg(eng_gpu_op_name(i)[0] == '_' || eng_op_find(eng_gpu_op_name(i)) != NULL,
                  "%s is not an engine op", eng_gpu_op_name(i));
    if (i) ck_assert_msg(strcmp(eng_gpu_op_name(i - 1), eng_gpu_op_name(i)) < 0, "unsorted at %s",
                         eng_gpu_op_name(i));
  }
  ck_assert_ptr_null(eng_gpu_op_name(eng_gpu_op_count()));
}
END_TEST

START_TEST(reference_tf_cases) {
  char why[512];
  ck_assert_msg(select_mode(ENG_DEVICE_REFERENCE, 0, why, sizeof why), "%s", why);
  long before = eng_devref_calls();
  int ran = tf_cases_on_device("reference");
  ck_assert_int_gt(ran, 40);
  ck_assert_int_gt(eng_devref_calls() - before, ran);
  ck_assert(select_mode(ENG_DEVICE_CPU, 0, why, sizeof why));
}
END_TEST

START_TEST(reference_random_cases) { random_cases_on(ENG_DEVICE_REFERENCE, "reference", true); }
END_TEST

START_TEST(cuda_cases) {
  char why[512];
  if (!select_mode(ENG_DEVICE_GPU, 0, why, sizeof why)) {
    ck_assert_msg(!getenv("TENSORD_REQUIRE_GPU"), "TENSORD_REQUIRE_GPU is set, but: %s", why);
    printf("test_eng_device: CUDA backend-consistency cases skipped: %s\n", why);
    return;
  }
  printf("test_eng_device: running on %s\n", eng_device_name());
  int ran = tf_cases_on_device("cuda");
  printf("test_eng_device: %d TensorFlow cases matched on the GPU\n", ran);
  random_cases_on(ENG_DEVICE_GPU, "cuda", false);
  printf("test_eng_device: %d random cases matched the CPU engine on the GPU\n", N_RCASES);
}
END_TEST

START_TEST(modes_and_fallback) {
  td_err err;
  eng_device_mode m;
  ck_ok(eng_device_parse_mode("gpu", &m, &err), err);
  ck_assert_int_eq(m, ENG_DEVICE_GPU);
  ck_err(eng_device_parse_mode("tpu", &m, &err), err, TD_INVALID_ARGUMENT, "auto, cpu, gpu");
  /* A plug-in that is not there: auto falls back with the reason, gpu
   * refuses to start. */
  eng_device_opts o = {.mode = ENG_DEVICE_AUTO, .plugin = "/nonexistent/libtensord_cuda.so"};
  char note[512];
  ck_ok(eng_device_select(&o, note, sizeof note, &err), err);
  ck_assert(!eng_device_active());
  ck_assert_msg(strstr(note, "CPU") && strstr(note, "/nonexistent"), "%s", note);
  ck_assert_str_eq(eng_device_name(), "cpu");
  o.mode = ENG_DEVICE_GPU;
  ck_err(eng_device_select(&o, note, sizeof note, &err), err, TD_FAILED_PRECONDITION,
         "no usable GPU");
  o.mode = ENG_DEVICE_REFERENCE;
  o.memory_fraction = 1.5;
  ck_err(eng_device_select(&o, note, sizeof note, &err), err, TD_INVALID_ARGUMENT,
         "per_process_gpu_memory_fraction");
  o.memory_fraction = 0;
  o.mode = ENG_DEVICE_CPU;
  ck_ok(eng_device_select(&o, note, sizeof note, &err), err);
  ck_assert_int_eq(eng_device_limit(), 0);
}
END_TEST

/* A model whose weights exceed the allowed share fails to attach with the
 * sizes; the memory it took is given back; a smaller one still fits. */
START_TEST(memory_budget) {
  char why[512];
  /* The reference device reports 16 GiB; 2e-5 of it is about 344 KiB. */
  ck_assert_msg(select_mode(ENG_DEVICE_REFERENCE, 2e-5, why, sizeof why), "%s", why);
  size_t limit = eng_device_limit();
  ck_assert(limit > 300 * 1024 && limit < 400 * 1024);
  rin big = W(256, 512), small = W(16, 8);
  eng_tensor x, w;
  rin xr = F(2, 256);
  make_input(&xr, &x);
  make_input(&big, &w);
  bool konst[2] = {false, true};
  eng_tensor in[2] = {x, w};
  td_err err;
  td_err_clear(&err);
  eng_graph *g = eng_graph_create();
  int a = eng_graph_add_node(g, "x", "Placeholder", NULL), b = eng_graph_add_node(g, "w", "Const", NULL);
  eng_graph_node(g, a)->n_out = eng_graph_node(g, b)->n_out = 1;
  eng_attr *at = eng_graph_add_attr(g, b, "value");
  at->kind = ENG_ATTR_TENSOR;
  at->tensor = eng_tensor_share(&w);
  int n = eng_graph_add_node(g, "n", "MatMul", NULL);
  eng_graph_node(g, n)->n_out = 1;
  eng_graph_add_input(g, n, (eng_edge){a, 0}, NULL);
  eng_graph_add_input(g, n, (eng_edge){b, 0}, NULL);
  eng_model *m;
  eng_plan *p;
  const char *inn = "x", *outn = "n:0";
  ck_ok(eng_model_create(g, NULL, NULL, &m, &err), err);
  ck_ok(eng_plan_create(m, 1, &inn, 1, &outn, 0, NULL, &p, &err), err);
  ck_err(eng_device_attach(m, 1, &p, &err), err, TD_RESOURCE_EXHAUSTED, "MiB of GPU memory");
  ck_assert_msg(strstr(err.msg, "0.5 MiB") && strstr(err.msg, "allowed"), "%s", err.msg);
  ck_assert_int_eq(eng_device_used(), 0);
  /* Not attached: it still runs, on the CPU. */
  eng_tensor out = {0};
  ck_ok(eng_plan_run(p, &x, &out, &err), err);
  eng_tensor_release(&out);
  eng_plan_destroy(p);
  eng_model_destroy(m);
  (void)konst;
  (void)in;
  /* A small model fits and runs on the device. */
  eng_tensor_release(&w);
  make_input(&small, &w);
  rin xs = F(3, 16);
  eng_tensor_release(&x);
  make_input(&xs, &x);
  eng_tensor sin[2] = {x, w};
  bool sk[2] = {false, true};
  one_op o1;
  build(&o1, "MatMul", "", 2, sin, sk, 1);
  ck_assert_int_gt(eng_device_used(), 0);
  long before = eng_devref_calls();
  ck_ok(eng_plan_run(o1.p, o1.fed, &out, &err), err);
  ck_assert_int_gt(eng_devref_calls(), before);
  eng_tensor_release(&out);
  unbuild(&o1);
  eng_tensor_release(&x);
  eng_tensor_release(&w);
  ck_assert(select_mode(ENG_DEVICE_CPU, 0, why, sizeof why));
}
END_TEST

/* Bad input on the device path: TensorFlow's errors from the CPU kernel,
 * no crash. */
START_TEST(bad_shapes_on_device) {
  char why[512];
  ck_assert_msg(select_mode(ENG_DEVICE_REFERENCE, 0, why, sizeof why), "%s", why);
  eng_gpu_set_host_small(0);
  rin ar = F(2, 3), br = F(2, 3);
  eng_tensor in[2], out = {0};
  make_input(&ar, &in[0]);
  make_input(&br, &in[1]);
  one_op b;
  build(&b, "MatMul", "", 2, in, NULL, 1);
  td_err err;
  ck_err(eng_plan_run(b.p, b.fed, &out, &err), err, TD_INVALID_ARGUMENT, "Matrix size-incompatible");
  unbuild(&b);
  rin sr = {R_INTS, ENG_DT_INT32, 1, {1}, {4}, true};
  eng_tensor_release(&in[1]);
  make_input(&sr, &in[1]);
  build(&b, "Reshape", "", 2, in, NULL, 1);
  ck_err(eng_plan_run(b.p, b.fed, &out, &err), err, TD_INVALID_ARGUMENT, "reshape");
  unbuild(&b);
  /* An index out of range: TensorFlow's CPU error, not its GPU's zeros. */
  eng_tensor gi[3];
  rin pr = F(4, 3), ir = {R_INTS, ENG_DT_INT32, 1, {2}, {1, 4}, false},
      axr = {R_INTS, ENG_DT_INT32, 0, {0}, {0}, true};
  make_input(&pr, &gi[0]);
  make_input(&ir, &gi[1]);
  make_input(&axr, &gi[2]);
  bool gk[3] = {false, false, true};
  build(&b, "GatherV2", "", 3, gi, gk, 1);
  ck_err(eng_plan_run(b.p, b.fed, &out, &err), err, TD_INVALID_ARGUMENT, "indices[1] = 4");
  unbuild(&b);
  for (int i = 0; i < 3; i++) eng_tensor_release(&gi[i]);
  eng_tensor_release(&in[0]);
  eng_tensor_release(&in[1]);
  eng_gpu_set_host_small(4096);
  ck_assert(select_mode(ENG_DEVICE_CPU, 0, why, sizeof why));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_device");
  TCase *tc = tcase_create("device");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, lowerings_are_sorted_engine_ops);
  tcase_add_test(tc, modes_and_fallback);
  tcase_add_test(tc, reference_tf_cases);
  tcase_add_test(tc, reference_random_cases);
  tcase_add_test(tc, memory_budget);
  tcase_add_test(tc, bad_shapes_on_device);
  tcase_add_test(tc, cuda_cases);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? 1 : 0;
}
