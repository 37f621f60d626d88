/* td_testcheck: Check assertions on tensord's td_code / td_err results,
 * shared by the unit tests.
 *   ck_err(call, err, CODE, "substring")  the call fails with CODE, err
 *                                         carries CODE and a message
 *                                         containing the substring;
 *   ck_ok(call, err)                      the call succeeds (err's message
 *                                         is printed when it does not). */
#ifndef TD_TESTCHECK_H
#define TD_TESTCHECK_H

#include <check.h>
#include <string.h>

#include "td_status.h"

#define ck_err(rc, err, want, substr)                                                           \
  do {                                                                                          \
    td_code rc_ = (rc);                                                                         \
    ck_assert_msg(rc_ == (want), "got %s (%s), want %s", td_code_name(rc_), (err).msg,          \
                  td_code_name(want));                                                          \
    ck_assert_int_eq((err).code, (want));                                                       \
    ck_assert_msg(strstr((err).msg, (substr)), "message '%s' lacks '%s'", (err).msg, (substr)); \
  } while (0)

#define ck_ok(rc, err)                                                       \
  do {                                                                       \
    td_code rc_ = (rc);                                                      \
    ck_assert_msg(rc_ == TD_OK, "got %s: %s", td_code_name(rc_), (err).msg); \
  } while (0)

#endif
