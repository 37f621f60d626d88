#include "td_status.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

td_code td_err_vset(td_err *err, td_code code, const char *fmt, va_list ap) {
  if (err) {
    err->code = code;
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
  }
  return code;
}

td_code td_err_set(td_err *err, td_code code, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  td_err_vset(err, code, fmt, ap);
  va_end(ap);
  return code;
}

td_code td_err_prefix(td_err *err, const char *fmt, ...) {
  if (!err) return TD_UNKNOWN;
  /* Build into a buffer big enough for both parts, then truncate. */
  char joined[2 * TD_ERR_MSG_MAX + 2];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(joined, TD_ERR_MSG_MAX, fmt, ap);
  va_end(ap);
  if (n < 0) return err->code;
  if (n >= TD_ERR_MSG_MAX) n = TD_ERR_MSG_MAX - 1;
  joined[n++] = ':';
  joined[n++] = ' ';
  memcpy(joined + n, err->msg, strnlen(err->msg, TD_ERR_MSG_MAX - 1) + 1);
  memcpy(err->msg, joined, TD_ERR_MSG_MAX - 1);
  err->msg[TD_ERR_MSG_MAX - 1] = '\0';
  return err->code;
}

void td_err_clear(td_err *err) {
  if (err) {
    err->code = TD_OK;
    err->msg[0] = '\0';
  }
}

const char *td_code_name(td_code code) {
  switch (code) {
#define TD_STATUS(name, num, http) \
  case TD_##name:                  \
    return #name;
#include "td_status.def"
#undef TD_STATUS
  }
  return "UNKNOWN";
}

int td_code_http(td_code code) {
  switch (code) {
#define TD_STATUS(name, num, http) \
  case TD_##name:                  \
    return http;
#include "td_status.def"
#undef TD_STATUS
  }
  return 500;
}

td_code td_code_from_errno(int e) {
  switch (e) {
    case ENOENT:
    case ENOTDIR:
    case ENXIO:
    case ENODEV:
    case ELOOP:
      return TD_NOT_FOUND;
    case EACCES:
    case EPERM:
    case EROFS:
      return TD_PERMISSION_DENIED;
    case EEXIST:
      return TD_ALREADY_EXISTS;
    case EMFILE:
    case ENFILE:
    case ENOMEM:
    case ENOSPC:
    case EDQUOT:
    case EFBIG:
      return TD_RESOURCE_EXHAUSTED;
    case EAGAIN:
    case EBUSY:
    case EINTR:
      return TD_UNAVAILABLE;
    case EINVAL:
    case ENAMETOOLONG:
    case EISDIR:
      return TD_INVALID_ARGUMENT;
    default:
      return TD_UNKNOWN;
  }
}
