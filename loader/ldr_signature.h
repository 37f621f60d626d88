/* ldr_signature: a SignatureDef as the rest of tensord sees it, decoded
 * from the SavedModel once at load. Plain values owned by the servable that
 * holds them; read-only after load, so any thread may read them while it
 * holds a reference to the servable. */
#ifndef LDR_SIGNATURE_H
#define LDR_SIGNATURE_H

#include "eng_tensor.h"

struct eng_plan;

typedef struct ldr_tensor_info {
  char *alias;     /* key in the SignatureDef's inputs/outputs map */
  char *name;      /* graph tensor, "node:index" */
  eng_dtype dtype; /* the declared dtype (refs reported as their base type) */
  eng_shape shape; /* the declared shape; rank -1 when unknown */
} ldr_tensor_info;

typedef struct ldr_signature {
  char *key;         /* "serving_default" */
  char *method_name; /* "tensorflow/serving/predict" */
  int n_inputs;
  ldr_tensor_info *inputs; /* sorted by alias */
  int n_outputs;
  ldr_tensor_info *outputs; /* sorted by alias */
  struct eng_plan *plan;    /* compiled feed->fetch plan; NULL if it failed */
  char *plan_error;         /* why plan is NULL */
} ldr_signature;

/* Index of the input/output with this alias, or -1. */
int ldr_signature_input(const ldr_signature *s, const char *alias);
int ldr_signature_output(const ldr_signature *s, const char *alias);

#endif
