/* eng_op: walks the whole op table, so an op without a CPU kernel, or an
 * entry out of order (eng_op_find bisects), is a test failure rather than a
 * silent stub. */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_op.h"

START_TEST(table_not_empty) {
  ck_assert_int_gt(eng_op_count(), 0);
  ck_assert_ptr_null(eng_op_at(-1));
  ck_assert_ptr_null(eng_op_at(eng_op_count()));
}
END_TEST

START_TEST(every_entry_has_cpu_kernel) {
  for (int i = 0; i < eng_op_count(); i++) {
    const eng_op_def *d = eng_op_at(i);
    ck_assert_ptr_nonnull(d);
    ck_assert_msg(d->name && *d->name, "entry %d has no name", i);
    ck_assert_msg(d->cpu != NULL, "op %s has no CPU kernel", d->name);
  }
}
END_TEST

START_TEST(names_strictly_sorted) {
  for (int i = 1; i < eng_op_count(); i++)
    ck_assert_msg(strcmp(eng_op_at(i - 1)->name, eng_op_at(i)->name) < 0,
                  "ops out of order at %d: '%s' then '%s'", i, eng_op_at(i - 1)->name,
                  eng_op_at(i)->name);
}
END_TEST

START_TEST(find_every_entry) {
  for (int i = 0; i < eng_op_count(); i++) {
    const eng_op_def *d = eng_op_at(i);
    ck_assert_msg(eng_op_find(d->name) == d, "eng_op_find(%s) misses entry %d", d->name, i);
    /* A copy of the name (not the table's own pointer) finds it too. */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", d->name);
    ck_assert_ptr_eq(eng_op_find(buf), d);
  }
}
END_TEST

START_TEST(find_unknown) {
  const char *unknown[] = {"",      "A",    "Zzz",        "add",
                           "AddV3", "Add ", "MatMul",     "StatefulPartitionedCall",
                           "_Arg",  "~",    "Placeholde", "VariableV2x",
                           "\x01"};
  for (size_t i = 0; i < sizeof unknown / sizeof unknown[0]; i++)
    ck_assert_msg(eng_op_find(unknown[i]) == NULL, "eng_op_find('%s') found something", unknown[i]);
}
END_TEST

START_TEST(ops_the_loader_needs) {
  /* savedmodel.md §3.4: the restore path and the half_plus_two graphs. */
  const char *need[] = {"Const",
                        "Placeholder",
                        "PlaceholderWithDefault",
                        "Identity",
                        "IdentityN",
                        "NoOp",
                        "VarHandleOp",
                        "VariableV2",
                        "RestoreV2",
                        "AssignVariableOp",
                        "Assign",
                        "ReadVariableOp",
                        "Mul",
                        "AddV2",
                        "Add"};
  for (size_t i = 0; i < sizeof need / sizeof need[0]; i++) {
    const eng_op_def *d = eng_op_find(need[i]);
    ck_assert_msg(d != NULL, "op %s missing", need[i]);
    ck_assert_str_eq(d->name, need[i]);
  }
  ck_assert(eng_op_find("Assign")->flags & ENG_OP_REF_INPUT0);
  ck_assert(eng_op_find("Assign")->flags & ENG_OP_STATEFUL);
  ck_assert(eng_op_find("AssignVariableOp")->flags & ENG_OP_STATEFUL);
  ck_assert(!(eng_op_find("Identity")->flags & ENG_OP_STATEFUL));
  ck_assert(!(eng_op_find("ReadVariableOp")->flags & ENG_OP_STATEFUL));
}
END_TEST

static Suite *suite(void) {
  Suite *s = suite_create("eng_op");
  TCase *tc = tcase_create("table");
  tcase_set_timeout(tc, 30);
  tcase_add_test(tc, table_not_empty);
  tcase_add_test(tc, every_entry_has_cpu_kernel);
  tcase_add_test(tc, names_strictly_sorted);
  tcase_add_test(tc, find_every_entry);
  tcase_add_test(tc, find_unknown);
  tcase_add_test(tc, ops_the_loader_needs);
  suite_add_tcase(s, tc);
  return s;
}

int main(void) {
  SRunner *sr = srunner_create(suite());
  srunner_run_all(sr, CK_NORMAL);
  int failed = srunner_ntests_failed(sr);
  srunner_free(sr);
  return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
