/* srv_infer: TF Serving's Classify and Regress semantics, shared by every
 * transport (REST :classify/:regress, gRPC Classify/Regress/MultiInference).
 *
 * A transport turns its request into serialized tf.Example protos, then:
 *   srv_call_begin (spec.sig_errors = SRV_SIG_ERRORS_INFER)
 *   srv_infer_check_signature   TF's PreProcessClassification/-Regression
 *   srv_infer_set_examples      the 1-D DT_STRING tensor fed to "inputs"
 *   srv_call_submit ... done
 *   srv_infer_classify_result / srv_infer_regress_result
 *                               TF's PostProcess*Result: validates the
 *                               outputs and shapes them into plain results
 *   srv_call_end
 * Messages and codes are TF Serving's (classifier.cc, regressor.cc, util.cc):
 *   "Expected one input Tensor.", "Expected one or two output Tensors, found
 *   3", "No classification inputs found in SignatureDef: <signature>",
 *   "Expected classification signature outputs to contain at least one of
 *   \"classes\" or \"scores\". Signature was: <signature>", "Expected one
 *   output Tensor.", "No regression outputs found in SignatureDef: ...",
 *   "Expected Tensor shape: [batch_size num_classes] but got [3]",
 *   "Expected scores Tensor of DT_FLOAT. Got: DT_INT32", "Expected output
 *   Tensor shape to be either [batch_size] or [batch_size, 1] but got [2,3]",
 *   "Input batch size did not match output batch size: 2 vs. 3", ...
 * all INVALID_ARGUMENT. <signature> is a text-format dump of the SignatureDef
 * in the spirit of protobuf's DebugString (not byte-identical to it).
 * Method names are checked only with srv_api_method_name_check()
 * (--enable_signature_method_name_check): then "tensorflow/serving/classify"
 * or ".../regress" is required (INVALID_ARGUMENT "Expected classification
 * signature method_name to be tensorflow/serving/classify. Was: ...").
 *
 * Context merging: with a context, element i of the input tensor is the
 * context's serialized bytes followed by example i's, which protobuf parsing
 * merges (example features win over context features of the same name), as
 * TF Serving's InputToSerializedExampleTensor does.
 *
 * Ownership. Results point into the call's output tensors (labels) or own
 * one array (free with srv_classify_result_free); they are valid until
 * srv_call_end. Threads: no state; any thread, distinct calls. Failures fill
 * the optional td_err and leave out-params untouched. */
#ifndef SRV_INFER_H
#define SRV_INFER_H

#include <stdbool.h>
#include <stddef.h>

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "srv_api.h"
#include "td_buf.h"
#include "td_status.h"

typedef enum { SRV_INFER_CLASSIFY, SRV_INFER_REGRESS } srv_infer_kind;

#define SRV_INFER_INPUTS "inputs"   /* the serialized-Example input's alias */
#define SRV_INFER_CLASSES "classes" /* DT_STRING [batch, num_classes] */
#define SRV_INFER_SCORES "scores"   /* DT_FLOAT  [batch, num_classes] */
#define SRV_INFER_OUTPUTS "outputs" /* DT_FLOAT  [batch] or [batch, 1] */

td_code srv_infer_check_signature(srv_infer_kind kind, const ldr_signature *sig, td_err *err);

/* Sets c->inputs[<"inputs">] (the signature must have passed the check) to
 * a [n] DT_STRING tensor: context bytes (context.len may be 0) followed by
 * examples[i]. n == 0 fails with "Input is empty."; a signature whose
 * "inputs" is not declared DT_STRING fails as TensorFlow's feed check does
 * ("Expects arg[0] to be float but string is provided"). The tensor, the
 * context counted once per example, is charged to the request's input
 * budget first (srv_call_charge: RESOURCE_EXHAUSTED naming the sizes). */
td_code srv_infer_set_examples(srv_call *c, const eng_str *examples, int n, eng_str context,
                               td_err *err);

typedef struct srv_class {
  const char *label; /* into the "classes" output; "" when it has none */
  size_t label_len;
  float score; /* 0 when the signature has no "scores" output */
} srv_class;

typedef struct srv_classify_result {
  int n_examples;
  int n_classes;
  srv_class *classes; /* n_examples * n_classes, row-major; owned */
} srv_classify_result;

/* Validates the outputs of a finished classify call and fills *out. */
td_code srv_infer_classify_result(const srv_call *c, int n_examples, srv_classify_result *out,
                                  td_err *err);
void srv_classify_result_free(srv_classify_result *r);

/* Validates the output of a finished regress call; *values (n_examples
 * floats) points into the call's output tensor. */
td_code srv_infer_regress_result(const srv_call *c, int n_examples, const float **values,
                                 td_err *err);

/* Appends a text-format dump of a signature (used in TF's messages). */
void srv_infer_signature_text(const ldr_signature *sig, td_buf *out);

#endif
