/* Linked into the ThreadSanitizer stage's test programs only
 * (scripts/test.d/62-hardening-tsan.sh): C11 mutexes and call_once routed
 * to their pthread equivalents. clang 14's TSan intercepts pthread_mutex_*
 * and pthread_once but not glibc's C11 <threads.h> functions (which call
 * glibc's internal pthread entry points), so without this every section
 * guarded by an mtx_t would be reported as a race. glibc's mtx_t and
 * once_flag have the layout of pthread_mutex_t and pthread_once_t; these
 * definitions take the place of libc's at link time. */
#include <pthread.h>
#include <threads.h>

int mtx_init(mtx_t *m, int type) {
  pthread_mutexattr_t a;
  pthread_mutexattr_init(&a);
  if (type & mtx_recursive) pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
  int rc = pthread_mutex_init((pthread_mutex_t *)m, &a);
  pthread_mutexattr_destroy(&a);
  return rc ? thrd_error : thrd_success;
}

int mtx_lock(mtx_t *m) {
  return pthread_mutex_lock((pthread_mutex_t *)m) ? thrd_error : thrd_success;
}

int mtx_trylock(mtx_t *m) {
  return pthread_mutex_trylock((pthread_mutex_t *)m) ? thrd_busy : thrd_success;
}

int mtx_unlock(mtx_t *m) {
  return pthread_mutex_unlock((pthread_mutex_t *)m) ? thrd_error : thrd_success;
}

void mtx_destroy(mtx_t *m) { pthread_mutex_destroy((pthread_mutex_t *)m); }

void call_once(once_flag *flag, void (*fn)(void)) { pthread_once((pthread_once_t *)flag, fn); }
