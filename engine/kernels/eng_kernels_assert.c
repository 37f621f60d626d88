/* Checks a graph makes of its own values: Assert (a false condition fails
 * the request with INVALID_ARGUMENT and the assertion's data, summarised
 * as TensorFlow prints it: each data tensor in brackets, at most
 * `summarize` elements) and CheckNumerics (a float tensor holding NaN or
 * Inf fails with the node's message; otherwise it passes through). */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "eng_kernels.h"

/* Appends up to `max` elements of t to buf (at *len, capacity cap). */
static void summarize(const eng_tensor *t, int64_t max, char *buf, size_t cap, size_t *len) {
  int64_t n = eng_tensor_numel(t);
  const void *d = t->dtype == ENG_DT_STRING ? NULL : eng_tensor_data(t);
#define PUT(...)                                                                   \
  do {                                                                             \
    if (*len < cap) *len += (size_t)snprintf(buf + *len, cap - *len, __VA_ARGS__); \
  } while (0)
  PUT("[");
  for (int64_t i = 0; i < n && i < max; i++) {
    if (i) PUT(" ");
    switch (t->dtype) {
      case ENG_DT_STRING: {
        eng_str s = eng_tensor_strs(t)[i];
        PUT("%.*s", (int)(s.len > 200 ? 200 : s.len), s.data);
        break;
      }
      case ENG_DT_FLOAT:
        PUT("%g", ((const float *)d)[i]);
        break;
      case ENG_DT_DOUBLE:
        PUT("%g", ((const double *)d)[i]);
        break;
      case ENG_DT_INT32:
        PUT("%d", ((const int32_t *)d)[i]);
        break;
      case ENG_DT_INT64:
        PUT("%lld", (long long)((const int64_t *)d)[i]);
        break;
      case ENG_DT_BOOL:
        PUT("%d", ((const uint8_t *)d)[i] ? 1 : 0);
        break;
      case ENG_DT_UINT8:
        PUT("%u", ((const uint8_t *)d)[i]);
        break;
      default:
        PUT("?");
        break;
    }
  }
  if (n > max) PUT("...");
  PUT("]");
#undef PUT
  if (*len > cap - 1) *len = cap - 1;
}

td_code eng_k_assert(eng_kctx *c) {
  const eng_tensor *cond = &c->in[0];
  if (cond->dtype != ENG_DT_BOOL || eng_tensor_numel(cond) != 1)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "In[0] should be a scalar bool");
  if (*(const uint8_t *)eng_tensor_data(cond)) return TD_OK;
  int64_t max = eng_node_attr_int(c->node, "summarize", 3);
  char msg[1024];
  size_t len = 0;
  for (int i = 1; i < c->n_in; i++) {
    if (i > 1 && len < sizeof msg - 1) msg[len++] = ' ';
    summarize(&c->in[i], max, msg, sizeof msg, &len);
  }
  msg[len] = 0;
  return eng_kfail(c, TD_INVALID_ARGUMENT, "assertion failed: %s", msg);
}

td_code eng_k_check_numerics(eng_kctx *c) {
  const eng_tensor *x = &c->in[0];
  bool nan = false, inf = false;
  int64_t n = eng_tensor_numel(x);
  if (x->dtype == ENG_DT_FLOAT) {
    const float *d = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) nan |= isnan(d[i]), inf |= isinf(d[i]);
  } else if (x->dtype == ENG_DT_DOUBLE) {
    const double *d = eng_tensor_data(x);
    for (int64_t i = 0; i < n; i++) nan |= isnan(d[i]), inf |= isinf(d[i]);
  } else {
    return eng_kfail(c, TD_UNIMPLEMENTED, "%s is not supported by its kernel",
                     eng_dtype_name(x->dtype));
  }
  if (nan || inf)
    return eng_kfail(c, TD_INVALID_ARGUMENT, "%s : Tensor had %s values",
                     eng_attr_str(c->node, "message", ""),
                     nan && inf ? "Inf and NaN"
                     : nan      ? "NaN"
                                : "Inf");
  c->out[0] = eng_tensor_share(x);
  return TD_OK;
}
