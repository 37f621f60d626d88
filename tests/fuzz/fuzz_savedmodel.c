/* saved_model.pb bytes -> ldr_servable_load: parse (with the depth bound),
 * MetaGraph selection, graph import, variable restore from a fixed good
 * checkpoint (half_plus_two's), signature compilation. The bytes are
 * written into a scratch version directory whose variables/ stays. */
#include "fuzz_util.h"
#include "ldr_servable.h"
#include "td_log.h"

static char dir[512], pb[600];

static void copy(const char *from, const char *to) {
  FILE *in = fopen(from, "rb"), *out = fopen(to, "wb");
  if (!in || !out) abort();
  char buf[65536];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, in)) > 0) fwrite(buf, 1, n, out);
  fclose(in);
  fclose(out);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  snprintf(dir, sizeof dir, "%s/1", fuzz_scratch("savedmodel"));
  mkdir(dir, 0700);
  char vars[600], a[700], b[700];
  snprintf(vars, sizeof vars, "%s/variables", dir);
  mkdir(vars, 0700);
  const char *src = TD_EXAMPLES "/half_plus_two/00000123/variables/variables";
  snprintf(a, sizeof a, "%s.index", src);
  snprintf(b, sizeof b, "%s/variables.index", vars);
  copy(a, b);
  snprintf(a, sizeof a, "%s.data-00000-of-00001", src);
  snprintf(b, sizeof b, "%s/variables.data-00000-of-00001", vars);
  copy(a, b);
  snprintf(pb, sizeof pb, "%s/saved_model.pb", dir);
  td_log_set_level((td_log_level)(TD_LOG_ERROR + 1));
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  fuzz_write(pb, data, size);
  ldr_servable *sv = NULL;
  td_err err;
  if (ldr_servable_load(dir, 1, "serve", &sv, &err) == TD_OK) ldr_servable_unref(sv);
  return 0;
}
