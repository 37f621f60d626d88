/* eng_tensor: the engine's tensor value.
 *
 * A tensor is a small plain struct (dtype, shape, ref flag) pointing at a
 * reference-counted buffer. Copying the struct does not copy the data: use
 * eng_tensor_share to take another reference and eng_tensor_release to drop
 * one. Buffers are 64-byte aligned and immutable once published to other
 * threads (the engine writes a tensor's data only while it holds the sole
 * reference). Reference counting is atomic, so tensors may be shared across
 * threads.
 *
 * Freed buffers are recycled through a small per-thread cache, so repeated
 * runs of a plan do not call malloc once warm.
 *
 * Strings (ENG_DT_STRING) are stored as an array of eng_str followed by the
 * bytes, in the same buffer. Resources (ENG_DT_RESOURCE) are scalars holding
 * an int64 variable-slot index of the model that produced them; is_ref marks
 * a TF1 reference to a variable slot (VariableV2's output), same layout.
 *
 * A zeroed eng_tensor (buf == NULL) is "empty": releasing it is a no-op. */
#ifndef ENG_TENSOR_H
#define ENG_TENSOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_dtype.h"
#include "td_status.h"

#define ENG_MAX_RANK 8

/* A shape. For run-time tensors every dim is >= 0. Declared shapes (a
 * Placeholder's attr, a signature) may hold -1 for an unknown dim, and
 * rank -1 for an unknown rank. */
typedef struct eng_shape {
  int rank;
  int64_t dim[ENG_MAX_RANK];
} eng_shape;

typedef struct eng_str {
  const char *data;
  size_t len;
} eng_str;

typedef struct eng_buffer eng_buffer;

typedef struct eng_tensor {
  eng_dtype dtype;
  bool is_ref;
  eng_shape shape;
  eng_buffer *buf;
} eng_tensor;

/* --- shapes ------------------------------------------------------------ */
/* A rank outside [0, ENG_MAX_RANK] cannot be represented: the result is the
 * unknown shape, so callers check ranks at their edge. */
eng_shape eng_shape_make(int rank, const int64_t *dims);
eng_shape eng_shape_scalar(void);
eng_shape eng_shape_unknown(void);
/* Element count; -1 when any dim or the rank is unknown. */
int64_t eng_shape_numel(const eng_shape *s);
bool eng_shape_equal(const eng_shape *a, const eng_shape *b);
/* True when a concrete shape fits a declared one (unknown rank or dims match
 * anything). */
bool eng_shape_fits(const eng_shape *declared, const eng_shape *actual);
/* "[2,3]", "[?,1]", "<unknown>"; returns buf. */
const char *eng_shape_str(const eng_shape *s, char *buf, size_t n);

/* --- tensors ----------------------------------------------------------- */
/* Allocates a zero-filled tensor of a fixed-size dtype, or a string tensor of
 * empty strings. Fails with INVALID_ARGUMENT for a shape with unknown dims
 * and UNIMPLEMENTED for dtypes the engine cannot store. */
td_code eng_tensor_alloc(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err);
/* As eng_tensor_alloc, but numeric data is left uninitialised: for kernels
 * that write every element. */
td_code eng_tensor_alloc_raw(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err);
/* Allocates a string tensor whose element i has lens[i] bytes; fill them
 * through eng_tensor_str_bytes. */
td_code eng_tensor_alloc_strings(eng_tensor *t, const eng_shape *shape, const size_t *lens,
                                 td_err *err);
/* The bytes eng_tensor_alloc_strings takes for n strings of `total` bytes
 * together (a table entry and a NUL per element, then the bytes),
 * saturating at SIZE_MAX: what a request's budget is charged for them. */
size_t eng_tensor_strings_size(int64_t n, size_t total);
/* Allocates a scalar DT_VARIANT tensor whose payload (eng_tensor_data) is
 * `bytes` zeroed bytes owned by the caller's code: dtor (optional) runs on
 * the payload when the last reference goes, to release what it holds
 * (TensorLists hold tensors). */
td_code eng_tensor_alloc_variant(eng_tensor *t, size_t bytes, void (*dtor)(void *data),
                                 td_err *err);
/* A "hollow" tensor: the dtype and shape of a numeric tensor whose bytes
 * the engine no longer holds (a weight kept only in a packed layout, see
 * eng_model_release_packed_sources). Its buffer is a distinct, empty one,
 * so the tensor still names one weight (shares compare equal by data
 * address); its data must never be read, and eng_tensor_hollow says so. */
td_code eng_tensor_alloc_hollow(eng_tensor *t, eng_dtype dt, const eng_shape *shape, td_err *err);
/* True when t's buffer holds fewer bytes than its shape needs (a hollow
 * tensor); false for empty and string tensors. */
bool eng_tensor_hollow(const eng_tensor *t);
/* References to t's buffer right now (0 for an empty tensor): lets the
 * owner of every reference it knows of see whether anyone else holds one. */
int eng_tensor_refs(const eng_tensor *t);
/* Allocates a scalar DT_RESOURCE (or ref) tensor naming variable slot `slot`. */
td_code eng_tensor_alloc_handle(eng_tensor *t, int64_t slot, bool is_ref, td_err *err);

void *eng_tensor_data(const eng_tensor *t);
eng_str *eng_tensor_strs(const eng_tensor *t);
char *eng_tensor_str_bytes(const eng_tensor *t, int64_t i);
int64_t eng_tensor_handle(const eng_tensor *t);
int64_t eng_tensor_numel(const eng_tensor *t);
/* Bytes of element data (numel * dtype size); 0 for strings. */
/* Frees the buffers the calling thread keeps for reuse (see eng_tensor.c):
 * for a thread that is done with tensors for a while, such as one that has
 * just loaded a model. */
void eng_tensor_cache_flush(void);
size_t eng_tensor_nbytes(const eng_tensor *t);

/* Takes another reference to t's buffer and returns a copy of the struct. */
eng_tensor eng_tensor_share(const eng_tensor *t);
/* Drops t's reference and empties t. */
void eng_tensor_release(eng_tensor *t);
/* Deep copy (new buffer). */
td_code eng_tensor_copy(eng_tensor *dst, const eng_tensor *src, td_err *err);

/* Low-precision floats are widened to float32 when a model loads: the
 * engine computes in float32 (see the README). ENG_DT_FLOAT for half and
 * bfloat16, the dtype itself otherwise. */
eng_dtype eng_dtype_widened(eng_dtype dt);
/* Replaces a half or bfloat16 tensor by its exact float32 equivalent; other
 * tensors are left alone. */
td_code eng_tensor_widen(eng_tensor *t, td_err *err);

#endif
