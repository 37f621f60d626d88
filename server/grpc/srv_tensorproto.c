#include "srv_tensorproto.h"

#include <stdlib.h>
#include <string.h>

/* Widens n values of type S into a new int32 (or protobuf-c bool) array. */
#define WIDEN(S, D, field)                              \
  do {                                                  \
    D *dst = malloc((size_t)(n ? n : 1) * sizeof(D));   \
    if (!dst) goto oom;                                 \
    const S *src = data;                                \
    for (int64_t i = 0; i < n; i++) dst[i] = (D)src[i]; \
    out->owned = dst;                                   \
    p->n_##field = (size_t)n;                           \
    p->field = dst;                                     \
  } while (0)

td_code srv_tensorproto_encode(const eng_tensor *t, bool tensor_content, srv_tensorproto *out,
                               td_err *err) {
  memset(out, 0, sizeof *out);
  Tensorflow__TensorProto *p = &out->proto;
  tensorflow__tensor_proto__init(p);
  tensorflow__tensor_shape_proto__init(&out->shape);
  int rank = t->shape.rank < 0 ? 0 : t->shape.rank;
  for (int d = 0; d < rank; d++) {
    tensorflow__tensor_shape_proto__dim__init(&out->dims[d]);
    out->dims[d].size = t->shape.dim[d];
    out->dimp[d] = &out->dims[d];
  }
  out->shape.n_dim = (size_t)rank;
  out->shape.dim = out->dimp;
  p->tensor_shape = &out->shape;
  p->dtype = (Tensorflow__DataType)t->dtype;

  int64_t n = eng_tensor_numel(t);
  void *data = n ? eng_tensor_data(t) : NULL;
  if (t->dtype == ENG_DT_STRING) {
    ProtobufCBinaryData *sv = calloc((size_t)(n ? n : 1), sizeof *sv);
    if (!sv) goto oom;
    const eng_str *s = n ? eng_tensor_strs(t) : NULL;
    for (int64_t i = 0; i < n; i++) sv[i] = (ProtobufCBinaryData){s[i].len, (uint8_t *)s[i].data};
    out->owned = sv;
    p->n_string_val = (size_t)n;
    p->string_val = sv;
    return TD_OK;
  }
  size_t es = eng_dtype_size(t->dtype);
  if (!es || t->dtype == ENG_DT_RESOURCE || t->dtype == ENG_DT_VARIANT) {
    memset(out, 0, sizeof *out);
    return td_err_set(err, TD_UNIMPLEMENTED, "cannot encode a tensor of type %s as a TensorProto",
                      eng_dtype_name(t->dtype));
  }
  if (tensor_content) {
    p->tensor_content = (ProtobufCBinaryData){(size_t)n * es, data};
    return TD_OK;
  }
  switch (t->dtype) {
    case ENG_DT_FLOAT:
      p->n_float_val = (size_t)n, p->float_val = data;
      break;
    case ENG_DT_DOUBLE:
      p->n_double_val = (size_t)n, p->double_val = data;
      break;
    case ENG_DT_INT32:
      p->n_int_val = (size_t)n, p->int_val = data;
      break;
    case ENG_DT_INT64:
      p->n_int64_val = (size_t)n, p->int64_val = data;
      break;
    case ENG_DT_UINT32:
      p->n_uint32_val = (size_t)n, p->uint32_val = data;
      break;
    case ENG_DT_UINT64:
      p->n_uint64_val = (size_t)n, p->uint64_val = data;
      break;
    case ENG_DT_COMPLEX64:
      p->n_scomplex_val = (size_t)n * 2, p->scomplex_val = data;
      break;
    case ENG_DT_COMPLEX128:
      p->n_dcomplex_val = (size_t)n * 2, p->dcomplex_val = data;
      break;
    case ENG_DT_INT16:
      WIDEN(int16_t, int32_t, int_val);
      break;
    case ENG_DT_INT8:
      WIDEN(int8_t, int32_t, int_val);
      break;
    case ENG_DT_UINT8:
      WIDEN(uint8_t, int32_t, int_val);
      break;
    case ENG_DT_UINT16:
      WIDEN(uint16_t, int32_t, int_val);
      break;
    case ENG_DT_HALF:
    case ENG_DT_BFLOAT16:
      WIDEN(uint16_t, int32_t, half_val);
      break;
    case ENG_DT_BOOL:
      WIDEN(bool, protobuf_c_boolean, bool_val);
      break;
    default:
      memset(out, 0, sizeof *out);
      return td_err_set(err, TD_UNIMPLEMENTED, "cannot encode a tensor of type %s as a TensorProto",
                        eng_dtype_name(t->dtype));
  }
  return TD_OK;
oom:
  memset(out, 0, sizeof *out);
  return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory encoding a tensor");
}

void srv_tensorproto_clear(srv_tensorproto *tp) {
  free(tp->owned);
  memset(tp, 0, sizeof *tp);
}
