/* td_file: reads a whole regular file into memory, bounded.
 *
 * Errors name the path: the errno's code (td_code_from_errno: NOT_FOUND,
 * PERMISSION_DENIED, ...) when it cannot be opened, INVALID_ARGUMENT when
 * it is not a regular file or is larger than max_bytes, DATA_LOSS on a short read. On success *data (malloc'd, one
 * spare NUL byte after the contents) belongs to the caller. Thread-safe. */
#ifndef TD_FILE_H
#define TD_FILE_H

#include <stddef.h>
#include <stdint.h>

#include "td_status.h"

td_code td_file_read(const char *path, size_t max_bytes, uint8_t **data, size_t *len, td_err *err);

#endif
