/* The model zoo: real Keras 3 models (MLP, CNN with batch norm and pooling,
 * MobileNetV2, a transformer encoder over int token ids with an attention
 * mask, a two-input/two-output functional model) exported by TensorFlow
 * 2.19.1, loaded with ldr_servable_load and run on the engine, compared with
 * TensorFlow's own outputs at batch 1 and 8 (tests/fixtures/zoo.json, written
 * by scripts/make_fixtures.py --zoo).
 *
 * Inputs are not stored: zoo_fill computes them with the formula the
 * fixture script uses, in exact float32 arithmetic.
 *
 * Bound: every element must satisfy |ours - tf| <= 1e-4 * max(|tf|, 1e-2).
 * That is a relative error of 1e-4; the floor 1e-2 only matters for outputs
 * near zero, where a relative bound measures cancellation noise rather than
 * correctness (float32 sums of thousands of products carry ~1e-7 absolute
 * error whatever their result). Softmax outputs of these models are all
 * above the floor or far below any visible difference. */
#include <check.h>
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model.h"
#include "ldr_servable.h"

#define ZOO_JSON TD_FIXTURES "/zoo.json"
#define REL_BOUND 1e-4
#define ABS_FLOOR 1e-2

static cJSON *zoo;

static void load_json(void) {
  FILE *f = fopen(ZOO_JSON, "rb");
  ck_assert_msg(f != NULL, "cannot open %s", ZOO_JSON);
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *buf = malloc((size_t)n + 1);
  ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
  buf[n] = '\0';
  fclose(f);
  zoo = cJSON_Parse(buf);
  free(buf);
  ck_assert_ptr_nonnull(zoo);
}

static eng_dtype dtype_of(const char *s) {
  if (!strcmp(s, "float32")) return ENG_DT_FLOAT;
  if (!strcmp(s, "int32")) return ENG_DT_INT32;
  if (!strcmp(s, "int64")) return ENG_DT_INT64;
  ck_abort_msg("dtype %s", s);
  return ENG_DT_INVALID;
}

/* The fixture script's zoo_input(), value for value. */
static void zoo_fill(const cJSON *spec, int batch, eng_tensor *t) {
  const cJSON *shape = cJSON_GetObjectItem(spec, "shape");
  int64_t dims[ENG_MAX_RANK];
  int r = 0;
  dims[r++] = batch;
  const cJSON *d;
  cJSON_ArrayForEach(d, shape) dims[r++] = (int64_t)d->valuedouble;
  eng_shape s = eng_shape_make(r, dims);
  eng_dtype dt = dtype_of(cJSON_GetObjectItem(spec, "dtype")->valuestring);
  ck_assert_int_eq(eng_tensor_alloc(t, dt, &s, NULL), TD_OK);
  const char *gen = cJSON_GetObjectItem(spec, "gen")->valuestring;
  const cJSON *sj = cJSON_GetObjectItem(spec, "seed"), *mj = cJSON_GetObjectItem(spec, "mod");
  int64_t seed = sj ? (int64_t)sj->valuedouble : 0, mod = mj ? (int64_t)mj->valuedouble : 1;
  int64_t n = eng_tensor_numel(t), last = dims[r - 1];
  for (int64_t i = 0; i < n; i++) {
    int64_t v;
    if (!strcmp(gen, "float")) {
      int64_t k = (i * 7919 + seed) % 2001;
      ((float *)eng_tensor_data(t))[i] = (float)k / 1000.0f - 1.0f;
      continue;
    } else if (!strcmp(gen, "int")) {
      v = (i * 31 + seed) % mod;
    } else {
      int64_t col = i % last, row = i / last;
      v = col < last - 3 * (row % 4);
    }
    if (dt == ENG_DT_INT32)
      ((int32_t *)eng_tensor_data(t))[i] = (int32_t)v;
    else
      ((int64_t *)eng_tensor_data(t))[i] = v;
  }
}

/* The load keeps each packed weight once, in its packed layout: no
 * original of a packed weight outlives the load, and what the version
 * holds in weights (variables plus packed layouts) stays within 1.3x the
 * weights it serves. Checked after runs at batch 1 (the plan prepared at
 * load) and 8 (a shape specialisation built after the release). */
static void check_weights(const char *name, const ldr_servable *sv) {
  eng_weight_stats st = ldr_servable_weight_stats(sv);
  size_t weights = st.variable_bytes + st.released_bytes;
  printf("zoo %-14s weights %zu B: variables held %zu, packed %zu, packed originals held %zu, "
         "released %zu\n",
         name, weights, st.variable_bytes, st.packed_bytes, st.packed_sources, st.released_bytes);
  if (!st.packed_bytes) return; /* nothing packed (a CPU without AVX2) */
  ck_assert_msg(st.packed_sources == 0, "%s: %zu bytes of packed weights' originals still held",
                name, st.packed_sources);
  ck_assert_uint_gt(st.released_bytes, 0);
  ck_assert_msg(st.variable_bytes + st.packed_bytes <= weights + weights * 3 / 10,
                "%s: holds %zu bytes of weights for %zu", name,
                st.variable_bytes + st.packed_bytes, weights);
}

static void run_model(const char *name) {
  if (!zoo) load_json();
  const cJSON *m = cJSON_GetObjectItem(cJSON_GetObjectItem(zoo, "models"), name);
  ck_assert_msg(m != NULL, "zoo.json has no model %s", name);
  char dir[512];
  snprintf(dir, sizeof dir, "%s/../../%s", TD_FIXTURES,
           cJSON_GetObjectItem(m, "dir")->valuestring);
  ldr_servable *sv = NULL;
  td_err err;
  td_err_clear(&err);
  td_code rc = ldr_servable_load(dir, 1, "serve", &sv, &err);
  ck_assert_msg(rc == TD_OK, "%s: %s", name, err.msg);
  const ldr_signature *sig = ldr_servable_signature(sv, "serving_default");
  ck_assert_ptr_nonnull(sig);
  ck_assert_msg(sig->plan != NULL, "%s: %s", name, sig->plan_error);
  const cJSON *ins = cJSON_GetObjectItem(m, "inputs"), *outs = cJSON_GetObjectItem(m, "outputs");
  ck_assert_int_eq(sig->n_inputs, cJSON_GetArraySize(ins));
  ck_assert_int_eq(sig->n_outputs, cJSON_GetArraySize(outs));
  for (int batch = 1; batch <= 8; batch += 7) {
    eng_tensor in[8] = {0}, out[8] = {0};
    for (int k = 0; k < sig->n_inputs; k++) {
      const cJSON *spec = cJSON_GetObjectItem(ins, sig->inputs[k].alias);
      ck_assert_msg(spec != NULL, "%s: input %s", name, sig->inputs[k].alias);
      zoo_fill(spec, batch, &in[k]);
    }
    rc = eng_plan_run(sig->plan, in, out, &err);
    ck_assert_msg(rc == TD_OK, "%s batch %d: %s", name, batch, err.msg);
    for (int k = 0; k < sig->n_outputs; k++) {
      char key[16];
      snprintf(key, sizeof key, "batch%d", batch);
      const cJSON *ref = cJSON_GetObjectItem(
          cJSON_GetObjectItem(outs, sig->outputs[k].alias), key);
      ck_assert_msg(ref != NULL, "%s: output %s", name, sig->outputs[k].alias);
      const cJSON *shape = cJSON_GetObjectItem(ref, "shape"), *vals = cJSON_GetObjectItem(ref, "values");
      ck_assert_int_eq(out[k].dtype, ENG_DT_FLOAT);
      ck_assert_int_eq(out[k].shape.rank, cJSON_GetArraySize(shape));
      for (int d = 0; d < out[k].shape.rank; d++)
        ck_assert_int_eq(out[k].shape.dim[d], (int64_t)cJSON_GetArrayItem(shape, d)->valuedouble);
      ck_assert_int_eq(eng_tensor_numel(&out[k]), cJSON_GetArraySize(vals));
      const float *got = eng_tensor_data(&out[k]);
      double worst = 0;
      int64_t at = 0, i = 0;
      const cJSON *v;
      cJSON_ArrayForEach(v, vals) {
        double want = v->valuedouble, den = fabs(want) > ABS_FLOOR ? fabs(want) : ABS_FLOOR;
        double e = fabs(got[i] - want) / den;
        if (e > worst || e != e) {
          worst = e;
          at = i;
        }
        i++;
      }
      printf("zoo %-14s batch %d output %-10s max rel err %.3g\n", name, batch,
             sig->outputs[k].alias, worst);
      ck_assert_msg(worst <= REL_BOUND, "%s batch %d output %s: rel err %g at %lld (got %.9g want %.9g)",
                    name, batch, sig->outputs[k].alias, worst, (long long)at, got[at],
                    cJSON_GetArrayItem(vals, (int)at)->valuedouble);
    }
    for (int k = 0; k < 8; k++) {
      eng_tensor_release(&in[k]);
      eng_tensor_release(&out[k]);
    }
  }
  check_weights(name, sv);
  /* A Keras export's "serve" signature calls the function serving_default
   * calls: the two share one plan (so its outputs are the ones above). */
  const cJSON *how = cJSON_GetObjectItem(m, "export");
  if (how && cJSON_IsString(how) && !strcmp(how->valuestring, "model.export")) {
    const ldr_signature *serve = ldr_servable_signature(sv, "serve");
    ck_assert_msg(serve != NULL, "%s: no 'serve' signature", name);
    ck_assert_msg(serve->plan == sig->plan && serve->plan_shared && !sig->plan_shared,
                  "%s: 'serve' does not share serving_default's plan", name);
  }
  ldr_servable_unref(sv);
}

START_TEST(zoo_mlp) { run_model("mlp"); }
END_TEST
START_TEST(zoo_cnn) { run_model("cnn"); }
END_TEST
START_TEST(zoo_mobilenet_v2) { run_model("mobilenet_v2"); }
END_TEST
START_TEST(zoo_transformer) { run_model("transformer"); }
END_TEST
START_TEST(zoo_two_io) { run_model("two_io"); }
END_TEST

int main(void) {
  Suite *s = suite_create("ldr_zoo");
  TCase *tc = tcase_create("zoo");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, zoo_mlp);
  tcase_add_test(tc, zoo_cnn);
  tcase_add_test(tc, zoo_mobilenet_v2);
  tcase_add_test(tc, zoo_transformer);
  tcase_add_test(tc, zoo_two_io);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  cJSON_Delete(zoo);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
