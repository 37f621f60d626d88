/* Warmup TFRecords -> ldr_warmup_replay against a loaded half_plus_two
 * (input "x", float): record framing and CRCs, PredictionLog parsing,
 * request tensors, and the runs. The bytes go in from memory: writing and
 * reading them back through a file took about a third of each run, and
 * ldr_warmup_run adds only that file read to the replay. */
#include "fuzz_util.h"
#include "ldr_servable.h"
#include "ldr_warmup.h"
#include "td_log.h"

static ldr_servable *sv;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  td_err err;
  td_log_set_level((td_log_level)(TD_LOG_ERROR + 1));
  if (ldr_servable_load(TD_EXAMPLES "/half_plus_two/00000123", 123, "serve", &sv, &err)) abort();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  td_err err;
  int n = 0;
  ldr_warmup_replay(sv, data, size, LDR_WARMUP_FILE, 1, &n, &err);
  return 0;
}
