#include "eng_threads.h"

#include <cblas.h>
#include <stdatomic.h>
#include <unistd.h>

#include "eng_pool.h"

static atomic_int threads;

void eng_threads_set(int n) {
  if (n <= 0) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    n = c > 0 ? (int)c : 1;
  }
  atomic_store(&threads, n);
  eng_pool_set_threads(n);
  openblas_set_num_threads(1);
}

int eng_threads(void) {
  int n = atomic_load(&threads);
  if (n > 0) return n;
  eng_threads_set(0);
  return atomic_load(&threads);
}
