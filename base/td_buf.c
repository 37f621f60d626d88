#include "td_buf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void td_buf_init(td_buf *b) { *b = (td_buf){0}; }

void td_buf_free(td_buf *b) {
  free(b->data);
  *b = (td_buf){0};
}

void td_buf_reset(td_buf *b) {
  b->len = 0;
  if (b->data) b->data[0] = '\0';
}

bool td_buf_reserve(td_buf *b, size_t extra) {
  if (b->oom) return false;
  if (extra > (size_t)-1 / 2 - b->len) {
    b->oom = true;
    return false;
  }
  size_t need = b->len + extra + 1;
  if (need <= b->cap) return true;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < need) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->oom = true;
    return false;
  }
  b->data = p;
  b->cap = cap;
  return true;
}

void td_buf_append(td_buf *b, const void *data, size_t n) {
  if (!td_buf_reserve(b, n)) return;
  memcpy(b->data + b->len, data, n);
  b->len += n;
  b->data[b->len] = '\0';
}

void td_buf_puts(td_buf *b, const char *s) { td_buf_append(b, s, strlen(s)); }

void td_buf_putc(td_buf *b, char c) { td_buf_append(b, &c, 1); }

void td_buf_printf(td_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  char small[256];
  int n = vsnprintf(small, sizeof small, fmt, ap);
  va_end(ap);
  if (n < 0) return;
  if ((size_t)n < sizeof small) {
    td_buf_append(b, small, (size_t)n);
    return;
  }
  if (!td_buf_reserve(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

char *td_buf_take(td_buf *b, size_t *len) {
  if (!b->data) td_buf_reserve(b, 0);
  char *p = b->data;
  if (len) *len = b->len;
  *b = (td_buf){0};
  return p;
}
