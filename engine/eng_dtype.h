/* eng_dtype: element types of engine tensors.
 *
 * The numeric values are TensorFlow's DataType enum values, so a dtype read
 * from a SavedModel or a TensorProto converts by a range check, not a table.
 * Reference types (TF's *_REF, base + 100) are not dtypes here: a ref is a
 * property of a tensor (eng_tensor.is_ref), see eng_dtype_from_tf. */
#ifndef ENG_DTYPE_H
#define ENG_DTYPE_H

#include <stdbool.h>
#include <stddef.h>

typedef enum {
  ENG_DT_INVALID = 0,
  ENG_DT_FLOAT = 1,
  ENG_DT_DOUBLE = 2,
  ENG_DT_INT32 = 3,
  ENG_DT_UINT8 = 4,
  ENG_DT_INT16 = 5,
  ENG_DT_INT8 = 6,
  ENG_DT_STRING = 7,
  ENG_DT_COMPLEX64 = 8,
  ENG_DT_INT64 = 9,
  ENG_DT_BOOL = 10,
  ENG_DT_BFLOAT16 = 14,
  ENG_DT_UINT16 = 17,
  ENG_DT_COMPLEX128 = 18,
  ENG_DT_HALF = 19,
  ENG_DT_RESOURCE = 20,
  ENG_DT_VARIANT = 21,
  ENG_DT_UINT32 = 22,
  ENG_DT_UINT64 = 23,
} eng_dtype;

/* Bytes per element for fixed-size types; 0 for STRING, RESOURCE, VARIANT
 * and anything the engine does not store. */
size_t eng_dtype_size(eng_dtype dt);

/* TensorFlow's short name ("float", "int32", "string"); "invalid" otherwise. */
const char *eng_dtype_name(eng_dtype dt);

/* TensorFlow's enum name ("DT_FLOAT"), as the status/metadata JSON prints it. */
const char *eng_dtype_enum_name(eng_dtype dt);

/* Maps a TensorFlow DataType number to an engine dtype. *is_ref (optional) is
 * set for the _REF variants. Returns ENG_DT_INVALID for numbers the engine
 * does not know. */
eng_dtype eng_dtype_from_tf(int tf_dtype, bool *is_ref);

#endif
