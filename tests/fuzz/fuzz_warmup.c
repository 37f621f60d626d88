/* Warmup TFRecords -> ldr_warmup_run against a loaded half_plus_two (input
 * "x", float): record framing and CRCs, PredictionLog parsing, request
 * tensors, and the runs. */
#include "fuzz_util.h"
#include "ldr_servable.h"
#include "ldr_warmup.h"
#include "td_log.h"

static ldr_servable *sv;
static char dir[512], file[700];

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  td_err err;
  td_log_set_level((td_log_level)(TD_LOG_ERROR + 1));
  if (ldr_servable_load(TD_EXAMPLES "/half_plus_two/00000123", 123, "serve", &sv, &err)) abort();
  snprintf(dir, sizeof dir, "%s", fuzz_scratch("warmup"));
  char extra[600];
  snprintf(extra, sizeof extra, "%s/assets.extra", dir);
  mkdir(extra, 0700);
  snprintf(file, sizeof file, "%s/" LDR_WARMUP_FILE, dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write(file, data, size);
  td_err err;
  int n = 0;
  ldr_warmup_run(sv, dir, 1, &n, &err);
  return 0;
}
