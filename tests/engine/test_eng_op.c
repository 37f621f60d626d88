/* eng_op: walks the whole op table, so an op without a CPU kernel, or an
 * entry out of order (eng_op_find bisects), is a test failure rather than a
 * silent stub. Then runs every computing op on small cases whose expected
 * outputs TensorFlow computed (op_cases.inc, from make_op_cases.py), and
 * checks that every table entry is either covered there or listed as a
 * bookkeeping op tested elsewhere. Float results must agree to 1e-5
 * relative (libm vs Eigen transcendental functions differ by an ulp or
 * two); integer and bool results exactly. */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_graph.h"
#include "eng_op.h"
#include "td_opcase.h"

START_TEST(table_not_empty) {
  ck_assert_int_gt(eng_op_count(), 0);
  ck_assert_ptr_null(eng_op_at(-1));
  ck_assert_ptr_null(eng_op_at(eng_op_count()));
}
END_TEST

START_TEST(every_entry_has_cpu_kernel) {
  for (int i = 0; i < eng_op_count(); i++) {
    const eng_op_def *d = eng_op_at(i);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(d->name && *d->name, "entry %d has no name", i);
    ck_assert_msg(d->cpu != NULL, "op %s has no CPU kernel", d->name);
  }
}
END_TEST

START_TEST(names_strictly_sorted) {
  for (int i = 1; i < eng_op_count(); i++)
    ck_assert_msg(strcmp(eng_op_at(i - 1)->name, eng_op_at(i)->name) < 0,
                  "ops out of order at %d: '%s' then '%s'", i, eng_op_at(i - 1)->name,
                  eng_op_at(i)->name);
}
END_TEST

START_TEST(find_every_entry) {
  for (int i = 0; i < eng_op_count(); i++) {
    const eng_op_def *d = eng_op_at(i);
    ck_assert_msg(eng_op_find(d->name) == d, "eng_op_find(%s) misses entry %d", d->name, i);
    /* A copy of the name (not the table's own pointer) finds it too. */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", d->name);
    ck_assert_ptr_eq(eng_op_find(buf), d);
  }
}
END_TEST

START_TEST(every_graph_op_has_arity) {
  /* The generated arity table covers every op a graph can name (only the
   * plan-internal ones are left out), and its ranges are sane. */
  for (int i = 0; i < eng_op_count(); i++) {
    const eng_op_def *d = eng_op_at(i);
    int lo = -1, hi = -2;
    bool known = eng_op_arity(d->name, &lo, &hi);
    ck_assert_msg(known || (d->flags & ENG_OP_PLAN_ONLY),
                  "op %s has no arity: rerun scripts/gen_op_arity.py", d->name);
    if (known) ck_assert_msg(lo >= 0 && (hi == -1 || hi >= lo), "op %s: %d..%d", d->name, lo, hi);
  }
  int lo, hi;
  ck_assert(eng_op_arity("Identity", &lo, &hi) && lo == 1 && hi == 1);
  ck_assert(eng_op_arity("ConcatV2", &lo, &hi) && lo == 3 && hi == -1);
  ck_assert(eng_op_arity("IdentityN", &lo, &hi) && lo == 0 && hi == -1);
  ck_assert(!eng_op_arity("NoSuchOp", &lo, &hi));
}
END_TEST

START_TEST(find_unknown) {
  const char *unknown[] = {"",      "A",    "Zzz",        "add",
                           "AddV3", "Add ", "matmul",     "StatefulPartitionedCall",
                           "_Arg",  "~",    "Placeholde", "VariableV2x",
                           "\x01"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    ck_assert_msg(eng_op_find(unknown[i]) == NULL, "eng_op_find('%s') found something", unknown[i]);
}
END_TEST

START_TEST(ops_the_loader_needs) {
  /* The restore path and the half_plus_two graphs. */
  const char *need[] = {"Const",
                        "Placeholder",
                        "PlaceholderWithDefault",
                        "Identity",
                        "IdentityN",
                        "NoOp",
                        "VarHandleOp",
                        "VariableV2",
                        "RestoreV2",
                        "AssignVariableOp",
                        "Assign",
                        "ReadVariableOp",
                        "Mul",
                        "AddV2",
                        "Add"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    const eng_op_def *d = eng_op_find(need[i]);
    ck_assert_msg(d != NULL, "op %s missing", need[i]);
    ck_assert_str_eq(d->name, need[i]);
  }
  ck_assert(eng_op_find("Assign")->flags & ENG_OP_REF_INPUT0);
  ck_assert(eng_op_find("Assign")->flags & ENG_OP_STATEFUL);
  ck_assert(eng_op_find("AssignVariableOp")->flags & ENG_OP_STATEFUL);
  ck_assert(!(eng_op_find("Identity")->flags & ENG_OP_STATEFUL));
  ck_assert(!(eng_op_find("ReadVariableOp")->flags & ENG_OP_STATEFUL));
}
END_TEST


/* --- numeric cases ------------------------------------------------------- */

typedef td_tv tv;
typedef td_opcase kcase;

/* Ops without numeric cases here: sources, variables, restore and calls
 * (test_eng_model.c, test_ldr_servable.c) and pure identities (below). */
static const char *bookkeeping[] = {
    "Assign",        "AssignVariableOp", "Const",       "DisableCopyOnRead", "Identity",
    "IdentityN",     "NoOp",             "Placeholder", "PlaceholderWithDefault",
    "ReadVariableOp", "RestoreV2",       "Snapshot",    "StopGradient",      "VarHandleOp",
    "VarIsInitializedOp", "VariableV2",  "CheckNumerics", "EnsureShape",     "PreventGradient",
    "FusedBatchNorm", "FusedBatchNormV2", "ParseExample", "ParseExampleV2",
    /* control flow and TensorLists: test_eng_control.c, tests/e2e/test_control.py */
    "If", "StatelessIf", "StatelessWhile", "While", "TensorListFromTensor", "TensorListGetItem",
    "TensorListLength", "TensorListReserve", "TensorListSetItem", "TensorListStack", "Switch",
    "Merge",
    /* lookup tables (model state): kernels/test_eng_kernels_table.c */
    "HashTableV2", "LookupTableImportV2", "LookupTableFindV2", "LookupTableSizeV2",
    /* a gather from a variable's value: tests/e2e/test_coverage_ops.py */
    "ResourceGather",
    /* random sources: kernels/test_eng_kernels_random.c */
    "RandomStandardNormal", "RandomUniform", "TruncatedNormal",
    /* text ops (strings in, strings out): kernels/test_eng_kernels_text.c,
     * tests/e2e/test_coverage.py against TensorFlow */
    "AsString", "StringJoin", "StringLength", "StringLower", "StringStrip", "StringToHashBucket",
    "StringToHashBucketFast", "StringToHashBucketStrong", "StringToNumber", "StringUpper", "Substr",
    "StaticRegexReplace", "StaticRegexFullMatch", "RegexReplace", "RegexFullMatch", "StringSplitV2",
    "StringNGrams", "RaggedTensorToTensor", "MutableHashTableV2", "RaggedBincount",
    "LookupTableInsertV2", "LookupTableExportV2", "InitializeTableFromTextFileV2",
    "UnsortedSegmentJoin",
    /* Unicode text: kernels/test_eng_unicode.c, tests/e2e/test_coverage_ops.py (unicode_text) */
    "UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode",
    /* StringFormat, dense ReduceJoin: tests/e2e/test_coverage_ops.py (string_tail) */
    "StringFormat", "ReduceJoin",
    /* runs only under XLA in TensorFlow: kernels/test_eng_kernels_scatter.c */
    "XlaDynamicUpdateSlice",
    /* plan-internal ops of Pad folding and the LayerNorm, expansion and scale
     * fusions: test_eng_compile.c */
    "_DepthwiseConv2dNativePadded", "_ExpandDepthwise", "_LayerNorm", "_PadView",
    "_ScaledConv1x1"};

static void run_case(int k) {
  const kcase *kc = &td_opcases[k];
  const eng_op_def *op = eng_op_find(kc->op);
  ck_assert_msg(op != NULL, "case %d: op %s is not in the table", k, kc->op);
  eng_graph *g = eng_graph_create();
  int id = eng_graph_add_node(g, "n", kc->op, NULL);
  eng_graph_node(g, id)->n_out = kc->n_out;
  td_opcase_attrs(g, id, kc->attrs);
  eng_tensor in[5] = {0}, out[3] = {0};
  for (int i = 0; i < kc->n_in; i++) td_opcase_tensor(&kc->in[i], &in[i]);
  td_err err;
  td_err_clear(&err);
  eng_kctx ctx = {.node = eng_graph_node(g, id), .node_id = id, .n_in = kc->n_in, .in = in,
                  .n_out = kc->n_out, .out = out, .err = &err};
  /* What TensorFlow ran, the load-time check must accept. */
  td_code rc = op->check ? op->check(ctx.node, &err) : TD_OK;
  ck_assert_msg(rc == TD_OK, "case %d (%s %s): the check refuses it: %s", k, kc->op, kc->attrs,
                err.msg);
  rc = op->cpu(&ctx);
  ck_assert_msg(rc == TD_OK, "case %d (%s %s): %s", k, kc->op, kc->attrs, err.msg);
  for (int o = 0; o < kc->n_out; o++) {
    const tv *want = &kc->out[o];
    char sb[128];
    ck_assert_msg(out[o].dtype == want->dt, "case %d (%s): output %d is %s", k, kc->op, o,
                  eng_dtype_name(out[o].dtype));
    eng_shape ws = eng_shape_make(want->rank, want->dim);
    ck_assert_msg(eng_shape_equal(&out[o].shape, &ws), "case %d (%s): output %d has shape %s", k,
                  kc->op, o, eng_shape_str(&out[o].shape, sb, sizeof sb));
    for (int i = 0; i < want->n; i++) {
      double got = td_opcase_elem(&out[o], i), w = want->v[i];
      bool ok = (want->dt == ENG_DT_FLOAT || want->dt == ENG_DT_DOUBLE ||
                 want->dt == ENG_DT_COMPLEX64 || want->dt == ENG_DT_COMPLEX128)
                    ? (got == w || fabs(got - w) <= 1e-5 * fmax(fabs(w), 1e-1) ||
                       (isnan(got) && isnan(w)))
                    : got == w;
      ck_assert_msg(ok, "case %d (%s %s): output %d element %d is %.9g, TensorFlow says %.9g", k,
                    kc->op, kc->attrs, o, i, got, w);
    }
  }
  for (int i = 0; i < 5; i++) eng_tensor_release(&in[i]);
  for (int i = 0; i < 3; i++) eng_tensor_release(&out[i]);
  eng_graph_destroy(g);
}

START_TEST(numeric_case) { run_case(_i); }
END_TEST

START_TEST(every_op_is_tested) {
  for (int i = 0; i < eng_op_count(); i++) {
    const char *name = eng_op_at(i)->name;
    bool hit = false;
    for (int k = 0; k < td_n_opcases && !hit; k++) hit = !strcmp(td_opcases[k].op, name);
    for (size_t k = 0; k < sizeof bookkeeping / sizeof *bookkeeping && !hit; k++)
      hit = !strcmp(bookkeeping[k], name);
    ck_assert_msg(hit, "op %s has no numeric case in op_cases.inc", name);
  }
}
END_TEST

/* Bad shapes are errors naming the node and op, never crashes. */
START_TEST(bad_shapes_fail_cleanly) {
  const struct {
    const char *op, *attrs;
    int n_in;
    tv in[3];
    const char *msg;
  } bad[] = {
      {"MatMul", "", 2, {{ENG_DT_FLOAT, 2, {2, 3}, 6, (const double[]){0, 0, 0, 0, 0, 0}},
                         {ENG_DT_FLOAT, 2, {2, 3}, 6, (const double[]){0, 0, 0, 0, 0, 0}}},
       "Matrix size-incompatible"},
      {"Reshape", "", 2, {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
                          {ENG_DT_INT32, 1, {1}, 1, (const double[]){4}}}, "reshape"},
      {"GatherV2", "", 3, {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
                           {ENG_DT_INT32, 1, {1}, 1, (const double[]){7}},
                           {ENG_DT_INT32, 0, {0}, 1, (const double[]){0}}}, "not in [0, 3)"},
      {"Conv2D", "strides=li:1,1,1,1;padding=s:VALID", 2,
       {{ENG_DT_FLOAT, 4, {1, 1, 1, 1}, 1, (const double[]){0}},
        {ENG_DT_FLOAT, 4, {3, 3, 1, 1}, 9, (const double[]){0, 0, 0, 0, 0, 0, 0, 0, 0}}},
       "negative"},
      {"StridedSlice", "shrink_axis_mask=i:1", 4,
       {{ENG_DT_FLOAT, 1, {3}, 3, (const double[]){1, 2, 3}},
        {ENG_DT_INT32, 1, {1}, 1, (const double[]){5}}, {ENG_DT_INT32, 1, {1}, 1, (const double[]){6}}},
       "out of bounds"},
      {"Fill", "", 2, {{ENG_DT_INT32, 1, {2}, 2, (const double[]){1 << 30, 1 << 30}},
                       {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){1}}}, "larger than"},
      {"Einsum", "equation=s:ab,bc->", 2, {{ENG_DT_FLOAT, 2, {1, 1}, 1, (const double[]){1}},
                                             {ENG_DT_FLOAT, 2, {1, 1}, 1, (const double[]){1}}},
       "equation 'ab,bc->'"},
      {"BroadcastArgs", "", 2, {{ENG_DT_INT32, 1, {2}, 2, (const double[]){2, 3}},
                                {ENG_DT_INT32, 1, {1}, 1, (const double[]){4}}},
       "Incompatible shapes: [2,3] vs. [4]"},
      {"BroadcastArgs", "", 2, {{ENG_DT_INT32, 2, {1, 1}, 1, (const double[]){2}},
                                {ENG_DT_INT32, 1, {1}, 1, (const double[]){3}}},
       "In[0] must be a vector"},
      {"LinSpace", "", 3, {{ENG_DT_FLOAT, 0, {0}, 1, (const double[]){1}},
                           {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){5}},
                           {ENG_DT_INT32, 0, {0}, 1, (const double[]){0}}},
       "Requires num > 0: 0"},
      {"LinSpace", "", 3, {{ENG_DT_FLOAT, 1, {1}, 1, (const double[]){1}},
                           {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){5}},
                           {ENG_DT_INT32, 0, {0}, 1, (const double[]){3}}},
       "start must be a scalar"},
      {"LinSpace", "", 3, {{ENG_DT_FLOAT, 0, {0}, 1, (const double[]){1}},
                           {ENG_DT_FLOAT, 0, {0}, 1, (const double[]){5}},
                           {ENG_DT_INT64, 0, {0}, 1, (const double[]){1e15}}},
       "larger than"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof *bad; k++) {
    eng_graph *g = eng_graph_create();
    int id = eng_graph_add_node(g, "badnode", bad[k].op, NULL);
    eng_graph_node(g, id)->n_out = 1;
    td_opcase_attrs(g, id, bad[k].attrs);
    eng_tensor in[4] = {0}, out[1] = {0};
    int n_in = bad[k].n_in;
    for (int i = 0; i < n_in && i < 3; i++) td_opcase_tensor(&bad[k].in[i], &in[i]);
    if (!strcmp(bad[k].op, "StridedSlice")) { /* strides */
      tv st = {ENG_DT_INT32, 1, {1}, 1, (const double[]){1}};
      td_opcase_tensor(&st, &in[3]);
    }
    td_err err;
    td_err_clear(&err);
    eng_kctx ctx = {.node = eng_graph_node(g, id), .node_id = id, .n_in = n_in, .in = in,
                    .n_out = 1, .out = out, .err = &err};
    td_code rc = eng_op_find(bad[k].op)->cpu(&ctx);
    ck_assert_msg(rc != TD_OK, "%s accepted a bad input", bad[k].op);
    ck_assert_msg(strstr(err.msg, "badnode") && strstr(err.msg, bad[k].op) &&
                      strstr(err.msg, bad[k].msg),
                  "%s: message '%s'", bad[k].op, err.msg);
    for (int i = 0; i < 4; i++) eng_tensor_release(&in[i]);
    eng_tensor_release(&out[0]);
    eng_graph_destroy(g);
  }
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_op");
  TCase *tc = tcase_create("table");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, table_not_empty);
  tcase_add_test(tc, every_entry_has_cpu_kernel);
  tcase_add_test(tc, names_strictly_sorted);
  tcase_add_test(tc, find_every_entry);
  tcase_add_test(tc, find_unknown);
  tcase_add_test(tc, every_graph_op_has_arity);
  tcase_add_test(tc, ops_the_loader_needs);
  suite_add_tcase(s, tc);
  TCase *num = tcase_create("numeric");
  tcase_set_timeout(num, 30);
  tcase_add_loop_test(num, numeric_case, 0, td_n_opcases);
  tcase_add_test(num, every_op_is_tested);
  tcase_add_test(num, bad_shapes_fail_cleanly);
  suite_add_tcase(s, num);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
