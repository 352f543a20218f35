#include "cuda_blaslt.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/hash.h"
#include "cuda_loader.h"

static jx_cublaslt_api api;
static void *lib;
static char load_error[1024];
static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static void load(void) {
  static const char *const sonames[] = {"libcublasLt.so", "libcublasLt.so.13", "libcublasLt.so.12",
                                        "libcublasLt.so.11", NULL};
  static const jx_cuda_library blaslt = {"cuBLASLt", "JX_CUBLASLT_PATH", sonames, 1,
                                         "install the CUDA toolkit's cuBLAS"};
#define SYM(field, name)                                                                           \
  { (void **)&api.field, name, NULL, 0 }
  const jx_cuda_symbol syms[] = {
      SYM(Create, "cublasLtCreate"),
      SYM(Destroy, "cublasLtDestroy"),
      SYM(GetVersion, "cublasLtGetVersion"),
      SYM(GetStatusName, "cublasLtGetStatusName"),
      SYM(GetStatusString, "cublasLtGetStatusString"),
      SYM(MatmulDescCreate, "cublasLtMatmulDescCreate"),
      SYM(MatmulDescDestroy, "cublasLtMatmulDescDestroy"),
      SYM(MatmulDescSetAttribute, "cublasLtMatmulDescSetAttribute"),
      SYM(MatrixLayoutCreate, "cublasLtMatrixLayoutCreate"),
      SYM(MatrixLayoutDestroy, "cublasLtMatrixLayoutDestroy"),
      SYM(MatrixLayoutSetAttribute, "cublasLtMatrixLayoutSetAttribute"),
      SYM(MatmulPreferenceCreate, "cublasLtMatmulPreferenceCreate"),
      SYM(MatmulPreferenceDestroy, "cublasLtMatmulPreferenceDestroy"),
      SYM(MatmulPreferenceSetAttribute, "cublasLtMatmulPreferenceSetAttribute"),
      SYM(MatmulAlgoGetHeuristic, "cublasLtMatmulAlgoGetHeuristic"),
      SYM(Matmul, "cublasLtMatmul"),
  };
#undef SYM
  lib = jx_cuda_library_open(&blaslt, syms, (int)(sizeof syms / sizeof syms[0]), load_error,
                             sizeof load_error);
}

const jx_cublaslt_api *jx_cublaslt(void) {
  pthread_once(&load_once, load);
  return lib ? &api : NULL;
}

const char *jx_cublaslt_load_error(void) {
  pthread_once(&load_once, load);
  return load_error;
}

/* ---- the row-major -> column-major mapping ---- */

jx_status jx_cuda_gemm_plan(const jx_cuda_gemm_desc *d, jx_cuda_colmajor *out) {
  if (d->dtype != JX_F32 && d->dtype != JX_BF16 && d->dtype != JX_F16)
    return jx_error_set(JX_ERR_DTYPE, "jx_cuda_gemm: dtype %s is not f32, bf16 or f16",
                        jx_dtype_name(d->dtype));
  if (d->m < 1 || d->n < 1 || d->k < 1 || d->batch < 1)
    return jx_error_set(JX_ERR_SHAPE,
                        "jx_cuda_gemm: m=%lld, n=%lld, k=%lld, batch=%lld must all be >= 1",
                        (long long)d->m, (long long)d->n, (long long)d->k, (long long)d->batch);
  if (d->stride_a < 0 || d->stride_b < 0 || (d->batch > 1 && d->stride_c < d->m * d->n))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_cuda_gemm: batch strides a=%lld, b=%lld must be >= 0 and c=%lld >= "
                        "m*n=%lld (the outputs of a batch may not overlap)",
                        (long long)d->stride_a, (long long)d->stride_b, (long long)d->stride_c,
                        (long long)(d->m * d->n));
  if ((d->ld_a && d->ld_a < (d->trans_a ? d->m : d->k)) ||
      (d->ld_b && d->ld_b < (d->trans_b ? d->k : d->n)) || d->outer < 0 || d->outer_a < 0 ||
      d->outer_b < 0 || (d->outer > 1 && d->outer_c < d->batch * d->m * d->n))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_cuda_gemm: leading dims a=%lld, b=%lld must be 0 or at least a stored "
                        "row, outer strides a=%lld, b=%lld >= 0 and c=%lld >= batch*m*n",
                        (long long)d->ld_a, (long long)d->ld_b, (long long)d->outer_a,
                        (long long)d->outer_b, (long long)d->outer_c);
  if (d->act != JX_CUDA_ACT_NONE && d->act != JX_CUDA_ACT_RELU && d->act != JX_CUDA_ACT_GELU)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_cuda_gemm: unknown activation %d",
                        (int)d->act);
  int64_t m = d->m, n = d->n, k = d->k;
  int batched = d->batch > 1;
  /* x is the row-major B seen column-major: stored [k, n] it is the n x k
   * matrix op(B)^T, used as is; stored [n, k] (trans_b) it is the k x n
   * matrix op(B), so transposed. y likewise for A. Then D (n x m) =
   * op(x) op(y) = op(B)^T op(A)^T = (op(A) op(B))^T: column-major, the
   * row-major C. */
  out->x = d->trans_b ? (jx_cuda_colmajor_operand){JX_CUBLAS_OP_T, k, n, d->ld_b ? d->ld_b : k, 0}
                      : (jx_cuda_colmajor_operand){JX_CUBLAS_OP_N, n, k, d->ld_b ? d->ld_b : n, 0};
  out->y = d->trans_a ? (jx_cuda_colmajor_operand){JX_CUBLAS_OP_T, m, k, d->ld_a ? d->ld_a : m, 0}
                      : (jx_cuda_colmajor_operand){JX_CUBLAS_OP_N, k, m, d->ld_a ? d->ld_a : k, 0};
  out->d = (jx_cuda_colmajor_operand){JX_CUBLAS_OP_N, n, m, n, 0};
  if (batched) {
    out->x.stride = d->stride_b;
    out->y.stride = d->stride_a;
    out->d.stride = d->stride_c;
  }
  out->rows = n;
  out->cols = m;
  out->inner = k;
  int e = d->act == JX_CUDA_ACT_RELU   ? JX_CUBLASLT_EPILOGUE_RELU
          : d->act == JX_CUDA_ACT_GELU ? JX_CUBLASLT_EPILOGUE_GELU
                                       : 0;
  if (d->has_bias) e |= JX_CUBLASLT_EPILOGUE_BIAS;
  out->epilogue = e ? e : JX_CUBLASLT_EPILOGUE_DEFAULT;
  return JX_OK;
}

const jx_cuda_gemm_align jx_cuda_gemm_aligned = {16, 16, 16, 16};

/* The largest power of two up to 16 dividing every address the operand
 * takes: its base and, in a batch, base + i * stride bytes. */
static jx_status operand_alignment(CUdeviceptr ptr, int64_t stride_bytes, int64_t elem,
                                   const char *name, uint32_t *out) {
  uint64_t bits = (uint64_t)ptr | (uint64_t)stride_bytes | 16;
  uint32_t align = (uint32_t)(bits & -bits);
  if (align < elem)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_cuda_gemm: %s at 0x%llx (batch stride %lld bytes) is not aligned to "
                        "its element size of %lld bytes",
                        name, (unsigned long long)ptr, (long long)stride_bytes, (long long)elem);
  *out = align;
  return JX_OK;
}

jx_status jx_cuda_gemm_alignment(const jx_cuda_gemm_desc *d, CUdeviceptr a, CUdeviceptr b,
                                 CUdeviceptr c, CUdeviceptr bias, jx_cuda_gemm_align *out) {
  int64_t elem = (int64_t)jx_dtype_size(d->dtype), batched = d->batch > 1, outer = d->outer > 1;
  *out = jx_cuda_gemm_aligned;
  /* every row and every problem of a batch or an outer batch starts at a
   * multiple of these strides past the base */
  jx_status st = operand_alignment(a, (batched * d->stride_a | outer * d->outer_a | d->ld_a) * elem,
                                   elem, "A", &out->a);
  if (!st)
    st = operand_alignment(b, (batched * d->stride_b | outer * d->outer_b | d->ld_b) * elem, elem,
                           "B", &out->b);
  if (!st)
    st = operand_alignment(c, (batched * d->stride_c | outer * d->outer_c) * elem, elem, "C",
                           &out->c);
  if (!st && d->has_bias) st = operand_alignment(bias, 0, elem, "the bias", &out->bias);
  return st;
}

uint64_t jx_cuda_gemm_key(const jx_cuda_gemm_desc *d, const jx_cuda_gemm_align *align, int device) {
  const int64_t fields[] = {d->dtype,
                            d->m,
                            d->n,
                            d->k,
                            d->batch,
                            d->trans_a,
                            d->trans_b,
                            d->batch > 1 ? d->stride_a : 0,
                            d->batch > 1 ? d->stride_b : 0,
                            d->batch > 1 ? d->stride_c : 0,
                            d->ld_a,
                            d->ld_b,
                            d->has_bias,
                            d->act,
                            align->a,
                            align->b,
                            align->c,
                            align->bias,
                            device};
  uint64_t h = jx_hash_str(JX_HASH_SEED, "jx-cuda-gemm-2");
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    h = jx_hash_u64(h, (uint64_t)fields[i]);
  return h;
}

/* ---- the handle, its workspace and its algorithm cache ---- */

/* Open addressing with linear probing: every problem of a program keeps its
 * entry (a direct-mapped table let two problems whose keys met in a slot
 * evict each other at every call, and each call then asked the heuristic
 * again). Only a full table evicts, at the key's home slot. */
enum { CACHE_SLOTS = 512, TUNE_REPS = 3 };

typedef struct {
  uint64_t key; /* 0: empty */
  cublasLtMatmulAlgo_t algo;
  size_t workspace_bytes; /* what the algorithm asked for */
} cached_algo;

struct jx_cuda_blas {
  int device;
  cublasLtHandle_t handle;
  CUdeviceptr workspace;
  size_t workspace_bytes;
  int autotune;
  pthread_mutex_t lock;
  int cached;
  cached_algo cache[CACHE_SLOTS];
  int64_t heuristic_calls, cache_hits, autotuned;
};

static jx_status check(cublasStatus_t s, const char *call, int device) {
  if (s == 0) return JX_OK;
  return jx_error_set(JX_ERR_INTERNAL, "cuBLASLt: %s on device %d: %s (%s)", call, device,
                      api.GetStatusName(s), api.GetStatusString(s));
}

jx_status jx_cuda_blas_create(int device, CUdeviceptr workspace, size_t workspace_bytes,
                              jx_cuda_blas **out) {
  *out = NULL;
  if (!jx_cublaslt()) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", load_error);
  jx_cuda_blas *b = calloc(1, sizeof *b);
  if (!b) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "cuBLASLt: out of host memory");
  jx_status st = check(api.Create(&b->handle), "cublasLtCreate", device);
  if (st) {
    free(b);
    return st;
  }
  b->device = device;
  b->workspace = workspace;
  b->workspace_bytes = workspace_bytes;
  pthread_mutex_init(&b->lock, NULL);
  *out = b;
  return JX_OK;
}

void jx_cuda_blas_destroy(jx_cuda_blas *b) {
  if (!b) return;
  api.Destroy(b->handle);
  pthread_mutex_destroy(&b->lock);
  free(b);
}

void jx_cuda_blas_set_autotune(jx_cuda_blas *b, int on) { b->autotune = on != 0; }

void jx_cuda_blas_counts(const jx_cuda_blas *b, int64_t *heuristic_calls, int64_t *cache_hits) {
  *heuristic_calls = b->heuristic_calls;
  *cache_hits = b->cache_hits;
}

int64_t jx_cuda_blas_autotuned(const jx_cuda_blas *b) { return b->autotuned; }

/* key's entry, or the empty slot it would take (the home slot when the
 * table is full). Under b->lock. */
static cached_algo *cache_slot(jx_cuda_blas *b, uint64_t key) {
  size_t home = (size_t)(key % CACHE_SLOTS);
  for (size_t i = 0; i < CACHE_SLOTS; i++) {
    cached_algo *s = &b->cache[(home + i) % CACHE_SLOTS];
    if (s->key == key || s->key == 0) return s;
  }
  return &b->cache[home];
}

/* The descriptors of one problem, created together and destroyed together. */
typedef struct {
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t x, y, d;
} problem;

static void problem_destroy(problem *p) {
  if (p->op) api.MatmulDescDestroy(p->op);
  if (p->x) api.MatrixLayoutDestroy(p->x);
  if (p->y) api.MatrixLayoutDestroy(p->y);
  if (p->d) api.MatrixLayoutDestroy(p->d);
}

static jx_status layout(const jx_cuda_colmajor_operand *o, int type, int32_t batch,
                        cublasLtMatrixLayout_t *l, int device) {
  jx_status st = check(api.MatrixLayoutCreate(l, type, (uint64_t)o->rows, (uint64_t)o->cols, o->ld),
                       "cublasLtMatrixLayoutCreate", device);
  if (!st && batch > 1)
    st = check(api.MatrixLayoutSetAttribute(*l, JX_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &batch,
                                            sizeof batch),
               "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", device);
  if (!st && batch > 1)
    st = check(api.MatrixLayoutSetAttribute(*l, JX_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                            &o->stride, sizeof o->stride),
               "cublasLtMatrixLayoutSetAttribute(STRIDED_BATCH_OFFSET)", device);
  return st;
}

static jx_status problem_create(const jx_cuda_gemm_desc *desc, const jx_cuda_colmajor *plan,
                                CUdeviceptr bias, int device, problem *p) {
  memset(p, 0, sizeof *p);
  if (desc->batch > INT32_MAX)
    return jx_error_set(JX_ERR_SHAPE, "jx_cuda_gemm: batch %lld exceeds cuBLASLt's int32",
                        (long long)desc->batch);
  int32_t type = desc->dtype == JX_F32    ? JX_CUDA_R_32F
                 : desc->dtype == JX_BF16 ? JX_CUDA_R_16BF
                                          : JX_CUDA_R_16F;
  int32_t batch = (int32_t)desc->batch, ta = plan->x.op, tb = plan->y.op;
  uint32_t epilogue = (uint32_t)plan->epilogue;
  jx_status st = check(api.MatmulDescCreate(&p->op, JX_CUBLAS_COMPUTE_32F, JX_CUDA_R_32F),
                       "cublasLtMatmulDescCreate", device);
  if (!st)
    st = check(api.MatmulDescSetAttribute(p->op, JX_CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta),
               "cublasLtMatmulDescSetAttribute(TRANSA)", device);
  if (!st)
    st = check(api.MatmulDescSetAttribute(p->op, JX_CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb),
               "cublasLtMatmulDescSetAttribute(TRANSB)", device);
  if (!st)
    st = check(api.MatmulDescSetAttribute(p->op, JX_CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                          sizeof epilogue),
               "cublasLtMatmulDescSetAttribute(EPILOGUE)", device);
  if (!st && desc->has_bias) {
    const void *ptr = (const void *)(uintptr_t)bias;
    st = check(
        api.MatmulDescSetAttribute(p->op, JX_CUBLASLT_MATMUL_DESC_BIAS_POINTER, &ptr, sizeof ptr),
        "cublasLtMatmulDescSetAttribute(BIAS_POINTER)", device);
    /* said, not left to cuBLASLt's default (which depends on the types) */
    if (!st)
      st = check(api.MatmulDescSetAttribute(p->op, JX_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE, &type,
                                            sizeof type),
                 "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", device);
  }
  if (!st) st = layout(&plan->x, type, batch, &p->x, device);
  if (!st) st = layout(&plan->y, type, batch, &p->y, device);
  if (!st) st = layout(&plan->d, type, batch, &p->d, device);
  if (st) problem_destroy(p);
  return st;
}

static jx_status set_preference(cublasLtMatmulPreference_t pref, int attr, const void *value,
                                size_t size, const char *name, int device) {
  return check(api.MatmulPreferenceSetAttribute(pref, attr, value, size), name, device);
}

int jx_cuda_gemm_fastest(const float *ms, int n) {
  int best = -1;
  for (int i = 0; i < n; i++)
    if (ms[i] >= 0 && ms[i] < INFINITY && (best < 0 || ms[i] < ms[best])) best = i;
  return best;
}

/* The operands of the call that first meets a problem: its candidates are
 * timed on them (the first of an outer batch). */
typedef struct {
  const void *x, *y;
  void *d;
  CUstream stream;
} operands;

static int by_value(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* ms[i]: the median of TUNE_REPS timed runs of candidate i (after one run
 * that warms it), timed by events on the stream; INFINITY where cuBLASLt
 * refuses it at run time. Waits for the stream: only at a problem's first
 * call. */
static jx_status time_candidates(jx_cuda_blas *b, const problem *p, const operands *o,
                                 const cublasLtMatmulHeuristicResult_t *r, int n, float *ms) {
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  const float one = 1.0f, zero = 0.0f;
  CUevent ev[TUNE_REPS + 1] = {0};
  jx_status st = JX_OK;
  for (int e = 0; e <= TUNE_REPS && !st; e++)
    st = jx_cuda_check(cu->EventCreate(&ev[e], 0), "cuEventCreate", b->device);
  for (int i = 0; i < n && !st; i++) {
    void *ws = r[i].workspaceSize ? (void *)(uintptr_t)b->workspace : NULL;
    int ok = 1;
    for (int rep = -1; rep < TUNE_REPS && ok && !st; rep++) {
      if (rep >= 0)
        st = jx_cuda_check(cu->EventRecord(ev[rep], o->stream), "cuEventRecord", b->device);
      ok = api.Matmul(b->handle, p->op, &one, o->x, p->x, o->y, p->y, &zero, o->d, p->d, o->d, p->d,
                      &r[i].algo, ws, r[i].workspaceSize, o->stream) == 0;
    }
    if (!st && ok)
      st = jx_cuda_check(cu->EventRecord(ev[TUNE_REPS], o->stream), "cuEventRecord", b->device);
    if (!st && ok)
      st = jx_cuda_check(cu->EventSynchronize(ev[TUNE_REPS]), "cuEventSynchronize", b->device);
    float t[TUNE_REPS];
    for (int rep = 0; rep < TUNE_REPS && !st && ok; rep++)
      st = jx_cuda_check(cu->EventElapsedTime(&t[rep], ev[rep], ev[rep + 1]), "cuEventElapsedTime",
                         b->device);
    if (ok && !st) qsort(t, TUNE_REPS, sizeof *t, by_value);
    ms[i] = ok && !st ? t[TUNE_REPS / 2] : INFINITY;
  }
  for (int e = 0; e <= TUNE_REPS; e++)
    if (ev[e]) cu->EventDestroy(ev[e]);
  return st;
}

/* The cached algorithm of desc at this alignment and the workspace it needs;
 * else the heuristic's candidates (up to JX_CUDA_GEMM_CANDIDATES that run
 * within the handle's workspace): with autotuning and operands to run on,
 * the fastest of them timed, else the first; then cached. */
static jx_status choose(jx_cuda_blas *b, const jx_cuda_gemm_desc *desc,
                        const jx_cuda_gemm_align *align, const problem *p, const operands *o,
                        cublasLtMatmulAlgo_t *algo, size_t *workspace_bytes) {
  uint64_t key = jx_cuda_gemm_key(desc, align, b->device);
  if (!key) key = 1;
  pthread_mutex_lock(&b->lock);
  cached_algo *slot = cache_slot(b, key);
  if (slot->key == key) {
    *algo = slot->algo;
    *workspace_bytes = slot->workspace_bytes;
    b->cache_hits++;
    pthread_mutex_unlock(&b->lock);
    return JX_OK;
  }
  pthread_mutex_unlock(&b->lock);
  cublasLtMatmulPreference_t pref = NULL;
  uint64_t ws = b->workspace_bytes;
  /* cuBLASLt's A is the row-major B and its B the row-major A (swapped) */
  const uint32_t x_align = align->b, y_align = align->a, d_align = align->c;
  int dev = b->device;
  jx_status st = check(api.MatmulPreferenceCreate(&pref), "cublasLtMatmulPreferenceCreate", dev);
  if (!st)
    st = set_preference(pref, JX_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws,
                        "cublasLtMatmulPreferenceSetAttribute(MAX_WORKSPACE_BYTES)", dev);
  if (!st)
    st = set_preference(pref, JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &x_align,
                        sizeof x_align, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_A)",
                        dev);
  if (!st)
    st = set_preference(pref, JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &y_align,
                        sizeof y_align, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_B)",
                        dev);
  if (!st)
    st = set_preference(pref, JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &d_align,
                        sizeof d_align, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_C)",
                        dev);
  if (!st)
    st = set_preference(pref, JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &d_align,
                        sizeof d_align, "cublasLtMatmulPreferenceSetAttribute(MIN_ALIGNMENT_D)",
                        dev);
  cublasLtMatmulHeuristicResult_t r[JX_CUDA_GEMM_CANDIDATES];
  int returned = 0, n = 0;
  if (!st)
    st = check(api.MatmulAlgoGetHeuristic(b->handle, p->op, p->x, p->y, p->d, p->d, pref,
                                          JX_CUDA_GEMM_CANDIDATES, r, &returned),
               "cublasLtMatmulAlgoGetHeuristic", dev);
  if (pref) api.MatmulPreferenceDestroy(pref);
  if (st) return st;
  size_t asked = 0; /* the smallest workspace a refused candidate asked for */
  for (int i = 0; i < returned && i < JX_CUDA_GEMM_CANDIDATES; i++) {
    if (r[i].state != 0) continue;
    if (r[i].workspaceSize > b->workspace_bytes) {
      if (!asked || r[i].workspaceSize < asked) asked = r[i].workspaceSize;
      continue;
    }
    r[n++] = r[i];
  }
  if (returned < 1)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "jx_cuda_gemm: cuBLASLt has no algorithm for %s [%lld x %lld] @ [%lld x "
                        "%lld] (batch %lld) on device %d",
                        jx_dtype_name(desc->dtype), (long long)desc->m, (long long)desc->k,
                        (long long)desc->k, (long long)desc->n, (long long)desc->batch, dev);
  if (n < 1)
    return jx_error_set(
        JX_ERR_INTERNAL,
        "jx_cuda_gemm: cuBLASLt's algorithms ask for %zu bytes of workspace or more "
        "on device %d, over the %zu the handle has (MAX_WORKSPACE_BYTES)",
        asked, dev, b->workspace_bytes);
  int pick = 0;
  float ms[JX_CUDA_GEMM_CANDIDATES];
  if (b->autotune && o && n > 1 && jx_cuda_driver()) {
    st = time_candidates(b, p, o, r, n, ms);
    if (st) return st;
    pick = jx_cuda_gemm_fastest(ms, n);
    if (pick < 0)
      return jx_error_set(JX_ERR_INTERNAL,
                          "jx_cuda_gemm: none of cuBLASLt's %d algorithms for %s [%lld x %lld] @ "
                          "[%lld x %lld] ran on device %d",
                          n, jx_dtype_name(desc->dtype), (long long)desc->m, (long long)desc->k,
                          (long long)desc->k, (long long)desc->n, dev);
    if (jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr,
              "jx: cuBLASLt %s %lldx%lldx%lld x%lld%s%s: candidate %d of %d, %.4f ms (the "
              "heuristic's first %.4f ms)\n",
              jx_dtype_name(desc->dtype), (long long)desc->m, (long long)desc->n,
              (long long)desc->k, (long long)desc->batch, desc->has_bias ? " +bias" : "",
              desc->act == JX_CUDA_ACT_GELU   ? " +gelu"
              : desc->act == JX_CUDA_ACT_RELU ? " +relu"
                                              : "",
              pick + 1, n, (double)ms[pick], (double)ms[0]);
  }
  *algo = r[pick].algo;
  *workspace_bytes = r[pick].workspaceSize;
  pthread_mutex_lock(&b->lock);
  b->heuristic_calls++;
  b->autotuned += b->autotune && o && n > 1;
  slot = cache_slot(b, key);
  *slot = (cached_algo){key, r[pick].algo, r[pick].workspaceSize};
  pthread_mutex_unlock(&b->lock);
  return JX_OK;
}

jx_status jx_cuda_gemm_algorithm(jx_cuda_blas *b, const jx_cuda_gemm_desc *desc,
                                 cublasLtMatmulAlgo_t *algo, size_t *workspace_bytes) {
  jx_cuda_colmajor plan;
  problem p;
  jx_status st = jx_cuda_gemm_plan(desc, &plan);
  if (!st) st = problem_create(desc, &plan, 0, b->device, &p);
  if (st) return st;
  st = choose(b, desc, &jx_cuda_gemm_aligned, &p, NULL, algo, workspace_bytes);
  problem_destroy(&p);
  return st;
}

jx_status jx_cuda_gemm(jx_cuda_blas *b, const jx_cuda_gemm_desc *desc, CUdeviceptr a,
                       CUdeviceptr bm, CUdeviceptr c, CUdeviceptr bias, CUstream stream) {
  jx_cuda_colmajor plan;
  jx_cuda_gemm_align align;
  problem p;
  jx_status st = jx_cuda_gemm_plan(desc, &plan);
  if (!st && desc->has_bias && !bias)
    st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_cuda_gemm: has_bias is set but bias is NULL");
  if (!st) st = jx_cuda_gemm_alignment(desc, a, bm, c, bias, &align);
  if (!st) st = problem_create(desc, &plan, bias, b->device, &p);
  if (st) return st;
  cublasLtMatmulAlgo_t algo;
  size_t ws_bytes = 0;
  /* swapped operands: cuBLASLt's A is the row-major B, its B the row-major A */
  const operands first = {(const void *)(uintptr_t)bm, (const void *)(uintptr_t)a,
                          (void *)(uintptr_t)c, stream};
  st = choose(b, desc, &align, &p, &first, &algo, &ws_bytes);
  const float one = 1.0f, zero = 0.0f;
  const int64_t elem = (int64_t)jx_dtype_size(desc->dtype);
  void *ws = ws_bytes ? (void *)(uintptr_t)b->workspace : NULL;
  for (int64_t i = 0; !st && i < (desc->outer > 1 ? desc->outer : 1); i++) {
    const void *x = (const void *)(uintptr_t)(bm + (CUdeviceptr)(i * desc->outer_b * elem));
    const void *y = (const void *)(uintptr_t)(a + (CUdeviceptr)(i * desc->outer_a * elem));
    void *d = (void *)(uintptr_t)(c + (CUdeviceptr)(i * desc->outer_c * elem));
    st = check(api.Matmul(b->handle, p.op, &one, x, p.x, y, p.y, &zero, d, p.d, d, p.d, &algo, ws,
                          ws_bytes, stream),
               "cublasLtMatmul", b->device);
  }
  problem_destroy(&p);
  return st;
}
