/* srv_v2: the Open Inference Protocol's (KServe v2) request semantics,
 * shared by its REST edge (srv_v2rest) and its gRPC edge (srv_grpc_v2).
 *
 * A v2 inference runs through the same srv_call as TF Serving's Predict
 * (srv_api.h): the edge decodes its wire format and drives
 *   srv_v2_begin      model name, version string ("" = the latest AVAILABLE
 *                     one) and signature (parameter "signature_name", default
 *                     serving_default) to a held version and signature;
 *   srv_v2_bind       per request input: finds the signature input of that
 *                     name (the SignatureDef alias), checks datatype and shape,
 *                     allocates the engine tensor in its slot;
 *   fill it           srv_v2_set_raw for raw little-endian bytes (binary
 *                     extension, raw_input_contents), or the edge writes the
 *                     typed values into eng_tensor_data / srv_v2_set_strings;
 *   srv_v2_check_complete  every signature input was given;
 *   srv_call_try_run_here / srv_call_submit ... done, srv_call_end.
 * Outputs are the signature's (sorted by alias), all of them unless the
 * request names some (srv_v2_output).
 *
 * Datatypes: BOOL, UINT8, UINT16, UINT32, UINT64, INT8, INT16, INT32,
 * INT64, FP16, BF16, FP32, FP64 and BYTES (TF strings) map one to one onto
 * the engine dtypes; an input's datatype must equal its signature dtype's.
 * Raw layout: elements packed little-endian (the host's order: tensord
 * builds for little-endian hosts only), BYTES as a 4-byte little-endian
 * length before each element.
 *
 * Errors (all INVALID_ARGUMENT unless said): unknown input or output names,
 * duplicate inputs, datatype and shape mismatches, raw sizes that do not
 * match the shape, missing inputs; UNIMPLEMENTED for a signature tensor with
 * no v2 datatype; RESOURCE_EXHAUSTED (srv_call_charge) for inputs that would
 * take more than the request's input budget, checked in srv_v2_bind before
 * the declared shape is allocated and, for BYTES, again with the lengths
 * before they are copied. Messages name the input and the model.
 *
 * No state; any thread, distinct calls. */
#ifndef SRV_V2_H
#define SRV_V2_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_tensor.h"
#include "ldr_signature.h"
#include "srv_api.h"
#include "td_buf.h"
#include "td_status.h"

#define SRV_V2_SERVER_NAME "tensord"
#define SRV_V2_PLATFORM "tensorflow_savedmodel"
#define SRV_V2_SIGNATURE_PARAM "signature_name"
/* The max_batch_size reported for a signature whose every tensor has a
 * leading dimension of any size (tensord batches no further than a request
 * asks, unless --enable_batching merges them). */
#define SRV_V2_MAX_BATCH 65536

/* "FP32" for ENG_DT_FLOAT ...; NULL for dtypes the protocol lacks. */
const char *srv_v2_datatype(eng_dtype dt);
/* The engine dtype of a v2 datatype name; ENG_DT_INVALID when unknown. */
eng_dtype srv_v2_dtype(const char *datatype, size_t len);

/* "" or NULL: latest; otherwise a decimal version number. */
td_code srv_v2_parse_version(const char *s, bool *has_version, int64_t *version, td_err *err);

td_code srv_v2_begin(srv_call *c, srv_api *api, const char *model, const char *version,
                     const char *signature, td_err *err);

/* shape: rank dims. On success *slot is the signature input's index and
 * c->inputs[*slot] is allocated (numeric: uninitialised data; BYTES: left
 * empty for srv_v2_set_raw / srv_v2_set_strings). */
td_code srv_v2_bind(srv_call *c, const char *model, const char *name, const char *datatype,
                    const int64_t *shape, size_t rank, int *slot, td_err *err);
/* The shape given at bind time (for BYTES inputs, not yet allocated). */
td_code srv_v2_set_raw(srv_call *c, int slot, const eng_shape *shape, const void *data, size_t len,
                       td_err *err);
/* BYTES from n separate strings (must equal the shape's element count). */
td_code srv_v2_set_strings(srv_call *c, int slot, const eng_shape *shape, const eng_str *s,
                           size_t n, td_err *err);
td_code srv_v2_check_complete(const srv_call *c, const char *model, td_err *err);

/* Index of the signature output `name`, or INVALID_ARGUMENT. */
td_code srv_v2_output(const ldr_signature *sig, const char *model, const char *name, int *index,
                      td_err *err);

/* Raw bytes of a tensor: numeric data in place (no copy), BYTES
 * length-prefixed into `scratch`. *data and *len describe the result. */
void srv_v2_raw(const eng_tensor *t, td_buf *scratch, const void **data, size_t *len);

/* The v2 view of a signature tensor: datatype (NULL: none) and shape (-1
 * for unknown dims; an unknown rank shows as [-1]). Returns the rank. */
int srv_v2_tensor_shape(const ldr_tensor_info *t, int64_t *dims);
/* The model version a metadata, config or readiness request names
 * (version as srv_v2_parse_version reads it) and the signature the v2 API
 * shows of it: serving_default, else the first. FAILED_PRECONDITION for a
 * version without signatures. On success the caller holds *sv (unref it);
 * *sig belongs to it. */
td_code srv_v2_acquire(srv_api *api, const char *model, const char *version, ldr_servable **sv,
                       const ldr_signature **sig, td_err *err);
/* The model config's data_type name: "TYPE_FP32" for ENG_DT_FLOAT ...,
 * "TYPE_STRING" for BYTES; "TYPE_INVALID" for dtypes it lacks. */
const char *srv_v2_config_type(eng_dtype dt);
/* The AVAILABLE versions of `model`, ascending, into *out (malloc'd; the
 * caller frees it). Returns their count: 0 (and *out NULL) for a model the
 * registry does not know, -1 (*out NULL) when out of memory. */
int srv_v2_available_versions(srv_api *api, const char *model, int64_t **out);
/* SRV_V2_MAX_BATCH when every input and output has rank >= 1 with a
 * leading dimension of any size, else 0. */
int srv_v2_max_batch(const ldr_signature *sig);

/* The statistics extension's entries: one per AVAILABLE version of `model`
 * (NULL: of every model), zeros for versions that have served nothing yet,
 * plus any other version the counters know (one that served and was then
 * unloaded). version >= 0 keeps that version only. Sorted by model and
 * version; free with srv_stats_snapshot_free. */
struct srv_stats_entry;
int srv_v2_stats(srv_api *api, const char *model, int64_t version, struct srv_stats_entry **out);

#endif
