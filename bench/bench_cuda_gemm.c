/* bf16 GEMM on a GPU, 4096 x 4096 x 4096 (f32 accumulation, tensor cores):
 * jx_cuda_gemm next to cublasLtMatmul called directly with the algorithm
 * cuBLASLt's heuristic ranks first, on the same buffers and stream. Prints
 * one JSON line per implementation (TFLOP/s from the median of RUNS timed
 * calls, each timed with CUDA events) and one with their ratio, after
 * checking 64 elements of the result against an f32 dot product on the CPU.
 * Then the GPT-2 124M step's q/k/v projection, 8192 x 768 x 768, plain, with
 * a bias and with a bias and GELU in the epilogue, each with the
 * heuristic's first algorithm and with the fastest of its candidates
 * (jx_cuda_blas_set_autotune): one "cuda_gemm_epilogue" JSON line each.
 * Where there is no GPU (or no cuBLASLt) it says why and exits 0. */
#include "bench_util.h"
#include "bench_cuda_timing.h"
#include <jx/jx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_blaslt.h"
#include "cuda/cuda_copy.h"
#include "cuda/cuda_device.h"

enum { N = 4096, RUNS = 20, WARMUP = 3 };
#define WORKSPACE ((size_t)32 << 20)

static int failed(const char *what) {
  fprintf(stderr, "bench_cuda_gemm: %s: %s\n", what, jx_last_error());
  return 1;
}

/* Median milliseconds of RUNS calls of one implementation (impl 0: jx, 1: direct). */
typedef struct {
  jx_cuda_blas *blas;
  const jx_cuda_gemm_desc *desc;
  uint64_t a, b, c, ws; /* device pointers, as the allocator hands them out */
  uint64_t bias;        /* jx's calls: 0 unless desc has a bias */
  CUstream stream;
  /* the direct call's own descriptors */
  cublasLtHandle_t handle;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t layout;
  cublasLtMatmulAlgo_t algo;
  size_t algo_workspace; /* what the heuristic's algorithm asked for */
} setup;

static jx_status call(const setup *s, int impl) {
  if (impl == 0) return jx_cuda_gemm(s->blas, s->desc, s->a, s->b, s->c, s->bias, s->stream);
  const jx_cublaslt_api *lt = jx_cublaslt();
  const float one = 1, zero = 0;
  /* row-major C = A B is column-major C^T = B^T A^T: B goes first */
  int r = lt->Matmul(s->handle, s->op, &one, (void *)(uintptr_t)s->b, s->layout,
                     (void *)(uintptr_t)s->a, s->layout, &zero, (void *)(uintptr_t)s->c, s->layout,
                     (void *)(uintptr_t)s->c, s->layout, &s->algo, (void *)(uintptr_t)s->ws,
                     s->algo_workspace, s->stream);
  return r ? jx_report_error(JX_ERR_INTERNAL, "cublasLtMatmul: %s", lt->GetStatusName(r)) : JX_OK;
}

typedef struct {
  const setup *s;
  int impl;
} timed_call;

static jx_status call_timed(const void *ctx) {
  const timed_call *t = ctx;
  return call(t->s, t->impl);
}

static jx_status time_impl(const setup *s, int impl, double *median_ms) {
  const timed_call t = {s, impl};
  return bench_cuda_median_ms(call_timed, &t, s->stream, WARMUP, RUNS, median_ms);
}

/* The q/k/v projection's GEMM with each epilogue, the heuristic's first
 * algorithm against the autotuned one, on s's buffers (A [8192, 768] and B
 * [768, 768] fit in the 4096^2 ones) and bias. */
static int epilogues(setup *s) {
  enum { M = 8192, K = 768 };
  const jx_cuda_act acts[3] = {JX_CUDA_ACT_NONE, JX_CUDA_ACT_NONE, JX_CUDA_ACT_GELU};
  const char *names[3] = {"none", "bias", "bias+gelu"};
  jx_cuda_blas *handles[2] = {NULL, NULL};
  for (int h = 0; h < 2; h++) {
    if (jx_cuda_blas_create(0, s->ws, WORKSPACE, &handles[h])) return failed("cuBLASLt");
    jx_cuda_blas_set_autotune(handles[h], h);
  }
  for (int e = 0; e < 3; e++)
    for (int h = 0; h < 2; h++) {
      jx_cuda_gemm_desc desc = {JX_BF16, M,     K,       K, 1, 0, 0, 0, 0,
                                0,       e > 0, acts[e], 0, 0, 0, 0, 0, 0};
      setup t = *s;
      t.desc = &desc;
      t.blas = handles[h];
      t.bias = e > 0 ? s->bias : 0;
      double ms = 0;
      if (time_impl(&t, 0, &ms)) return failed(names[e]);
      printf("{\"bench\":\"cuda_gemm_epilogue\",\"shape\":\"%dx%dx%d\",\"epilogue\":\"%s\","
             "\"choice\":\"%s\",\"median_ms\":%.4f,\"tflop_per_s\":%.1f}\n",
             M, K, K, names[e], h ? "autotuned" : "heuristic_first", ms,
             2.0 * M * K * K / (ms * 1e-3) / 1e12);
    }
  for (int h = 0; h < 2; h++) jx_cuda_blas_destroy(handles[h]);
  return 0;
}

int main(void) {
  if (jx_cuda_probe() == 0) {
    printf("bench_cuda_gemm: skipped: no CUDA device (%s)\n", jx_cuda_probe_error());
    return 0;
  }
  const jx_cublaslt_api *lt = jx_cublaslt();
  if (!lt) {
    printf("bench_cuda_gemm: skipped: %s\n", jx_cublaslt_load_error());
    return 0;
  }
  jx_cuda_device *d = NULL;
  if (jx_cuda_device_open(0, &d)) return failed("opening device 0");
  size_t elems = (size_t)N * N, bytes = elems * sizeof(uint16_t);
  uint16_t *ha = malloc(bytes), *hb = malloc(bytes), *hc = malloc(bytes);
  if (!ha || !hb || !hc) return failed("host buffers");
  srand(1);
  for (size_t i = 0; i < elems; i++) {
    ha[i] = jx_f32_to_bf16((float)rand() / RAND_MAX - 0.5f);
    hb[i] = jx_f32_to_bf16((float)rand() / RAND_MAX - 0.5f);
  }
  setup s = {0};
  jx_cuda_gemm_desc desc = {JX_BF16,          N, N, N, 1, 0, 0, 0, 0, 0, 0,
                            JX_CUDA_ACT_NONE, 0, 0, 0, 0, 0, 0};
  s.desc = &desc;
  s.stream = d->compute;
  uint64_t bias = 0;
  if (jx_cuda_allocator_alloc(d->memory, bytes, &s.a) ||
      jx_cuda_allocator_alloc(d->memory, bytes, &s.b) ||
      jx_cuda_allocator_alloc(d->memory, bytes, &s.c) ||
      jx_cuda_allocator_alloc(d->memory, WORKSPACE, &s.ws) ||
      jx_cuda_allocator_alloc(d->memory, N * sizeof(uint16_t), &bias))
    return failed("device buffers");
  if (jx_cuda_copy_to_device(d, s.a, ha, bytes, s.stream) ||
      jx_cuda_copy_to_device(d, s.b, hb, bytes, s.stream) ||
      jx_cuda_copy_to_device(d, bias, ha, N * sizeof(uint16_t), s.stream))
    return failed("copies");
  if (jx_cuda_blas_create(0, s.ws, WORKSPACE, &s.blas)) return failed("cuBLASLt");
  if (jx_cuda_gemm_algorithm(s.blas, &desc, &s.algo, &s.algo_workspace)) return failed("heuristic");
  /* the direct call's descriptors, built here as a cuBLASLt user would */
  int32_t no = JX_CUBLAS_OP_N;
  if (lt->Create(&s.handle) || lt->MatmulDescCreate(&s.op, JX_CUBLAS_COMPUTE_32F, JX_CUDA_R_32F) ||
      lt->MatmulDescSetAttribute(s.op, JX_CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no) ||
      lt->MatmulDescSetAttribute(s.op, JX_CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof no) ||
      lt->MatrixLayoutCreate(&s.layout, JX_CUDA_R_16BF, N, N, N)) {
    fprintf(stderr, "bench_cuda_gemm: building the direct call's descriptors failed\n");
    return 1;
  }
  double ms[2];
  const char *impls[2] = {"jx", "cublaslt"};
  for (int impl = 0; impl < 2; impl++) {
    if (time_impl(&s, impl, &ms[impl])) return failed(impls[impl]);
    if (jx_cuda_copy_to_host(d, hc, s.c, bytes, s.stream)) return failed("copy back");
    /* spot checks against an f32 dot product of the same bf16 inputs */
    double worst = 0;
    for (int t = 0; t < 64; t++) {
      size_t i = (size_t)(t * 997) % N, j = (size_t)(t * 1571 + 13) % N;
      double ref = 0, scale = 0;
      for (size_t p = 0; p < N; p++) {
        double x = jx_bf16_to_f32(ha[i * N + p]) * (double)jx_bf16_to_f32(hb[p * N + j]);
        ref += x;
        scale += fabs(x);
      }
      double err = fabs(jx_bf16_to_f32(hc[i * N + j]) - ref) / (scale > 0 ? scale : 1);
      if (err > worst) worst = err;
    }
    printf("{\"bench\":\"cuda_gemm_bf16_%d\",\"impl\":\"%s\",\"median_ms\":%.3f,"
           "\"tflop_per_s\":%.1f,\"max_rel_err\":%.2e}\n",
           N, impls[impl], ms[impl], 2.0 * N * N * N / (ms[impl] * 1e-3) / 1e12, worst);
    if (worst > 1e-2) {
      fprintf(stderr, "bench_cuda_gemm: %s: the result is wrong (relative error %.2e)\n",
              impls[impl], worst);
      return 1;
    }
  }
  printf("{\"bench\":\"cuda_gemm_bf16_%d\",\"jx_over_cublaslt\":%.3f,\"device\":\"%s\"}\n", N,
         ms[1] / ms[0], d->info.name);
  s.bias = bias;
  if (epilogues(&s)) return 1;
  lt->MatrixLayoutDestroy(s.layout);
  lt->MatmulDescDestroy(s.op);
  lt->Destroy(s.handle);
  jx_cuda_blas_destroy(s.blas);
  free(ha);
  free(hb);
  free(hc);
  return 0;
}
