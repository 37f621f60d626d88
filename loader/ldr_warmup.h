/* ldr_warmup: SavedModel warmup, as TF Serving does it.
 *
 * A version directory may hold assets.extra/tf_serving_warmup_requests: a
 * TFRecord file (each record: uint64 length, masked CRC-32C of the length,
 * the bytes, masked CRC-32C of the bytes) of serialized
 * tensorflow.serving.PredictionLog messages. ldr_warmup_run replays each
 * record's PredictRequest through the servable's signature plans, so the
 * first real requests do not pay for first-touch costs; the lifecycle
 * manager runs it after a load and before the version becomes AVAILABLE.
 *
 * As in TF Serving: a missing file is fine (logged); at most 1000 records
 * ("Number of warmup records exceeds the maximum (1000) at <path>",
 * INVALID_ARGUMENT); a framing or checksum error is DATA_LOSS ending with
 * "Please verify your warmup data is in TFRecord format."; a record that
 * does not parse is INVALID_ARGUMENT; and any error fails the load. Only
 * predict_log records are replayed: classify, regress and multi-inference
 * records are UNIMPLEMENTED in tensord for now (TF Serving replays them),
 * session_run and predict_streamed records are UNIMPLEMENTED as in TF
 * Serving. Each record runs `iterations` times (0 or 1: once).
 *
 * Runs on the calling (load) thread; the servable must be fully loaded and
 * not yet shared with request threads. */
#ifndef LDR_WARMUP_H
#define LDR_WARMUP_H

#include <stddef.h>
#include <stdint.h>

#include "ldr_servable.h"
#include "td_status.h"

#define LDR_WARMUP_FILE "assets.extra/tf_serving_warmup_requests"
#define LDR_WARMUP_MAX_RECORDS 1000

/* *n_records (optional) receives the number of records replayed. */
td_code ldr_warmup_run(const ldr_servable *sv, const char *version_dir, int iterations,
                       int *n_records, td_err *err);
/* The same replay over the file's bytes already in memory (path names the
 * file in messages); ldr_warmup_run reads the file and calls it. */
td_code ldr_warmup_replay(const ldr_servable *sv, const uint8_t *data, size_t len,
                          const char *path, int iterations, int *n_records, td_err *err);

#endif
