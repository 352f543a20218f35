#include <stdlib.h>
/* The counter-based PRNG primitives, bit-identical to JAX's default PRNG
 * (jax/_src/random/threefry2x32.py with jax_threefry_partitionable = True).
 *
 * threefry2x32(k0, k1, x0, x1) -> (y0, y1): the Threefry-2x32 block cipher
 * with 20 rounds (Salmon et al., "Parallel random numbers: as easy as 1, 2,
 * 3", SC'11; Random123's rotation constants and key schedule), applied
 * elementwise to four u32 operands of one shape.
 *
 * random_bits(key) with params "shape=l0 bit_width=i0": key is u32[2]; the
 * element at row-major index i hashes the 64-bit counter i, split into
 * (hi, lo) = (i >> 32, i & 0xffffffff), under the key: (b1, b2) =
 * threefry2x32(key[0], key[1], hi, lo). This is JAX's partitionable layout
 * (prng.iota_2x32_shape), where every element's bits depend only on its own
 * index, so any shard can compute its part alone. The result is
 *   64 bits: (b1 << 32) | b2 as u64
 *   32 bits: b1 ^ b2 as u32
 *   16 / 8 bits: b1 ^ b2 truncated to u16 / u8. */
#include "../base/error.h"
#include "prims.h"
#include "rules.h"

/* ---- the hash ---- */

static uint32_t rotl32(uint32_t x, int d) { return (x << d) | (x >> (32 - d)); }

/* One Threefry-2x32-20 block: the plain reference, written as Random123's
 * threefry2x32_R(20, ...) unrolls it. */
static void threefry_block(uint32_t k0, uint32_t k1, uint32_t x0, uint32_t x1, uint32_t *y0,
                           uint32_t *y1) {
  static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  /* The key schedule's third word makes the extended key's parity constant. */
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  x0 += ks[0];
  x1 += ks[1];
  /* Five groups of four rounds; after group g the key words (g+1)%3 and
   * (g+2)%3 are injected, plus the group number into the second word. */
  for (uint32_t g = 0; g < 5; g++) {
    for (int r = 0; r < 4; r++) {
      x0 += x1;
      x1 = rotl32(x1, rot[g % 2][r]);
      x1 ^= x0;
    }
    x0 += ks[(g + 1) % 3];
    x1 += ks[(g + 2) % 3] + g + 1;
  }
  *y0 = x0;
  *y1 = x1;
}

/* The same hash over the THREEFRY_LANES counters first, first + 1, ...,
 * written lane-wise so that the compiler runs the rounds on vector
 * registers: every round is the same u32 add, rotate and xor on each lane,
 * and the fixed lane count lets even -O2's cheapest vectorizer take it. */
enum { THREEFRY_LANES = 64 };
static void threefry_lanes(uint32_t k0, uint32_t k1, uint64_t first, uint32_t *restrict y0,
                           uint32_t *restrict y1) {
  static const int rot[2][4] = {{13, 15, 26, 6}, {17, 29, 16, 24}};
  const uint32_t ks[3] = {k0, k1, k0 ^ k1 ^ 0x1BD11BDAu};
  for (int j = 0; j < THREEFRY_LANES; j++) {
    uint64_t c = first + (uint64_t)j;
    y0[j] = (uint32_t)(c >> 32) + ks[0];
    y1[j] = (uint32_t)c + ks[1];
  }
  for (uint32_t g = 0; g < 5; g++) {
    for (int r = 0; r < 4; r++) {
      int d = rot[g % 2][r];
      for (int j = 0; j < THREEFRY_LANES; j++) {
        y0[j] += y1[j];
        y1[j] = ((y1[j] << d) | (y1[j] >> (32 - d))) ^ y0[j];
      }
    }
    uint32_t a = ks[(g + 1) % 3], b = ks[(g + 2) % 3] + g + 1;
    for (int j = 0; j < THREEFRY_LANES; j++) {
      y0[j] += a;
      y1[j] += b;
    }
  }
}

void jx_random_bits_run(const uint32_t key[2], int width, uint64_t first, int64_t n, void *out) {
  uint32_t b1[THREEFRY_LANES], b2[THREEFRY_LANES];
  for (int64_t s = 0; s < n; s += THREEFRY_LANES) {
    int m = n - s < THREEFRY_LANES ? (int)(n - s) : THREEFRY_LANES;
    threefry_lanes(key[0], key[1], first + (uint64_t)s, b1, b2);
    switch (width) {
    case 8:
      for (int j = 0; j < m; j++) ((uint8_t *)out)[s + j] = (uint8_t)(b1[j] ^ b2[j]);
      break;
    case 16:
      for (int j = 0; j < m; j++) ((uint16_t *)out)[s + j] = (uint16_t)(b1[j] ^ b2[j]);
      break;
    case 32:
      for (int j = 0; j < m; j++) ((uint32_t *)out)[s + j] = b1[j] ^ b2[j];
      break;
    default:
      for (int j = 0; j < m; j++) ((uint64_t *)out)[s + j] = ((uint64_t)b1[j] << 32) | b2[j];
      break;
    }
  }
}

/* ---- threefry2x32 ---- */

static jx_status infer_threefry(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  static const char *const names[4] = {"k0", "k1", "x0", "x1"};
  for (int i = 0; i < ctx->nin; i++) {
    if (in[i].dtype != JX_U32)
      return jx_error_set(JX_ERR_DTYPE, "threefry2x32: operand %s is %s but must be u32", names[i],
                          jx_aval_str(in[i].dtype, in[i].shape, a));
    if (!jx_shape_equal(in[i].shape, in[0].shape))
      return jx_error_set(JX_ERR_SHAPE,
                          "threefry2x32: operands must have one shape, got %s (k0) and %s (%s)",
                          jx_aval_str(in[0].dtype, in[0].shape, a),
                          jx_aval_str(in[i].dtype, in[i].shape, b), names[i]);
  }
  for (int o = 0; o < ctx->nout; o++) out[o] = (jx_aval){JX_U32, 0, in[0].shape, 0};
  return JX_OK;
}

static void eval_threefry(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  const uint32_t *k0 = in[0].data, *k1 = in[1].data, *x0 = in[2].data, *x1 = in[3].data;
  uint32_t *y0 = out[0].data, *y1 = out[1].data;
  int64_t n = jx_shape_numel(in[0].shape);
  for (int64_t i = 0; i < n; i++) threefry_block(k0[i], k1[i], x0[i], x1[i], &y0[i], &y1[i]);
}

const jx_prim jx_prim_threefry2x32 = {.name = "threefry2x32",
                                      .id = JX_PRIM_threefry2x32,
                                      .nin = 4,
                                      .nout = 2,
                                      .params = "",
                                      .infer = infer_threefry,
                                      .eval = eval_threefry,
                                      .jvp = jx_jvp_zero,
                                      .elementwise = 1};

/* ---- random_bits ---- */

static jx_dtype bits_dtype(int64_t width) {
  switch (width) {
  case 8: return JX_U8;
  case 16: return JX_U16;
  case 32: return JX_U32;
  default: return JX_U64;
  }
}

static jx_status infer_random_bits(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const jx_params *p = ctx->params;
  char a[JX_AVAL_STR_CAP];
  if (in[0].dtype != JX_U32 || in[0].shape.rank != 1 || in[0].shape.dims[0] != 2)
    return jx_error_set(in[0].dtype != JX_U32 ? JX_ERR_DTYPE : JX_ERR_SHAPE,
                        "random_bits: the key is %s but must be u32[2]",
                        jx_aval_str(in[0].dtype, in[0].shape, a));
  int64_t w = p->i[0];
  if (w != 8 && w != 16 && w != 32 && w != 64)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "random_bits: bit width is %lld but must be 8, 16, 32 or 64", (long long)w);
  const jx_ilist *l = &p->l[0];
  if (l->n < 0 || l->n > JX_MAX_RANK)
    return jx_error_set(JX_ERR_SHAPE, "random_bits: shape has rank %d, more than %d", l->n,
                        JX_MAX_RANK);
  jx_shape s = jx_shape_make(l->n, l->v);
  jx_status st = jx_shape_check(s, "random_bits", "shape");
  if (st) return st;
  out[0] = (jx_aval){bits_dtype(w), 0, s, 0};
  return JX_OK;
}

static void eval_random_bits(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  jx_random_bits_run(in[0].data, (int)ctx->params->i[0], 0, jx_shape_numel(out[0].shape),
                     out[0].data);
}

/* Batching over keys: one draw per key, stacked (as JAX's vmap of
 * random_bits, which also runs the hash per key). */
static jx_status batch_random_bits(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                   int64_t n, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  jx_array *keys = jx_rule_moveaxis(in[0], bdim[0], 0);
  jx_array **draws = malloc(sizeof *draws * (size_t)(n ? n : 1));
  if (!draws) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "random_bits: out of memory");
  for (int64_t k = 0; k < n; k++) { /* key k: row k of keys, drawn from, given a leading axis */
    jx_params row = JX_PARAMS_INIT, flat = JX_PARAMS_INIT, lead = JX_PARAMS_INIT;
    row.l[0] = (jx_ilist){2, {k, 0}};
    row.l[1] = (jx_ilist){2, {k + 1, 2}};
    row.l[2] = (jx_ilist){2, {1, 1}};
    flat.l[0] = (jx_ilist){1, {2}};
    lead.l[0] = (jx_ilist){1, {0}};
    jx_array *key = jx_bind1(&jx_prim_slice, 1, &keys, &row);
    key = jx_bind1(&jx_prim_reshape, 1, &key, &flat);
    jx_array *draw = jx_bind1(&jx_prim_random_bits, 1, &key, p);
    draws[k] = jx_bind1(&jx_prim_expand_dims, 1, &draw, &lead);
  }
  if (n > 0) { /* stacked along the new leading axis */
    jx_params along = JX_PARAMS_INIT;
    along.i[0] = 0;
    out[0] = jx_bind1(&jx_prim_concatenate, (int)n, draws, &along);
  } else {
    jx_aval a;
    jx_aval key = {JX_U32, 0, {1, {2}}, 0};
    jx_status st = infer_random_bits(ctx, &key, &a);
    if (st) {
      free(draws);
      return st;
    }
    a.shape.rank++;
    for (int i = a.shape.rank - 1; i > 0; i--) a.shape.dims[i] = a.shape.dims[i - 1];
    a.shape.dims[0] = 0;
    out[0] = jx_rule_zeros(a);
  }
  free(draws);
  out_bdim[0] = 0;
  return jx_last_status();
}

const jx_prim jx_prim_random_bits = {.name = "random_bits",
                                     .id = JX_PRIM_random_bits,
                                     .nin = 1,
                                     .nout = 1,
                                     .params = "shape=l0 bit_width=i0",
                                     .infer = infer_random_bits,
                                     .eval = eval_random_bits,
                                     .jvp = jx_jvp_zero,
                                     .batch = batch_random_bits};

const jx_prim *const jx_prims_random[] = {&jx_prim_threefry2x32, &jx_prim_random_bits, NULL};
