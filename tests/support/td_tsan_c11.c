/* Linked into the ThreadSanitizer stage's test programs only
 * (scripts/test.d/62-hardening-tsan.sh): C11 mutexes, condition variables,
 * threads and call_once routed to their pthread equivalents. clang 14's TSan intercepts
 * pthread_mutex_* and pthread_once but not glibc's C11 <threads.h> functions (which call glibc's
 * internal pthread entry points), so without this every section guarded by an mtx_t would be
 * reported as a race, and a thread started by thrd_create would run without TSan's per-thread state
 * (and crash at its first instrumented access). glibc's mtx_t, cnd_t, thrd_t and once_flag have the
 * layout of pthread_mutex_t, pthread_cond_t, pthread_t and pthread_once_t; these definitions take
 * the place of libc's at link time. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
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

int cnd_init(cnd_t *c) {
  return pthread_cond_init((pthread_cond_t *)c, NULL) ? thrd_error : thrd_success;
}

int cnd_signal(cnd_t *c) {
  return pthread_cond_signal((pthread_cond_t *)c) ? thrd_error : thrd_success;
}

int cnd_broadcast(cnd_t *c) {
  return pthread_cond_broadcast((pthread_cond_t *)c) ? thrd_error : thrd_success;
}

int cnd_wait(cnd_t *c, mtx_t *m) {
  return pthread_cond_wait((pthread_cond_t *)c, (pthread_mutex_t *)m) ? thrd_error : thrd_success;
}

void cnd_destroy(cnd_t *c) { pthread_cond_destroy((pthread_cond_t *)c); }

typedef struct start {
  thrd_start_t fn;
  void *arg;
} start;

static void *trampoline(void *arg) {
  start s = *(start *)arg;
  free(arg);
  return (void *)(intptr_t)s.fn(s.arg);
}

int thrd_create(thrd_t *t, thrd_start_t fn, void *arg) {
  start *s = malloc(sizeof *s);
  if (!s) return thrd_nomem;
  s->fn = fn;
  s->arg = arg;
  if (pthread_create((pthread_t *)t, NULL, trampoline, s)) {
    free(s);
    return thrd_error;
  }
  return thrd_success;
}

int thrd_join(thrd_t t, int *res) {
  void *r;
  if (pthread_join((pthread_t)t, &r)) return thrd_error;
  if (res) *res = (int)(intptr_t)r;
  return thrd_success;
}
