/* The walk mirrors protobuf-c's parse only as far as nesting goes: tags,
 * varints and lengths are followed so that a nested message's extent is
 * known, and anything the walk cannot follow is left for protobuf-c to
 * reject with its own error. */
#include "td_pbdepth.h"

#include <stdbool.h>

static bool read_varint(const uint8_t **p, const uint8_t *end, uint64_t *v) {
  uint64_t x = 0;
  for (int shift = 0; shift < 64 && *p < end; shift += 7) {
    uint8_t b = *(*p)++;
    x |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *v = x;
      return true;
    }
  }
  return false;
}

static td_pb_walk walk(const ProtobufCMessageDescriptor *desc, const uint8_t *p, const uint8_t *end,
                       int depth_left) {
  while (p < end) {
    uint64_t tag, n;
    if (!read_varint(&p, end, &tag)) return TD_PB_MALFORMED;
    switch (tag & 7) {
      case 0:
        if (!read_varint(&p, end, &n)) return TD_PB_MALFORMED;
        break;
      case 1:
        if (end - p < 8) return TD_PB_MALFORMED;
        p += 8;
        break;
      case 5:
        if (end - p < 4) return TD_PB_MALFORMED;
        p += 4;
        break;
      case 2: {
        if (!read_varint(&p, end, &n) || n > (uint64_t)(end - p)) return TD_PB_MALFORMED;
        const ProtobufCFieldDescriptor *f =
            tag >> 3 <= UINT32_MAX
                ? protobuf_c_message_descriptor_get_field(desc, (unsigned)(tag >> 3))
                : NULL;
        if (f && f->type == PROTOBUF_C_TYPE_MESSAGE) {
          if (depth_left <= 0) return TD_PB_TOO_DEEP;
          td_pb_walk w = walk(f->descriptor, p, p + n, depth_left - 1);
          if (w) return w;
        }
        p += n;
        break;
      }
      default: /* groups: protobuf-c rejects them */
        return TD_PB_MALFORMED;
    }
  }
  return TD_PB_OK;
}

td_pb_walk td_pb_check_depth(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                             size_t len, int max_depth) {
  if (!len) return TD_PB_OK;
  return walk(desc, data, data + len, max_depth);
}

ProtobufCMessage *td_pb_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                               size_t len, const uint8_t *data, td_err *err) {
  if (td_pb_check_depth(desc, data, len, TD_PB_MAX_DEPTH) == TD_PB_TOO_DEEP) {
    td_err_set(err, TD_INVALID_ARGUMENT, "%s (%zu bytes): messages nested deeper than %d levels",
               desc->name, len, TD_PB_MAX_DEPTH);
    return NULL;
  }
  ProtobufCMessage *m = protobuf_c_message_unpack(desc, alloc, len, data);
  if (!m) td_err_set(err, TD_DATA_LOSS, "not a valid %s (%zu bytes)", desc->name, len);
  return m;
}
