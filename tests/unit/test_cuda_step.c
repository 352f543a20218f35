/* A training step that stays on the device (src/cuda/cuda_exec.h), under
 * tests/cuda_fake's driver (kernels in tests/cuda_emu's emulator) and its
 * fake cuBLASLt (GEMMs computed on the emulated device memory):
 *  - integer elementwise equations (index arithmetic, comparisons, shifts,
 *    converts, selects on masks) are kernels, with the reference kernels'
 *    semantics: the bits of the CPU jit, edge cases included (x / 0,
 *    INT_MIN / -1, shifts past the width, float -> int saturation and NaN);
 *    so is a bf16 scatter-add (an embedding's gradient in bf16);
 *  - bf16 sums are kernels with the reference kernel's bits, and
 *    attention's contractions (batch dims 0 and 2) are GEMMs;
 *  - a small GPT's train step, and a bf16 MLP's, copy nothing between
 *    host and device after their first call, and their losses are the CPU
 *    jit's within bounds derived below.
 * Oracles: the CPU jit of the same functions; the fake driver's copy
 * counters; the executor's host-equation count. */
#define _GNU_SOURCE
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/cuda.h>
#include <jx/jx.h>

#include "cuda/cuda_copy.h"
#include "cuda/cuda_exec.h"
#include "ir/program.h"
#include "cuda_test_driver.h"
#include "test_util.h"
#include "trace/fn.h"

/* The CUDA executable of f's program for these inputs: kernels, host
 * equations and GEMMs. */
static int executable_counts(jx_fn *gpu, int nin, jx_array *const *in, int *host, int *gemms) {
  jx_aval av[80];
  assert_true(nin <= 80);
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(gpu, av);
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  int k = jx_cuda_executable_kernels(jx_program_executable(p), host, gemms);
  jx_program_release(p);
  return k;
}

static void expect_same_bits(jx_array *want, jx_array *got, int o) {
  char *a, *b;
  size_t bytes = cuda_test_read_pair(want, got, &a, &b);
  if (memcmp(a, b, bytes) != 0) {
    for (size_t i = 0; i < bytes; i++)
      if (a[i] != b[i])
        fail_msg("integer output %d (%s): byte %zu differs from the CPU jit", o,
                 jx_dtype_name(jx_dtype_of(want)), i);
  }
  free(a);
  free(b);
}

/* fn jitted on the CPU (*cpu; with reference = 1 its reference kernels,
 * no C compile) and on CUDA (*gpu), each called once on in. */
static void call_on_both(jx_fn *fn, jx_array *const *in, jx_array **want, jx_array **got,
                         jx_fn **cpu, jx_fn **gpu, int reference) {
  setenv("JX_PLATFORM", "cpu", 1);
  if (reference) setenv("JX_JIT_KERNELS", "0", 1);
  *cpu = jx_jit(fn, NULL);
  check_ok(jx_call(*cpu, in, want));
  setenv("JX_JIT_KERNELS", "1", 1);
  setenv("JX_PLATFORM", "cuda", 1);
  *gpu = jx_jit(fn, NULL);
  check_ok(jx_call(*gpu, in, got));
  setenv("JX_PLATFORM", "cpu", 1);
}

/* Releases the three functions and the test's scope; then nothing is left
 * on the device. */
static void release_all(jx_fn *fn, jx_fn *cpu, jx_fn *gpu) {
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(fn);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

/* ---- integer equations as kernels ---- */

enum { NI = 24, INT_OUTS = 17 };

/* in: i32 a, i32 b, u32 c, i64 d, i64 e, u8 f, f32 x, f32 table[8, 3] */
static void int_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = in[0], *b = in[1], *c = in[2], *d = in[3], *e = in[4], *f = in[5], *x = in[6];
  out[0] = jx_floor_divide(a, b); /* lax.div and rem, sign fix-ups: x / 0, INT_MIN / -1 */
  out[1] = jx_rem(a, b);
  out[2] = jx_sub(jx_add(jx_mul(a, b), a), b); /* wraps */
  out[3] = jx_shift_left(a, b);                /* counts < 0 and >= 32 give 0 */
  out[4] = jx_shift_right_arithmetic(a, b);
  out[5] = jx_shift_right_logical(c, jx_astype(b, JX_U32));
  out[6] = jx_bitwise_xor(jx_bitwise_and(a, b), jx_bitwise_not(jx_bitwise_or(a, b)));
  out[7] = jx_astype(x, JX_I32); /* truncates, saturates, NaN -> 0 */
  out[8] = jx_astype(x, JX_U8);
  out[9] = jx_astype(x, JX_I64);
  out[10] = jx_add(jx_astype(d, JX_F32), jx_astype(a, JX_F32)); /* i64 -> f32 rounds once */
  out[11] = jx_astype(d, JX_I8);                                /* wraps */
  out[12] = jx_where(jx_lt(a, b), jx_maximum(a, b), jx_minimum(jx_neg(a), b));
  out[13] = jx_add(jx_floor_divide(d, e), jx_mul(d, e));
  out[14] = jx_add(jx_mul(f, f), f); /* u8 wraps */
  /* jx_take's wrapping of negative indices (lt, add, select_n on the
   * indices) feeds the gather kernel */
  out[15] = jx_take(in[7], jx_rem(a, jx_scalar(JX_I32, 8)), 0);
  /* and a bf16 embedding gradient: rows added at ids with repeats (one
   * rounding per add, in the updates' order), an id past the end dropped */
  int32_t ids[10] = {3, 7, 3, 0, 9, 3, 7, 1, 7, 7};
  jx_array *ix = jx_array_from(JX_I32, (jx_shape){2, {10, 1}}, ids);
  jx_array *rows =
      jx_array_from(JX_I32, (jx_shape){1, {10}}, (int32_t[]){1, 5, 2, 2, 7, 0, 6, 3, 4, 5});
  jx_array *up = jx_astype(jx_mul(jx_take(in[7], rows, 0), jx_scalar(JX_F32, 0.731)), JX_BF16);
  jx_scatter_dims dn = {JX_AXES(1), JX_AXES(0), JX_AXES(0), 1};
  out[16] = jx_scatter(jx_astype(jx_mul(in[7], jx_scalar(JX_F32, 1.37)), JX_BF16), ix, up, &dn,
                       JX_SCATTER_ADD, JX_SCATTER_DROP);
}

static void test_integer_kernels(void **state) {
  (void)state;
  jx_scope_begin();
  int32_t a[NI] = {7,  -7, 7,       -7, INT_MIN, INT_MAX, 0, 5, -1, 123456789, 1 << 30, -3,
                   12, 40, -100000, 1,  2,       3,       9, 6, -9, 77,        -77,     31};
  int32_t b[NI] = {2,  2, -2, -2, -1, -1, 0, 0,  0, 31, 32, 33,
                   -1, 1, 5,  31, 30, -5, 4, 64, 3, -3, 7,  1};
  uint32_t c[NI];
  int64_t d[NI], e[NI];
  uint8_t f[NI];
  float x[NI] = {1.5f,  -1.5f, 2.9f,  -2.9f,  NAN,   INFINITY, -INFINITY,  3e9f,
                 -3e9f, 255.f, 256.f, 300.7f, -0.5f, 1e20f,    -1e20f,     0.f,
                 -0.f,  65.5f, 7.f,   -8.f,   2e9f,  -2.2e9f,  16777217.f, 9e18f};
  for (int i = 0; i < NI; i++) {
    c[i] = (uint32_t)a[i] * 2654435761u;
    d[i] = (int64_t)a[i] * 3000000000ll + i;
    e[i] = i % 5 == 0 ? 0 : i % 7 == 0 ? -1 : (int64_t)b[i] * 1000003 + 1;
    f[i] = (uint8_t)((uint32_t)a[i] * 37u + 11u); /* wraps, as the int product would */
  }
  d[3] = INT64_MIN;
  e[3] = -1; /* INT64_MIN / -1 wraps */
  d[5] = (1ll << 53) + 1;
  float table[8 * 3];
  for (int i = 0; i < 24; i++) table[i] = (float)i * 0.5f;
  jx_array *in[8] = {jx_array_from(JX_I32, (jx_shape){1, {NI}}, a),
                     jx_array_from(JX_I32, (jx_shape){1, {NI}}, b),
                     jx_array_from(JX_U32, (jx_shape){1, {NI}}, c),
                     jx_array_from(JX_I64, (jx_shape){1, {NI}}, d),
                     jx_array_from(JX_I64, (jx_shape){1, {NI}}, e),
                     jx_array_from(JX_U8, (jx_shape){1, {NI}}, f),
                     jx_array_from(JX_F32, (jx_shape){1, {NI}}, x),
                     jx_array_from(JX_F32, (jx_shape){2, {8, 3}}, table)};
  jx_fn *fn = jx_fn_create("integers", 8, INT_OUTS, int_body, NULL);
  jx_array *want[INT_OUTS], *got[INT_OUTS];
  jx_fn *cpu, *gpu;
  call_on_both(fn, in, want, got, &cpu, &gpu, 0);
  for (int o = 0; o < INT_OUTS; o++) expect_same_bits(want[o], got[o], o);
  int host = 0, gemms = 0, kernels = executable_counts(gpu, 8, in, &host, &gemms);
  fprintf(stderr, "integers: %d kernels, %d equations on the host\n", kernels, host);
  assert_true(kernels >= 1);
  assert_int_equal(host, 0);
  release_all(fn, cpu, gpu);
}

/* ---- bf16 sums as kernels ---- */

/* bf16 sums on the device as the reference kernel sums them (loaded into
 * floats, the f32 pairwise tree, one rounding of the result): the CPU
 * jit's bits for column reductions over one and two leading axes (a bias
 * gradient), a fused one (of a product rounded to bf16 first), a row
 * reduction and a sum of every element; 300 rows make the tree's leaves
 * and partial sums matter. */
static void bf16_sums_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0];
  out[0] = jx_sum(x, JX_AXES(0, 1), 0);
  out[1] = jx_sum(x, JX_AXES(0), 0);
  out[2] = jx_sum(jx_mul(x, x), JX_AXES(0, 1), 0);
  out[3] = jx_sum(x, JX_AXES(2), 0);
  out[4] = jx_sum(x, JX_AXES(0, 1, 2), 0);
}

static void test_bf16_sums(void **state) {
  (void)state;
  jx_scope_begin();
  enum { A = 3, B = 100, C = 24 };
  float v[A * B * C];
  for (int i = 0; i < A * B * C; i++) v[i] = sinf((float)i * 0.37f) * (1 + (float)(i % 7));
  jx_array *in[1] = {jx_astype(jx_array_from(JX_F32, (jx_shape){3, {A, B, C}}, v), JX_BF16)};
  jx_fn *fn = jx_fn_create("bf16_sums", 1, 5, bf16_sums_body, NULL);
  jx_array *want[5], *got[5];
  jx_fn *cpu, *gpu;
  call_on_both(fn, in, want, got, &cpu, &gpu, 1);
  for (int o = 0; o < 5; o++) expect_same_bits(want[o], got[o], o);
  int host = 0, gemms = 0, kernels = executable_counts(gpu, 1, in, &host, &gemms);
  fprintf(stderr, "bf16 sums: %d kernels, %d equations on the host\n", kernels, host);
  assert_int_equal(host, 0);
  release_all(fn, cpu, gpu);
}

/* ---- attention's contractions as GEMMs ---- */

/* Unfused attention's dot_generals (no flash kernel for its head_dim)
 * batch over dims 0 and 2 of a [batch, T, heads, head_dim] operand: a GEMM
 * per batch row over the heads (rows head_dim * heads apart), each one
 * cuBLASLt call; the CPU jit's values within the bound derived below, in
 * f32 and bf16 (bf16 in and out, f32 accumulation), no equation on the host.
 * in: q, k, v [2, 8, 3, 16]; p, dp [2, 3, 8, 8]; do [2, 3, 8, 16]. */
static void attention_dots_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *q = in[0], *k = in[1], *v = in[2], *p = in[3], *dp = in[4], *d_o = in[5];
  out[0] = jx_dot_general(q, k, JX_AXES(3), JX_AXES(3), JX_AXES(0, 2), JX_AXES(0, 2)); /* q k^T */
  out[1] = jx_dot_general(p, v, JX_AXES(3), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2)); /* p v */
  out[2] = jx_dot_general(d_o, v, JX_AXES(3), JX_AXES(3), JX_AXES(0, 1), JX_AXES(0, 2));
  out[3] =
      jx_dot_general(p, d_o, JX_AXES(2), JX_AXES(2), JX_AXES(0, 1), JX_AXES(0, 1));     /* p^T do */
  out[4] = jx_dot_general(dp, k, JX_AXES(3), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2)); /* ds k */
  out[5] = jx_dot_general(dp, q, JX_AXES(2), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2)); /* ds^T q */
}

static void check_attention_dots(jx_dtype dt) {
  jx_scope_begin();
  const jx_shape qs = {4, {2, 8, 3, 16}}, ps = {4, {2, 3, 8, 8}}, os = {4, {2, 3, 8, 16}};
  const jx_shape shapes[6] = {qs, qs, qs, ps, ps, os};
  jx_array *in[6];
  for (int i = 0; i < 6; i++) {
    int64_t n = jx_shape_numel(shapes[i]);
    float *v = malloc(sizeof *v * (size_t)n);
    assert_non_null(v);
    for (int64_t j = 0; j < n; j++) v[j] = sinf((float)(j * (i + 3)) * 0.113f + (float)i);
    in[i] = jx_astype(jx_array_from(JX_F32, shapes[i], v), dt);
    free(v);
  }
  jx_fn *fn = jx_fn_create("attention_dots", 6, 6, attention_dots_body, NULL);
  jx_array *want[6], *got[6];
  jx_fn *cpu, *gpu;
  call_on_both(fn, in, want, got, &cpu, &gpu, 1);
  /* cuBLASLt may add in another order than the CPU: each output is a sum
   * of at most K = 16 products of values in [-1, 1] (sines), each order
   * within K u of the exact sum's magnitude bound K (u = 2^-24), so the
   * two within 2 K^2 u; a bf16 output may then round to the neighbouring
   * bf16 value, one unit of at most 2^-7 |value| more. */
  const double abs_tol = 2 * 16 * 16 * ldexp(1, -24), rel_tol = dt == JX_BF16 ? ldexp(1, -7) : 0;
  for (int o = 0; o < 6; o++) {
    jx_array *w = jx_astype(want[o], JX_F32), *g = jx_astype(got[o], JX_F32);
    int64_t n = jx_shape_numel(jx_shape_of(w));
    float *x = malloc(sizeof *x * (size_t)n), *y = malloc(sizeof *y * (size_t)n);
    assert_non_null(x);
    assert_non_null(y);
    check_ok(jx_read(w, x, sizeof *x * (size_t)n));
    check_ok(jx_read(g, y, sizeof *y * (size_t)n));
    for (int64_t j = 0; j < n; j++)
      if (!(fabs((double)y[j] - x[j]) <= abs_tol + rel_tol * fabs((double)x[j])))
        fail_msg("attention dot %d (%s), element %lld: %.9g on CUDA, %.9g on the CPU", o,
                 jx_dtype_name(dt), (long long)j, (double)y[j], (double)x[j]);
    free(x);
    free(y);
  }
  int host = 0, gemms = 0;
  executable_counts(gpu, 6, in, &host, &gemms);
  fprintf(stderr, "attention dots (%s): %d GEMMs, %d equations on the host\n", jx_dtype_name(dt),
          gemms, host);
  assert_int_equal(gemms, 6);
  assert_int_equal(host, 0);
  release_all(fn, cpu, gpu);
}

static void test_attention_dots_are_gemms(void **state) {
  (void)state;
  check_attention_dots(JX_F32);
  check_attention_dots(JX_BF16);
}

/* ---- a GPT train step that stays on the device ---- */

enum { CALLS = 2 };

/* The step's losses over CALLS calls of jit(train_step) on the current
 * platform, each call taking the previous one's parameters and state
 * (donated); up[c] and down[c]: the bytes call c copied between host and
 * device (the call and waiting for its outputs; the loss is read after). */
static void run_steps(jx_fn *step_fn, int np, int ns, jx_array *const *init, jx_array *x,
                      jx_array *y, double *loss, uint64_t *up, uint64_t *down) {
  int nin = np + ns + 2, nout = 1 + np + ns;
  int donate[80] = {0};
  jx_array *in[80], *out[80];
  assert_true(nin <= 80);
  for (int i = 0; i < np + ns; i++) {
    donate[i] = 1;
    in[i] = jx_keep(jx_add(init[i], jx_scalar(JX_F32, 0))); /* a copy: donation takes it */
  }
  in[np + ns] = x;
  in[np + ns + 1] = y;
  jx_fn *step = jx_jit(step_fn, &(jx_jit_options){.donate = donate});
  for (int c = 0; c < CALLS; c++) {
    jx_scope_begin();
    jx_cuda_copy_stats s0 = jx_cuda_copy_stats_get();
    check_ok(jx_call(step, in, out));
    for (int o = 0; o < nout; o++) check_ok(jx_block_until_ready(out[o]));
    jx_cuda_copy_stats s1 = jx_cuda_copy_stats_get();
    up[c] = s1.to_device_bytes - s0.to_device_bytes;
    down[c] = s1.to_host_bytes - s0.to_host_bytes;
    loss[c] = jx_item(out[0]);
    for (int i = 0; i < np + ns; i++) {
      jx_release(in[i]);
      in[i] = jx_keep(out[1 + i]);
    }
    jx_scope_end();
  }
  for (int i = 0; i < np + ns; i++) jx_release(in[i]);
  jx_fn_release(step);
}

/* jit(train_step(loss_fn)) with AdamW over params, on (x, y): on the
 * device it has no host equation and at least min_gemms GEMMs, copies
 * nothing after its first call, and its losses are the CPU's within
 * rel_bound * |loss|. */
static void check_train_step(const char *what, jx_fn *loss_fn, jx_tree *params, jx_array *x,
                             jx_array *y, int min_gemms, double rel_bound) {
  jx_optimizer *opt = jx_optim_adamw(3e-4, 0.9, 0.95, 1e-8, 0.1);
  jx_tree *ostate = jx_optim_init(opt, params);
  int np = jx_tree_size(params), ns = jx_tree_size(ostate);
  jx_array *init[80];
  assert_true(np + ns <= 78);
  jx_tree_flatten(params, init);
  jx_tree_flatten(ostate, init + np);
  jx_fn *step_fn = jx_train_step(loss_fn, params, ostate, opt);
  double want[CALLS], got[CALLS];
  uint64_t up[CALLS], down[CALLS];
  /* the CPU's steps without generated code (the reference kernels, whose
   * bits the C kernels keep): no C compile in the test */
  setenv("JX_PLATFORM", "cpu", 1);
  setenv("JX_JIT_KERNELS", "0", 1);
  run_steps(step_fn, np, ns, init, x, y, want, up, down);
  setenv("JX_JIT_KERNELS", "1", 1);
  setenv("JX_PLATFORM", "cuda", 1);
  run_steps(step_fn, np, ns, init, x, y, got, up, down);
  jx_array *in[80];
  for (int i = 0; i < np + ns; i++) in[i] = init[i];
  in[np + ns] = x;
  in[np + ns + 1] = y;
  jx_fn *probe = jx_jit(step_fn, NULL); /* the same program's executable, for its counts */
  int host = -1, gemms = 0, kernels = executable_counts(probe, np + ns + 2, in, &host, &gemms);
  setenv("JX_PLATFORM", "cpu", 1);
  fprintf(stderr, "%s: %d kernels, %d GEMMs, %d equations on the host\n", what, kernels, gemms,
          host);
  assert_int_equal(host, 0);
  assert_true(gemms >= min_gemms);
  for (int c = 0; c < CALLS; c++)
    fprintf(stderr,
            "%s, call %d: loss %.7f on CUDA, %.7f on the CPU (difference %.3g); copied %llu B up, "
            "%llu B down\n",
            what, c, got[c], want[c], fabs(got[c] - want[c]), (unsigned long long)up[c],
            (unsigned long long)down[c]);
  for (int c = 0; c < CALLS; c++) assert_true(fabs(got[c] - want[c]) <= rel_bound * fabs(want[c]));
  assert_true(up[0] > 0);           /* the first call uploads the parameters, state and batch */
  for (int c = 1; c < CALLS; c++) { /* then nothing moves either way */
    assert_int_equal(up[c], 0);
    assert_int_equal(down[c], 0);
  }
  assert_true(want[CALLS - 1] < want[0]); /* it trained */
  jx_fn_release(probe);
  jx_fn_release(step_fn);
  jx_tree_release(ostate);
  jx_optim_release(opt);
}

static void test_gpt_step_stays_on_the_device(void **state) {
  (void)state;
  jx_scope_begin();
  jx_gpt_config cfg = jx_gpt_config_default();
  cfg.vocab = 64;
  cfg.n_layers = 1;
  cfg.d_model = 32;
  cfg.n_heads = 1; /* head_dim 32: the flash attention kernels */
  cfg.context = 16;
  jx_tree *params = jx_gpt_init(&cfg, jx_random_key(5), JX_F32);
  assert_non_null(params);
  int32_t tokens[2 * 16], targets[2 * 16];
  for (int i = 0; i < 32; i++) {
    tokens[i] = (i * 37 + 5) % 64;
    targets[i] = (i * 53 + 11) % 64;
  }
  jx_array *x = jx_array_from(JX_I32, (jx_shape){2, {2, 16}}, tokens);
  jx_array *y = jx_array_from(JX_I32, (jx_shape){2, {2, 16}}, targets);
  jx_fn *loss_fn = jx_gpt_loss_fn(&cfg, params);
  /* The oracle's bound: the device's sums (GEMMs, reductions) may add in
   * another order than the CPU's; each value on the loss's path is a sum
   * of at most K = 128 terms (d 32, the MLP's 4 d, the vocabulary of 64),
   * which moves it by at most K u relative (u = 2^-24) of the sum of its
   * terms' magnitudes, and the loss is at most 8 such sums deep (two
   * layer norms, attention, the MLP, the head, the softmax, the mean):
   * 8 K u |loss| (about 6e-5 |loss|). The fake cuBLASLt happens to add in
   * the CPU's order, so the losses here agree exactly. q, k, v, the
   * projection, the MLP's two and the head are GEMMs, and more. */
  check_train_step("GPT step", loss_fn, params, x, y, 8, 8 * 128 * ldexp(1, -24));
  jx_fn_release(loss_fn);
  jx_tree_release(params);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

/* A bf16 MLP's loss (f32 parameters cast to bf16 inside, as a
 * mixed-precision step does; the loss in f32):
 * mean((tanh(x w1 + b1) w2 + b2 - y)^2), x [2, 4, 16], w1 [16, 32],
 * w2 [32, 8], y [2, 4, 8]. */
static void bf16_mlp_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *w1 = jx_astype(in[0], JX_BF16), *b1 = jx_astype(in[1], JX_BF16);
  jx_array *w2 = jx_astype(in[2], JX_BF16), *b2 = jx_astype(in[3], JX_BF16);
  jx_array *x = jx_astype(in[4], JX_BF16);
  jx_array *h =
      jx_tanh(jx_add(jx_dot_general(x, w1, JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES()), b1));
  jx_array *o = jx_add(jx_dot_general(h, w2, JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES()), b2);
  out[0] = jx_mean(jx_square(jx_sub(jx_astype(o, JX_F32), in[5])), JX_AXES(), 0);
}

/* The step's bf16 parts on the device, in a step small enough to compile
 * quickly for the emulator: bf16 GEMMs (bf16 in and out, f32
 * accumulation; forward, and the backward's transposed ones) and the bias
 * gradients as bf16 column sums. Bound: as the GPT's with K = 64 (the
 * mean's terms), plus at each of the 8 levels a bf16 rounding that another
 * f32 order may send the other way, one unit of 2^-8 relative:
 * 8 (K 2^-24 + 2^-8) |loss| (about 3e-2 |loss|). */
static void test_bf16_step_stays_on_the_device(void **state) {
  (void)state;
  jx_scope_begin();
  const jx_shape shapes[6] = {{2, {16, 32}}, {1, {32}},       {2, {32, 8}},
                              {1, {8}},      {3, {2, 4, 16}}, {3, {2, 4, 8}}};
  const char *names[4] = {"w1", "b1", "w2", "b2"};
  jx_array *a[6];
  for (int i = 0; i < 6; i++) {
    int64_t n = jx_shape_numel(shapes[i]);
    float v[128];
    assert_true(n <= 128 * 4);
    float *buf = n <= 128 ? v : malloc(sizeof *buf * (size_t)n);
    assert_non_null(buf);
    for (int64_t j = 0; j < n; j++)
      buf[j] = 0.5f * sinf((float)(j * (2 * i + 3)) * 0.271f + (float)i);
    a[i] = jx_array_from(JX_F32, shapes[i], buf);
    if (buf != v) free(buf);
  }
  jx_tree *params = jx_tree_create();
  for (int i = 0; i < 4; i++) jx_tree_set(params, names[i], a[i]);
  jx_fn *loss_fn = jx_fn_create("bf16_mlp_loss", 6, 1, bf16_mlp_loss, NULL);
  check_train_step("bf16 MLP step", loss_fn, params, a[4], a[5], 4,
                   8 * (64 * ldexp(1, -24) + ldexp(1, -8)));
  jx_fn_release(loss_fn);
  jx_tree_release(params);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

int main(void) {
  int rc = cuda_test_driver("test_cuda_step", 0);
  if (rc >= 0) return rc;
  /* the fake cuBLASLt: the executor's GEMMs compute on the fake device */
  setenv("JX_CUBLASLT_PATH", JX_CUBLASLT_FAKE, 1);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_integer_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bf16_sums, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_dots_are_gemms, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpt_step_stays_on_the_device, setup, teardown),
      cmocka_unit_test_setup_teardown(test_bf16_step_stays_on_the_device, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
