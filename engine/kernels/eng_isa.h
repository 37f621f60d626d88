/* eng_isa: which vector instruction set the CPU kernels use, decided once
 * per process for every kernel family (packed GEMM, depthwise convolution,
 * pooling, the vector math functions).
 *
 * The choice is the best of AVX-512 (avx512f), AVX2 with FMA, or generic
 * (plain C, and BLAS for the products) that the CPU reports through CPUID,
 * lowered by the operator's cap in the environment variable
 * TENSORD_ENGINE_ISA:
 *   avx512   no cap (the AVX-512 kernels where the CPU has them)
 *   avx2     at most the AVX2+FMA kernels
 *   generic  none of the vector kernels
 * (case-insensitive; unset or empty: no cap). A cap never raises the
 * choice: avx512 on a CPU without it, or avx2 on one without AVX2+FMA,
 * leaves what the CPU has, and an unknown value is ignored; both are
 * logged once as a warning (td_log) when the choice is made, and the
 * process runs on as if the variable were unset. The variable is read
 * once, at the first call into this module; changing it later has no
 * effect.
 *
 * The cap covers this engine's own kernels only: OpenBLAS, which the
 * generic products call, picks its kernels by itself (OPENBLAS_CORETYPE
 * caps it), and glibc's string functions do as well.
 *
 * Every function may be called from any thread; the first call decides
 * (call_once) and the rest read the result. */
#ifndef ENG_ISA_H
#define ENG_ISA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Ordered: a larger value can run every kernel of a smaller one. */
typedef enum { ENG_ISA_GENERIC, ENG_ISA_AVX2, ENG_ISA_AVX512 } eng_isa;

/* The instruction set the kernels use: the CPU's best, lowered by the cap. */
eng_isa eng_isa_active(void);
/* The CPU's best, ignoring the cap. */
eng_isa eng_isa_cpu(void);
/* True when kernels for `isa` may run in this process (isa <= active):
 * the per-instruction-set test entry points (eng_gemm_pack_isa,
 * eng_dwconv_run_isa) honour the cap too. */
bool eng_isa_allows(eng_isa isa);

/* The L2 cache per core in bytes, as the C library reads it (1 MiB when it
 * cannot tell): what the GEMM's prefetch and the banded depthwise size
 * their working sets by. */
int64_t eng_isa_l2_bytes(void);

/* "avx512", "avx2" or "generic". */
const char *eng_isa_name(eng_isa isa);
/* Parses one of those names (case-insensitive) into *out; false (and *out
 * untouched) for anything else. */
bool eng_isa_parse(const char *s, eng_isa *out);

/* One line for the daemon's start-up log, written into buf (n bytes,
 * always terminated) and returned: the choice, what the CPU has and the
 * cap when one applies, e.g. "Engine kernels: avx2 (CPU: avx512, capped
 * by TENSORD_ENGINE_ISA=avx2)". */
const char *eng_isa_describe(char *buf, size_t n);

#endif
