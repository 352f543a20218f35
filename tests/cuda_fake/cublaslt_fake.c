/* A fake cuBLASLt for tests: a shared library exporting the symbols
 * src/cuda/cuda_blaslt.c loads, which records what it was told
 * (cublaslt_fake.h: the descriptors' attributes, the heuristic's
 * preferences, and the workspace each matmul is given) and computes each
 * matmul on the host, where tests/cuda_fake's driver keeps device memory:
 * column-major D = act(alpha op(A) op(B) + beta C + bias) with the layouts'
 * leading dimensions, transposes, strided batches and the bias epilogue
 * (a bias per row of D; ReLU, or GELU's tanh form as cuBLASLt's), f32 or
 * bf16 operands with f32 accumulation in k order (bf16 results rounded to
 * nearest even), so a program's GEMMs under the fake driver give real
 * numbers (a real cuBLASLt sums in another order: tests compare within a
 * tolerance). Its heuristic
 * answers one algorithm per call, or up to the number a test sets, each with
 * a cost in microseconds its matmuls spin for (numbered, so a cached one is
 * told from a new one), asking for the workspace set by the reset call, or none when
 * that is over MAX_WORKSPACE_BYTES, as cuBLASLt answers. Point the loader at
 * it with JX_CUBLASLT_PATH. Not thread-safe: one test thread. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cublaslt_fake.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/cuda_blaslt.h"

#define EXPORT __attribute__((visibility("default")))

struct jx_cublaslt_desc_ {
  int32_t bias_type;
  int bias_set;
  int32_t trans_a, trans_b;
  uint32_t epilogue;
  const void *bias;
};
struct jx_cublaslt_layout_ {
  int type;
  uint64_t rows, cols;
  int64_t ld;
  int32_t batch;
  int64_t stride; /* elements between batch members */
};
struct jx_cublaslt_pref_ {
  uint64_t max_workspace;
  uint32_t min_alignment[4];
};

static jx_fake_cublaslt_log log_;
static size_t algo_workspace;
static uint64_t algos;
static int computes = 1; /* 0 after a reset: test_cuda_blaslt's addresses are made up */
static int candidates = 1;
static double cost_us[8];
static int handle_storage;

EXPORT const jx_fake_cublaslt_log *jx_fake_cublaslt_log_get(void) { return &log_; }
EXPORT void jx_fake_cublaslt_reset(size_t workspace) {
  memset(&log_, 0, sizeof log_);
  algo_workspace = workspace;
  computes = 0;
  candidates = 1;
  memset(cost_us, 0, sizeof cost_us);
}
EXPORT void jx_fake_cublaslt_candidates(int n, const double *cost) {
  candidates = n < 1 ? 1 : n > 8 ? 8 : n;
  for (int i = 0; i < candidates; i++) cost_us[i] = cost ? cost[i] : 0;
}

EXPORT cublasStatus_t cublasLtCreate(cublasLtHandle_t *h) {
  *h = (cublasLtHandle_t)(void *)&handle_storage;
  return 0;
}
EXPORT cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
  (void)h;
  return 0;
}
EXPORT size_t cublasLtGetVersion(void) { return 130100; }
EXPORT const char *cublasLtGetStatusName(cublasStatus_t s) {
  return s ? "CUBLAS_STATUS_INVALID_VALUE" : "CUBLAS_STATUS_SUCCESS";
}
EXPORT const char *cublasLtGetStatusString(cublasStatus_t s) {
  return s ? "an unsupported value or parameter was passed" : "success";
}

EXPORT cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, int compute, int scale) {
  (void)compute, (void)scale;
  *d = calloc(1, sizeof **d);
  return *d ? 0 : 3;
}
EXPORT cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
  free(d);
  return 0;
}
enum { INVALID_VALUE = 7, NOT_SUPPORTED = 15 }; /* CUBLAS_STATUS_* */

/* Copies an attribute of exactly `want` bytes. */
static cublasStatus_t attr_copy(void *to, size_t want, const void *buf, size_t size) {
  if (size != want) return INVALID_VALUE;
  memcpy(to, buf, size);
  return 0;
}

EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr,
                                                     const void *buf, size_t size) {
  switch (attr) {
  case JX_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
    d->bias_set = 1;
    return attr_copy(&d->bias_type, sizeof d->bias_type, buf, size);
  case JX_CUBLASLT_MATMUL_DESC_TRANSA: return attr_copy(&d->trans_a, sizeof d->trans_a, buf, size);
  case JX_CUBLASLT_MATMUL_DESC_TRANSB: return attr_copy(&d->trans_b, sizeof d->trans_b, buf, size);
  case JX_CUBLASLT_MATMUL_DESC_EPILOGUE:
    return attr_copy(&d->epilogue, sizeof d->epilogue, buf, size);
  case JX_CUBLASLT_MATMUL_DESC_BIAS_POINTER: return attr_copy(&d->bias, sizeof d->bias, buf, size);
  default: return 0;
  }
}

EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, int type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  *l = calloc(1, sizeof **l);
  if (!*l) return 3;
  **l = (struct jx_cublaslt_layout_){type, rows, cols, ld, 1, 0};
  return 0;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  free(l);
  return 0;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, int attr,
                                                       const void *buf, size_t size) {
  if (attr == JX_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT)
    return attr_copy(&l->batch, sizeof l->batch, buf, size);
  if (attr == JX_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET)
    return attr_copy(&l->stride, sizeof l->stride, buf, size);
  return 0;
}

EXPORT cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p) {
  *p = calloc(1, sizeof **p);
  return *p ? 0 : 3;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
  free(p);
  return 0;
}
EXPORT cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, int attr,
                                                           const void *buf, size_t size) {
  if (attr == JX_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
    if (size != sizeof p->max_workspace) return 7;
    memcpy(&p->max_workspace, buf, size);
  } else if (attr >= JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
             attr <= JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
    if (size != sizeof(uint32_t)) return 7;
    memcpy(&p->min_alignment[attr - JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], buf, size);
  }
  return 0;
}

EXPORT cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
    cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, cublasLtMatmulPreference_t pref,
    int requested, cublasLtMatmulHeuristicResult_t *results, int *returned) {
  (void)h, (void)op, (void)a, (void)b, (void)c, (void)d;
  log_.heuristic_calls++;
  log_.requested = requested;
  log_.max_workspace = pref->max_workspace;
  memcpy(log_.min_alignment, pref->min_alignment, sizeof log_.min_alignment);
  *returned = 0;
  if (requested < 1 || algo_workspace > pref->max_workspace) return 0;
  for (int i = 0; i < candidates && i < requested; i++) {
    memset(&results[i], 0, sizeof results[i]);
    results[i].algo.data[0] = ++algos;
    results[i].algo.data[1] = (uint64_t)i; /* its cost's index */
    results[i].workspaceSize = algo_workspace;
    *returned = i + 1;
  }
  return 0;
}

/* Spins for us microseconds of CLOCK_MONOTONIC. */
static void spin(double us) {
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  do clock_gettime(CLOCK_MONOTONIC, &t);
  while ((double)(t.tv_sec - t0.tv_sec) * 1e6 + (double)(t.tv_nsec - t0.tv_nsec) * 1e-3 < us);
}

/* bf16 bits <-> float: rounded to nearest even, NaN kept quiet with its sign */
static float bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}
static uint16_t f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

/* Element (i, j) of batch member z of a column-major matrix. */
static float load(const struct jx_cublaslt_layout_ *l, const void *p, int64_t z, uint64_t i,
                  uint64_t j) {
  int64_t at = z * l->stride + (int64_t)i + (int64_t)j * l->ld;
  return l->type == JX_CUDA_R_16BF ? bf16_to_f32(((const uint16_t *)p)[at])
                                   : ((const float *)p)[at];
}
static void store(const struct jx_cublaslt_layout_ *l, void *p, int64_t z, uint64_t i, uint64_t j,
                  float v) {
  int64_t at = z * l->stride + (int64_t)i + (int64_t)j * l->ld;
  if (l->type == JX_CUDA_R_16BF)
    ((uint16_t *)p)[at] = f32_to_bf16(v);
  else
    ((float *)p)[at] = v;
}

/* op(X)'s element (i, j): X's, or X^T's when trans. */
static float op_load(const struct jx_cublaslt_layout_ *l, const void *p, int32_t trans, int64_t z,
                     uint64_t i, uint64_t j) {
  return trans ? load(l, p, z, j, i) : load(l, p, z, i, j);
}

static cublasStatus_t compute(cublasLtMatmulDesc_t op, float alpha, const void *a,
                              cublasLtMatrixLayout_t al, const void *b, cublasLtMatrixLayout_t bl,
                              float beta, const void *c, cublasLtMatrixLayout_t cl, void *d,
                              cublasLtMatrixLayout_t dl) {
  const struct jx_cublaslt_layout_ *ls[4] = {al, bl, cl, dl};
  for (int i = 0; i < 4; i++)
    if (ls[i]->type != JX_CUDA_R_32F && ls[i]->type != JX_CUDA_R_16BF) return NOT_SUPPORTED;
  uint64_t m = dl->rows, n = dl->cols;
  uint64_t k = op->trans_a ? al->rows : al->cols;
  uint64_t am = op->trans_a ? al->cols : al->rows, bk = op->trans_b ? bl->cols : bl->rows;
  uint64_t bn = op->trans_b ? bl->rows : bl->cols;
  if (am != m || bk != k || bn != n || cl->rows != m || cl->cols != n) return INVALID_VALUE;
  uint32_t epi = op->epilogue ? op->epilogue : JX_CUBLASLT_EPILOGUE_DEFAULT;
  int bias = (epi & JX_CUBLASLT_EPILOGUE_BIAS) != 0, relu = (epi & JX_CUBLASLT_EPILOGUE_RELU) != 0;
  int gelu = (epi & JX_CUBLASLT_EPILOGUE_GELU) != 0;
  if (bias && !op->bias) return INVALID_VALUE;
  for (int32_t z = 0; z < dl->batch; z++)
    for (uint64_t j = 0; j < n; j++)
      for (uint64_t i = 0; i < m; i++) {
        float acc = 0;
        for (uint64_t p = 0; p < k; p++)
          acc += op_load(al, a, op->trans_a, z, i, p) * op_load(bl, b, op->trans_b, z, p, j);
        float v = alpha * acc;
        if (beta != 0) v += beta * load(cl, c, z, i, j);
        if (bias)
          v += dl->type == JX_CUDA_R_16BF ? bf16_to_f32(((const uint16_t *)op->bias)[i])
                                          : ((const float *)op->bias)[i];
        if (relu) v = v > 0 ? v : 0;
        if (gelu) v = 0.5f * v * (1 + tanhf(0.7978845608f * (v + 0.044715f * v * v * v)));
        store(dl, d, z, i, j, v);
      }
  return 0;
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                                     const void *a, cublasLtMatrixLayout_t adesc, const void *b,
                                     cublasLtMatrixLayout_t bdesc, const void *beta, const void *c,
                                     cublasLtMatrixLayout_t cdesc, void *d,
                                     cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspace_bytes, CUstream stream) {
  (void)h, (void)stream;
  log_.matmul_calls++;
  log_.bias_type = op->bias_set ? op->bias_type : -1;
  log_.workspace = workspace;
  log_.workspace_bytes = workspace_bytes;
  log_.algo_id = algo->data[0];
  log_.algo_index = (int)algo->data[1];
  if (algo->data[1] < 8 && cost_us[algo->data[1]] > 0) spin(cost_us[algo->data[1]]);
  if (!computes) return 0;
  return compute(op, *(const float *)alpha, a, adesc, b, bdesc, *(const float *)beta, c, cdesc, d,
                 ddesc);
}
