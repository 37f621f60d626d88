/* The instruction-set choice (see eng_isa.h): CPUID and the environment
 * read once under call_once, then plain reads of the result. */
#include "eng_isa.h"

#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <threads.h>
#include <unistd.h>

#include "td_log.h"

#define ENV_NAME "TENSORD_ENGINE_ISA"

static const char *const names[] = {"generic", "avx2", "avx512"};

static once_flag once = ONCE_FLAG_INIT;
static eng_isa cpu, active;
static bool capped; /* a valid cap that lowered the choice */

static eng_isa detect(void) {
  __builtin_cpu_init();
  if (__builtin_cpu_supports("avx512f")) return ENG_ISA_AVX512;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return ENG_ISA_AVX2;
  return ENG_ISA_GENERIC;
}

static void decide(void) {
  cpu = active = detect();
  const char *env = getenv(ENV_NAME);
  if (!env || !*env) return;
  eng_isa cap;
  if (!eng_isa_parse(env, &cap)) {
    td_log_warn("%s=%s is not one of avx512, avx2, generic: ignored, the kernels use %s", ENV_NAME,
                env, names[cpu]);
    return;
  }
  if (cap > cpu) {
    td_log_warn("%s=%s: this CPU has no %s kernels; the kernels use %s", ENV_NAME, env, names[cap],
                names[cpu]);
    return;
  }
  capped = cap < cpu;
  active = cap;
}

eng_isa eng_isa_active(void) {
  call_once(&once, decide);
  return active;
}

eng_isa eng_isa_cpu(void) {
  call_once(&once, decide);
  return cpu;
}

bool eng_isa_allows(eng_isa isa) { return isa <= eng_isa_active(); }

const char *eng_isa_name(eng_isa isa) {
  return isa >= ENG_ISA_GENERIC && isa <= ENG_ISA_AVX512 ? names[isa] : "?";
}

bool eng_isa_parse(const char *s, eng_isa *out) {
  for (int i = 0; i <= ENG_ISA_AVX512; i++)
    if (!strcasecmp(s, names[i])) {
      *out = (eng_isa)i;
      return true;
    }
  return false;
}

const char *eng_isa_describe(char *buf, size_t n) {
  eng_isa v = eng_isa_active();
  if (capped)
    snprintf(buf, n, "Engine kernels: %s (CPU: %s, capped by %s=%s)", names[v], names[cpu],
             ENV_NAME, names[v]);
  else
    snprintf(buf, n, "Engine kernels: %s (the CPU's best)", names[v]);
  return buf;
}

static int64_t l2_size;
static once_flag l2_once = ONCE_FLAG_INIT;

static void l2_init(void) {
  long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
  l2_size = v > 0 ? v : 1 << 20;
}

int64_t eng_isa_l2_bytes(void) {
  call_once(&l2_once, l2_init);
  return l2_size;
}
