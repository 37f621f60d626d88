/* eng_mem: large arrays on 2 MiB pages (eng_mem.h). */
#include "eng_mem.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <threads.h>

static bool huge = true;
static once_flag huge_once = ONCE_FLAG_INIT;

static void read_huge(void) {
  const char *e = getenv("TENSORD_ENGINE_HUGEPAGES");
  huge = !(e && !strcmp(e, "0"));
}

bool eng_mem_huge_enabled(void) {
  call_once(&huge_once, read_huge);
  return huge;
}

void *eng_mem_alloc(size_t align, size_t bytes, size_t used) {
  bool big = used >= ENG_MEM_HUGE && used <= bytes && eng_mem_huge_enabled();
  void *p = NULL;
  if (posix_memalign(&p, big && align < ENG_MEM_HUGE ? ENG_MEM_HUGE : align, bytes)) return NULL;
#ifdef MADV_HUGEPAGE
  /* Advice only: where the kernel has no huge pages to give, or THP is
   * off, the array stays on small pages. */
  if (big) (void)madvise(p, used & ~(ENG_MEM_HUGE - 1), MADV_HUGEPAGE);
#endif
  return p;
}
