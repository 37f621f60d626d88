#include "ldr_proto.h"

#include <stdlib.h>
#include <string.h>

td_code ldr_proto_shape(const Tensorflow__TensorShapeProto *p, eng_shape *out, td_err *err) {
  if (!p) {
    *out = eng_shape_scalar();
    return TD_OK;
  }
  if (p->unknown_rank) {
    *out = eng_shape_unknown();
    return TD_OK;
  }
  if (p->n_dim > ENG_MAX_RANK)
    return td_err_set(err, TD_UNIMPLEMENTED, "rank %zu exceeds the engine's maximum of %d",
                      p->n_dim, ENG_MAX_RANK);
  out->rank = (int)p->n_dim;
  for (size_t i = 0; i < p->n_dim; i++) {
    int64_t d = p->dim[i]->size;
    if (d < -1) return td_err_set(err, TD_INVALID_ARGUMENT, "dimension %zu is %lld", i, (long long)d);
    out->dim[i] = d;
  }
  return TD_OK;
}

/* Copies n typed values into the tensor, repeating the last to fill it. */
#define FILL(T, src, count)                                          \
  do {                                                               \
    T *dst = eng_tensor_data(out);                                   \
    for (int64_t i = 0; i < numel; i++)                              \
      dst[i] = (T)(src)[(size_t)i < (count) ? (size_t)i : (count)-1]; \
  } while (0)

/* The typed repeated field's value count for a numeric dtype; false for a
 * dtype whose values only tensor_content can carry here. */
static bool typed_count(const Tensorflow__TensorProto *p, eng_dtype dt, size_t *count) {
  switch (dt) {
    case ENG_DT_FLOAT:
      *count = p->n_float_val;
      return true;
    case ENG_DT_DOUBLE:
      *count = p->n_double_val;
      return true;
    case ENG_DT_INT32:
    case ENG_DT_INT16:
    case ENG_DT_INT8:
    case ENG_DT_UINT8:
    case ENG_DT_UINT16:
      *count = p->n_int_val;
      return true;
    case ENG_DT_INT64:
      *count = p->n_int64_val;
      return true;
    case ENG_DT_BOOL:
      *count = p->n_bool_val;
      return true;
    case ENG_DT_HALF:
    case ENG_DT_BFLOAT16:
      *count = p->n_half_val;
      return true;
    case ENG_DT_UINT32:
      *count = p->n_uint32_val;
      return true;
    case ENG_DT_UINT64:
      *count = p->n_uint64_val;
      return true;
    case ENG_DT_COMPLEX64: /* (real, imaginary) pairs */
      *count = p->n_scomplex_val / 2;
      return true;
    case ENG_DT_COMPLEX128:
      *count = p->n_dcomplex_val / 2;
      return true;
    default:
      return false;
  }
}

td_code ldr_proto_tensor_peek(const Tensorflow__TensorProto *p, ldr_proto_info *info, td_err *err) {
  memset(info, 0, sizeof *info);
  eng_dtype dt = eng_dtype_from_tf(p->dtype, &info->is_ref);
  info->dtype = dt;
  eng_shape shape;
  td_code rc = ldr_proto_shape(p->tensor_shape, &shape, err);
  if (rc) return rc;
  if (shape.rank < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT, "tensor has unknown rank");
  for (int i = 0; i < shape.rank; i++)
    if (shape.dim[i] < 0)
      return td_err_set(err, TD_INVALID_ARGUMENT, "tensor has an unknown dimension");
  info->shape = shape;
  if (dt == ENG_DT_INVALID || dt == ENG_DT_RESOURCE || dt == ENG_DT_VARIANT)
    return td_err_set(err, TD_UNIMPLEMENTED, "tensors of DataType %d are not supported", p->dtype);
  int64_t numel = eng_shape_numel(&shape);
  if (numel == INT64_MAX) /* saturated: TensorFlow's shapes stop at int64 too */
    return td_err_set(err, TD_INVALID_ARGUMENT, "the shape has more than 2^63-1 elements");
  uint64_t n = (uint64_t)numel;
  info->numel = numel;

  if (dt == ENG_DT_STRING) {
    size_t count = p->n_string_val;
    if (count > n)
      return td_err_set(err, TD_INVALID_ARGUMENT, "%zu strings for a tensor of %lld elements",
                        count, (long long)numel);
    /* As eng_tensor_alloc_strings lays them out: a table entry and a NUL
     * per element, then the bytes, the last string repeated to fill. */
    unsigned __int128 bytes = (unsigned __int128)n * (sizeof(eng_str) + 1);
    for (size_t i = 0; i < count; i++) bytes += p->string_val[i].len;
    if (count && count < n) bytes += (unsigned __int128)(n - count) * p->string_val[count - 1].len;
    info->bytes = bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes;
    info->filled = count < n;
    return TD_OK;
  }
  size_t es = eng_dtype_size(dt);
  size_t wide = eng_dtype_size(eng_dtype_widened(dt));
  if (!es)
    return td_err_set(err, TD_UNIMPLEMENTED, "tensors of type %s are not supported",
                      eng_dtype_name(dt));
  unsigned __int128 need = (unsigned __int128)n * es;
  if (p->tensor_content.len) {
    if (need != p->tensor_content.len)
      return td_err_set(
          err, TD_INVALID_ARGUMENT,
          "tensor_content has %zu bytes, a %s tensor of %lld elements needs %llu",
          p->tensor_content.len, eng_dtype_name(dt), (long long)numel,
          need > UINT64_MAX ? (unsigned long long)UINT64_MAX : (unsigned long long)need);
  } else {
    size_t count = 0;
    if (!typed_count(p, dt, &count))
      return td_err_set(err, TD_UNIMPLEMENTED, "tensors of type %s are not supported",
                        eng_dtype_name(dt));
    if ((dt == ENG_DT_COMPLEX64 && p->n_scomplex_val % 2) ||
        (dt == ENG_DT_COMPLEX128 && p->n_dcomplex_val % 2))
      return td_err_set(err, TD_INVALID_ARGUMENT,
                        "a %s tensor needs (real, imaginary) pairs, got an odd count of values",
                        eng_dtype_name(dt));
    if (count > n)
      return td_err_set(err, TD_INVALID_ARGUMENT, "%zu values for a %s tensor of %lld elements",
                        count, eng_dtype_name(dt), (long long)numel);
    info->filled = count < n;
  }
  unsigned __int128 bytes = (unsigned __int128)n * (wide > es ? wide : es);
  info->bytes = bytes > SIZE_MAX ? SIZE_MAX : (size_t)bytes;
  return TD_OK;
}

/* Complex values: count (real, imaginary) pairs of es-byte parts, the last
 * pair repeated to fill numel. */
static void fill_pairs(void *dst, size_t es, const void *src, int64_t numel, size_t count) {
  for (int64_t i = 0; i < numel; i++) {
    size_t k = (size_t)i < count ? (size_t)i : count - 1;
    memcpy((char *)dst + (size_t)i * 2 * es, (const char *)src + k * 2 * es, 2 * es);
  }
}

/* Fills a tensor peek has accepted. */
static td_code decode_tensor(const Tensorflow__TensorProto *p, const ldr_proto_info *info,
                             eng_tensor *out, td_err *err) {
  eng_dtype dt = info->dtype;
  int64_t numel = info->numel;
  td_code rc;
  if (dt == ENG_DT_STRING) {
    size_t n = p->n_string_val;
    size_t *lens = calloc((size_t)(numel ? numel : 1), sizeof *lens);
    if (!lens) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "out of memory");
    for (int64_t i = 0; i < numel && n; i++) lens[i] = p->string_val[(size_t)i < n ? (size_t)i : n - 1].len;
    rc = eng_tensor_alloc_strings(out, &info->shape, lens, err);
    free(lens);
    if (rc) return rc;
    for (int64_t i = 0; i < numel && n; i++) {
      const ProtobufCBinaryData *s = &p->string_val[(size_t)i < n ? (size_t)i : n - 1];
      if (s->len) memcpy(eng_tensor_str_bytes(out, i), s->data, s->len);
    }
    return TD_OK;
  }
  rc = eng_tensor_alloc(out, dt, &info->shape, err);
  if (rc) return rc;
  if (p->tensor_content.len) {
    memcpy(eng_tensor_data(out), p->tensor_content.data, p->tensor_content.len);
    return TD_OK;
  }
  size_t count = 0;
  typed_count(p, dt, &count);
  if (!count) return TD_OK; /* zeros */
  switch (dt) {
    case ENG_DT_FLOAT: FILL(float, p->float_val, count); break;
    case ENG_DT_DOUBLE: FILL(double, p->double_val, count); break;
    case ENG_DT_INT32: FILL(int32_t, p->int_val, count); break;
    case ENG_DT_INT16: FILL(int16_t, p->int_val, count); break;
    case ENG_DT_INT8: FILL(int8_t, p->int_val, count); break;
    case ENG_DT_UINT8: FILL(uint8_t, p->int_val, count); break;
    case ENG_DT_UINT16: FILL(uint16_t, p->int_val, count); break;
    case ENG_DT_INT64: FILL(int64_t, p->int64_val, count); break;
    case ENG_DT_BOOL: FILL(bool, p->bool_val, count); break;
    case ENG_DT_HALF: case ENG_DT_BFLOAT16: FILL(uint16_t, p->half_val, count); break;
    case ENG_DT_UINT32: FILL(uint32_t, p->uint32_val, count); break;
    case ENG_DT_UINT64: FILL(uint64_t, p->uint64_val, count); break;
    case ENG_DT_COMPLEX64:
      fill_pairs(eng_tensor_data(out), sizeof(float), p->scomplex_val, numel, count);
      break;
    case ENG_DT_COMPLEX128:
      fill_pairs(eng_tensor_data(out), sizeof(double), p->dcomplex_val, numel, count);
      break;
    default: break;
  }
  return TD_OK;
}

static td_code decode_checked(const Tensorflow__TensorProto *p, const ldr_proto_info *info,
                              eng_tensor *out, td_err *err) {
  td_code rc = decode_tensor(p, info, out, err);
  if (!rc && (rc = eng_tensor_widen(out, err))) eng_tensor_release(out);
  return rc;
}

td_code ldr_proto_tensor(const Tensorflow__TensorProto *p, eng_tensor *out, td_err *err) {
  ldr_proto_info info;
  td_code rc = ldr_proto_tensor_peek(p, &info, err);
  return rc ? rc : decode_checked(p, &info, out, err);
}

td_code ldr_proto_tensor_bounded(const Tensorflow__TensorProto *p, size_t max_bytes,
                                 eng_tensor *out, td_err *err) {
  ldr_proto_info info;
  td_code rc = ldr_proto_tensor_peek(p, &info, err);
  if (rc) return rc;
  if (info.bytes > max_bytes)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED,
                      "the tensor would take %zu bytes, more than the %zu this request may use",
                      info.bytes, max_bytes);
  if (info.filled && info.bytes > LDR_PROTO_MAX_FILL_BYTES)
    return td_err_set(err, TD_RESOURCE_EXHAUSTED,
                      "%lld elements (%zu bytes) from fewer values: filling by repetition is "
                      "limited to %d bytes; send every value",
                      (long long)info.numel, info.bytes, LDR_PROTO_MAX_FILL_BYTES);
  return decode_checked(p, &info, out, err);
}

static bool dup_bytes(eng_bytes *b, const ProtobufCBinaryData *src) {
  b->len = src->len;
  b->data = malloc(src->len + 1);
  if (!b->data) return false;
  if (src->len) memcpy(b->data, src->data, src->len);
  b->data[src->len] = '\0';
  return true;
}

static td_code attr_list(const Tensorflow__AttrValue__ListValue *l, eng_attr *a, td_err *err) {
  a->kind = ENG_ATTR_LIST;
  a->list_kind = ENG_ATTR_NONE;
  a->n = 0;
  a->li = NULL;
#define TAKE(count, kind, field, T)                                      \
  if (count) {                                                           \
    a->list_kind = kind;                                                 \
    a->field = calloc(count, sizeof(T));                                 \
    if (!a->field) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "oom"); \
    a->n = (int)(count);                                                 \
  }
  if (l->n_s) {
    TAKE(l->n_s, ENG_ATTR_S, ls, eng_bytes);
    for (size_t i = 0; i < l->n_s; i++)
      if (!dup_bytes(&a->ls[i], &l->s[i])) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "oom");
  } else if (l->n_i) {
    TAKE(l->n_i, ENG_ATTR_I, li, int64_t);
    memcpy(a->li, l->i, l->n_i * sizeof(int64_t));
  } else if (l->n_f) {
    TAKE(l->n_f, ENG_ATTR_F, lf, float);
    memcpy(a->lf, l->f, l->n_f * sizeof(float));
  } else if (l->n_b) {
    TAKE(l->n_b, ENG_ATTR_B, lb, bool);
    for (size_t i = 0; i < l->n_b; i++) a->lb[i] = l->b[i];
  } else if (l->n_type) {
    TAKE(l->n_type, ENG_ATTR_TYPE, ltype, eng_dtype);
    for (size_t i = 0; i < l->n_type; i++)
      a->ltype[i] = eng_dtype_widened(eng_dtype_from_tf(l->type[i], NULL));
  } else if (l->n_shape) {
    TAKE(l->n_shape, ENG_ATTR_SHAPE, lshape, eng_shape);
    for (size_t i = 0; i < l->n_shape; i++) {
      td_code rc = ldr_proto_shape(l->shape[i], &a->lshape[i], err);
      if (rc) return rc;
    }
  } else if (l->n_func) {
    TAKE(l->n_func, ENG_ATTR_FUNC, lfunc, char *);
    for (size_t i = 0; i < l->n_func; i++)
      if (!(a->lfunc[i] = strdup(l->func[i]->name)))
        return td_err_set(err, TD_RESOURCE_EXHAUSTED, "oom");
  } else if (l->n_tensor) {
    return td_err_set(err, TD_UNIMPLEMENTED, "attribute lists of tensors are not supported");
  }
#undef TAKE
  return TD_OK;
}

td_code ldr_proto_attr(const Tensorflow__AttrValue *v, eng_attr *a, td_err *err) {
  switch (v->value_case) {
    case TENSORFLOW__ATTR_VALUE__VALUE_S:
      a->kind = ENG_ATTR_S;
      if (!dup_bytes(&a->s, &v->s)) return td_err_set(err, TD_RESOURCE_EXHAUSTED, "oom");
      return TD_OK;
    case TENSORFLOW__ATTR_VALUE__VALUE_I: a->kind = ENG_ATTR_I; a->i = v->i; return TD_OK;
    case TENSORFLOW__ATTR_VALUE__VALUE_F: a->kind = ENG_ATTR_F; a->f = v->f; return TD_OK;
    case TENSORFLOW__ATTR_VALUE__VALUE_B: a->kind = ENG_ATTR_B; a->b = v->b; return TD_OK;
    case TENSORFLOW__ATTR_VALUE__VALUE_TYPE:
      a->kind = ENG_ATTR_TYPE;
      a->type = eng_dtype_widened(eng_dtype_from_tf(v->type, NULL));
      return TD_OK;
    case TENSORFLOW__ATTR_VALUE__VALUE_SHAPE:
      a->kind = ENG_ATTR_SHAPE;
      return ldr_proto_shape(v->shape, &a->shape, err);
    case TENSORFLOW__ATTR_VALUE__VALUE_TENSOR: {
      td_code rc = ldr_proto_tensor(v->tensor, &a->tensor, err);
      if (!rc) a->kind = ENG_ATTR_TENSOR;
      return rc;
    }
    case TENSORFLOW__ATTR_VALUE__VALUE_FUNC:
      a->kind = ENG_ATTR_FUNC;
      a->func = strdup(v->func && v->func->name ? v->func->name : "");
      return a->func ? TD_OK : td_err_set(err, TD_RESOURCE_EXHAUSTED, "oom");
    case TENSORFLOW__ATTR_VALUE__VALUE_LIST:
      return attr_list(v->list, a, err);
    case TENSORFLOW__ATTR_VALUE__VALUE_PLACEHOLDER:
      return td_err_set(err, TD_UNIMPLEMENTED, "attribute placeholders (polymorphic functions) are not supported");
    default:
      return TD_OK; /* unset: leave kind NONE */
  }
}
