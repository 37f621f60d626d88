/* ldr_http: the HTTP client object storage uses (libcurl).
 *
 * ldr_http_do sends one request and collects the response body; with
 * retries > 0 it tries again, with exponential backoff and jitter (100 ms
 * doubling, at most 5 s between tries), on transport failures (refused
 * connection, reset, timeout) and on answers 429 and 5xx; any other answer
 * is returned as it is, for the caller to read. ldr_http_fetch downloads
 * byte ranges of objects into files at their offsets, several at once
 * (curl's multi interface on the calling thread), each part retried the
 * same way, and checks that every part delivered exactly its length.
 *
 * Headers are "Name: value" strings; they may carry credentials, so they are
 * never logged or put in an error message (URLs are: callers keep secrets
 * out of them). Connections time out after 10 s; a transfer that moves
 * less than 1 byte/s for 30 s is abandoned as a timeout. `insecure` turns
 * off TLS peer and host verification (S3_VERIFY_SSL=0).
 *
 * Threads: every call is independent (its own curl handles) and may run on
 * any thread; libcurl's global init happens once, on the first call. */
#ifndef LDR_HTTP_H
#define LDR_HTTP_H

#include <stdbool.h>
#include <stdint.h>

#include "td_buf.h"
#include "td_status.h"

typedef struct ldr_http_req {
  const char *method; /* "GET" when NULL */
  const char *url;
  const char *const *headers; /* n_headers strings "Name: value" */
  int n_headers;
  const char *body; /* request body (PUT/POST), may be NULL */
  size_t body_len;
  bool insecure;
  long timeout_ms; /* whole request; 0: none (the stall limit still applies) */
} ldr_http_req;

/* On TD_OK *status is the HTTP status (any) and body holds the response
 * (appended). UNAVAILABLE naming the URL and curl's reason when no answer
 * came after every try, DEADLINE_EXCEEDED for a timeout; when the last
 * answer was a 5xx or 429 that answer is returned with TD_OK. */
td_code ldr_http_do(const ldr_http_req *r, int retries, long *status, td_buf *body, td_err *err);

typedef struct ldr_http_part {
  ldr_http_req req; /* GET; a Range header is added */
  int fd;           /* written with pwrite at off */
  int64_t off, len;
} ldr_http_part;

/* Fetches every part, at most `parallel` at a time; each part may be tried
 * 1 + retries times. On failure the first error (naming the URL) is
 * returned; what was written to the files is then undefined. */
td_code ldr_http_fetch(ldr_http_part *parts, int n, int parallel, int retries, td_err *err);

/* Backoff before try `attempt` (1, 2, ...): the delay in microseconds. */
int64_t ldr_http_backoff_us(int attempt);

#endif
