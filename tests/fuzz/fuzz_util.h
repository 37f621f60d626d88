/* Helpers shared by the libFuzzer targets: a scratch directory per process
 * (under /dev/shm when it exists) and whole-file writes. Each target keeps
 * its own state in statics set up once by LLVMFuzzerInitialize. */
#ifndef FUZZ_UTIL_H
#define FUZZ_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char *fuzz_scratch(const char *tag) {
  static char dir[256];
  const char *root = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(dir, sizeof dir, "%s/tensord-fuzz-%s-%d", root, tag, (int)getpid());
  mkdir(dir, 0700);
  return dir;
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t n) {
  FILE *f = fopen(path, "wb");
  if (!f) abort();
  if (n && fwrite(data, 1, n, f) != n) abort();
  fclose(f);
}

#endif
