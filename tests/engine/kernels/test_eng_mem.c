/* eng_mem: a large array is aligned to 2 MiB and its whole 2 MiB pages,
 * and only those, carry the kernel's huge-page advice (the "hg" flag of
 * their mapping in /proc/self/smaps); a small one is aligned as asked and
 * not advised; TENSORD_ENGINE_HUGEPAGES=0 turns the advice off. The
 * setting is read once per process, so each test runs in its own (Check's
 * fork mode, forced below). */
#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng_mem.h"

#define MIB ((size_t)1 << 20)

/* Whether the kernel takes madvise(MADV_HUGEPAGE) at all (built with
 * transparent huge pages): where it does not, nothing is advised. */
static bool thp_kernel(void) { return access("/sys/kernel/mm/transparent_hugepage", F_OK) == 0; }

/* 1 when the mapping holding address a carries the huge-page advice, 0
 * when it does not, -1 when smaps has no mapping for it. */
static int advised(const void *a) {
  FILE *f = fopen("/proc/self/smaps", "r");
  ck_assert_ptr_nonnull(f);
  char line[512];
  bool inside = false;
  int result = -1;
  uintptr_t x = (uintptr_t)a;
  while (fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
      inside = x >= lo && x < hi;
      continue;
    }
    if (inside && !strncmp(line, "VmFlags:", 8)) {
      result = strstr(line, " hg") != NULL;
      break;
    }
  }
  fclose(f);
  return result;
}

START_TEST(large_arrays_are_advised_page_by_whole_page) {
  size_t bytes = 5 * MIB + 12345;
  char *p = eng_mem_alloc(64, bytes, bytes);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % ENG_MEM_HUGE, 0);
  memset(p, 1, bytes);
  if (thp_kernel()) {
    ck_assert_int_eq(advised(p), 1);
    ck_assert_int_eq(advised(p + 4 * MIB - 1), 1); /* the second whole page */
    ck_assert_int_eq(advised(p + 4 * MIB), 0);     /* the partial one: not */
  }
  free(p);
}
END_TEST

START_TEST(only_the_used_part_is_advised) {
  char *p = eng_mem_alloc(64, 8 * MIB, 3 * MIB);
  ck_assert_ptr_nonnull(p);
  memset(p, 1, 8 * MIB);
  if (thp_kernel()) {
    ck_assert_int_eq(advised(p), 1);
    ck_assert_int_eq(advised(p + 2 * MIB), 0);
  }
  free(p);
}
END_TEST

START_TEST(small_arrays_keep_their_alignment_unadvised) {
  char *p = eng_mem_alloc(256, MIB, MIB);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % 256, 0);
  memset(p, 1, MIB);
  if (thp_kernel()) ck_assert_int_ne(advised(p), 1);
  free(p);
}
END_TEST

START_TEST(the_environment_turns_the_advice_off) {
  ck_assert_int_eq(setenv("TENSORD_ENGINE_HUGEPAGES", "0", 1), 0);
  ck_assert(!eng_mem_huge_enabled());
  char *p = eng_mem_alloc(64, 6 * MIB, 6 * MIB);
  ck_assert_ptr_nonnull(p);
  ck_assert_uint_eq((uintptr_t)p % 64, 0);
  memset(p, 1, 6 * MIB);
  if (thp_kernel()) ck_assert_int_ne(advised(p), 1);
  free(p);
}
END_TEST

int main(void) {
  Suite *s = suite_create("eng_mem");
  TCase *tc = tcase_create("mem");
  tcase_add_test(tc, large_arrays_are_advised_page_by_whole_page);
  tcase_add_test(tc, only_the_used_part_is_advised);
  tcase_add_test(tc, small_arrays_keep_their_alignment_unadvised);
  tcase_add_test(tc, the_environment_turns_the_advice_off);
  suite_add_tcase(s, tc);
  SRunner *sr = srunner_create(s);
  srunner_set_fork_status(sr, CK_FORK);
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
