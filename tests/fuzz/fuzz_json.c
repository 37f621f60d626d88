/* REST request bodies -> srv_json_parse_request -> tensors, as the REST
 * layer decodes them: predict ("instances" / "inputs", row and columnar,
 * b64 objects) against two signatures (half_plus_two's single float input,
 * and a hand-made one with float, int64, string and bool inputs of several
 * ranks), and classify / regress examples. */
#include <math.h>
#include <stdbool.h>

#include "fuzz_util.h"
#include "srv_json.h"
#include "srv_jsonexample.h"

static ldr_tensor_info multi_in[4];
static ldr_signature single, multi;
static ldr_tensor_info single_in[1];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  single_in[0] = (ldr_tensor_info){
      .alias = "x", .name = "x:0", .dtype = ENG_DT_FLOAT, .shape = {.rank = 1, .dim = {-1}}};
  single = (ldr_signature){.key = "serving_default", .n_inputs = 1, .inputs = single_in};
  /* Sorted by alias, as ldr_signature promises. */
  multi_in[0] = (ldr_tensor_info){
      .alias = "a", .name = "a:0", .dtype = ENG_DT_FLOAT, .shape = {.rank = 2, .dim = {-1, 3}}};
  multi_in[1] = (ldr_tensor_info){
      .alias = "b", .name = "b:0", .dtype = ENG_DT_INT64, .shape = {.rank = 1, .dim = {-1}}};
  multi_in[2] =
      (ldr_tensor_info){.alias = "c", .name = "c:0", .dtype = ENG_DT_STRING, .shape = {.rank = -1}};
  multi_in[3] = (ldr_tensor_info){
      .alias = "d", .name = "d:0", .dtype = ENG_DT_BOOL, .shape = {.rank = 3, .dim = {-1, -1, 2}}};
  multi = (ldr_signature){.key = "serving_default", .n_inputs = 4, .inputs = multi_in};
  return 0;
}

static void decode(const srv_json_request *r, const ldr_signature *sig) {
  eng_tensor in[4];
  srv_json_format fmt;
  td_err err;
  /* A 4 KiB budget: small inputs decode, larger ones take the refusal path. */
  if (srv_json_decode_predict(r, sig, 4096, in, &fmt, &err) == TD_OK)
    for (int i = 0; i < sig->n_inputs; i++) eng_tensor_release(&in[i]);
}

/* A JSON number as text must read as strtod reads it (srv_jsonparse has
 * its own fast paths for decimals). Only inputs that are a whole JSON
 * number: optional '-', digits, optional fraction and exponent. */
static bool is_json_number(const char *s, size_t n) {
  size_t i = 0;
  if (i < n && s[i] == '-') i++;
  if (i >= n || s[i] < '0' || s[i] > '9') return false;
  if (s[i] == '0')
    i++;
  else
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  if (i < n && s[i] == '.') {
    if (++i >= n || s[i] < '0' || s[i] > '9') return false;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  if (i < n && (s[i] == 'e' || s[i] == 'E')) {
    i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) i++;
    if (i >= n || s[i] < '0' || s[i] > '9') return false;
    while (i < n && s[i] >= '0' && s[i] <= '9') i++;
  }
  return i == n;
}

static void check_number(const uint8_t *data, size_t size) {
  char t[64];
  if (size >= sizeof t || !is_json_number((const char *)data, size)) return;
  memcpy(t, data, size);
  t[size] = '\0';
  double want = strtod(t, NULL);
  if (isinf(want)) return; /* refused as too large */
  cJSON *v = NULL;
  td_err err;
  if (srv_json_parse(t, size, &v, &err) != TD_OK) abort();
  if (!(v->valuedouble == want || (isnan(want) && isnan(v->valuedouble)))) abort();
  srv_json_free(v);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  check_number(data, size);
  srv_json_request r;
  td_err err;
  if (srv_json_parse_request((const char *)data, size, &r, &err) != TD_OK) return 0;
  decode(&r, &single);
  decode(&r, &multi);
  srv_json_examples ex;
  if (srv_json_decode_examples(&r, &ex, &err) == TD_OK) srv_json_examples_free(&ex);
  srv_json_request_free(&r);
  return 0;
}
