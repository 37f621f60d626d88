/* ldr_crc32c: CRC-32C (Castagnoli), and the masking TensorFlow's file
 * formats (SSTable blocks, tensor bundles, TFRecord) store. Pure functions. */
#ifndef LDR_CRC32C_H
#define LDR_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* Continues a CRC: pass 0 to start. Uses the CPU's CRC-32C instruction when
 * it has one (x86-64 SSE4.2). */
uint32_t ldr_crc32c_extend(uint32_t crc, const void *data, size_t n);
/* The same with the table code on any CPU (tests compare the two). */
uint32_t ldr_crc32c_extend_portable(uint32_t crc, const void *data, size_t n);
static inline uint32_t ldr_crc32c(const void *data, size_t n) {
  return ldr_crc32c_extend(0, data, n);
}
uint32_t ldr_crc32c_mask(uint32_t crc);
uint32_t ldr_crc32c_unmask(uint32_t masked);

#endif
