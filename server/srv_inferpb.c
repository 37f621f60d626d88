#include "srv_inferpb.h"

#include <stdlib.h>
#include <string.h>

void srv_inferpb_classification_free(srv_inferpb_classification *k) {
  free(k->per_example), free(k->per_example_p), free(k->classes), free(k->classes_p);
  free(k->labels);
  srv_classify_result_free(&k->cr);
  memset(k, 0, sizeof *k); /* freeing twice is safe */
}

td_code srv_inferpb_classify(const srv_call *call, int n_examples, srv_inferpb_classification *k,
                             td_err *err) {
  memset(k, 0, sizeof *k);
  tensorflow__serving__classification_result__init(&k->result);
  td_code rc = srv_infer_classify_result(call, n_examples, &k->cr, err);
  if (rc) return rc;
  size_t ne = (size_t)k->cr.n_examples, nc = (size_t)k->cr.n_classes, total = ne * nc;
  size_t label_bytes = 0;
  for (size_t i = 0; i < total; i++) label_bytes += k->cr.classes[i].label_len + 1;
  k->per_example = calloc(ne + 1, sizeof *k->per_example);
  k->per_example_p = calloc(ne + 1, sizeof *k->per_example_p);
  k->classes = calloc(total + 1, sizeof *k->classes);
  k->classes_p = calloc(total + 1, sizeof *k->classes_p);
  k->labels = malloc(label_bytes + 1);
  if (!k->per_example || !k->per_example_p || !k->classes || !k->classes_p || !k->labels) {
    srv_inferpb_classification_free(k);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  char *lp = k->labels;
  for (size_t i = 0; i < total; i++) {
    const srv_class *src = &k->cr.classes[i];
    tensorflow__serving__class__init(&k->classes[i]);
    memcpy(lp, src->label, src->label_len);
    lp[src->label_len] = '\0';
    k->classes[i].label = lp;
    lp += src->label_len + 1;
    k->classes[i].score = src->score;
    k->classes_p[i] = &k->classes[i];
  }
  for (size_t e = 0; e < ne; e++) {
    tensorflow__serving__classifications__init(&k->per_example[e]);
    k->per_example[e].n_classes = nc;
    k->per_example[e].classes = k->classes_p + e * nc;
    k->per_example_p[e] = &k->per_example[e];
  }
  k->result.n_classifications = ne;
  k->result.classifications = k->per_example_p;
  return TD_OK;
}

void srv_inferpb_regression_free(srv_inferpb_regression *g) {
  free(g->values), free(g->values_p);
  memset(g, 0, sizeof *g);
}

td_code srv_inferpb_regress(const srv_call *call, int n_examples, srv_inferpb_regression *g,
                            td_err *err) {
  memset(g, 0, sizeof *g);
  tensorflow__serving__regression_result__init(&g->result);
  const float *v;
  td_code rc = srv_infer_regress_result(call, n_examples, &v, err);
  if (rc) return rc;
  size_t n = (size_t)n_examples;
  g->values = calloc(n + 1, sizeof *g->values);
  g->values_p = calloc(n + 1, sizeof *g->values_p);
  if (!g->values || !g->values_p) {
    srv_inferpb_regression_free(g);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
  }
  for (size_t i = 0; i < n; i++) {
    tensorflow__serving__regression__init(&g->values[i]);
    g->values[i].value = v[i];
    g->values_p[i] = &g->values[i];
  }
  g->result.n_regressions = n;
  g->result.regressions = g->values_p;
  return TD_OK;
}
