/* Conformance adapters for the random ops: in0 is always the raw key u32[2]
 * (or, for "key", the seed as a u64 scalar). */
#include <string.h>

#include "conformance.h"

static jx_status key(const conf_case *c, int nin, jx_array *const *in, int *nout, jx_array **out) {
  (void)c;
  (void)nin;
  uint64_t seed = 0;
  jx_status st = jx_read(in[0], &seed, sizeof seed);
  if (st) return st;
  *nout = 1;
  out[0] = jx_random_key(seed);
  return jx_last_status();
}

static jx_status categorical(const conf_case *c, int nin, jx_array *const *in, int *nout,
                             jx_array **out) {
  (void)nin;
  *nout = 1;
  out[0] = jx_random_categorical(in[0], in[1], (int)conf_int(c, "axis", -1));
  return jx_last_status();
}

#define SHAPE(c) conf_shape(c, "shape", JX_SHAPE())
#define DTYPE(c) conf_dtype(c, "dtype", JX_F32)
CONF_ONE(split, jx_random_split(in[0], conf_int(c, "n", 2)))
CONF_ONE(fold_in, jx_random_fold_in(in[0], (uint32_t)conf_int(c, "data", 0)))
CONF_ONE(bits, jx_random_bits(in[0], SHAPE(c)))
CONF_ONE(uniform, jx_random_uniform(in[0], DTYPE(c), SHAPE(c), conf_double(c, "lo", 0),
                                    conf_double(c, "hi", 1)))
CONF_ONE(normal, jx_random_normal(in[0], DTYPE(c), SHAPE(c)))
CONF_ONE(truncated_normal,
         jx_random_truncated_normal(in[0], DTYPE(c), SHAPE(c), conf_double(c, "lo", -2),
                                    conf_double(c, "hi", 2)))
CONF_ONE(bernoulli, jx_random_bernoulli(in[0], conf_double(c, "p", 0.5), SHAPE(c)))
CONF_ONE(permutation, jx_random_permutation(in[0], conf_int(c, "n", 0)))

const conf_op conf_ops_random[] = {
    {"key", key},
    {"split", split},
    {"fold_in", fold_in},
    {"bits", bits},
    {"uniform", uniform},
    {"normal", normal},
    {"truncated_normal", truncated_normal},
    {"bernoulli", bernoulli},
    {"categorical", categorical},
    {"permutation", permutation},
    {NULL, NULL},
};
