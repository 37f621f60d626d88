/* Checkpoint bytes -> ldr_bundle: the input is a 4-byte little-endian
 * length, that many bytes of variables.index, then the data shard. Every
 * listed key is read. */
#include "fuzz_util.h"
#include "ldr_bundle.h"

static char prefix[512], index_path[600], shard_path[600];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  snprintf(prefix, sizeof prefix, "%s/variables", fuzz_scratch("bundle"));
  snprintf(index_path, sizeof index_path, "%s.index", prefix);
  snprintf(shard_path, sizeof shard_path, "%s.data-00000-of-00001", prefix);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 4) return 0;
  size_t n = (size_t)data[0] | (size_t)data[1] << 8 | (size_t)data[2] << 16 | (size_t)data[3] << 24;
  data += 4, size -= 4;
  if (n > size) n = size;
  fuzz_write(index_path, data, n);
  fuzz_write(shard_path, data + n, size - n);
  ldr_bundle *b = NULL;
  td_err err;
  if (ldr_bundle_open(prefix, &b, &err) == TD_OK) {
    for (int i = 0; i < ldr_bundle_count(b); i++) {
      eng_tensor t = {0};
      if (ldr_bundle_read(b, ldr_bundle_key(b, i), ENG_DT_INVALID, &t, &err) == TD_OK)
        eng_tensor_release(&t);
    }
  }
  ldr_bundle_close(b);
  return 0;
}
