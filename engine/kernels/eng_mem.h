/* eng_mem: memory for the engine's large arrays (packed weights, large
 * tensors), on 2 MiB pages where the kernel gives them.
 *
 * A run streams every weight of a model: on 4 KiB pages a 100 MB model is
 * 25,000 pages per run, each a TLB miss once the other layers have pushed
 * its entry out. Linux backs anonymous memory with transparent huge pages
 * always, only where the program asks (madvise(MADV_HUGEPAGE)), or never
 * (/sys/kernel/mm/transparent_hugepage/enabled); distributions commonly
 * default to the second, so the engine asks. An array of at least
 * ENG_MEM_HUGE bytes is aligned to 2 MiB and its whole 2 MiB pages are
 * advised; its last, partial page is not, so that the array holds at most
 * what it would on small pages. A smaller array is aligned to `align` only.
 * The environment variable TENSORD_ENGINE_HUGEPAGES=0 turns the advice off
 * (read once, at the first call).
 *
 * Memory from eng_mem_alloc is released with free(). Thread-safe. */
#ifndef ENG_MEM_H
#define ENG_MEM_H

#include <stdbool.h>
#include <stddef.h>

#define ENG_MEM_HUGE ((size_t)2 << 20)

/* bytes of memory aligned to align (a power of two, a multiple of
 * sizeof(void *)), or NULL. Only the whole 2 MiB pages among its first
 * `used` bytes are advised (used <= bytes): the room past them, which a
 * recycled buffer may never touch, then costs nothing until it is. */
void *eng_mem_alloc(size_t align, size_t bytes, size_t used);
/* False when TENSORD_ENGINE_HUGEPAGES is 0. */
bool eng_mem_huge_enabled(void);

#endif
