/* td_pbdepth: protobuf-c unpacking of bytes from outside, with a bound on
 * message nesting checked on the wire first.
 *
 * protobuf-c unpacks nested messages by recursion and sets no limit, so a
 * few kilobytes of nested length-delimited fields (an AttrValue holding a
 * NameAttrList holding an AttrValue, ...) overflow the thread's stack. The
 * check walks the encoded bytes with the message's descriptor, descending
 * only into fields the descriptor declares as messages (what protobuf-c
 * itself would recurse into), and stops at TD_PB_MAX_DEPTH levels below
 * the top message, as protobuf C++ does by default. The walk is linear in
 * the input and recurses at most TD_PB_MAX_DEPTH + 1 frames. Bytes fields
 * (google.protobuf.Any values, the raw request views) are not descended
 * into: whoever unpacks them later goes through td_pb_unpack again.
 *
 * Every protobuf-c unpack of bytes that come from outside the process
 * (SavedModels, checkpoint index entries, warmup records, gRPC requests)
 * goes through td_pb_unpack. Pure functions, any thread. */
#ifndef TD_PBDEPTH_H
#define TD_PBDEPTH_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>
#include <stdint.h>

#include "td_status.h"

#define TD_PB_MAX_DEPTH 100

typedef enum {
  TD_PB_OK = 0,       /* nesting within the bound (the bytes may still be malformed) */
  TD_PB_TOO_DEEP = 1, /* messages nest deeper than max_depth */
  TD_PB_MALFORMED = 2 /* a tag, varint or length the walk could not follow */
} td_pb_walk;

/* Walks data[0..len) as a `desc` message; max_depth levels of nested
 * messages are allowed below it. */
td_pb_walk td_pb_check_depth(const ProtobufCMessageDescriptor *desc, const uint8_t *data,
                             size_t len, int max_depth);

/* protobuf_c_message_unpack after the depth check. NULL on failure, with
 * *err INVALID_ARGUMENT ("nested deeper than 100 levels") for too deep and
 * DATA_LOSS ("not a valid <message name>") for bytes protobuf-c rejects.
 * `alloc` may be NULL (malloc). */
ProtobufCMessage *td_pb_unpack(const ProtobufCMessageDescriptor *desc, ProtobufCAllocator *alloc,
                               size_t len, const uint8_t *data, td_err *err);

#endif
