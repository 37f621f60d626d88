#include "ldr_savedmodel.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cfg_pbtxt.h"
#include "td_file.h"
#include "td_pbdepth.h"

#define MAX_SAVED_MODEL_BYTES ((size_t)2 << 30)

/* 1: a regular file (*size set); 0: absent; -1: there, but not a file. */
static int regular_file(const char *path, size_t *size) {
  struct stat st;
  if (stat(path, &st)) return 0;
  if (!S_ISREG(st.st_mode)) return -1;
  *size = (size_t)st.st_size;
  return 1;
}

td_code ldr_savedmodel_read(const char *dir, Tensorflow__SavedModel **out, size_t *bytes, bool *text,
                        td_err *err) {
  char pb[4096], txt[4096];
  snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
  snprintf(txt, sizeof txt, "%s/saved_model.pbtxt", dir);
  size_t size = 0;
  *out = NULL;
  if (text) *text = false;
  int has_pb = regular_file(pb, &size);
  if (has_pb < 0) return td_err_set(err, TD_INVALID_ARGUMENT, "%s: not a regular file", pb);
  if (has_pb) {
    if (size > MAX_SAVED_MODEL_BYTES)
      return td_err_set(err, TD_INVALID_ARGUMENT, "%s: larger than 2 GiB", pb);
    uint8_t *data = NULL;
    size_t len = 0;
    td_code rc = td_file_read(pb, MAX_SAVED_MODEL_BYTES, &data, &len, err);
    if (rc) return rc;
    td_err why;
    *out = (Tensorflow__SavedModel *)td_pb_unpack(&tensorflow__saved_model__descriptor, NULL, len,
                                                  data, &why);
    free(data);
    size = len;
    if (!*out && why.code == TD_INVALID_ARGUMENT) /* too deep: no later read will parse */
      return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: %s", pb, why.msg);
    if (!*out)
      return td_err_set(err, TD_DATA_LOSS,
                        "%s: cannot parse the SavedModel protocol buffer (%zu bytes; truncated, "
                        "still being written, or corrupt)",
                        pb, len);
  } else if (regular_file(txt, &size) > 0) {
    if (size > MAX_SAVED_MODEL_BYTES)
      return td_err_set(err, TD_INVALID_ARGUMENT, "%s: larger than 2 GiB", txt);
    ProtobufCMessage *m = NULL;
    td_err e;
    td_err_clear(&e);
    td_code rc = cfg_pbtxt_parse_file_flags(txt, &tensorflow__saved_model__descriptor,
                                            CFG_PBTXT_SKIP_UNKNOWN, MAX_SAVED_MODEL_BYTES, &m, &e);
    if (rc == TD_INVALID_ARGUMENT)
      return td_err_set(err, TD_DATA_LOSS, "%s (truncated, still being written, or corrupt)", e.msg);
    if (rc) {
      if (err) *err = e;
      return rc;
    }
    *out = (Tensorflow__SavedModel *)m;
    if (text) *text = true;
  } else {
    return td_err_set(err, TD_NOT_FOUND, "%s: cannot open: no saved_model.pb (or saved_model.pbtxt)",
                      pb);
  }
  if (bytes) *bytes = size;
  if (!(*out)->n_meta_graphs) {
    ldr_savedmodel_free(*out);
    *out = NULL;
    return td_err_set(err, TD_INVALID_ARGUMENT, "%s/saved_model.pb%s: the SavedModel holds no MetaGraph",
                      dir, text && *text ? "txt" : "");
  }
  return TD_OK;
}

void ldr_savedmodel_free(Tensorflow__SavedModel *sm) {
  if (sm) protobuf_c_message_free_unpacked(&sm->base, NULL);
}
