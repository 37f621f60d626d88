/* td_buf: a growable byte buffer for building responses and messages.
 * Plain value; the owner frees it with td_buf_free. Appends never fail
 * silently: on allocation failure the buffer is marked (oom) and later
 * appends are ignored, so a writer checks once at the end. */
#ifndef TD_BUF_H
#define TD_BUF_H

#include <stdbool.h>
#include <stddef.h>

typedef struct td_buf {
  char *data; /* NUL-terminated when len > 0 */
  size_t len;
  size_t cap;
  bool oom;
} td_buf;

void td_buf_init(td_buf *b);
void td_buf_free(td_buf *b);
void td_buf_reset(td_buf *b);
bool td_buf_reserve(td_buf *b, size_t extra);
void td_buf_append(td_buf *b, const void *data, size_t n);
void td_buf_puts(td_buf *b, const char *s);
void td_buf_putc(td_buf *b, char c);
void td_buf_printf(td_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands the bytes to the caller (who frees them) and resets b. */
char *td_buf_take(td_buf *b, size_t *len);

#endif
