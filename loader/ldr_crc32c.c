/* CRC-32C with the CPU's instruction where there is one (x86-64 with
 * SSE4.2: `crc32` folds eight bytes per instruction, several times the
 * table code's speed), else by slicing-by-8: eight 256-entry tables, where
 * table k maps a byte to the CRC contribution of that byte followed by k
 * zero bytes, so eight input bytes fold into the CRC with eight lookups and
 * no serial dependency between them. The tables are built once (call_once)
 * rather than spelled out as 2048 literals; building them takes
 * microseconds. Words are loaded byte by byte, so the result does not
 * depend on the host's byte order. */
#include "ldr_crc32c.h"

#include <string.h>
#include <threads.h>

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>
#define HAVE_CRC_INSN 1
#endif

#define CRC32C_POLY 0x82F63B78u /* Castagnoli, reflected */
#define CRC32C_MASK_DELTA 0xa282ead8u

static uint32_t crc_table[8][256];
static once_flag crc_once = ONCE_FLAG_INIT;

static void crc_tables_init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = (c >> 1) ^ (CRC32C_POLY & (0u - (c & 1u)));
    crc_table[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++)
      crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xffu];
}

static inline uint32_t load_le32(const uint8_t *p) {
  return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t ldr_crc32c_extend_portable(uint32_t crc, const void *data, size_t n) {
  call_once(&crc_once, crc_tables_init);
  const uint8_t *p = data;
  const uint32_t(*t)[256] = (const uint32_t(*)[256])crc_table;
  uint32_t c = ~crc;
  while (n >= 8) {
    uint32_t lo = c ^ load_le32(p);
    uint32_t hi = load_le32(p + 4);
    c = t[7][lo & 0xff] ^ t[6][(lo >> 8) & 0xff] ^ t[5][(lo >> 16) & 0xff] ^ t[4][lo >> 24] ^
        t[3][hi & 0xff] ^ t[2][(hi >> 8) & 0xff] ^ t[1][(hi >> 16) & 0xff] ^ t[0][hi >> 24];
    p += 8;
    n -= 8;
  }
  while (n--) c = t[0][(c ^ *p++) & 0xff] ^ (c >> 8);
  return ~c;
}

#ifdef HAVE_CRC_INSN
/* The instruction works on the CRC register as the tables do (reflected
 * Castagnoli polynomial, no inversion: the caller inverts). */
__attribute__((target("sse4.2"))) static uint32_t crc_insn(uint32_t crc, const void *data,
                                                          size_t n) {
  const uint8_t *p = data;
  uint32_t c = ~crc;
  for (; n && ((uintptr_t)p & 7); n--) c = _mm_crc32_u8(c, *p++);
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    memcpy(&w, p, 8); /* little-endian, as the instruction expects */
    c64 = _mm_crc32_u64(c64, w);
  }
  c = (uint32_t)c64;
  while (n--) c = _mm_crc32_u8(c, *p++);
  return ~c;
}
#endif

uint32_t ldr_crc32c_extend(uint32_t crc, const void *data, size_t n) {
#ifdef HAVE_CRC_INSN
  static int have = -1; /* racing first calls store the same value */
  if (have < 0) have = __builtin_cpu_supports("sse4.2") ? 1 : 0;
  if (have) return crc_insn(crc, data, n);
#endif
  return ldr_crc32c_extend_portable(crc, data, n);
}

/* Masking keeps a CRC stored next to the data it covers from looking like
 * data whose CRC is easy to compute (LevelDB's rationale). */
uint32_t ldr_crc32c_mask(uint32_t crc) { return ((crc >> 15) | (crc << 17)) + CRC32C_MASK_DELTA; }

uint32_t ldr_crc32c_unmask(uint32_t masked) {
  uint32_t rot = masked - CRC32C_MASK_DELTA;
  return (rot >> 17) | (rot << 15);
}
