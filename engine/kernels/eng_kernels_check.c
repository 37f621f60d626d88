/* Load-time checks of the op table (eng_op.h's check): what a kernel
 * accepts, read from a node's attributes alone. Each check mirrors the
 * refusals its kernel would make on every request (a dtype it has no loop
 * for, a data format or stride layout it does not walk, an equation it
 * cannot plan), so a version that would refuse them fails its load. A
 * missing attribute is TensorFlow's default, never a failure: kernels read
 * the same defaults. */
#include <stdio.h>
#include <string.h>

#include "eng_einsum.h"
#include "eng_kernels.h"

/* Fails naming the node and op. */
#define FAIL(n, err, code, ...)                                                 \
  do {                                                                          \
    char m_[256];                                                               \
    snprintf(m_, sizeof m_, __VA_ARGS__);                                       \
    return td_err_set(err, code, "node '%s' (%s): %s", (n)->name, (n)->op, m_); \
  } while (0)

/* The dtype attribute `attr` (when present) is one of mask's classes. */
enum { C_FLOAT = 1, C_DOUBLE = 2, C_INT = 4, C_BOOL = 8, C_STRING = 16 };

static bool dtype_in(eng_dtype dt, unsigned mask) {
  dt = eng_dtype_widened(dt);
  switch (dt) {
    case ENG_DT_FLOAT:
      return mask & C_FLOAT;
    case ENG_DT_DOUBLE:
      return mask & C_DOUBLE;
    case ENG_DT_INT32:
    case ENG_DT_INT64:
      return mask & C_INT;
    case ENG_DT_BOOL:
      return mask & C_BOOL;
    case ENG_DT_STRING:
      return mask & C_STRING;
    default:
      return false;
  }
}

static td_code want_type(const eng_node *n, const char *attr, unsigned mask, td_err *err) {
  const eng_attr *a = eng_node_attr(n, attr);
  if (!a || a->kind != ENG_ATTR_TYPE || dtype_in(a->type, mask)) return TD_OK;
  FAIL(n, err, TD_UNIMPLEMENTED, "%s %s is not supported by its kernel", attr,
       eng_dtype_name(a->type));
}

/* data_format NHWC, strides / dilations of 4 with 1 on batch and depth,
 * a known padding; ksize likewise for pools (ksize_attr non-NULL). */
static td_code want_window(const eng_node *n, const char *ksize_attr, td_err *err) {
  const char *fmt = eng_attr_str(n, "data_format", "NHWC");
  if (strcmp(fmt, "NHWC"))
    FAIL(n, err, TD_UNIMPLEMENTED, "data_format %s is not supported (NHWC only)", fmt);
  int64_t st[4] = {1, 1, 1, 1}, dl[4] = {1, 1, 1, 1}, k[4] = {1, 1, 1, 1}, ep[8];
  int nst = eng_attr_ints(n, "strides", st, 4), ndl = eng_attr_ints(n, "dilations", dl, 4);
  if (nst != 4 || (ndl && ndl != 4))
    FAIL(n, err, TD_INVALID_ARGUMENT, "strides and dilations must have 4 elements");
  if (st[0] != 1 || st[3] != 1 || dl[0] != 1 || dl[3] != 1)
    FAIL(n, err, TD_UNIMPLEMENTED, "strides or dilations in the batch or depth dimension");
  if (ksize_attr) {
    if (eng_attr_ints(n, ksize_attr, k, 4) != 4)
      FAIL(n, err, TD_INVALID_ARGUMENT, "%s must have 4 elements", ksize_attr);
    if (k[0] != 1 || k[3] != 1)
      FAIL(n, err, TD_UNIMPLEMENTED, "pooling across the batch or depth dimension");
  }
  const char *pad = eng_attr_str(n, "padding", "VALID");
  if (strcmp(pad, "VALID") && strcmp(pad, "SAME") && strcmp(pad, "EXPLICIT"))
    FAIL(n, err, TD_INVALID_ARGUMENT, "padding '%s' is not supported", pad);
  if (!strcmp(pad, "EXPLICIT") && eng_attr_ints(n, "explicit_paddings", ep, 8) != 8)
    FAIL(n, err, TD_INVALID_ARGUMENT, "explicit_paddings must have 8 elements");
  return TD_OK;
}

td_code eng_c_float(const eng_node *n, td_err *err) { return want_type(n, "T", C_FLOAT, err); }

td_code eng_c_conv(const eng_node *n, td_err *err) {
  td_code rc = want_type(n, "T", C_FLOAT, err);
  return rc ? rc : want_window(n, NULL, err);
}

td_code eng_c_pool(const eng_node *n, td_err *err) {
  td_code rc = want_type(n, "T", C_FLOAT, err);
  return rc ? rc : want_window(n, "ksize", err);
}

td_code eng_c_batch_norm(const eng_node *n, td_err *err) {
  td_code rc = want_type(n, "T", C_FLOAT, err);
  if (!rc) rc = want_type(n, "U", C_FLOAT, err);
  const char *fmt = eng_attr_str(n, "data_format", "NHWC");
  if (!rc && strcmp(fmt, "NHWC"))
    FAIL(n, err, TD_UNIMPLEMENTED, "data_format %s is not supported (NHWC only)", fmt);
  return rc;
}

td_code eng_c_matmul(const eng_node *n, td_err *err) {
  return want_type(n, "T", C_FLOAT | C_DOUBLE, err);
}

td_code eng_c_einsum(const eng_node *n, td_err *err) {
  td_code rc = want_type(n, "T", C_FLOAT | C_DOUBLE, err);
  if (rc) return rc;
  const char *eq = eng_attr_str(n, "equation", "");
  int64_t na = eng_node_attr_int(n, "N", n->n_in);
  if (na && na != 2)
    FAIL(n, err, TD_UNIMPLEMENTED, "Einsum of %lld operands is not supported", (long long)na);
  rc = eng_einsum_check(eq, err);
  if (rc && err) td_err_prefix(err, "node '%s' (%s)", n->name, n->op);
  return rc;
}

/* Element-moving ops: fixed-size dtypes and strings (eng_kmove_strings). */
td_code eng_c_movable(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (!a || a->kind != ENG_ATTR_TYPE || a->type == ENG_DT_STRING ||
      eng_dtype_size(eng_dtype_widened(a->type)))
    return TD_OK;
  FAIL(n, err, TD_UNIMPLEMENTED, "T %s is not supported by its kernel", eng_dtype_name(a->type));
}

td_code eng_c_real(const eng_node *n, td_err *err) {
  return want_type(n, "T", C_FLOAT | C_DOUBLE | C_INT, err);
}

td_code eng_c_floats(const eng_node *n, td_err *err) {
  return want_type(n, "T", C_FLOAT | C_DOUBLE, err);
}

td_code eng_c_not_complex(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (!a || a->kind != ENG_ATTR_TYPE ||
      (a->type != ENG_DT_COMPLEX64 && a->type != ENG_DT_COMPLEX128))
    return TD_OK;
  FAIL(n, err, TD_UNIMPLEMENTED, "T %s is not supported by its kernel", eng_dtype_name(a->type));
}

td_code eng_c_numeric(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (!a || a->kind != ENG_ATTR_TYPE) return TD_OK;
  switch (eng_dtype_widened(a->type)) {
    case ENG_DT_FLOAT:
    case ENG_DT_DOUBLE:
    case ENG_DT_INT32:
    case ENG_DT_INT64:
    case ENG_DT_UINT8:
    case ENG_DT_INT8:
    case ENG_DT_INT16:
      return TD_OK;
    default:
      FAIL(n, err, TD_UNIMPLEMENTED, "T %s is not supported by its kernel",
           eng_dtype_name(a->type));
  }
}

td_code eng_c_image(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (!a || a->kind != ENG_ATTR_TYPE) return TD_OK;
  eng_dtype dt = eng_dtype_widened(a->type);
  if (dt == ENG_DT_FLOAT || dt == ENG_DT_INT32 || dt == ENG_DT_UINT8) return TD_OK;
  FAIL(n, err, TD_UNIMPLEMENTED, "T %s is not supported by its kernel", eng_dtype_name(a->type));
}

td_code eng_c_shape_ints(const eng_node *n, td_err *err) { return want_type(n, "T", C_INT, err); }

td_code eng_c_lin_space(const eng_node *n, td_err *err) {
  td_code rc = want_type(n, "T", C_FLOAT | C_DOUBLE, err);
  return rc ? rc : want_type(n, "Tidx", C_INT, err);
}

/* A fixed-size T (strings are not moved) and integer start indices. */
td_code eng_c_dynamic_update_slice(const eng_node *n, td_err *err) {
  const eng_attr *a = eng_node_attr(n, "T");
  if (a && a->kind == ENG_ATTR_TYPE && !eng_dtype_size(eng_dtype_widened(a->type)))
    FAIL(n, err, TD_UNIMPLEMENTED, "T %s is not supported by its kernel", eng_dtype_name(a->type));
  return want_type(n, "Tindices", C_INT, err);
}
