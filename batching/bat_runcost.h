/* bat_runcost: what runs of each signature have cost, so that bat_queue can
 * tell a run that is known to be short (and may run on the submitting
 * thread) from one that is not.
 *
 * For each key (a signature pointer) it keeps a moving average of the
 * measured run time and the largest input size seen to run within the
 * limit. A run is judged short when the average is within the limit and
 * its input is no larger than that size. A key never measured is not short:
 * its first runs go to the workers, which measure them.
 *
 * The table is small and fixed (the least recently used entry gives way),
 * and keys are pointers, which a later version may reuse once the old one is
 * freed. A stale entry can therefore misjudge a new signature, but only
 * once: a sample far above the limit replaces the average at once, and a
 * slow run no larger than the size trusted so far halves that size. The
 * estimate is a heuristic; nothing depends on it for correctness.
 *
 * Thread-safe (one internal mutex, held for a few loads and stores). */
#ifndef BAT_RUNCOST_H
#define BAT_RUNCOST_H

#include <stdbool.h>
#include <stdint.h>

#include "td_status.h"

typedef struct bat_runcost bat_runcost;

/* limit_ns: what counts as short; 0 makes nothing short. */
td_code bat_runcost_create(uint64_t limit_ns, bat_runcost **out, td_err *err);
void bat_runcost_destroy(bat_runcost *c);

void bat_runcost_set_limit(bat_runcost *c, uint64_t limit_ns);
uint64_t bat_runcost_limit(bat_runcost *c);

/* One measured run of `key` with `size` units of input (bytes). */
void bat_runcost_record(bat_runcost *c, const void *key, uint64_t size, uint64_t ns);

/* True when a run of `key` with `size` units of input is expected to take no
 * longer than the limit. */
bool bat_runcost_is_short(bat_runcost *c, const void *key, uint64_t size);

#endif
