/* What tests/cuda_fake/cublaslt_fake.c was told, for the test that loads it
 * (test_cuda_blaslt finds these with dlsym on the library jx loaded). */
#ifndef JX_TESTS_CUDA_FAKE_CUBLASLT_FAKE_H
#define JX_TESTS_CUDA_FAKE_CUBLASLT_FAKE_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  int heuristic_calls, matmul_calls;
  int requested; /* algorithms the last heuristic call asked for */
  /* the last heuristic call's preferences (0: not set) */
  uint64_t max_workspace;
  uint32_t min_alignment[4]; /* A, B, C, D in cuBLASLt's (column-major) order */
  /* the last matmul: its descriptor's bias type (-1: not set), the workspace
   * it was given, and the algorithm */
  int32_t bias_type;
  const void *workspace;
  size_t workspace_bytes;
  uint64_t algo_id;
  int algo_index; /* the algorithm's place in its heuristic call's answer */
} jx_fake_cublaslt_log;

/* jx_fake_cublaslt_log_get: the log so far. jx_fake_cublaslt_reset: zeroes
 * it, sets the workspace the heuristic's algorithms ask for, and stops the
 * matmuls from computing (they only record: for addresses that are not
 * memory). Until a reset, each matmul computes on the host memory the fake
 * driver's device pointers address. */
typedef const jx_fake_cublaslt_log *(*jx_fake_cublaslt_log_get_fn)(void);
typedef void (*jx_fake_cublaslt_reset_fn)(size_t algo_workspace);
/* jx_fake_cublaslt_candidates: from now on the heuristic answers up to n
 * algorithms per call (n <= 8; 1 after a reset), the i-th of which spins
 * for cost_us[i] microseconds of the host's clock in each matmul (what the
 * fake driver's events time). */
typedef void (*jx_fake_cublaslt_candidates_fn)(int n, const double *cost_us);

#endif
