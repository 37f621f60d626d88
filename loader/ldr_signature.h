/* ldr_signature: a SignatureDef as the rest of tensord sees it, decoded
 * from the SavedModel once at load. Plain values owned by the servable that
 * holds them; read-only after load, so any thread may read them while it
 * holds a reference to the servable. */
#ifndef LDR_SIGNATURE_H
#define LDR_SIGNATURE_H

#include <stdbool.h>

#include "eng_tensor.h"

struct eng_plan;

typedef struct ldr_tensor_info {
  char *alias;     /* key in the SignatureDef's inputs/outputs map */
  char *name;      /* graph tensor, "node:index" */
  eng_dtype dtype; /* the declared dtype (refs reported as their base type) */
  eng_shape shape; /* the declared shape; rank -1 when unknown */
  /* As declared, for the metadata API (TensorInfo printed back verbatim): */
  int tf_dtype;           /* the DataType number, refs (base + 100) included */
  const char *dtype_name; /* its enum name ("DT_FLOAT", "DT_INVALID"), static;
                             NULL for a number TensorFlow's enum lacks */
  bool has_shape;         /* the TensorInfo carries a tensor_shape at all */
  char **dim_names;       /* shape.rank names, or NULL when every dim is unnamed */
} ldr_tensor_info;

typedef struct ldr_signature {
  char *key;         /* "serving_default" */
  char *method_name; /* "tensorflow/serving/predict" */
  int n_inputs;
  ldr_tensor_info *inputs; /* sorted by alias */
  int n_outputs;
  ldr_tensor_info *outputs; /* sorted by alias */
  struct eng_plan *plan;    /* compiled feed->fetch plan; NULL if it failed. Shared with
                               another signature of the servable that computes the same
                               (plan_shared on all but its owner): inputs and outputs are
                               by position, in alias order */
  bool plan_shared;         /* plan is another signature's: not freed with this one */
  char *plan_error;         /* why plan is NULL */
} ldr_signature;

/* Index of the input/output with this alias, or -1. */
int ldr_signature_input(const ldr_signature *s, const char *alias);
int ldr_signature_output(const ldr_signature *s, const char *alias);

#endif
