/* The CUDA executor (src/cuda/cuda_exec.h) end to end: jitted functions run
 * with JX_PLATFORM=cuda must give the CPU jit's results bit for bit. Without
 * a GPU (every CI machine) it runs against tests/cuda_fake's driver, whose
 * kernels are the CUDA sources the executor renders, compiled by the system
 * C++ compiler and run in tests/cuda_emu's emulator (skips with a message
 * where there is none). Modes (argv[1]):
 *   (none)       the fake driver (JX_CUDA_DRIVER_PATH, JX_CUDA_MODULE_SOURCE=1);
 *   --real       the machine's driver and NVRTC (scripts/gpu-check.sh; skips
 *                without a GPU);
 *   --no-driver  no driver at all: JX_PLATFORM=cuda must fail with the
 *                message that says what is missing, never run on the CPU.
 * Cases: an elementwise chain, row and column reductions (long ones: the
 * threads of a block share a row or a tile of columns), broadcasts, a
 * dot_general (host), kernels mixed with host equations (sort), gathers
 * (take, lax.gather in both modes, dynamic_slice) as device kernels, an MLP
 * forward; a second call copies nothing up or down where no host equation
 * runs; every device block back in the allocator once the arrays and the
 * executable are freed. */
#define _GNU_SOURCE
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
#include "cuda/cuda_device.h"
#include "cuda/cuda_exec.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "ir/program.h"
#include "cuda_test_driver.h"
#include "test_capture.h"
#include "test_util.h"
#include "trace/fn.h"

static int real_driver;
/* The kernel steps, distinct kernels and host equations of check_case's
 * last CUDA program. */
static int last_kernels, last_distinct, last_host, last_gathers, last_splits;

static jx_array *values(jx_shape s, int seed) {
  int64_t n = jx_shape_numel(s);
  float *f = malloc(sizeof *f * (size_t)(n ? n : 1));
  assert_non_null(f);
  for (int64_t i = 0; i < n; i++)
    f[i] = (float)(sin(0.37 * (double)i + seed) * (1 + (double)(i % 5)) * 0.5);
  jx_array *a = jx_array_from(JX_F32, s, f);
  free(f);
  return a;
}

static jx_cuda_alloc_stats device_memory(void) {
  jx_cuda_device *d = NULL;
  check_ok(jx_cuda_device_open(0, &d));
  return jx_cuda_allocator_stats(d->memory);
}

/* Bit for bit; with a real driver, where cuBLASLt runs the GEMMs (its own
 * order of the sums), within 1e-5 relative for the cases that multiply (a
 * NaN where the CPU has one: the inputs of some cases make NaNs). */
static void expect_same_bits(jx_array *want, jx_array *got, const char *what, int o, int gemms) {
  char *a, *b;
  size_t bytes = cuda_test_read_pair(want, got, &a, &b);
  if (gemms && jx_dtype_of(want) == JX_F32) {
    const float *x = (const float *)a, *y = (const float *)b;
    for (size_t i = 0; i < bytes / 4; i++)
      if (x[i] != y[i] && !(fabsf(x[i] - y[i]) <= 1e-5f * fmaxf(1.0f, fabsf(x[i]))) &&
          !(isnan(x[i]) && isnan(y[i])))
        fail_msg("%s output %d element %zu: CUDA %g, CPU %g", what, o, i, y[i], x[i]);
  } else if (memcmp(a, b, bytes) != 0) {
    fail_msg("%s output %d: CUDA differs from the CPU jit", what, o);
  }
  free(a);
  free(b);
}

/* Runs body jitted on the CPU and on CUDA on inputs from make_input
 * (values() for check_case); checks the outputs' bits, that
 * the CUDA program has at least min_kernels kernels and min_host host
 * equations, and the device memory: a second call with the same inputs
 * copies nothing up when no host equation feeds a kernel (the first call's
 * uploads stay with the arrays) and reuses the first call's blocks (freed
 * with its outputs); outputs and inputs hold their blocks until they are
 * freed, and then every block is back in the allocator. */
static void check_case_of(jx_array *(*make_input)(jx_shape s, int seed), const char *what, int nin,
                          int nout, jx_body body, jx_shape *shapes, int min_kernels, int min_host) {
  jx_array *in[8], *want[24], *got[24];
  jx_aval av[8];
  jx_scope_begin(); /* the case's arrays */
  for (int i = 0; i < nin; i++) {
    in[i] = make_input(shapes[i], i + 1);
    av[i] = (jx_aval){JX_F32, 0, shapes[i], 0};
  }
  jx_fn *f = jx_fn_create(what, nin, nout, body, NULL);
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = jx_jit(f, NULL);
  check_ok(jx_call(cpu, in, want));
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(f, NULL);
  jx_cuda_alloc_stats before = device_memory();
  jx_scope_begin(); /* the first call's outputs */
  check_ok(jx_call(gpu, in, got));
  for (int o = 0; o < nout; o++) expect_same_bits(want[o], got[o], what, o, real_driver);
  jx_scope_end();
  jx_cuda_copy_stats copied = jx_cuda_copy_stats_get();
  check_ok(jx_call(gpu, in, got)); /* again: cached blocks, the inputs already up */
  jx_cuda_copy_stats copied2 = jx_cuda_copy_stats_get();
  jx_cuda_alloc_stats after = device_memory();
  setenv("JX_PLATFORM", "cpu", 1);
  jx_program *p = jx_fn_program(gpu, av);
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  int host = 0, gemms = 0,
      kernels = jx_cuda_executable_kernels(jx_program_executable(p), &host, &gemms);
  last_kernels = kernels;
  last_distinct = jx_cuda_executable_distinct_kernels(jx_program_executable(p));
  last_host = host;
  last_gathers = jx_cuda_executable_gathers(jx_program_executable(p));
  last_splits = jx_cuda_executable_splits(jx_program_executable(p));
  fprintf(stderr,
          "%s: %d kernels, %d GEMMs, %d equations on the host; device blocks %lld taken, %lld "
          "reused; second call copied %llu B up, %llu B down\n",
          what, kernels, gemms, host, (long long)(after.device_allocs - before.device_allocs),
          (long long)(after.reuses - before.reuses),
          (unsigned long long)(copied2.to_device_bytes - copied.to_device_bytes),
          (unsigned long long)(copied2.to_host_bytes - copied.to_host_bytes));
  if (!host) { /* everything stays on the device */
    assert_int_equal(copied2.to_device_bytes, copied.to_device_bytes);
    assert_int_equal(copied2.to_host_bytes, copied.to_host_bytes);
  }
  for (int o = 0; o < nout; o++) expect_same_bits(want[o], got[o], what, o, gemms || real_driver);
  assert_true(kernels >= min_kernels);
  /* the fake has no cuBLASLt: dot_general runs on the host there */
  if (!real_driver) assert_int_equal(gemms, 0);
  assert_true(host + gemms >= min_host);
  if (kernels) /* the second call reused the first call's blocks */
    assert_true(after.reuses > before.reuses);
  jx_scope_end(); /* inputs and outputs: their blocks go back */
  jx_program_release(p);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(f);
  assert_int_equal(device_memory().in_use, 0);
}

static void check_case(const char *what, int nin, int nout, jx_body body, jx_shape *shapes,
                       int min_kernels, int min_host) {
  check_case_of(values, what, nin, nout, body, shapes, min_kernels, min_host);
}

/* tanh(x * y + 1) - exp(-x) * 0.5 */
static void chain_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_tanh(jx_add(jx_mul(in[0], in[1]), jx_scalar(JX_F32, 1)));
  out[0] = jx_sub(t, jx_mul(jx_exp(jx_neg(in[0])), jx_scalar(JX_F32, 0.5)));
}

static void test_elementwise_chain(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {37, 300}}, {2, {37, 300}}};
  check_case("chain", 2, 1, chain_body, s, 1, 0);
}

/* sum and max over the last axis of a chain */
static void row_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = jx_add(jx_mul(in[0], in[0]), in[1]);
  out[0] = jx_sum(x, JX_AXES(1), 0);
  out[1] = jx_max(jx_sub(in[0], in[1]), JX_AXES(1), 0);
}

static void test_row_reduction(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {19, 1000}}, {2, {19, 1000}}};
  check_case("row reduction", 2, 2, row_body, s, 2, 0);
}

/* rows of 40,000: over 256 leaves of the pairwise tree, so a block's
 * threads share each row in two chunks; its strips of max/min meet in order */
static void long_row_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(in[0], in[0]), JX_AXES(1), 0);
  out[1] = jx_max(jx_mul(in[0], jx_scalar(JX_F32, 3)), JX_AXES(1), 0);
  out[2] = jx_min(jx_abs(in[0]), JX_AXES(1), 0);
}

static void test_long_row_reduction(void **state) {
  (void)state;
  jx_shape s[1] = {{2, {3, 40000}}};
  check_case("long row reduction", 1, 3, long_row_body, s, 1, 0);
}

/* Rows where the order decides the bits: two NaNs of different payloads
 * (the first wins), a -0 before a +0 and a +0 before a -0 among negative
 * numbers (the first of equal values stays), and row 3 all -inf: a
 * block's threads scan interleaved columns, and their results must meet
 * as the sequential scan's. */
static jx_array *special_values(jx_shape s, int seed) {
  (void)seed;
  int64_t n = jx_shape_numel(s), w = s.dims[1];
  float *f = malloc(sizeof *f * (size_t)n);
  assert_non_null(f);
  for (int64_t i = 0; i < n; i++) f[i] = -1.0f - (float)(i % 97);
  uint32_t nan_a = 0x7fc00001u, nan_b = 0x7fc00002u;
  memcpy(&f[0 * w + 2900], &nan_a, 4);
  memcpy(&f[0 * w + 301], &nan_b, 4); /* the first NaN */
  f[1 * w + 5] = -0.0f;
  f[1 * w + 2000] = 0.0f;
  f[2 * w + 7] = 0.0f;
  f[2 * w + 1500] = -0.0f;
  for (int64_t j = 0; j < w; j++) f[3 * w + j] = -INFINITY;
  jx_array *a = jx_array_from(JX_F32, s, f);
  free(f);
  return a;
}

static void extremum_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_max(in[0], JX_AXES(1), 0);
  out[1] = jx_min(jx_neg(in[0]), JX_AXES(1), 0);
}

static void test_row_extremum_order(void **state) {
  (void)state;
  jx_shape s[1] = {{2, {4, 3000}}};
  check_case_of(special_values, "row extremum order", 1, 2, extremum_body, s, 1, 0);
}

/* reductions of an input, with nothing to fuse them with: kernels too, so
 * nothing comes down to the host */
static void lone_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(in[0], JX_AXES(1), 0);
  out[1] = jx_max(in[0], JX_AXES(0), 0);
  out[2] = jx_min(in[0], JX_AXES(1), 0);
  out[3] = jx_sum(in[0], JX_AXES(0), 0);
}

static void test_lone_reductions(void **state) {
  (void)state;
  jx_shape s[1] = {{2, {29, 301}}};
  check_case("lone reductions", 1, 4, lone_body, s, 4, 0);
  assert_int_equal(last_host, 0);
}

/* a bias gradient's sum over the batch, and a max over the two leading axes */
static void col_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(in[0], jx_add(in[1], jx_scalar(JX_F32, 2))), JX_AXES(0), 0);
  out[1] = jx_max(jx_exp(jx_reshape(in[0], (jx_shape){3, {3, 11, 37}})), JX_AXES(0, 1), 0);
}

static void test_column_reduction(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {33, 37}}, {2, {33, 37}}};
  check_case("column reduction", 2, 2, col_body, s, 2, 0);
}

/* 3000 reduced rows: 24 leaves of the pairwise tree, so a tile's 8 row
 * groups sum leaves in three rounds and row group 0 adds them as the tree
 * does; 45 columns: a full tile and a part one. Max/min scan 8 strips that
 * meet in order; a sum over two leading axes; a full-shape store (exp(x))
 * made in the same kernel as its column sum. */
static void long_col_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_exp(jx_mul(in[0], jx_scalar(JX_F32, 0.5f)));
  out[0] = jx_sum(jx_mul(in[0], in[0]), JX_AXES(0), 0);
  out[1] = jx_max(jx_mul(in[0], jx_scalar(JX_F32, 3)), JX_AXES(0), 0);
  out[2] = jx_min(jx_abs(in[0]), JX_AXES(0), 0);
  out[3] = jx_sum(jx_reshape(jx_tanh(in[0]), (jx_shape){3, {40, 75, 45}}), JX_AXES(0, 1), 0);
  out[4] = e;
  out[5] = jx_sum(e, JX_AXES(0), 0);
}

static void test_long_column_reduction(void **state) {
  (void)state;
  jx_shape s[1] = {{2, {3000, 45}}};
  check_case("long column reduction", 1, 6, long_col_body, s, 4, 0);
  assert_int_equal(last_host, 0);
}

/* Reductions split across blocks (jx_cuda_reduction_split, its rule's
 * threshold lowered so that small shapes split into 4 to 8 pieces): a
 * few long rows and a column sum over many rows, f32 and f64 sums (the
 * pieces are subtrees of the pairwise tree, added back in its order), a
 * column min and a row max (strips in order; log(x + 2.4) is NaN at a few of the last 2000
 * columns of each row, so a later piece's NaN must win). */
static void split_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *d = jx_astype(in[0], JX_F64);
  jx_array *t = jx_reshape(jx_mul(in[1], jx_scalar(JX_F32, 3)), (jx_shape){1, {9000}});
  out[0] = jx_sum(jx_mul(x, x), JX_AXES(1), 0);
  jx_array *late = jx_ge(jx_iota(JX_F32, jx_shape_of(x), 1), jx_scalar(JX_F32, 6000));
  out[1] = jx_max(jx_where(late, jx_log(jx_add(x, jx_scalar(JX_F32, 2.4f))), x), JX_AXES(1), 0);
  out[2] = jx_sum(jx_mul(d, d), JX_AXES(1), 0);
  out[3] = jx_sum(jx_mul(in[1], in[1]), JX_AXES(0), 0);
  out[4] = jx_min(in[1], JX_AXES(0), 0);
  out[5] = jx_sum(t, JX_AXES(0), 0); /* 9000 terms into one scalar */
  /* bf16: f32 pieces, rounded once combined */
  out[6] = jx_sum(jx_astype(jx_mul(x, x), JX_BF16), JX_AXES(1), 0);
  out[7] = jx_sum(jx_astype(jx_mul(in[1], in[1]), JX_BF16), JX_AXES(0), 0);
}

static void test_split_reductions(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {3, 8000}}, {2, {3000, 3}}};
  jx_cuda_set_reduction_split(256, 8);
  check_case("split reductions", 2, 8, split_body, s, 4, 0);
  jx_cuda_set_reduction_split(0, 0);
  assert_true(last_host <= 1);   /* the iota */
  assert_true(last_splits >= 8); /* the split is what this checks */
}

/* (x + b) * c with b [n] along the rows and c [m, 1] along the columns */
static void broadcast_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_shape s = jx_shape_of(in[0]);
  jx_array *b = jx_broadcast_in_dim(in[1], s, JX_AXES(1));
  jx_array *c = jx_broadcast_in_dim(jx_reshape(in[2], (jx_shape){1, {s.dims[0]}}), s, JX_AXES(0));
  out[0] = jx_mul(jx_add(in[0], b), jx_tanh(c));
}

static void test_broadcasts(void **state) {
  (void)state;
  jx_shape s[3] = {{2, {45, 70}}, {1, {70}}, {2, {45, 1}}};
  check_case("broadcasts", 3, 1, broadcast_body, s, 1, 0);
}

static void dot_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

static void test_dot_general(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {17, 40}}, {2, {40, 23}}};
  check_case("dot_general", 2, 1, dot_body, s, 0, 1);
}

/* kernel -> sort (host) -> kernel -> take (the gather kernel) -> kernel */
static void mixed_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = jx_exp(jx_mul(in[0], jx_scalar(JX_F32, 0.3)));
  jx_array *sorted = jx_sort(jx_add(x, in[1]), 1);
  jx_array *y = jx_tanh(jx_sub(jx_mul(sorted, x), in[1]));
  int32_t idx[5] = {4, 0, 2, 2, 7};
  jx_array *ix = jx_array_from(JX_I32, (jx_shape){1, {5}}, idx);
  jx_array *rows = jx_take(y, ix, 0);
  out[0] = jx_sum(jx_mul(rows, rows), JX_AXES(1), 0);
  out[1] = y;
}

static void test_kernels_mixed_with_host(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {9, 50}}, {2, {9, 50}}};
  check_case("mixed", 2, 2, mixed_body, s, 2, 1);
  assert_int_equal(last_gathers, 1);
}

/* Gathers on the device, as JAX's modes say. jx_take (FILL_OR_DROP): an
 * embedding lookup with rows in range, negative ones (wrapped) and ones
 * past the end (NaN), on a table computed by a kernel and on an input; an
 * i64 index. lax.gather in clip mode: windows of 4 x 5 whose starts (row,
 * column) go out of range on either side are clamped into the operand;
 * the same in fill mode. A dynamic_slice and a dynamic_update_slice whose
 * starts are clamped. */
static void gather_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  int32_t rows[2 * 6] = {4, 0, 49, -1, -50, 50, 7, 7, 3, 100, -51, 12};
  jx_array *ix = jx_array_from(JX_I32, (jx_shape){2, {2, 6}}, rows);
  out[0] = jx_take(jx_tanh(in[0]), ix, 0);
  int64_t cols[3] = {32, -33, 1};
  out[1] = jx_take(in[0], jx_array_from(JX_I64, (jx_shape){1, {3}}, cols), 1);
  int32_t starts[4 * 2] = {0, 0, 48, 30, -3, 2, 10, -7};
  jx_array *st = jx_array_from(JX_I32, (jx_shape){2, {4, 2}}, starts);
  jx_gather_dims dn = {JX_AXES(1, 2), JX_AXES(), JX_AXES(0, 1), 1};
  out[2] = jx_gather(in[0], st, &dn, JX_SHAPE(4, 5), JX_GATHER_CLIP);
  out[3] = jx_gather(in[0], st, &dn, JX_SHAPE(4, 5), JX_GATHER_FILL);
  out[4] = jx_dynamic_slice(
      jx_exp(in[0]), (jx_array *[]){jx_scalar(JX_I32, 47), jx_scalar(JX_I32, 3)}, JX_SHAPE(5, 6));
  jx_array *upd = jx_slice(jx_sin(in[0]), JX_SHAPE(0, 0), JX_SHAPE(3, 7), JX_SHAPE());
  out[5] = jx_dynamic_update_slice(in[0], upd,
                                   (jx_array *[]){jx_scalar(JX_I32, -2), jx_scalar(JX_I32, 30)});
}

static void test_gather(void **state) {
  (void)state;
  jx_shape s[1] = {{2, {50, 33}}};
  check_case("gather", 1, 6, gather_body, s, 2, 0);
  /* the 6 gathers and slices on the device, and the wrapping of jx_take's
   * negative indices (integer lt, add, select_n) in a kernel */
  assert_int_equal(last_gathers, 7); /* and the slice of sin(x) */
  assert_int_equal(last_host, 0);
}

/* An embedding's gradient: scatter-add of rows of updates into a table at
 * token ids with repeats (the same row 3 and 4 times: each element's adds
 * in the updates' order, one thread per column, so the host's bits), ids
 * past the end dropped; lax.scatter_add in clip mode clamps them. */
static void scatter_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  int32_t ids[10] = {3, 7, 3, 0, 9, 3, 7, 12, 7, 7};
  jx_array *ix = jx_array_from(JX_I32, (jx_shape){2, {10, 1}}, ids);
  jx_array *up = jx_tanh(in[1]);
  jx_scatter_dims dn = {JX_AXES(1), JX_AXES(0), JX_AXES(0), 1};
  out[0] = jx_scatter(in[0], ix, up, &dn, JX_SCATTER_ADD, JX_SCATTER_DROP);
  out[1] = jx_scatter(jx_exp(in[0]), ix, up, &dn, JX_SCATTER_ADD, JX_SCATTER_CLIP);
}

static void test_scatter_add(void **state) {
  (void)state;
  jx_shape s[2] = {{2, {10, 37}}, {2, {10, 37}}};
  check_case("scatter-add", 2, 2, scatter_body, s, 2, 0);
  assert_int_equal(last_gathers, 2);
  assert_int_equal(last_host, 0);
}

/* softmax(relu(x @ w1 + b1) @ w2 + b2) */
static void mlp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_matmul(in[0], in[1]);
  h = jx_relu(jx_add(h, jx_broadcast_in_dim(in[2], jx_shape_of(h), JX_AXES(1))));
  jx_array *z = jx_matmul(h, in[3]);
  z = jx_add(z, jx_broadcast_in_dim(in[4], jx_shape_of(z), JX_AXES(1)));
  out[0] = jx_softmax(z, 1);
}

static void test_mlp_forward(void **state) {
  (void)state;
  jx_shape s[5] = {{2, {32, 64}}, {2, {64, 48}}, {1, {48}}, {2, {48, 10}}, {1, {10}}};
  check_case("mlp", 5, 1, mlp_body, s, 2, 2);
}

/* three layers of h = tanh(h @ w + b), each with weights of its own */
static void layers_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = in[0];
  for (int l = 0; l < 3; l++) {
    h = jx_matmul(h, in[1 + 2 * l]);
    h = jx_tanh(jx_add(h, jx_broadcast_in_dim(in[2 + 2 * l], jx_shape_of(h), JX_AXES(1))));
  }
  out[0] = h;
}

/* A chain of 18 small steps, each an output: one group needs more stores
 * than a kernel has, so the device cuts it into two kernels, where the CPU
 * runs its equations one by one (an optimizer's update of many small
 * parameters: a kernel per equation). */
static void wide_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0];
  for (int i = 0; i < 18; i++) {
    x = jx_add(jx_mul(x, jx_scalar(JX_F32, 0.5f + 0.01f * (float)i)), in[1]);
    out[i] = x;
  }
}

static void test_too_many_stores_cut(void **state) {
  (void)state;
  jx_shape s[2] = {{1, {64}}, {1, {64}}};
  check_case("wide", 2, 18, wide_body, s, 2, 0);
  assert_int_equal(last_kernels, 2); /* not one kernel per equation */
}

/* identical layers share one kernel of the module (kernel_batch.h) */
static void test_identical_layers_share_a_kernel(void **state) {
  (void)state;
  jx_shape s[7] = {{2, {16, 24}}, {2, {24, 24}}, {1, {24}}, {2, {24, 24}},
                   {1, {24}},     {2, {24, 24}}, {1, {24}}};
  check_case("layers", 7, 1, layers_body, s, 3, 0);
  assert_int_equal(last_distinct, 1);
}

/* dot_general(l, r) with these dims, for the GEMM mapping */
typedef struct {
  int nb;     /* leading batch dims */
  int lc, rc; /* the contracting dims */
  int two;    /* 1: lc + 1 and rc + 1 are contracted too */
} dot_case;

static void dims_body(void *ctx, jx_array *const *in, jx_array **out) {
  const dot_case *c = ctx;
  if (c->two) /* contracting (lc, lc + 1) with (rc, rc + 1) */
    out[0] = jx_dot_general(in[0], in[1], JX_AXES(c->lc, c->lc + 1), JX_AXES(c->rc, c->rc + 1),
                            JX_AXES(), JX_AXES());
  else
    out[0] =
        c->nb ? jx_dot_general(in[0], in[1], JX_AXES(c->lc), JX_AXES(c->rc), JX_AXES(0), JX_AXES(0))
              : jx_dot_general(in[0], in[1], JX_AXES(c->lc), JX_AXES(c->rc), JX_AXES(), JX_AXES());
}

/* Small integers: every sum is exact, in any order. */
static jx_array *integers(jx_dtype dt, jx_shape s, int seed, float *host) {
  int64_t n = jx_shape_numel(s);
  for (int64_t i = 0; i < n; i++) host[i] = (float)((i * 7 + seed * 3) % 11 - 5);
  if (dt == JX_F32) return jx_array_from(dt, s, host);
  int32_t *h = malloc(sizeof *h * (size_t)n);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++) h[i] = (int32_t)host[i];
  jx_array *a = jx_array_from(dt, s, h);
  free(h);
  return a;
}

/* JX_PROFILE_STEPS=1: the executable times its steps on the device and,
 * freed, reports the runs and each step's label with its share. */
typedef struct {
  jx_array *x, *y;
} profile_case;

static jx_status two_profiled_runs(void *ctx) {
  profile_case *c = ctx;
  jx_fn *f = jx_fn_create("profiled", 2, 1, chain_body, NULL);
  jx_fn *gpu = jx_jit(f, NULL);
  jx_array *in[2] = {c->x, c->y}, *out[1];
  jx_status st = JX_OK;
  for (int run = 0; run < 2 && !st; run++) {
    jx_scope_begin();
    st = jx_call(gpu, in, out);
    if (!st) st = jx_block_until_ready(out[0]);
    jx_scope_end();
  }
  jx_fn_release(gpu); /* frees the executable: the report */
  jx_fn_release(f);
  return st;
}

static void test_step_profile(void **state) {
  (void)state;
  jx_scope_begin();
  jx_shape s = {2, {37, 300}};
  profile_case c = {values(s, 1), values(s, 2)};
  setenv("JX_PLATFORM", "cuda", 1);
  setenv("JX_PROFILE_STEPS", "1", 1);
  jx_status st;
  const char *report = captured(two_profiled_runs, &c, &st);
  unsetenv("JX_PROFILE_STEPS");
  setenv("JX_PLATFORM", "cpu", 1);
  check_ok(st);
  /* the first run (one-time work) left out */
  assert_non_null(strstr(report, "jx: profiled on CUDA: 1 runs after the first"));
  /* the chain is one kernel: its label and the whole time, also by kind */
  assert_non_null(strstr(report, "kernel "));
  assert_non_null(strstr(report, "f32[37,300]"));
  assert_non_null(strstr(report, "100.0%"));
  assert_non_null(strstr(report, "by kind: kernel 1 steps"));
  jx_scope_end();
}

/* jx_cuda_dot_as_gemm on traced programs: the GEMM it describes, computed
 * on the CPU from its fields, equals the eager dot_general; layouts that
 * are not one GEMM are refused. No device needed. */
static void test_dot_as_gemm(void **state) {
  (void)state;
  const struct {
    dot_case c;
    jx_shape l, r;
    jx_dtype dt;
    int maps;
  } cases[] = {
      {{0, 1, 0, 0}, {2, {5, 7}}, {2, {7, 3}}, JX_F32, 1},       /* A B */
      {{0, 0, 0, 0}, {2, {7, 5}}, {2, {7, 3}}, JX_F32, 1},       /* A^T B */
      {{0, 1, 1, 0}, {2, {5, 7}}, {2, {3, 7}}, JX_F32, 1},       /* A B^T */
      {{0, 0, 1, 0}, {2, {7, 5}}, {2, {3, 7}}, JX_F32, 1},       /* A^T B^T */
      {{1, 2, 1, 0}, {3, {4, 5, 7}}, {3, {4, 7, 3}}, JX_F32, 1}, /* batched */
      {{1, 1, 2, 0}, {3, {4, 7, 5}}, {3, {4, 3, 7}}, JX_F32, 1}, /* batched, both transposed */
      {{0, 1, 0, 0}, {2, {5, 7}}, {2, {7, 3}}, JX_I32, 0},       /* integers: the host */
      {{0, 2, 0, 0}, {3, {2, 3, 7}}, {2, {7, 4}}, JX_F32, 1},    /* x[n, T, d] w: m = n T */
      {{0, 2, 1, 0}, {3, {2, 3, 7}}, {2, {4, 7}}, JX_F32, 1},    /* x w^T */
      {{0, 0, 0, 1}, {3, {2, 3, 5}}, {3, {2, 3, 4}}, JX_F32, 1}, /* x^T dy: k = n T */
      {{0, 1, 1, 1}, {3, {5, 2, 3}}, {3, {4, 2, 3}}, JX_F32, 1}, /* k = n T, both last */
      {{0, 1, 0, 0}, {3, {3, 7, 2}}, {2, {7, 4}}, JX_F32, 0},    /* free dims on both sides of k */
  };
  for (size_t t = 0; t < sizeof cases / sizeof cases[0]; t++) {
    float lh[512], rh[512];
    jx_array *in[2] = {integers(cases[t].dt, cases[t].l, 1, lh),
                       integers(cases[t].dt, cases[t].r, 2, rh)};
    jx_fn *f = jx_fn_create("dot", 2, 1, dims_body, (void *)&cases[t].c);
    jx_aval av[2] = {{cases[t].dt, 0, cases[t].l, 0}, {cases[t].dt, 0, cases[t].r, 0}};
    jx_program *p = jx_fn_program(f, av);
    assert_non_null(p);
    int found = -1;
    for (int e = 0; e < p->neqns; e++)
      if (!strcmp(p->eqns[e].prim->name, "dot_general")) found = e;
    assert_true(found >= 0);
    jx_cuda_gemm_desc g;
    int maps = jx_cuda_dot_as_gemm(p, &p->eqns[found], &g);
    assert_int_equal(maps, cases[t].maps);
    if (maps) {
      jx_array *want[1];
      check_ok(jx_call(f, in, want));
      float c[512], w[512];
      for (int64_t b = 0; b < g.batch; b++)
        for (int64_t i = 0; i < g.m; i++)
          for (int64_t j = 0; j < g.n; j++) {
            float sum = 0;
            for (int64_t q = 0; q < g.k; q++) {
              float x =
                  g.trans_a ? lh[b * g.stride_a + q * g.m + i] : lh[b * g.stride_a + i * g.k + q];
              float y =
                  g.trans_b ? rh[b * g.stride_b + j * g.k + q] : rh[b * g.stride_b + q * g.n + j];
              sum += x * y;
            }
            c[b * g.stride_c + i * g.n + j] = sum;
          }
      int64_t n = g.batch * g.m * g.n;
      assert_int_equal(jx_shape_numel(jx_shape_of(want[0])), n);
      check_ok(jx_read(want[0], w, sizeof(float) * (size_t)n));
      assert_memory_equal(c, w, sizeof(float) * (size_t)n);
    }
    jx_program_release(p);
    jx_fn_release(f);
  }
}

/* No driver: the call fails and says what is missing. */
static void test_no_driver(void **state) {
  (void)state;
  jx_shape s[2] = {{1, {8}}, {1, {8}}};
  jx_array *in[2] = {values(s[0], 1), values(s[1], 2)}, *out[1] = {NULL};
  jx_fn *f = jx_fn_create("nodriver", 2, 1, chain_body, NULL);
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(f, NULL);
  jx_status st = jx_call(gpu, in, out);
  setenv("JX_PLATFORM", "cpu", 1);
  assert_int_not_equal(st, JX_OK);
  const char *msg = jx_last_error();
  fprintf(stderr, "the error: %s\n", msg);
  assert_non_null(strstr(msg, "JX_PLATFORM=cuda"));
  assert_non_null(strstr(msg, "CUDA: driver not found"));
  assert_non_null(strstr(msg, "JX_CUDA_DRIVER_PATH"));
  jx_clear_error();
  /* and a platform that does not exist */
  setenv("JX_PLATFORM", "tpu", 1);
  jx_fn *tpu = jx_jit(f, NULL);
  assert_int_not_equal(jx_call(tpu, in, out), JX_OK);
  setenv("JX_PLATFORM", "cpu", 1);
  assert_non_null(strstr(jx_last_error(), "JX_PLATFORM='tpu'"));
  jx_clear_error();
  jx_fn_release(tpu);
  jx_fn_release(gpu);
  jx_fn_release(f);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "";
  if (!strcmp(mode, "--no-driver")) {
    setenv("JX_CUDA_DRIVER_PATH", "/nonexistent/libcuda.so.1", 1);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_no_driver, setup, teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
  }
  real_driver = !strcmp(mode, "--real");
  int rc = cuda_test_driver("test_cuda_exec", real_driver);
  if (rc >= 0) return rc;
  printf("test_cuda_exec: %s\n", jx_cuda_status());
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_elementwise_chain, setup, teardown),
      cmocka_unit_test_setup_teardown(test_row_reduction, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_row_reduction, setup, teardown),
      cmocka_unit_test_setup_teardown(test_row_extremum_order, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lone_reductions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_column_reduction, setup, teardown),
      cmocka_unit_test_setup_teardown(test_long_column_reduction, setup, teardown),
      cmocka_unit_test_setup_teardown(test_split_reductions, setup, teardown),
      cmocka_unit_test_setup_teardown(test_broadcasts, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dot_general, setup, teardown),
      cmocka_unit_test_setup_teardown(test_kernels_mixed_with_host, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gather, setup, teardown),
      cmocka_unit_test_setup_teardown(test_scatter_add, setup, teardown),
      cmocka_unit_test_setup_teardown(test_mlp_forward, setup, teardown),
      cmocka_unit_test_setup_teardown(test_identical_layers_share_a_kernel, setup, teardown),
      cmocka_unit_test_setup_teardown(test_too_many_stores_cut, setup, teardown),
      cmocka_unit_test_setup_teardown(test_dot_as_gemm, setup, teardown),
      cmocka_unit_test_setup_teardown(test_step_profile, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
