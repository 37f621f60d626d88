/* Random sources: RandomUniform ([0, 1)), RandomStandardNormal and
 * TruncatedNormal (normal values redrawn until within two standard
 * deviations), float32 or float64 of the shape input 0 gives. What a
 * served graph holds them for is training-time noise (dropout, Gaussian
 * noise) behind a learning-phase switch, so the values must only be random
 * and of the right distribution: they come from a per-thread xoshiro256**
 * stream seeded once per thread from the clock and the thread, not from
 * TensorFlow's Philox with the node's seed attributes, so runs differ from
 * TensorFlow's and from each other. The op table marks these ops
 * ENG_OP_RANDOM, so no plan folds them into constants. */
#include <math.h>
#include <stdint.h>
#include <threads.h>
#include <time.h>

#include "eng_kernels.h"

static thread_local uint64_t rs[4];
static thread_local bool seeded;

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t splitmix(uint64_t *x) {
  uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

static uint64_t next(void) {
  if (!seeded) {
    struct timespec ts;
    timespec_get(&ts, TIME_UTC);
    uint64_t s =
        (uint64_t)ts.tv_sec * 1000000007ull ^ (uint64_t)ts.tv_nsec ^ (uint64_t)(uintptr_t)&seeded;
    for (int i = 0; i < 4; i++) rs[i] = splitmix(&s);
    seeded = true;
  }
  uint64_t r = rotl(rs[1] * 5, 7) * 9, t = rs[1] << 17;
  rs[2] ^= rs[0];
  rs[3] ^= rs[1];
  rs[1] ^= rs[2];
  rs[0] ^= rs[3];
  rs[2] ^= t;
  rs[3] = rotl(rs[3], 45);
  return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform(void) { return (double)(next() >> 11) * 0x1.0p-53; }

static double normal(void) {
  double u = uniform(), v = uniform();
  return sqrt(-2.0 * log(1.0 - u)) * cos(2.0 * M_PI * v);
}

enum { R_UNIFORM, R_NORMAL, R_TRUNCATED };

static td_code random_op(eng_kctx *c, int kind) {
  int64_t dims[ENG_MAX_RANK];
  int n;
  td_code rc = eng_karg_ints(c, 0, dims, ENG_MAX_RANK, &n);
  if (rc) return rc;
  for (int i = 0; i < n; i++)
    if (dims[i] < 0) return eng_kfail(c, TD_INVALID_ARGUMENT, "shape must be non-negative");
  eng_dtype dt = eng_node_attr_type(c->node, "dtype", ENG_DT_FLOAT);
  if (dt != ENG_DT_FLOAT && dt != ENG_DT_DOUBLE)
    return eng_kfail(c, TD_UNIMPLEMENTED, "dtype %s is not supported by its kernel",
                     eng_dtype_name(dt));
  eng_shape s = eng_shape_make(n, dims);
  if ((rc = eng_kout_raw(c, 0, dt, &s))) return rc;
  int64_t count = eng_shape_numel(&s);
  void *y = eng_tensor_data(&c->out[0]);
  for (int64_t i = 0; i < count; i++) {
    double v;
    if (kind == R_UNIFORM) {
      v = uniform();
      if (dt == ENG_DT_FLOAT && (float)v >= 1.0f) v = 0; /* rounding up to 1 */
    } else {
      do v = normal();
      while (kind == R_TRUNCATED && fabs(v) >= 2.0);
    }
    if (dt == ENG_DT_FLOAT)
      ((float *)y)[i] = (float)v;
    else
      ((double *)y)[i] = v;
  }
  return TD_OK;
}

td_code eng_k_random_uniform(eng_kctx *c) { return random_op(c, R_UNIFORM); }
td_code eng_k_random_standard_normal(eng_kctx *c) { return random_op(c, R_NORMAL); }
td_code eng_k_truncated_normal(eng_kctx *c) { return random_op(c, R_TRUNCATED); }

td_code eng_c_random(const eng_node *n, td_err *err) {
  eng_dtype dt = eng_node_attr_type(n, "dtype", ENG_DT_FLOAT);
  if (dt == ENG_DT_FLOAT || dt == ENG_DT_DOUBLE) return TD_OK;
  return td_err_set(err, TD_UNIMPLEMENTED,
                    "node '%s' (%s): dtype %s is not supported by its kernel", n->name, n->op,
                    eng_dtype_name(dt));
}
