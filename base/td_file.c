#include "td_file.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

td_code td_file_read(const char *path, size_t max_bytes, uint8_t **data, size_t *len, td_err *err) {
  FILE *f = fopen(path, "rb");
  if (!f)
    return td_err_set(err, td_code_from_errno(errno), "%s: cannot open (%s)", path,
                      strerror(errno));
  struct stat st;
  if (fstat(fileno(f), &st) || !S_ISREG(st.st_mode) || st.st_size < 0 ||
      (size_t)st.st_size > max_bytes) {
    fclose(f);
    return td_err_set(err, TD_INVALID_ARGUMENT,
                      "%s: not a regular file, or larger than %zu bytes", path, max_bytes);
  }
  size_t n = (size_t)st.st_size;
  uint8_t *buf = malloc(n + 1);
  if (!buf) {
    fclose(f);
    return td_err_set(err, TD_RESOURCE_EXHAUSTED, "%s: out of memory", path);
  }
  size_t got = fread(buf, 1, n, f);
  fclose(f);
  if (got != n) {
    free(buf);
    return td_err_set(err, TD_DATA_LOSS, "%s: short read", path);
  }
  buf[n] = '\0';
  *data = buf;
  *len = n;
  return TD_OK;
}
