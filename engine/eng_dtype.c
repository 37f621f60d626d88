#include "eng_dtype.h"

size_t eng_dtype_size(eng_dtype dt) {
  switch (dt) {
    case ENG_DT_FLOAT: return 4;
    case ENG_DT_DOUBLE: return 8;
    case ENG_DT_INT32: return 4;
    case ENG_DT_UINT8: return 1;
    case ENG_DT_INT16: return 2;
    case ENG_DT_INT8: return 1;
    case ENG_DT_COMPLEX64: return 8;
    case ENG_DT_INT64: return 8;
    case ENG_DT_BOOL: return 1;
    case ENG_DT_BFLOAT16: return 2;
    case ENG_DT_UINT16: return 2;
    case ENG_DT_COMPLEX128: return 16;
    case ENG_DT_HALF: return 2;
    case ENG_DT_UINT32: return 4;
    case ENG_DT_UINT64: return 8;
    default: return 0;
  }
}

const char *eng_dtype_name(eng_dtype dt) {
  switch (dt) {
    case ENG_DT_FLOAT: return "float";
    case ENG_DT_DOUBLE: return "double";
    case ENG_DT_INT32: return "int32";
    case ENG_DT_UINT8: return "uint8";
    case ENG_DT_INT16: return "int16";
    case ENG_DT_INT8: return "int8";
    case ENG_DT_STRING: return "string";
    case ENG_DT_COMPLEX64: return "complex64";
    case ENG_DT_INT64: return "int64";
    case ENG_DT_BOOL: return "bool";
    case ENG_DT_BFLOAT16: return "bfloat16";
    case ENG_DT_UINT16: return "uint16";
    case ENG_DT_COMPLEX128: return "complex128";
    case ENG_DT_HALF: return "half";
    case ENG_DT_RESOURCE: return "resource";
    case ENG_DT_VARIANT: return "variant";
    case ENG_DT_UINT32: return "uint32";
    case ENG_DT_UINT64: return "uint64";
    default: return "invalid";
  }
}

const char *eng_dtype_enum_name(eng_dtype dt) {
  switch (dt) {
    case ENG_DT_FLOAT: return "DT_FLOAT";
    case ENG_DT_DOUBLE: return "DT_DOUBLE";
    case ENG_DT_INT32: return "DT_INT32";
    case ENG_DT_UINT8: return "DT_UINT8";
    case ENG_DT_INT16: return "DT_INT16";
    case ENG_DT_INT8: return "DT_INT8";
    case ENG_DT_STRING: return "DT_STRING";
    case ENG_DT_COMPLEX64: return "DT_COMPLEX64";
    case ENG_DT_INT64: return "DT_INT64";
    case ENG_DT_BOOL: return "DT_BOOL";
    case ENG_DT_BFLOAT16: return "DT_BFLOAT16";
    case ENG_DT_UINT16: return "DT_UINT16";
    case ENG_DT_COMPLEX128: return "DT_COMPLEX128";
    case ENG_DT_HALF: return "DT_HALF";
    case ENG_DT_RESOURCE: return "DT_RESOURCE";
    case ENG_DT_VARIANT: return "DT_VARIANT";
    case ENG_DT_UINT32: return "DT_UINT32";
    case ENG_DT_UINT64: return "DT_UINT64";
    default: return "DT_INVALID";
  }
}

eng_dtype eng_dtype_from_tf(int tf_dtype, bool *is_ref) {
  bool ref = tf_dtype > 100;
  if (ref) tf_dtype -= 100;
  if (is_ref) *is_ref = ref;
  switch (tf_dtype) {
    case ENG_DT_FLOAT: case ENG_DT_DOUBLE: case ENG_DT_INT32: case ENG_DT_UINT8:
    case ENG_DT_INT16: case ENG_DT_INT8: case ENG_DT_STRING: case ENG_DT_COMPLEX64:
    case ENG_DT_INT64: case ENG_DT_BOOL: case ENG_DT_BFLOAT16: case ENG_DT_UINT16:
    case ENG_DT_COMPLEX128: case ENG_DT_HALF: case ENG_DT_RESOURCE: case ENG_DT_VARIANT:
    case ENG_DT_UINT32: case ENG_DT_UINT64:
      return (eng_dtype)tf_dtype;
    default:
      return ENG_DT_INVALID;
  }
}
