/* The attention core on the CPU executor (src/compile/attention_call.h):
 * a jitted program runs the forward and backward attention calls as the
 * fused kernels of src/prims/flash_attention.h.
 *
 * Oracle: the plain composite, the calls' own programs, which run where
 * the kernels do not: eagerly (jx_call of an unjitted function evaluates
 * the calls' bodies) and under jit with JX_FLASH_ATTENTION=0. The fused
 * kernels sum in another order and keep a running maximum, so they agree
 * to f32 rounding, within a bound relative to each output's largest entry.
 * The kernel counters say the kernels ran (and did not, where they must
 * not), so that a comparison of the composite with itself cannot pass for
 * one of the kernels. Shapes: T = 1, T a multiple of the 64-row tile and
 * not (ragged last tiles, of queries and keys), one head and many, head
 * widths that are not whole vectors; f32 (bf16 and f16 run the
 * composite). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "array/array.h"
#include "nn/attention_core.h"
#include "prims/flash_attention.h"
#include "test_util.h"
#include "test_close.h"

/* (q, k, v) -> o */
static void core(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = nn_causal_attention_core(in[0], in[1], in[2]);
}

/* (q, k, v, c) -> sum(o * c) in f32: c the cotangent of o */
static void core_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *o = jx_astype(nn_causal_attention_core(in[0], in[1], in[2]), JX_F32);
  out[0] = jx_sum(jx_mul(o, in[3]), JX_AXES(), 0);
}

static jx_array *random_array(jx_shape s, uint64_t seed) {
  int64_t n = jx_shape_numel(s);
  float *data = malloc(sizeof *data * (size_t)(n + 1));
  assert_non_null(data);
  uint64_t state = seed;
  for (int64_t i = 0; i < n; i++) data[i] = (float)test_rng_uniform(&state);
  jx_array *a = jx_array_from(JX_F32, s, data);
  free(data);
  return a;
}

/* Runs f (nout outputs) three ways: eagerly, jitted with the kernels,
 * jitted without; checks the kernels ran exactly on the one; err[o] gets
 * output o's worst error against the two composites. */
static void check_fn(jx_fn *f, jx_array *const *in, int nout, double *err) {
  jx_array *eager[4], *flash[4], *plain[4];
  check_ok(jx_call(f, in, eager));
  int64_t fwd0 = jx_flash_attention_runs(0), bwd0 = jx_flash_attention_runs(1);
  jx_fn *jf = jx_jit(f, NULL);
  check_ok(jx_call(jf, in, flash));
  for (int o = 0; o < nout; o++) check_ok(jx_block_until_ready(flash[o])); /* a dispatched run */
  int64_t fwd1 = jx_flash_attention_runs(0), bwd1 = jx_flash_attention_runs(1);
  assert_int_equal(fwd1 - fwd0, 1);                /* the forward call ran fused ... */
  assert_int_equal(bwd1 - bwd0, nout > 1 ? 1 : 0); /* ... and the backward, under grad */
  setenv("JX_FLASH_ATTENTION", "0", 1);
  jx_fn *jp = jx_jit(f, NULL);
  check_ok(jx_call(jp, in, plain));
  for (int o = 0; o < nout; o++) check_ok(jx_block_until_ready(plain[o]));
  unsetenv("JX_FLASH_ATTENTION");
  assert_int_equal(jx_flash_attention_runs(0), fwd1);
  assert_int_equal(jx_flash_attention_runs(1), bwd1);
  for (int o = 0; o < nout; o++) {
    double a = relative_error(eager[o], flash[o]), b = relative_error(plain[o], flash[o]);
    err[o] = a > b ? a : b;
  }
  jx_fn_release(jp);
  jx_fn_release(jf);
}

/* o and (loss, dq, dk, dv) for q, k, v [n, t, heads, dh] of dtype dt:
 * the worst errors of o, of the loss and of the three gradients into err.
 * The loss is a sum of terms of both signs: its error is relative to a
 * value that cancellation makes small, hence apart. */
static void run_case(jx_dtype dt, int64_t n, int64_t t, int64_t heads, int64_t dh, double *err) {
  jx_scope_begin();
  jx_shape s = JX_SHAPE(n, t, heads, dh);
  jx_array *in[4] = {jx_astype(random_array(s, 11), dt), jx_astype(random_array(s, 12), dt),
                     jx_astype(random_array(s, 13), dt),
                     random_array(JX_SHAPE(n, heads, t, dh), 14)};
  jx_fn *f = jx_fn_create("flash core", 3, 1, core, NULL);
  double e[4];
  check_fn(f, in, 1, e);
  err[0] = e[0];
  jx_fn *loss = jx_fn_create("flash core loss", 4, 1, core_loss, NULL);
  jx_fn *g = jx_value_and_grad_first(loss, 3, 0);
  check_fn(g, in, 4, e);
  err[1] = e[0];
  err[2] = e[1] > e[2] ? e[1] : e[2];
  err[2] = e[3] > err[2] ? e[3] : err[2];
  fprintf(stderr,
          "attention %s [%lld, %lld, %lld heads, %lld]: o %.3g, loss %.3g, gradients %.3g "
          "(relative to each output's largest entry)\n",
          jx_dtype_name(dt), (long long)n, (long long)t, (long long)heads, (long long)dh, err[0],
          err[1], err[2]);
  jx_fn_release(g);
  jx_fn_release(loss);
  jx_fn_release(f);
  jx_scope_end();
}

static void check_case(int64_t n, int64_t t, int64_t heads, int64_t dh) {
  double err[3];
  run_case(JX_F32, n, t, heads, dh, err);
  assert_true(err[0] <= 1e-6);
  assert_true(err[1] <= 1e-5);
  assert_true(err[2] <= 2e-6);
}

static void test_one_position(void **state) {
  (void)state;
  check_case(2, 1, 3, 32);
}

static void test_whole_tiles_many_heads(void **state) {
  (void)state;
  check_case(2, 128, 8, 32);
}

static void test_ragged_tiles(void **state) {
  (void)state;
  check_case(3, 70, 2, 32);  /* a last tile of 6 queries and keys */
  check_case(1, 131, 1, 16); /* one head, three tiles, the last of 3 */
}

static void test_odd_head_width(void **state) {
  (void)state;
  check_case(2, 37, 2, 12); /* a vector and a half per row */
  check_case(1, 9, 1, 3);
}

/* The plain C loops (CPUs without AVX2 and FMA) on ragged tiles. */
static void test_portable_loops(void **state) {
  (void)state;
  jx_flash_attention_set_portable(1);
  check_case(2, 70, 3, 12);
  jx_flash_attention_set_portable(0);
}

/* bf16 and f16 are not the kernels': the call runs its program, which
 * rounds the scores and probabilities to the dtype as JAX does. */
static void check_half_runs_composite(jx_dtype dt) {
  jx_shape s = JX_SHAPE(1, 20, 2, 32);
  jx_array *in[3] = {jx_astype(random_array(s, 1), dt), jx_astype(random_array(s, 2), dt),
                     jx_astype(random_array(s, 3), dt)};
  jx_fn *f = jx_fn_create("flash core half", 3, 1, core, NULL), *jf = jx_jit(f, NULL);
  jx_array *want, *got;
  check_ok(jx_call(f, in, &want));
  int64_t runs = jx_flash_attention_runs(0);
  check_ok(jx_call(jf, in, &got));
  check_ok(jx_block_until_ready(got));
  assert_int_equal(jx_flash_attention_runs(0), runs);
  assert_true(relative_error(want, got) <= 1e-2);
  jx_fn_release(jf);
  jx_fn_release(f);
}

static void test_half_precision_runs_composite(void **state) {
  (void)state;
  check_half_runs_composite(JX_BF16);
  check_half_runs_composite(JX_F16);
}

/* The backward in two passes (key tiles, then query tiles; what it runs
 * with fewer heads than threads and free cores) gives the one pass's bits:
 * one head alone, split, against the same head as batch entry 0 of several
 * in one pass, on ragged tiles. */
static void test_split_backward_keeps_bits(void **state) {
  (void)state;
  const int64_t t = 150, dh = 24, many = 3, one = t * dh;
  float *buf = malloc(sizeof *buf * (size_t)(12 * many * one));
  assert_non_null(buf);
  float *q = buf, *k = q + many * one, *v = k + many * one, *o = v + many * one;
  float *dout = o + many * one, *lse = dout + many * one, *g = lse + many * one;
  for (int64_t i = 0; i < 5 * many * one; i++) buf[i] = (float)sin(0.37 * (double)i) * 0.8f;
  for (int heads = 0; heads < 2; heads++) {
    jx_flash_shape s = {heads ? many : 1, t, 1, dh, 1.0f / sqrtf((float)dh)};
    float *dq = g + heads * 3 * many * one, *dk = dq + many * one, *dv = dk + many * one;
    jx_flash_attention_set_split(heads ? 0 : 1);
    assert_int_equal(jx_flash_attention_fwd(&s, q, k, v, o, lse), JX_OK);
    assert_int_equal(jx_flash_attention_bwd(&s, q, k, v, o, lse, dout, dq, dk, dv), JX_OK);
  }
  jx_flash_attention_set_split(-1);
  /* batch entry 0 of the many against the one head alone */
  for (int w = 0; w < 3; w++)
    assert_memory_equal(g + w * many * one, g + (3 + w) * many * one, sizeof(float) * one);
  free(buf);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_one_position, setup, teardown),
      cmocka_unit_test_setup_teardown(test_whole_tiles_many_heads, setup, teardown),
      cmocka_unit_test_setup_teardown(test_ragged_tiles, setup, teardown),
      cmocka_unit_test_setup_teardown(test_odd_head_width, setup, teardown),
      cmocka_unit_test_setup_teardown(test_portable_loops, setup, teardown),
      cmocka_unit_test_setup_teardown(test_half_precision_runs_composite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_split_backward_keeps_bits, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
