/* cfg_session: the thread counts of TF Serving's
 * --tensorflow_session_config_file (a text-format tensorflow.ConfigProto).
 *
 * Only intra_op_parallelism_threads (threads one op may use) and
 * inter_op_parallelism_threads (ops at once: tensord's engine workers) mean
 * something here; every other ConfigProto field is read and skipped, the
 * text must still be well formed (errors name line and column). Negative
 * counts are INVALID_ARGUMENT. Pure; thread-safe. */
#ifndef CFG_SESSION_H
#define CFG_SESSION_H

#include "td_status.h"

typedef struct cfg_session {
  int intra_op_threads; /* 0: not set */
  int inter_op_threads; /* 0: not set */
} cfg_session;

td_code cfg_session_load(const char *path, cfg_session *out, td_err *err);
td_code cfg_session_parse(const char *text, cfg_session *out, td_err *err);

#endif
