/* The KV-cache decode step's attention on the CPU executor: a jitted
 * program runs the decode attention call (src/nn/attention_core.h) as the
 * kernel of src/prims/decode_attention.h, which reads only each sequence's
 * filled slots.
 *
 * Oracle: the call's own program, a masked softmax over every slot, which
 * runs eagerly and under jit with JX_DECODE_ATTENTION=0. The kernel sums
 * in another order (a running maximum per chunk of slots), so the two
 * agree to f32 rounding (TOL), relative to each output's largest entry. The
 * kernel's counter says it ran, and did not where it must not. Each batch
 * has sequences of different ranges: left pads, one slot, the whole
 * window, more slots than the kernel's chunk, and ranges outside [0, S)
 * or empty. Then: the derivatives (the composite's, by finite
 * differences), vmap, and greedy decoding by jx_gpt_generate giving the
 * same tokens with the kernel and without. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "array/array.h"
#include "nn/attention_core.h"
#include "prims/decode_attention.h"
#include "test_util.h"
#include "test_close.h"

/* The kernel's bound, relative to each output's largest entry: with inputs
 * in [-1, 1), the scores' dot products (up to 64 terms, summed in another
 * order) differ from the composite's by a few ulp of their terms, and the
 * probabilities and the weighted sums of values by as much. */
#define TOL 2e-6

/* (q, k, v, lo, hi) -> o */
static void attend(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = nn_decode_attention_core(in[0], in[1], in[2], in[3], in[4]);
}

static jx_array *random_array(jx_dtype dt, jx_shape s, uint64_t seed) {
  int64_t n = jx_shape_numel(s);
  float *data = malloc(sizeof *data * (size_t)(n + 1));
  assert_non_null(data);
  uint64_t state = seed;
  for (int64_t i = 0; i < n; i++) data[i] = (float)(2 * test_rng_uniform(&state) - 1);
  jx_array *a = jx_astype(jx_array_from(JX_F32, s, data), dt);
  free(data);
  return a;
}

/* q [n, H, dh], k and v [n, S, H, dh] and the ranges [lo, hi) of in. */
static void make_inputs(jx_dtype dt, int64_t n, int64_t S, int64_t H, int64_t dh, const int32_t *lo,
                        const int32_t *hi, jx_array **in) {
  in[0] = random_array(dt, JX_SHAPE(n, H, dh), 21);
  in[1] = random_array(dt, JX_SHAPE(n, S, H, dh), 22);
  in[2] = random_array(dt, JX_SHAPE(n, S, H, dh), 23);
  in[3] = jx_array_from(JX_I32, JX_SHAPE(n), lo);
  in[4] = jx_array_from(JX_I32, JX_SHAPE(n), hi);
}

/* The kernel's o against the composite's, eagerly and jitted without the
 * kernel: the worst relative error. */
static double check_case(int64_t n, int64_t S, int64_t H, int64_t dh, const int32_t *lo,
                         const int32_t *hi) {
  jx_scope_begin();
  jx_array *in[5], *eager, *fast, *plain;
  make_inputs(JX_F32, n, S, H, dh, lo, hi, in);
  jx_fn *f = jx_fn_create("decode attention", 5, 1, attend, NULL);
  check_ok(jx_call(f, in, &eager));
  int64_t runs = jx_decode_attention_runs();
  assert_int_equal(runs, jx_decode_attention_runs()); /* eagerly: the composite */
  jx_fn *jf = jx_jit(f, NULL);
  check_ok(jx_call(jf, in, &fast));
  check_ok(jx_block_until_ready(fast));
  assert_int_equal(jx_decode_attention_runs(), runs + 1);
  setenv("JX_DECODE_ATTENTION", "0", 1);
  jx_fn *jp = jx_jit(f, NULL);
  check_ok(jx_call(jp, in, &plain));
  check_ok(jx_block_until_ready(plain));
  unsetenv("JX_DECODE_ATTENTION");
  assert_int_equal(jx_decode_attention_runs(), runs + 1);
  double a = relative_error(eager, fast), b = relative_error(plain, fast);
  fprintf(stderr, "decode attention [%lld, S %lld, %lld heads, %lld]: %.3g\n", (long long)n,
          (long long)S, (long long)H, (long long)dh, a > b ? a : b);
  jx_fn_release(jp);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_scope_end();
  return a > b ? a : b;
}

/* Left pads, one slot, the whole window, and one in between. */
static void test_per_sequence_ranges(void **state) {
  (void)state;
  const int32_t lo[4] = {0, 5, 69, 0}, hi[4] = {70, 40, 70, 1};
  assert_true(check_case(4, 70, 8, 32, lo, hi) <= TOL);
  assert_true(check_case(4, 70, 1, 64, lo, hi) <= TOL);
}

/* The slots outside a sequence's range are never read: NaN there leaves
 * the kernel's output bit for bit as it was (the composite, which weighs
 * them by 0, would give NaN). */
static void test_unfilled_slots_not_read(void **state) {
  (void)state;
  jx_scope_begin();
  enum { N = 3, S = 40, H = 2, DH = 16 };
  const int32_t lo[N] = {0, 4, 10}, hi[N] = {1, 25, 40};
  jx_array *in[5], *clean, *dirty;
  make_inputs(JX_F32, N, S, H, DH, lo, hi, in);
  jx_fn *f = jx_fn_create("decode attention", 5, 1, attend, NULL), *jf = jx_jit(f, NULL);
  check_ok(jx_call(jf, in, &clean));
  static float kv[N * S * H * DH];
  for (int i = 1; i <= 2; i++) {
    check_ok(jx_read(in[i], kv, sizeof kv));
    for (int b = 0; b < N; b++)
      for (int j = 0; j < S; j++)
        for (int e = 0; e < H * DH && (j < lo[b] || j >= hi[b]); e++)
          kv[((b * S) + j) * H * DH + e] = NAN;
    in[i] = jx_array_from(JX_F32, JX_SHAPE(N, S, H, DH), kv);
  }
  check_ok(jx_call(jf, in, &dirty));
  float a[N * H * DH], b[N * H * DH];
  check_ok(jx_read(clean, a, sizeof a));
  check_ok(jx_read(dirty, b, sizeof b));
  assert_memory_equal(a, b, sizeof a);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_scope_end();
}

/* More filled slots than a chunk of the kernel holds (256), up to the
 * whole window. */
static void test_long_windows(void **state) {
  (void)state;
  const int32_t lo[2] = {0, 3}, hi[2] = {300, 257};
  assert_true(check_case(2, 300, 2, 16, lo, hi) <= TOL);
}

/* Heads whose width is not whole vectors (the plain loops) and the plain
 * loops on whole vectors. */
static void test_plain_loops(void **state) {
  (void)state;
  const int32_t lo[3] = {0, 2, 7}, hi[3] = {9, 30, 31};
  assert_true(check_case(3, 31, 3, 12, lo, hi) <= TOL);
  jx_decode_attention_set_portable(1);
  assert_true(check_case(3, 31, 4, 32, lo, hi) <= TOL);
  jx_decode_attention_set_portable(0);
}

/* Ranges past the ends are clamped to [0, S); an empty one weighs every
 * slot equally, as the composite's all-masked softmax does. */
static void test_clamped_and_empty_ranges(void **state) {
  (void)state;
  const int32_t lo[4] = {-3, 10, 12, 40}, hi[4] = {5, 99, 12, 2};
  assert_true(check_case(4, 20, 2, 8, lo, hi) <= TOL);
}

/* The call's derivatives are its equations' (JVP and VJP against finite
 * differences; the composite runs, which rounds the scores to f32 whatever
 * the inputs' dtype, hence f32 and its tolerances), and it batches under
 * vmap. */
static void test_derivatives_and_vmap(void **state) {
  (void)state;
  jx_scope_begin();
  const int32_t lo[2] = {1, 0}, hi[2] = {4, 6};
  jx_array *in[5];
  make_inputs(JX_F32, 2, 6, 2, 4, lo, hi, in);
  jx_fn *f = jx_fn_create("decode attention", 5, 1, attend, NULL);
  check_ok(jx_check_grads(f, in, 1, 0, 0));
  /* vmap over a leading axis of 3 copies of (q, k, v), the ranges shared,
   * jitted (the kernel may or may not take the batched call): each slice
   * is the unbatched composite's */
  jx_array *one[5], *three[5], *want, *got;
  make_inputs(JX_F32, 2, 6, 2, 8, lo, hi, one);
  for (int i = 0; i < 3; i++) three[i] = jx_stack(3, (jx_array *[]){one[i], one[i], one[i]}, 0);
  three[3] = one[3];
  three[4] = one[4];
  check_ok(jx_call(f, one, &want));
  jx_fn *vf = jx_vmap(f, JX_AXES(0, 0, 0, JX_NONE, JX_NONE), JX_AXES(0));
  jx_fn *jvf = jx_jit(vf, NULL);
  check_ok(jx_call(jvf, three, &got));
  for (int64_t i = 0; i < 3; i++)
    assert_true(relative_error(want, jx_reshape(jx_slice(got, JX_SHAPE(i, 0, 0, 0),
                                                         JX_SHAPE(i + 1, 2, 2, 8), JX_SHAPE()),
                                                JX_SHAPE(2, 2, 8))) <= TOL);
  jx_fn_release(jvf);
  jx_fn_release(vf);
  jx_fn_release(f);
  jx_scope_end();
}

/* bf16 is not the kernel's: the call runs its program. */
static void test_bf16_runs_composite(void **state) {
  (void)state;
  jx_scope_begin();
  const int32_t lo[2] = {0, 2}, hi[2] = {9, 5};
  jx_array *in[5], *want, *got;
  make_inputs(JX_BF16, 2, 9, 2, 8, lo, hi, in);
  jx_fn *f = jx_fn_create("decode attention bf16", 5, 1, attend, NULL), *jf = jx_jit(f, NULL);
  check_ok(jx_call(f, in, &want));
  int64_t runs = jx_decode_attention_runs();
  check_ok(jx_call(jf, in, &got));
  check_ok(jx_block_until_ready(got));
  assert_int_equal(jx_decode_attention_runs(), runs);
  assert_true(relative_error(want, got) <= 1e-2);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_scope_end();
}

static int32_t tokens[2][3][40];
static int ntok[2][3];
static int which;

static void collect(void *ctx, int64_t seq, int32_t token) {
  (void)ctx;
  tokens[which][seq][ntok[which][seq]++] = token;
}

/* Greedy decoding of a batch of prompts of different lengths gives the
 * same tokens with the kernel as without it, past a sliding window (a
 * context of 32 for 12 + 40 tokens). */
static void test_generate_same_tokens(void **state) {
  (void)state;
  const jx_gpt_config c = {
      .vocab = 64, .n_layers = 2, .d_model = 64, .n_heads = 4, .context = 32, .mlp_ratio = 4};
  jx_tree *params = jx_gpt_init(&c, jx_random_key(3), JX_F32);
  int32_t p[3][12];
  const int32_t *prompts[3] = {p[0], p[1], p[2]};
  for (int b = 0; b < 3; b++)
    for (int i = 0; i < 12; i++) p[b][i] = (int32_t)((i * 7 + b * 31 + 3) % c.vocab);
  jx_generate_options o = {.max_tokens = 40, .on_token = collect};
  for (which = 0; which < 2; which++) {
    if (which) setenv("JX_DECODE_ATTENTION", "0", 1);
    int64_t runs = jx_decode_attention_runs();
    check_ok(jx_gpt_generate(&c, params, 3, prompts, (int64_t[]){12, 3, 7}, &o, NULL));
    if (which)
      assert_int_equal(jx_decode_attention_runs(), runs);
    else
      assert_true(jx_decode_attention_runs() > runs + 30 * c.n_layers);
    unsetenv("JX_DECODE_ATTENTION");
  }
  for (int b = 0; b < 3; b++) {
    assert_int_equal(ntok[0][b], 40);
    assert_int_equal(ntok[1][b], 40);
    assert_memory_equal(tokens[0][b], tokens[1][b], sizeof tokens[0][b]);
  }
  jx_tree_release(params);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_per_sequence_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_unfilled_slots_not_read, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_windows, setup, teardown),
      cmocka_unit_test_setup_teardown(test_plain_loops, setup, teardown),
      cmocka_unit_test_setup_teardown(test_clamped_and_empty_ranges, setup, teardown),
      cmocka_unit_test_setup_teardown(test_derivatives_and_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bf16_runs_composite, setup, teardown),
      cmocka_unit_test_setup_teardown(test_generate_same_tokens, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
