/* srv_inferpb: the result of a finished Classify or Regress call as TF
 * Serving's protobuf-c messages (ClassificationResult, RegressionResult),
 * for the gRPC answers and the request log.
 *
 * The call's outputs are validated as srv_infer_classify_result /
 * srv_infer_regress_result do (same errors). Ownership: the message points
 * into arrays the struct owns (free with the matching _free, also after a
 * failure) and, for labels, into NUL-terminated copies; valid until freed.
 * Threads: no state. */
#ifndef SRV_INFERPB_H
#define SRV_INFERPB_H

#include "srv_api.h"
#include "srv_infer.h"
#include "td_status.h"
#include "tensorflow_serving/apis/classification.pb-c.h"
#include "tensorflow_serving/apis/regression.pb-c.h"

typedef struct srv_inferpb_classification {
  Tensorflow__Serving__ClassificationResult result;
  Tensorflow__Serving__Classifications *per_example, **per_example_p;
  Tensorflow__Serving__Class *classes, **classes_p;
  char *labels; /* NUL-terminated copies: protobuf-c strings are C strings */
  srv_classify_result cr;
} srv_inferpb_classification;

typedef struct srv_inferpb_regression {
  Tensorflow__Serving__RegressionResult result;
  Tensorflow__Serving__Regression *values, **values_p;
} srv_inferpb_regression;

td_code srv_inferpb_classify(const srv_call *call, int n_examples, srv_inferpb_classification *k,
                             td_err *err);
void srv_inferpb_classification_free(srv_inferpb_classification *k);
td_code srv_inferpb_regress(const srv_call *call, int n_examples, srv_inferpb_regression *g,
                            td_err *err);
void srv_inferpb_regression_free(srv_inferpb_regression *g);

#endif
