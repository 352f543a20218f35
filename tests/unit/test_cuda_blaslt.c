/* jx_cuda_gemm's calls into cuBLASLt, against tests/cuda_fake's fake
 * cuBLASLt (JX_CUBLASLT_PATH), which records what it is told: each operand's
 * alignment given to the heuristic as a MIN_ALIGNMENT preference and keying
 * the algorithm cache, the bias's data type set explicitly, the workspace of
 * a matmul being what the heuristic's algorithm asked for (at most the
 * handle's), misaligned operands refused, every problem of many keeping its
 * cache entry, and the autotuner caching the fastest of the heuristic's
 * candidates (timed by the fake driver's events). No GPU: the device
 * pointers are numbers the fakes never dereference. */
#define _GNU_SOURCE /* setenv, RTLD_NOLOAD */
#include <dlfcn.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <math.h>
#include <jx/jx.h>

#include "cuda/cuda_blaslt.h"
#include "cuda_fake/cublaslt_fake.h"
#include "test_util.h"

#define CAP ((size_t)1 << 20) /* the handle's workspace */
#define WS  ((CUdeviceptr)0x7000000)

static jx_fake_cublaslt_log_get_fn fake_log;
static jx_fake_cublaslt_reset_fn fake_reset;
static jx_fake_cublaslt_candidates_fn fake_candidates;

static void assert_contains(const char *s, const char *part) {
  if (!s || !strstr(s, part)) fprintf(stderr, "expected '%s' in: %s\n", part, s ? s : "(null)");
  assert_true(s && strstr(s, part));
}

static jx_cuda_blas *make_blas(size_t algo_workspace) {
  fake_reset(algo_workspace);
  jx_cuda_blas *b = NULL;
  check_ok(jx_cuda_blas_create(0, WS, CAP, &b));
  return b;
}

static void alignment_is_a_preference_and_keys_the_cache(void **state) {
  (void)state;
  jx_cuda_blas *b = make_blas(4096);
  const jx_fake_cublaslt_log *log = fake_log();
  const jx_cuda_gemm_desc g = {JX_BF16,          64, 32, 16, 1, 0, 0, 0, 0, 0, 1,
                               JX_CUDA_ACT_NONE, 0,  0,  0,  0, 0, 0};
  CUdeviceptr a = 0x100000, bm = 0x200000, c = 0x300000, bias = 0x400000;
  check_ok(jx_cuda_gemm(b, &g, a, bm, c, bias, NULL));
  assert_int_equal(log->heuristic_calls, 1);
  assert_int_equal(log->max_workspace, CAP);
  for (int i = 0; i < 4; i++) assert_int_equal(log->min_alignment[i], 16);
  uint64_t aligned_algo = log->algo_id;
  /* the same problem at other 16-byte-aligned addresses: cached */
  check_ok(jx_cuda_gemm(b, &g, a + 0x40, bm + 0x10, c + 0x20, bias + 0x30, NULL));
  assert_int_equal(log->heuristic_calls, 1);
  assert_int_equal(log->algo_id, aligned_algo);
  /* A 2 bytes off: a new entry; A is cuBLASLt's B (the operands swap) */
  check_ok(jx_cuda_gemm(b, &g, a + 2, bm, c, bias, NULL));
  assert_int_equal(log->heuristic_calls, 2);
  assert_int_equal(log->min_alignment[0], 16);
  assert_int_equal(log->min_alignment[1], 2);
  assert_true(log->algo_id != aligned_algo);
  /* B 4 bytes off, C 8 bytes off */
  check_ok(jx_cuda_gemm(b, &g, a, bm + 4, c + 8, bias, NULL));
  assert_int_equal(log->heuristic_calls, 3);
  assert_int_equal(log->min_alignment[0], 4);
  assert_int_equal(log->min_alignment[1], 16);
  assert_int_equal(log->min_alignment[2], 8);
  assert_int_equal(log->min_alignment[3], 8);
  /* the bias 2 bytes off: no preference for it, but its own cache entry */
  check_ok(jx_cuda_gemm(b, &g, a, bm, c, bias + 2, NULL));
  assert_int_equal(log->heuristic_calls, 4);
  /* and the aligned problem is still cached */
  check_ok(jx_cuda_gemm(b, &g, a, bm, c, bias, NULL));
  assert_int_equal(log->heuristic_calls, 4);
  assert_int_equal(log->algo_id, aligned_algo);
  int64_t calls, hits;
  jx_cuda_blas_counts(b, &calls, &hits);
  assert_int_equal(calls, 4);
  assert_int_equal(hits, 2);
  jx_cuda_blas_destroy(b);
}

static void batch_strides_count_in_the_alignment(void **state) {
  (void)state;
  jx_cuda_gemm_desc g = {JX_F16,           8, 8, 8, 3, 0, 0, 8 * 8 + 1, 0, 8 * 8 + 4, 0,
                         JX_CUDA_ACT_NONE, 0, 0, 0, 0, 0, 0};
  jx_cuda_gemm_align al;
  /* A's problems start 2 bytes apart in alignment, C's 8; B is shared */
  check_ok(jx_cuda_gemm_alignment(&g, 0x1000, 0x2000, 0x3000, 0, &al));
  assert_int_equal(al.a, 2);
  assert_int_equal(al.b, 16);
  assert_int_equal(al.c, 8);
  assert_int_equal(al.bias, 16);
  /* one problem: the strides do not matter */
  g.batch = 1;
  check_ok(jx_cuda_gemm_alignment(&g, 0x1000, 0x2000, 0x3000, 0, &al));
  assert_int_equal(al.a, 16);
  assert_int_equal(al.c, 16);
  /* rows ld_a apart (10 halves: 4 bytes) and outer problems (C's 66
   * halves apart: 4 bytes) count */
  g.ld_a = 10;
  g.outer = 2;
  g.outer_c = 8 * 8 + 2;
  check_ok(jx_cuda_gemm_alignment(&g, 0x1000, 0x2000, 0x3000, 0, &al));
  assert_int_equal(al.a, 4);
  assert_int_equal(al.b, 16);
  assert_int_equal(al.c, 4);
  jx_cuda_colmajor plan;
  check_ok(jx_cuda_gemm_plan(&g, &plan));
  assert_int_equal(plan.y.ld, 10);
  /* a leading dim shorter than a stored row, or outer problems that overlap */
  g.ld_a = 7;
  assert_int_equal(jx_cuda_gemm_plan(&g, &plan), JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "jx_cuda_gemm: leading dims a=7, b=0 must be 0 or at least");
  jx_clear_error();
  g.ld_a = 0;
  g.outer_c = 8 * 8 - 1;
  assert_int_equal(jx_cuda_gemm_plan(&g, &plan), JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "c=63 >= batch*m*n");
  jx_clear_error();
}

static void misaligned_operands_are_refused(void **state) {
  (void)state;
  jx_cuda_blas *b = make_blas(0);
  const jx_fake_cublaslt_log *log = fake_log();
  const jx_cuda_gemm_desc g = {JX_F32,           4, 4, 4, 1, 0, 0, 0, 0, 0, 1,
                               JX_CUDA_ACT_RELU, 0, 0, 0, 0, 0, 0};
  assert_int_equal(jx_cuda_gemm(b, &g, 0x1000, 0x2002, 0x3000, 0x4000, NULL),
                   JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(),
                  "jx_cuda_gemm: B at 0x2002 (batch stride 0 bytes) is not aligned to its element "
                  "size of 4 bytes");
  jx_clear_error();
  assert_int_equal(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0x4001, NULL),
                   JX_ERR_INVALID_ARGUMENT);
  assert_contains(jx_last_error(), "jx_cuda_gemm: the bias at 0x4001");
  jx_clear_error();
  assert_int_equal(log->heuristic_calls, 0);
  assert_int_equal(log->matmul_calls, 0);
  jx_cuda_blas_destroy(b);
}

static void bias_type_is_the_dtype(void **state) {
  (void)state;
  const jx_dtype dtypes[] = {JX_F32, JX_BF16, JX_F16};
  const int32_t types[] = {JX_CUDA_R_32F, JX_CUDA_R_16BF, JX_CUDA_R_16F};
  jx_cuda_blas *b = make_blas(0);
  const jx_fake_cublaslt_log *log = fake_log();
  for (int i = 0; i < 3; i++) {
    jx_cuda_gemm_desc g = {dtypes[i],        16, 16, 16, 1, 0, 0, 0, 0, 0, 1,
                           JX_CUDA_ACT_GELU, 0,  0,  0,  0, 0, 0};
    check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0x4000, NULL));
    assert_int_equal(log->bias_type, types[i]);
    g.has_bias = 0;
    check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0, NULL));
    assert_int_equal(log->bias_type, -1); /* no bias: nothing said */
  }
  jx_cuda_blas_destroy(b);
}

static void workspace_is_what_the_heuristic_asked(void **state) {
  (void)state;
  const jx_cuda_gemm_desc g = {JX_BF16,          32, 32, 32, 1, 0, 0, 0, 0, 0, 0,
                               JX_CUDA_ACT_NONE, 0,  0,  0,  0, 0, 0};
  jx_cuda_blas *b = make_blas(12345);
  const jx_fake_cublaslt_log *log = fake_log();
  for (int rep = 0; rep < 2; rep++) { /* the second from the cache */
    check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0, NULL));
    assert_int_equal(log->workspace_bytes, 12345);
    assert_ptr_equal(log->workspace, (void *)(uintptr_t)WS);
  }
  assert_int_equal(log->heuristic_calls, 1);
  cublasLtMatmulAlgo_t algo;
  size_t ws = 0;
  check_ok(jx_cuda_gemm_algorithm(b, &g, &algo, &ws));
  assert_int_equal(ws, 12345);
  assert_int_equal(log->heuristic_calls, 1); /* the bench's query is the aligned entry */
  jx_cuda_blas_destroy(b);
  /* an algorithm needing none gets none */
  b = make_blas(0);
  check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0, NULL));
  assert_int_equal(log->workspace_bytes, 0);
  assert_null(log->workspace);
  jx_cuda_blas_destroy(b);
  /* over the cap the heuristic answers nothing, and the error says so */
  b = make_blas(CAP + 1);
  assert_int_equal(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0, NULL), JX_ERR_UNIMPLEMENTED);
  assert_contains(jx_last_error(), "jx_cuda_gemm: cuBLASLt has no algorithm for bf16");
  jx_clear_error();
  assert_int_equal(log->matmul_calls, 0);
  jx_cuda_blas_destroy(b);
}

/* Many problems at once (a GPT step has dozens): each keeps its entry, so
 * a second round asks the heuristic nothing. A direct-mapped table of 256
 * slots let two keys meeting in a slot evict each other at every call. */
static void every_problem_keeps_its_cache_entry(void **state) {
  (void)state;
  jx_cuda_blas *b = make_blas(0);
  const jx_fake_cublaslt_log *log = fake_log();
  enum { PROBLEMS = 300 };
  for (int round = 0; round < 2; round++)
    for (int i = 0; i < PROBLEMS; i++) {
      const jx_cuda_gemm_desc g = {JX_BF16,          8 + i, 16, 16, 1, 0, 0, 0, 0, 0, i % 2,
                                   JX_CUDA_ACT_NONE, 0,     0,  0,  0, 0, 0};
      check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0x4000, NULL));
      assert_int_equal(log->heuristic_calls, round ? PROBLEMS : i + 1);
    }
  assert_int_equal(log->requested, JX_CUDA_GEMM_CANDIDATES);
  int64_t calls, hits;
  jx_cuda_blas_counts(b, &calls, &hits);
  assert_int_equal(calls, PROBLEMS);
  assert_int_equal(hits, PROBLEMS);
  jx_cuda_blas_destroy(b);
}

static void fastest_is_the_smallest_time(void **state) {
  (void)state;
  const float ms[] = {NAN, 0.5f, INFINITY, 0.2f, 0.2f, -1.0f};
  assert_int_equal(jx_cuda_gemm_fastest(ms, 6), 3); /* the first of a tie */
  assert_int_equal(jx_cuda_gemm_fastest(ms, 3), 1);
  assert_int_equal(jx_cuda_gemm_fastest(ms, 1), -1); /* nothing ran */
  assert_int_equal(jx_cuda_gemm_fastest(ms, 0), -1);
}

/* Autotuning: the heuristic's candidates timed by the (fake) driver's
 * events on the first call, the fastest cached; off, the first. The fake's
 * candidates spin for 2.5, 0.4 and 1.5 ms per matmul. */
static void autotune_caches_the_fastest_candidate(void **state) {
  (void)state;
  const double cost_us[] = {2500, 400, 1500};
  const jx_cuda_gemm_desc g = {JX_BF16,          64, 64, 64, 1, 0, 0, 0, 0, 0, 1,
                               JX_CUDA_ACT_GELU, 0,  0,  0,  0, 0, 0};
  jx_cuda_blas *b = make_blas(256);
  const jx_fake_cublaslt_log *log = fake_log();
  fake_candidates(3, cost_us);
  check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0x4000, NULL));
  assert_int_equal(log->algo_index, 0); /* not tuned: the heuristic's first */
  assert_int_equal(log->matmul_calls, 1);
  assert_int_equal(jx_cuda_blas_autotuned(b), 0);
  jx_cuda_blas_destroy(b);

  b = make_blas(256);
  fake_candidates(3, cost_us);
  jx_cuda_blas_set_autotune(b, 1);
  check_ok(jx_cuda_gemm(b, &g, 0x1000, 0x2000, 0x3000, 0x4000, NULL));
  /* each candidate warmed once and timed 3 times, then the call itself */
  assert_int_equal(log->matmul_calls, 3 * 4 + 1);
  assert_int_equal(log->algo_index, 1);
  assert_int_equal(log->workspace_bytes, 256);
  uint64_t chosen = log->algo_id;
  check_ok(jx_cuda_gemm(b, &g, 0x1000 + 0x100, 0x2000, 0x3000, 0x4000, NULL));
  assert_int_equal(log->matmul_calls, 3 * 4 + 2); /* cached: no timing */
  assert_int_equal(log->algo_id, chosen);
  assert_int_equal(log->heuristic_calls, 1);
  assert_int_equal(jx_cuda_blas_autotuned(b), 1);
  /* the bench's query never times (no operands): the first */
  cublasLtMatmulAlgo_t algo;
  size_t ws = 0;
  const jx_cuda_gemm_desc h = {JX_BF16,          32, 64, 64, 1, 0, 0, 0, 0, 0, 0,
                               JX_CUDA_ACT_NONE, 0,  0,  0,  0, 0, 0};
  check_ok(jx_cuda_gemm_algorithm(b, &h, &algo, &ws));
  assert_int_equal(algo.data[1], 0);
  assert_int_equal(jx_cuda_blas_autotuned(b), 1);
  jx_cuda_blas_destroy(b);
}

int main(void) {
  setenv("JX_CUBLASLT_PATH", JX_CUBLASLT_FAKE, 1);
  /* the fake driver's events (the host's clock) time the autotuned candidates */
  setenv("JX_CUDA_DRIVER_PATH", JX_CUDA_FAKE_DRIVER, 1);
  if (!jx_cublaslt()) {
    fprintf(stderr, "the fake cuBLASLt did not load: %s\n", jx_cublaslt_load_error());
    return 1;
  }
  void *lib = dlopen(JX_CUBLASLT_FAKE, RTLD_NOW | RTLD_NOLOAD);
  fake_log = lib ? (jx_fake_cublaslt_log_get_fn)dlsym(lib, "jx_fake_cublaslt_log_get") : NULL;
  fake_reset = lib ? (jx_fake_cublaslt_reset_fn)dlsym(lib, "jx_fake_cublaslt_reset") : NULL;
  fake_candidates =
      lib ? (jx_fake_cublaslt_candidates_fn)dlsym(lib, "jx_fake_cublaslt_candidates") : NULL;
  if (!fake_log || !fake_reset || !fake_candidates) {
    fprintf(stderr, "the fake cuBLASLt's log is missing: %s\n", dlerror());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(alignment_is_a_preference_and_keys_the_cache),
      cmocka_unit_test(batch_strides_count_in_the_alignment),
      cmocka_unit_test(misaligned_operands_are_refused),
      cmocka_unit_test(bias_type_is_the_dtype),
      cmocka_unit_test(workspace_is_what_the_heuristic_asked),
      cmocka_unit_test(every_problem_keeps_its_cache_entry),
      cmocka_unit_test(fastest_is_the_smallest_time),
      cmocka_unit_test(autotune_caches_the_fastest_candidate),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
