/* td_opcase: the op test cases TensorFlow computed (tests/engine/
 * op_cases.inc, written by make_op_cases.py) and the helpers that turn
 * them into engine nodes and tensors, shared by the CPU kernel tests and
 * the backend-consistency tests. */
#ifndef TD_OPCASE_H
#define TD_OPCASE_H

#include <stdbool.h>

#include "eng_graph.h"
#include "eng_tensor.h"

typedef struct td_tv {
  eng_dtype dt;
  int rank;
  int64_t dim[ENG_MAX_RANK];
  int n;
  const double *v;
} td_tv;

typedef struct td_opcase {
  const char *op;
  const char *attrs; /* "name=kind:value;..." kinds b i f s t li lf ls */
  int n_in;
  td_tv in[5];
  int n_out;
  td_tv out[3];
} td_opcase;

/* The cases of op_cases.inc. */
extern const td_opcase td_opcases[];
extern const int td_n_opcases;

/* Adds the attributes of an attrs spec to node id. */
void td_opcase_attrs(eng_graph *g, int id, const char *spec);
/* Adds a node of one output to g: inputs by edge name ("x", "n:1"),
 * attrs in td_opcase_attrs's form or NULL. Returns its id. */
int td_opcase_node(eng_graph *g, const char *name, const char *op, const char *attrs, int n_in,
                   const char *const *in);
/* The same with n_out outputs and its inputs as further arguments, ended
 * by NULL: edge names, or "^name" for a control input. */
int td_opcase_vnode(eng_graph *g, const char *name, const char *op, int n_out, ...);
/* A tensor holding v's values. */
void td_opcase_tensor(const td_tv *v, eng_tensor *t);
/* Element i of a numeric or bool tensor, as a double (complex tensors:
 * part i of their (real, imaginary) pairs, as v holds them). */
double td_opcase_elem(const eng_tensor *t, int i);
/* Whether got matches TensorFlow's want for dtype dt: floats within rel
 * (relative, with a 0.1 floor on the scale), NaN matching NaN; others
 * exactly. */
bool td_opcase_close(eng_dtype dt, double got, double want, double rel);

#endif
