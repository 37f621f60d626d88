/* eng_isa: the TENSORD_ENGINE_ISA cap lowers the CPU's choice and never
 * raises it, unknown values are ignored with one warning, and the kernels'
 * entry points follow the choice. The choice is made once per process, so
 * each test runs in its own (Check's fork mode, forced below) and sets the
 * environment before its first call. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_dwconv.h"
#include "eng_gemm.h"
#include "eng_isa.h"

/* Sends this process's stderr (td_log's stream) to a temporary file. */
static FILE *capture_stderr(void) {
  FILE *f = tmpfile();
  ck_assert_ptr_nonnull(f);
  fflush(stderr);
  ck_assert_int_ge(dup2(fileno(f), STDERR_FILENO), 0);
  return f;
}

/* Lines of the captured stderr that contain `needle`. */
static int count_lines(FILE *f, const char *needle) {
  fflush(stderr);
  rewind(f);
  char line[1024];
  int n = 0;
  while (fgets(line, sizeof line, f))
    if (strstr(line, needle)) n++;
  return n;
}

static eng_isa min_isa(eng_isa a, eng_isa b) { return a < b ? a : b; }

START_TEST(names_round_trip) {
  for (int i = ENG_ISA_GENERIC; i <= ENG_ISA_AVX512; i++) {
    eng_isa v = ENG_ISA_GENERIC;
    ck_assert(eng_isa_parse(eng_isa_name((eng_isa)i), &v));
    ck_assert_int_eq(v, i);
  }
  eng_isa v = ENG_ISA_AVX2;
  ck_assert(eng_isa_parse("AVX512", &v));
  ck_assert_int_eq(v, ENG_ISA_AVX512);
  ck_assert(!eng_isa_parse("sse4", &v));
  ck_assert(!eng_isa_parse("", &v));
  ck_assert(!eng_isa_parse("avx2 ", &v));
  ck_assert_int_eq(v, ENG_ISA_AVX512); /* untouched on failure */
}
END_TEST

START_TEST(unset_is_the_cpu) {
  unsetenv("TENSORD_ENGINE_ISA");
  FILE *err = capture_stderr();
  ck_assert_int_eq(eng_isa_active(), eng_isa_cpu());
  ck_assert(eng_isa_allows(eng_isa_cpu()));
  ck_assert(eng_isa_allows(ENG_ISA_GENERIC));
  char buf[200];
  ck_assert_ptr_nonnull(strstr(eng_isa_describe(buf, sizeof buf), "the CPU's best"));
  ck_assert_int_eq(count_lines(err, "TENSORD_ENGINE_ISA"), 0);
  fclose(err);
}
END_TEST

START_TEST(empty_is_unset) {
  setenv("TENSORD_ENGINE_ISA", "", 1);
  FILE *err = capture_stderr();
  ck_assert_int_eq(eng_isa_active(), eng_isa_cpu());
  ck_assert_int_eq(count_lines(err, "TENSORD_ENGINE_ISA"), 0);
  fclose(err);
}
END_TEST

START_TEST(cap_avx2_lowers) {
  setenv("TENSORD_ENGINE_ISA", "Avx2", 1);
  eng_isa cpu = eng_isa_cpu(), want = min_isa(cpu, ENG_ISA_AVX2);
  ck_assert_int_eq(eng_isa_active(), want);
  ck_assert(!eng_isa_allows(ENG_ISA_AVX512));
  float b[4] = {1, 2, 3, 4};
  eng_packed *p = eng_gemm_pack_isa(ENG_ISA_AVX512, b, 2, 2, false, NULL, 0);
  ck_assert_ptr_null(p); /* the cap binds the per-ISA entry points too */
  p = eng_gemm_pack_isa(ENG_ISA_AVX2, b, 2, 2, false, NULL, 0);
  ck_assert(want == ENG_ISA_AVX2 ? p != NULL : p == NULL);
  eng_gemm_free(p);
  char buf[200];
  eng_isa_describe(buf, sizeof buf);
  if (cpu > ENG_ISA_AVX2)
    ck_assert_str_eq(buf, "Engine kernels: avx2 (CPU: avx512, capped by TENSORD_ENGINE_ISA=avx2)");
}
END_TEST

START_TEST(cap_generic_runs_no_vector_kernel) {
  setenv("TENSORD_ENGINE_ISA", "generic", 1);
  ck_assert_int_eq(eng_isa_active(), ENG_ISA_GENERIC);
  ck_assert(!eng_isa_allows(ENG_ISA_AVX2));
  float b[4] = {1, 2, 3, 4}, a[2] = {1, 1}, c[2] = {0, 0};
  ck_assert_ptr_null(eng_gemm_pack(b, 2, 2, false)); /* callers use BLAS */
  ck_assert(!eng_gemm_dynamic(a, 2, 1, b, 2, false, 2, 2, c, 2));
  /* A 1x1 depthwise product still computes, on the scalar loop. */
  eng_conv_geom g = {.n = 1,
                     .h = 1,
                     .w = 1,
                     .c = 2,
                     .kh = 1,
                     .kw = 1,
                     .sh = 1,
                     .sw = 1,
                     .dh = 1,
                     .dw = 1,
                     .oh = 1,
                     .ow = 1};
  float x[2] = {2, 3}, f[2] = {4, 5}, y[2] = {0, 0};
  ck_assert(!eng_dwconv_run_isa(ENG_ISA_AVX2, &g, x, f, y, NULL));
  eng_dwconv_run(&g, x, f, y, NULL);
  ck_assert(y[0] == 8 && y[1] == 15);
}
END_TEST

START_TEST(unknown_is_ignored_with_one_warning) {
  setenv("TENSORD_ENGINE_ISA", "avx1024", 1);
  FILE *err = capture_stderr();
  ck_assert_int_eq(eng_isa_active(), eng_isa_cpu());
  ck_assert_int_eq(eng_isa_active(), eng_isa_cpu());
  char buf[200];
  eng_isa_describe(buf, sizeof buf);
  ck_assert_int_eq(count_lines(err, "TENSORD_ENGINE_ISA=avx1024 is not one of"), 1);
  ck_assert_int_eq(count_lines(err, "tensord]"), 1); /* the only line logged */
  fclose(err);
}
END_TEST

/* A cap above the CPU changes nothing; it warns only when it names an
 * instruction set the CPU lacks. */
START_TEST(cap_above_cpu_changes_nothing) {
  setenv("TENSORD_ENGINE_ISA", "avx512", 1);
  FILE *err = capture_stderr();
  ck_assert_int_eq(eng_isa_active(), eng_isa_cpu());
  ck_assert_int_eq(count_lines(err, "this CPU has no avx512"),
                   eng_isa_cpu() < ENG_ISA_AVX512 ? 1 : 0);
  fclose(err);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_isa");
  TCase *tc = tcase_create("isa");
  tcase_add_test(tc, names_round_trip);
  tcase_add_test(tc, unset_is_the_cpu);
  tcase_add_test(tc, empty_is_unset);
  tcase_add_test(tc, cap_avx2_lowers);
  tcase_add_test(tc, cap_generic_runs_no_vector_kernel);
  tcase_add_test(tc, unknown_is_ignored_with_one_warning);
  tcase_add_test(tc, cap_above_cpu_changes_nothing);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK); /* one process per test: the choice is per process */
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
