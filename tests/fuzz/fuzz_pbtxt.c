/* Text-format configs through cfg_pbtxt: the first byte picks the message
 * (model config, batching parameters, SSL config, a text SavedModel), the
 * rest is the text. The model config and batching go on through their
 * converters and validation, as the daemon reads them. */
#include "cfg_batching.h"
#include "cfg_model_config.h"
#include "cfg_pbtxt.h"
#include "fuzz_util.h"
#include "tensorflow/core/protobuf/saved_model.pb-c.h"
#include "tensorflow_serving/config/ssl_config.pb-c.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (!size) return 0;
  const char *text = (const char *)data + 1;
  size_t len = size - 1;
  td_err err;
  switch (data[0] % 4) {
    case 0: {
      cfg_model_config c;
      if (cfg_model_config_parse(text, len, &c, &err) == TD_OK) cfg_model_config_free(&c);
      break;
    }
    case 1: {
      char *z = malloc(len + 1); /* cfg_batching_parse takes a C string */
      if (!z) return 0;
      memcpy(z, text, len);
      z[len] = '\0';
      cfg_batching b;
      cfg_batching_parse(z, 2, &b, &err);
      free(z);
      break;
    }
    case 2: {
      ProtobufCMessage *m = NULL;
      if (cfg_pbtxt_parse(text, len, &tensorflow__serving__sslconfig__descriptor, &m, &err) ==
          TD_OK)
        protobuf_c_message_free_unpacked(m, NULL);
      break;
    }
    default: {
      ProtobufCMessage *m = NULL;
      if (cfg_pbtxt_parse_flags(text, len, &tensorflow__saved_model__descriptor,
                                CFG_PBTXT_SKIP_UNKNOWN, &m, &err) == TD_OK)
        protobuf_c_message_free_unpacked(m, NULL);
    }
  }
  return 0;
}
