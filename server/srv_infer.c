/* Classify/Regress checks and result shaping (contract in srv_infer.h). */
#include "srv_infer.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

static void info_text(const char *field, const ldr_tensor_info *t, td_buf *b) {
  td_buf_printf(b, "%s {\n  key: \"%s\"\n  value {\n    name: \"%s\"\n", field, t->alias, t->name);
  if (t->dtype_name)
    td_buf_printf(b, "    dtype: %s\n", t->dtype_name);
  else
    td_buf_printf(b, "    dtype: %d\n", t->tf_dtype);
  if (t->has_shape) {
    td_buf_puts(b, "    tensor_shape {\n");
    if (t->shape.rank < 0) td_buf_puts(b, "      unknown_rank: true\n");
    for (int d = 0; d < t->shape.rank; d++)
      td_buf_printf(b, "      dim {\n        size: %" PRId64 "\n      }\n", t->shape.dim[d]);
    td_buf_puts(b, "    }\n");
  }
  td_buf_puts(b, "  }\n}\n");
}

void srv_infer_signature_text(const ldr_signature *sig, td_buf *out) {
  for (int i = 0; i < sig->n_inputs; i++) info_text("inputs", &sig->inputs[i], out);
  for (int i = 0; i < sig->n_outputs; i++) info_text("outputs", &sig->outputs[i], out);
  td_buf_printf(out, "method_name: \"%s\"\n", sig->method_name ? sig->method_name : "");
}

static td_code sig_error(td_err *err, const char *what, const ldr_signature *sig) {
  td_buf b;
  td_buf_init(&b);
  td_buf_puts(&b, what);
  srv_infer_signature_text(sig, &b);
  td_err_set(err, TD_INVALID_ARGUMENT, "%s", b.oom || !b.data ? what : b.data);
  td_buf_free(&b);
  return TD_INVALID_ARGUMENT;
}

td_code srv_infer_check_signature(srv_infer_kind kind, const ldr_signature *sig, td_err *err) {
  const char *want = kind == SRV_INFER_CLASSIFY ? "tensorflow/serving/classify"
                                                : "tensorflow/serving/regress";
  if (srv_api_method_name_check() && strcmp(sig->method_name ? sig->method_name : "", want))
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expected %s signature method_name to be %s. Was: %s",
                      kind == SRV_INFER_CLASSIFY ? "classification" : "regression", want,
                      sig->method_name ? sig->method_name : "");
  if (sig->n_inputs != 1) return td_err_set(err, TD_INVALID_ARGUMENT, "Expected one input Tensor.");
  if (kind == SRV_INFER_CLASSIFY) {
    if (sig->n_outputs != 1 && sig->n_outputs != 2)
      return td_err_set(err, TD_INVALID_ARGUMENT, "Expected one or two output Tensors, found %d",
                        sig->n_outputs);
    if (ldr_signature_input(sig, SRV_INFER_INPUTS) < 0)
      return sig_error(err, "No classification inputs found in SignatureDef: ", sig);
    if (ldr_signature_output(sig, SRV_INFER_CLASSES) < 0 &&
        ldr_signature_output(sig, SRV_INFER_SCORES) < 0)
      return sig_error(err,
                       "Expected classification signature outputs to contain at least one of "
                       "\"classes\" or \"scores\". Signature was: ",
                       sig);
    return TD_OK;
  }
  if (sig->n_outputs != 1)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expected one output Tensor.");
  if (ldr_signature_input(sig, SRV_INFER_INPUTS) < 0)
    return sig_error(err, "No regression inputs found in SignatureDef: ", sig);
  if (ldr_signature_output(sig, SRV_INFER_OUTPUTS) < 0)
    return sig_error(err, "No regression outputs found in SignatureDef: ", sig);
  return TD_OK;
}

td_code srv_infer_set_examples(srv_call *c, const eng_str *examples, int n, eng_str context,
                               td_err *err) {
  int in = ldr_signature_input(c->sig, SRV_INFER_INPUTS);
  if (in < 0) return td_err_set(err, TD_INVALID_ARGUMENT, "Expected one input Tensor.");
  if (n <= 0) return td_err_set(err, TD_INVALID_ARGUMENT, "Input is empty.");
  const ldr_tensor_info *ti = &c->sig->inputs[in];
  if (ti->dtype != ENG_DT_STRING)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expects arg[0] to be %s but string is provided",
                      eng_dtype_name(ti->dtype));
  /* The context is copied into every element: n examples sent once with
   * one context expand to n * context bytes, so the budget is charged
   * before anything of that size exists. */
  unsigned __int128 total = (unsigned __int128)(unsigned)n * context.len;
  for (int i = 0; i < n; i++) total += examples[i].len;
  size_t bytes = eng_tensor_strings_size(n, total > SIZE_MAX ? SIZE_MAX : (size_t)total);
  td_code rc = srv_call_charge(c, ti->alias, bytes, err);
  if (rc) return rc;
  size_t *lens = malloc((size_t)n * sizeof *lens);
  if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  for (int i = 0; i < n; i++) lens[i] = context.len + examples[i].len;
  eng_shape shape = eng_shape_make(1, (int64_t[]){n});
  eng_tensor t = {0};
  rc = eng_tensor_alloc_strings(&t, &shape, lens, err);
  free(lens);
  if (rc) return rc;
  for (int i = 0; i < n; i++) {
    char *dst = eng_tensor_str_bytes(&t, i);
    if (context.len) memcpy(dst, context.data, context.len);
    if (examples[i].len) memcpy(dst + context.len, examples[i].data, examples[i].len);
  }
  eng_tensor_release(&c->inputs[in]);
  c->inputs[in] = t;
  return TD_OK;
}

static const char *dt_enum(eng_dtype dt) { return eng_dtype_enum_name(dt); }

static td_code check_matrix(const char *what, const eng_tensor *t, eng_dtype want, int n_examples,
                            td_err *err) {
  char sh[96];
  if (t->shape.rank != 2)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Expected Tensor shape: [batch_size num_classes] but got %s",
                      eng_shape_str(&t->shape, sh, sizeof sh));
  if (t->dtype != want)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expected %s Tensor of %s. Got: %s", what,
                      dt_enum(want), dt_enum(t->dtype));
  if (t->shape.dim[0] != n_examples)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expected %s output batch size of %d. Got: %" PRId64,
                      what, n_examples, t->shape.dim[0]);
  return TD_OK;
}

td_code srv_infer_classify_result(const srv_call *c, int n_examples, srv_classify_result *out,
                                  td_err *err) {
  int ic = ldr_signature_output(c->sig, SRV_INFER_CLASSES);
  int is = ldr_signature_output(c->sig, SRV_INFER_SCORES);
  const eng_tensor *classes = ic >= 0 ? &c->outputs[ic] : NULL;
  const eng_tensor *scores = is >= 0 ? &c->outputs[is] : NULL;
  td_code rc;
  if (classes && (rc = check_matrix("classes", classes, ENG_DT_STRING, n_examples, err))) return rc;
  if (scores && (rc = check_matrix("scores", scores, ENG_DT_FLOAT, n_examples, err))) return rc;
  int64_t n_classes = 0;
  if (classes && scores && classes->shape.dim[1] != scores->shape.dim[1])
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Tensors class and score should match in dim_size(1). Got %" PRId64
                      " vs. %" PRId64,
                      classes->shape.dim[1], scores->shape.dim[1]);
  n_classes = classes ? classes->shape.dim[1] : scores ? scores->shape.dim[1] : 0;
  if (n_classes > INT32_MAX || (n_examples && n_classes > (int64_t)(SIZE_MAX / sizeof(srv_class)) / n_examples))
    return td_err_set(err, TD_INVALID_ARGUMENT, "too many classes: %" PRId64, n_classes);
  size_t total = (size_t)n_examples * (size_t)n_classes;
  srv_class *cl = calloc(total + 1, sizeof *cl);
  if (!cl) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  const eng_str *labels = classes ? eng_tensor_strs(classes) : NULL;
  const float *sv = scores ? eng_tensor_data(scores) : NULL;
  for (size_t i = 0; i < total; i++) {
    cl[i].label = labels ? labels[i].data : "";
    cl[i].label_len = labels ? labels[i].len : 0;
    cl[i].score = sv ? sv[i] : 0.0f;
  }
  *out = (srv_classify_result){.n_examples = n_examples, .n_classes = (int)n_classes,
                               .classes = cl};
  return TD_OK;
}

void srv_classify_result_free(srv_classify_result *r) {
  if (!r) return;
  free(r->classes);
  r->classes = NULL;
  r->n_examples = r->n_classes = 0;
}

td_code srv_infer_regress_result(const srv_call *c, int n_examples, const float **values,
                                 td_err *err) {
  int io = ldr_signature_output(c->sig, SRV_INFER_OUTPUTS);
  if (io < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Could not find output tensor '%s'",
                      SRV_INFER_OUTPUTS);
  const eng_tensor *t = &c->outputs[io];
  char sh[96];
  if (!(t->shape.rank == 1 || (t->shape.rank == 2 && t->shape.dim[1] == 1)))
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Expected output Tensor shape to be either [batch_size] or [batch_size, 1] "
                      "but got %s",
                      eng_shape_str(&t->shape, sh, sizeof sh));
  if (t->shape.dim[0] != n_examples)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "Input batch size did not match output batch size: %d vs. %" PRId64,
                      n_examples, t->shape.dim[0]);
  if (t->dtype != ENG_DT_FLOAT)
    return td_err_set(err, TD_INVALID_ARGUMENT, "Expected output Tensor of DT_FLOAT.  Got: %s",
                      dt_enum(t->dtype));
  *values = eng_tensor_data(t);
  return TD_OK;
}
