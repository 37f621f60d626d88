#include "td_opcase.h"

#include <check.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const td_opcase td_opcases[] = {
#include "../engine/op_cases.inc"
};
const int td_n_opcases = (int)(sizeof td_opcases / sizeof td_opcases[0]);

int td_opcase_node(eng_graph *g, const char *name, const char *op, const char *attrs, int n_in,
                   const char *const *in) {
  int id = eng_graph_add_node(g, name, op, NULL);
  ck_assert_int_ge(id, 0);
  eng_graph_node(g, id)->n_out = 1;
  for (int k = 0; k < n_in; k++) {
    eng_edge e;
    ck_assert_int_eq(eng_graph_parse_edge(g, in[k], &e, NULL), TD_OK);
    ck_assert_int_eq(eng_graph_add_input(g, id, e, NULL), TD_OK);
  }
  if (attrs) td_opcase_attrs(g, id, attrs);
  return id;
}

int td_opcase_vnode(eng_graph *g, const char *name, const char *op, int n_out, ...) {
  td_err err;
  td_err_clear(&err);
  int id = eng_graph_add_node(g, name, op, &err);
  ck_assert_msg(id >= 0, "add %s: %s", name, err.msg);
  eng_graph_node(g, id)->n_out = n_out;
  va_list ap;
  va_start(ap, n_out);
  for (const char *in; (in = va_arg(ap, const char *));) {
    if (in[0] == '^') {
      int from = eng_graph_find(g, in + 1, strlen(in + 1));
      ck_assert_msg(from >= 0, "node %s: no control input %s", name, in + 1);
      ck_assert_int_eq(eng_graph_add_ctrl(g, id, from, NULL), TD_OK);
    } else {
      eng_edge e;
      ck_assert_msg(eng_graph_parse_edge(g, in, &e, &err) == TD_OK, "node %s: input %s: %s", name,
                    in, err.msg);
      ck_assert_int_eq(eng_graph_add_input(g, id, e, NULL), TD_OK);
    }
  }
  va_end(ap);
  return id;
}

void td_opcase_attrs(eng_graph *g, int id, const char *spec) {
  char buf[512];
  snprintf(buf, sizeof buf, "%s", spec);
  for (char *save = NULL, *tok = strtok_r(buf, ";", &save); tok; tok = strtok_r(NULL, ";", &save)) {
    char *eq = strchr(tok, '='), *colon = eq ? strchr(eq, ':') : NULL;
    ck_assert_msg(eq && colon, "bad attr spec '%s'", tok);
    *eq = *colon = '\0';
    const char *kind = eq + 1, *val = colon + 1;
    eng_attr *a = eng_graph_add_attr(g, id, tok);
    if (!strcmp(kind, "b")) {
      a->kind = ENG_ATTR_B;
      a->b = atoi(val);
    } else if (!strcmp(kind, "i")) {
      a->kind = ENG_ATTR_I;
      a->i = atoll(val);
    } else if (!strcmp(kind, "f")) {
      a->kind = ENG_ATTR_F;
      a->f = strtof(val, NULL);
    } else if (!strcmp(kind, "t")) {
      a->kind = ENG_ATTR_TYPE;
      a->type = (eng_dtype)atoi(val);
    } else if (!strcmp(kind, "s")) {
      a->kind = ENG_ATTR_S;
      a->s.data = strdup(val);
      a->s.len = strlen(val);
    } else if (!strcmp(kind, "ls")) { /* comma-separated strings */
      a->kind = ENG_ATTR_LIST;
      a->list_kind = ENG_ATTR_S;
      a->ls = calloc(16, sizeof *a->ls);
      for (const char *p = val; *p && a->n < 16;) {
        size_t n = strcspn(p, ",");
        a->ls[a->n].data = strndup(p, n);
        a->ls[a->n++].len = n;
        p += n + (p[n] == ',');
      }
    } else if (!strcmp(kind, "lf")) {
      a->kind = ENG_ATTR_LIST;
      a->list_kind = ENG_ATTR_F;
      a->lf = calloc(16, sizeof *a->lf);
      for (const char *p = val; *p && a->n < 16;) {
        a->lf[a->n++] = strtof(p, (char **)&p);
        if (*p == ',') p++;
      }
    } else {
      a->kind = ENG_ATTR_LIST;
      a->list_kind = ENG_ATTR_I;
      a->li = calloc(16, sizeof *a->li);
      for (const char *p = val; *p;) {
        a->li[a->n++] = strtoll(p, (char **)&p, 10);
        if (*p == ',') p++;
      }
    }
  }
}

void td_opcase_tensor(const td_tv *v, eng_tensor *t) {
  eng_shape s = eng_shape_make(v->rank, v->dim);
  ck_assert_int_eq(eng_tensor_alloc(t, v->dt, &s, NULL), TD_OK);
  void *d = eng_tensor_data(t);
  /* Complex tensors: v->n counts parts, (real, imaginary) pairs. */
  for (int i = 0; i < v->n; i++) {
    switch (v->dt) {
      case ENG_DT_FLOAT: ((float *)d)[i] = (float)v->v[i]; break;
      case ENG_DT_DOUBLE: ((double *)d)[i] = v->v[i]; break;
      case ENG_DT_INT32: ((int32_t *)d)[i] = (int32_t)v->v[i]; break;
      case ENG_DT_INT64: ((int64_t *)d)[i] = (int64_t)v->v[i]; break;
      case ENG_DT_COMPLEX64: ((float *)d)[i] = (float)v->v[i]; break;
      case ENG_DT_COMPLEX128: ((double *)d)[i] = v->v[i]; break;
      default: ((uint8_t *)d)[i] = v->v[i] != 0; break;
    }
  }
}

double td_opcase_elem(const eng_tensor *t, int i) {
  const void *d = eng_tensor_data(t);
  switch (t->dtype) {
    case ENG_DT_FLOAT: return ((const float *)d)[i];
    case ENG_DT_DOUBLE: return ((const double *)d)[i];
    case ENG_DT_INT32: return ((const int32_t *)d)[i];
    case ENG_DT_INT64: return (double)((const int64_t *)d)[i];
    case ENG_DT_COMPLEX64: return ((const float *)d)[i];
    case ENG_DT_COMPLEX128: return ((const double *)d)[i];
    default: return ((const uint8_t *)d)[i];
  }
}

bool td_opcase_close(eng_dtype dt, double got, double want, double rel) {
  if (dt != ENG_DT_FLOAT && dt != ENG_DT_DOUBLE && dt != ENG_DT_COMPLEX64 &&
      dt != ENG_DT_COMPLEX128)
    return got == want;
  return got == want || fabs(got - want) <= rel * fmax(fabs(want), 1e-1) ||
         (isnan(got) && isnan(want));
}
