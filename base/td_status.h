/* td_status: the project's error currency.
 *
 * Every fallible call returns a td_code (TD_OK == 0) and, when the caller
 * passes a non-NULL td_err, fills it with the code and a message that names
 * the thing at fault ("input 'x': expected rank 2, got 3"). The codes and
 * their gRPC / HTTP mappings come from one table, td_status.def, so REST and
 * gRPC report a failure the same way.
 *
 * td_err is a plain value: no allocation, safe to copy, safe to use from any
 * thread that owns it. */
#ifndef TD_STATUS_H
#define TD_STATUS_H

#include <stdarg.h>

typedef enum {
#define TD_STATUS(name, code, http) TD_##name = code,
#include "td_status.def"
#undef TD_STATUS
} td_code;

/* Longer than gRPC's limit on purpose: TF Serving cuts gRPC messages over
 * 1024 characters and appends "...TRUNCATED", and the transport can only
 * do the same if it sees that a message was longer. */
#define TD_ERR_MSG_MAX 2048

typedef struct td_err {
  td_code code;
  char msg[TD_ERR_MSG_MAX];
} td_err;

/* Sets *err (when non-NULL) and returns code, so callers can write
 * `return td_err_set(err, TD_NOT_FOUND, "model '%s'", name);`. */
td_code td_err_set(td_err *err, td_code code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
td_code td_err_vset(td_err *err, td_code code, const char *fmt, va_list ap);

/* Prepends context to an existing message: "loading 'x': <old message>".
 * Returns err->code (TD_OK-safe: a NULL err returns TD_UNKNOWN). */
td_code td_err_prefix(td_err *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

void td_err_clear(td_err *err);

/* "INVALID_ARGUMENT"; "UNKNOWN" for values outside the table. */
const char *td_code_name(td_code code);
/* HTTP status for REST responses; 500 for values outside the table. */
int td_code_http(td_code code);
/* The code for a failed system call's errno, the one translation the
 * project uses (as libuv's uv_translate_sys_error): missing paths are
 * NOT_FOUND, refused access PERMISSION_DENIED, an existing name
 * ALREADY_EXISTS, exhausted descriptors,
 * memory or space RESOURCE_EXHAUSTED, a retryable interruption
 * UNAVAILABLE, a bad name INVALID_ARGUMENT, anything else UNKNOWN. */
td_code td_code_from_errno(int e);

#endif
