/* cfg_pbtxt: protobuf text format, parsed into protobuf-c messages.
 *
 * protobuf-c has no text format, and tensord reads several text-format
 * files TF Serving users already have: --model_config_file
 * (ModelServerConfig), --batching_parameters_file, --ssl_config_file,
 * --monitoring_config_file, and saved_model.pbtxt. This parser is driven by
 * the message descriptor, so one implementation serves them all.
 *
 * Accepted: `field: value`, `field { ... }` / `field < ... >` (colon
 * optional), repeated fields by repetition or `field: [a, b]`, maps as
 * repeated `{ key: .. value: .. }` entries, oneofs (a second member is an
 * error), enums by name or number, bools (true/false/t/f/1/0), integers
 * (decimal, hex, octal, with sign), floats (incl. inf/nan), strings in
 * single or double quotes with C escapes and adjacent-string concatenation,
 * `#` comments, and `,` / `;` between fields. A non-repeated field given
 * twice is an error, as in protobuf's own parser. Any expansion
 * (`[type.googleapis.com/...] { }`) works for registered types (below);
 * extensions are not supported.
 *
 * Errors are INVALID_ARGUMENT with "line L column C: <problem>" (prefixed
 * with the path by cfg_pbtxt_parse_file). On success *out is a message
 * allocated with the default allocator: free it with
 * protobuf_c_message_free_unpacked(msg, NULL). On failure nothing leaks.
 * Pure functions; thread-safe. */
#ifndef CFG_PBTXT_H
#define CFG_PBTXT_H

#include <protobuf-c/protobuf-c.h>
#include <stddef.h>

#include "td_status.h"

td_code cfg_pbtxt_parse(const char *text, size_t len, const ProtobufCMessageDescriptor *desc,
                        ProtobufCMessage **out, td_err *err);
/* Files up to 64 MiB. */
td_code cfg_pbtxt_parse_file(const char *path, const ProtobufCMessageDescriptor *desc,
                             ProtobufCMessage **out, td_err *err);

/* Any expansion: a google.protobuf.Any field may be written
 * `[type.googleapis.com/pkg.Msg] { ... }` for a message type registered
 * here; it is parsed and packed (type_url, value). An unregistered type is
 * an error naming it. Register before parsing, from one thread. */
void cfg_pbtxt_register_any_type(const ProtobufCMessageDescriptor *d);
/* Messages whose unknown fields are skipped even in strict parsing: for a
 * TensorFlow message the project declares only in part (ConfigProto). */
void cfg_pbtxt_register_lenient(const ProtobufCMessageDescriptor *d);

/* Skip fields the descriptor does not know, and Any expansions, instead of
 * failing: for files written against TensorFlow's full .proto files (a
 * saved_model.pbtxt) read through the project's smaller ones, as protobuf's
 * binary parser skips unknown fields. The skipped text must still be well
 * formed. */
#define CFG_PBTXT_SKIP_UNKNOWN 1u
td_code cfg_pbtxt_parse_flags(const char *text, size_t len, const ProtobufCMessageDescriptor *desc,
                              unsigned flags, ProtobufCMessage **out, td_err *err);
td_code cfg_pbtxt_parse_file_flags(const char *path, const ProtobufCMessageDescriptor *desc,
                                   unsigned flags, size_t max_bytes, ProtobufCMessage **out,
                                   td_err *err);

#endif
