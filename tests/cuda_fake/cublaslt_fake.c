/* A fake cuBLASLt for tests: a shared library exporting the symbols
 * src/cuda/cuda_blaslt.c loads, which computes nothing and records what it
 * was told (cublaslt_fake.h): the descriptors' attributes, the heuristic's
 * preferences, and the workspace each matmul is given. Its heuristic
 * answers one algorithm per call (numbered, so a cached one is told from a
 * new one) asking for the workspace set by the reset call, or none when
 * that is over MAX_WORKSPACE_BYTES, as cuBLASLt answers. Point the loader at
 * it with JX_CUBLASLT_PATH. Not thread-safe: one test thread. */
#include "cublaslt_fake.h"

#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_blaslt.h"

#define EXPORT __attribute__((visibility("default")))

struct jx_cublaslt_desc_ {
  int32_t bias_type;
  int bias_set;
};
struct jx_cublaslt_layout_ {
  int unused;
};
struct jx_cublaslt_pref_ {
  uint64_t max_workspace;
  uint32_t min_alignment[4];
};

static jx_fake_cublaslt_log log_;
static size_t algo_workspace;
static uint64_t algos;
static int handle_storage;

EXPORT const jx_fake_cublaslt_log *jx_fake_cublaslt_log_get(void) { return &log_; }
EXPORT void jx_fake_cublaslt_reset(size_t workspace) {
  memset(&log_, 0, sizeof log_);
  algo_workspace = workspace;
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
EXPORT cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, int attr,
                                                     const void *buf, size_t size) {
  if (attr != JX_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE) return 0;
  if (size != sizeof d->bias_type) return 7; /* CUBLAS_STATUS_INVALID_VALUE */
  memcpy(&d->bias_type, buf, size);
  d->bias_set = 1;
  return 0;
}

EXPORT cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, int type, uint64_t rows,
                                                 uint64_t cols, int64_t ld) {
  (void)type, (void)rows, (void)cols, (void)ld;
  *l = calloc(1, sizeof **l);
  return *l ? 0 : 3;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
  free(l);
  return 0;
}
EXPORT cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l, int attr,
                                                       const void *buf, size_t size) {
  (void)l, (void)attr, (void)buf, (void)size;
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
  log_.max_workspace = pref->max_workspace;
  memcpy(log_.min_alignment, pref->min_alignment, sizeof log_.min_alignment);
  *returned = 0;
  if (requested < 1 || algo_workspace > pref->max_workspace) return 0;
  memset(&results[0], 0, sizeof results[0]);
  results[0].algo.data[0] = ++algos;
  results[0].workspaceSize = algo_workspace;
  *returned = 1;
  return 0;
}

EXPORT cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                                     const void *a, cublasLtMatrixLayout_t adesc, const void *b,
                                     cublasLtMatrixLayout_t bdesc, const void *beta, const void *c,
                                     cublasLtMatrixLayout_t cdesc, void *d,
                                     cublasLtMatrixLayout_t ddesc, const cublasLtMatmulAlgo_t *algo,
                                     void *workspace, size_t workspace_bytes, CUstream stream) {
  (void)h, (void)alpha, (void)a, (void)adesc, (void)b, (void)bdesc, (void)beta, (void)c;
  (void)cdesc, (void)d, (void)ddesc, (void)stream;
  log_.matmul_calls++;
  log_.bias_type = op->bias_set ? op->bias_type : -1;
  log_.workspace = workspace;
  log_.workspace_bytes = workspace_bytes;
  log_.algo_id = algo->data[0];
  return 0;
}
