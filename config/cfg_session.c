#include "cfg_session.h"

#include <string.h>

#include "cfg_pbtxt.h"
#include "tensorflow/core/protobuf/config.pb-c.h"

#define PREFIX "Error parsing text-format tensorflow.ConfigProto"

static td_code convert(const Tensorflow__ConfigProto *c, cfg_session *out, td_err *err) {
  if (c->intra_op_parallelism_threads < 0 || c->inter_op_parallelism_threads < 0)
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "ConfigProto: thread counts must be >= 0 (intra %d, inter %d)",
                      c->intra_op_parallelism_threads, c->inter_op_parallelism_threads);
  *out = (cfg_session){.intra_op_threads = c->intra_op_parallelism_threads,
                       .inter_op_threads = c->inter_op_parallelism_threads};
  return TD_OK;
}

td_code cfg_session_parse(const char *text, cfg_session *out, td_err *err) {
  ProtobufCMessage *m = NULL;
  td_code rc = cfg_pbtxt_parse_flags(text, strlen(text), &tensorflow__config_proto__descriptor,
                                     CFG_PBTXT_SKIP_UNKNOWN, &m, err);
  if (rc) return td_err_prefix(err, PREFIX);
  rc = convert((const Tensorflow__ConfigProto *)m, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  return rc;
}

td_code cfg_session_load(const char *path, cfg_session *out, td_err *err) {
  ProtobufCMessage *m = NULL;
  td_code rc = cfg_pbtxt_parse_file_flags(path, &tensorflow__config_proto__descriptor,
                                          CFG_PBTXT_SKIP_UNKNOWN, (size_t)1 << 20, &m, err);
  if (rc) return td_err_prefix(err, PREFIX);
  rc = convert((const Tensorflow__ConfigProto *)m, out, err);
  protobuf_c_message_free_unpacked(m, NULL);
  if (rc) td_err_prefix(err, "%s", path);
  return rc;
}
