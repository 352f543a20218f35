/* cuBLASLt through a function table (libcublasLt.so.13/.12/.11, or
 * $JX_CUBLASLT_PATH), and jx_cuda_gemm: one (batched) row-major GEMM
 *
 *   C[b] = act(op(A[b]) @ op(B[b]) + bias)      C: [m, n], bias: [n]
 *
 * in f32 (exact f32 arithmetic, no TF32: the CPU's numbers) or bf16/f16
 * (inputs and output in that type, f32 accumulation, tensor cores), with an
 * optional bias and ReLU/GELU fused into the kernel's epilogue (cuBLASLt's
 * GELU is the tanh approximation). cuBLASLt is column-major; a row-major
 * matrix is the column-major view of its transpose, so C = A B is computed as
 * C^T = B^T A^T: the operands swap and nothing is copied. As llm.c calls it:
 * each operand's alignment (up to 16 bytes) is told to the heuristic as a
 * preference, the bias's data type is set, and a matmul gets the workspace
 * the heuristic's algorithm asked for (at most the handle's). The algorithm
 * (the heuristic's first, or the fastest of its candidates timed on the
 * first call: jx_cuda_blas_set_autotune) and its workspace size are cached
 * per problem and alignment. */
#ifndef JX_SRC_CUDA_CUDA_BLASLT_H
#define JX_SRC_CUDA_CUDA_BLASLT_H

#include <jx/array.h>
#include <jx/base.h>
#include <stddef.h>
#include <stdint.h>

#include "cuda_driver.h"

typedef int cublasStatus_t;
typedef struct cublasLtContext *cublasLtHandle_t;
typedef struct jx_cublaslt_desc_ *cublasLtMatmulDesc_t;
typedef struct jx_cublaslt_layout_ *cublasLtMatrixLayout_t;
typedef struct jx_cublaslt_pref_ *cublasLtMatmulPreference_t;
typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

/* the enum values of cublasLt.h, cublas_api.h and library_types.h jx uses */
enum {
  JX_CUBLAS_OP_N = 0,
  JX_CUBLAS_OP_T = 1,
  JX_CUBLAS_COMPUTE_32F = 68,
  JX_CUDA_R_32F = 0,
  JX_CUDA_R_16F = 2,
  JX_CUDA_R_16BF = 14,
  JX_CUBLASLT_MATMUL_DESC_TRANSA = 3,
  JX_CUBLASLT_MATMUL_DESC_TRANSB = 4,
  JX_CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  JX_CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  JX_CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
  JX_CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
  JX_CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6,
  JX_CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  JX_CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
  JX_CUBLASLT_EPILOGUE_DEFAULT = 1,
  JX_CUBLASLT_EPILOGUE_RELU = 2,
  JX_CUBLASLT_EPILOGUE_BIAS = 4,
  JX_CUBLASLT_EPILOGUE_GELU = 32
};

typedef struct {
  cublasStatus_t (*Create)(cublasLtHandle_t *h);
  cublasStatus_t (*Destroy)(cublasLtHandle_t h);
  size_t (*GetVersion)(void);
  const char *(*GetStatusName)(cublasStatus_t s);
  const char *(*GetStatusString)(cublasStatus_t s);
  cublasStatus_t (*MatmulDescCreate)(cublasLtMatmulDesc_t *d, int compute_type, int scale_type);
  cublasStatus_t (*MatmulDescDestroy)(cublasLtMatmulDesc_t d);
  cublasStatus_t (*MatmulDescSetAttribute)(cublasLtMatmulDesc_t d, int attr, const void *buf,
                                           size_t size);
  cublasStatus_t (*MatrixLayoutCreate)(cublasLtMatrixLayout_t *l, int type, uint64_t rows,
                                       uint64_t cols, int64_t ld);
  cublasStatus_t (*MatrixLayoutDestroy)(cublasLtMatrixLayout_t l);
  cublasStatus_t (*MatrixLayoutSetAttribute)(cublasLtMatrixLayout_t l, int attr, const void *buf,
                                             size_t size);
  cublasStatus_t (*MatmulPreferenceCreate)(cublasLtMatmulPreference_t *p);
  cublasStatus_t (*MatmulPreferenceDestroy)(cublasLtMatmulPreference_t p);
  cublasStatus_t (*MatmulPreferenceSetAttribute)(cublasLtMatmulPreference_t p, int attr,
                                                 const void *buf, size_t size);
  cublasStatus_t (*MatmulAlgoGetHeuristic)(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                           cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                           cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                           cublasLtMatmulPreference_t pref, int requested,
                                           cublasLtMatmulHeuristicResult_t *results, int *returned);
  cublasStatus_t (*Matmul)(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                           const void *a, cublasLtMatrixLayout_t adesc, const void *b,
                           cublasLtMatrixLayout_t bdesc, const void *beta, const void *c,
                           cublasLtMatrixLayout_t cdesc, void *d, cublasLtMatrixLayout_t ddesc,
                           const cublasLtMatmulAlgo_t *algo, void *workspace,
                           size_t workspace_bytes, CUstream stream);
} jx_cublaslt_api;

/* The table, loading the library on the first call (thread-safe), or NULL;
 * records no error. */
const jx_cublaslt_api *jx_cublaslt(void);
const char *jx_cublaslt_load_error(void); /* "cuBLASLt not found: ...", or "" */

typedef enum { JX_CUDA_ACT_NONE = 0, JX_CUDA_ACT_RELU = 1, JX_CUDA_ACT_GELU = 2 } jx_cuda_act;

/* One row-major GEMM: A is [m, k] ([k, m] when trans_a), B is [k, n]
 * ([n, k] when trans_b), C is [m, n]; C dense, A and B dense unless ld_a,
 * ld_b say the elements between their stored rows (0: the row's length).
 * batch > 1: batch problems at strides of stride_a, stride_b, stride_c
 * elements (0 for A or B: the same matrix for every problem). outer > 1:
 * that many such batches at strides of outer_a, outer_b, outer_c (a second
 * batch dim that is no multiple of the first's strides: attention's heads
 * in a [batch, T, heads, head_dim] array), one cuBLASLt call each. */
typedef struct {
  jx_dtype dtype; /* JX_F32, JX_BF16 or JX_F16: A, B, C and bias */
  int64_t m, n, k, batch;
  int trans_a, trans_b;
  int64_t stride_a, stride_b, stride_c;
  int has_bias; /* a bias of n elements added to every row */
  jx_cuda_act act;
  int64_t ld_a, ld_b;
  int64_t outer, outer_a, outer_b, outer_c;
} jx_cuda_gemm_desc;

/* One column-major operand as cuBLASLt sees it. */
typedef struct {
  int op;             /* JX_CUBLAS_OP_N or _T */
  int64_t rows, cols; /* of the stored matrix, column-major */
  int64_t ld;
  int64_t stride;
} jx_cuda_colmajor_operand;

/* The column-major problem D = op(X) op(Y) that computes the row-major one:
 * x holds the row-major B, y the row-major A; D is n x m (the row-major C). */
typedef struct {
  jx_cuda_colmajor_operand x, y, d;
  int64_t rows, cols, inner; /* D's rows (n) and columns (m); the k they share */
  int epilogue;              /* a JX_CUBLASLT_EPILOGUE_* value (bias on D's rows = C's columns) */
} jx_cuda_colmajor;

/* Checks desc and fills the column-major problem: pure, for tests.
 * Errors (JX_ERR_INVALID_ARGUMENT) name jx_cuda_gemm and the bad field. */
jx_status jx_cuda_gemm_plan(const jx_cuda_gemm_desc *desc, jx_cuda_colmajor *out);

/* What cuBLASLt may assume of each row-major operand's address: bytes, a
 * power of two from the element size up to 16 (the most its kernels use). */
typedef struct {
  uint32_t a, b, c, bias; /* bias: 16 when there is none */
} jx_cuda_gemm_align;

/* Every operand 16-byte aligned (the allocator's blocks are). */
extern const jx_cuda_gemm_align jx_cuda_gemm_aligned;

/* The alignment of a, b, c and bias (and, for a batch, of every problem's
 * operands: the strides in bytes count too). An address that is not a
 * multiple of the element size is an error (JX_ERR_INVALID_ARGUMENT) naming
 * jx_cuda_gemm and the operand. */
jx_status jx_cuda_gemm_alignment(const jx_cuda_gemm_desc *desc, CUdeviceptr a, CUdeviceptr b,
                                 CUdeviceptr c, CUdeviceptr bias, jx_cuda_gemm_align *out);

/* The algorithm cache's key: every field of desc that changes the choice,
 * the operands' alignment and the device. */
uint64_t jx_cuda_gemm_key(const jx_cuda_gemm_desc *desc, const jx_cuda_gemm_align *align,
                          int device);

/* A cuBLASLt handle with its workspace and algorithm cache, for one device. */
typedef struct jx_cuda_blas jx_cuda_blas;

/* workspace: device memory of workspace_bytes (32 MiB suits Hopper), owned by
 * the caller: the most the heuristic may ask for (its
 * MAX_WORKSPACE_BYTES); each matmul is given what its algorithm asked. Errors: cuBLASLt missing
 * (JX_ERR_UNIMPLEMENTED), cublasLtCreate. */
jx_status jx_cuda_blas_create(int device, CUdeviceptr workspace, size_t workspace_bytes,
                              jx_cuda_blas **out);
void jx_cuda_blas_destroy(jx_cuda_blas *b);
/* Heuristic calls made and cache hits since creation: for tests and benches. */
void jx_cuda_blas_counts(const jx_cuda_blas *b, int64_t *heuristic_calls, int64_t *cache_hits);

/* The heuristic is asked for this many algorithms per problem. */
enum { JX_CUDA_GEMM_CANDIDATES = 8 };

/* on: a problem's first jx_cuda_gemm times the heuristic's candidates on its
 * own operands and stream (a warm-up run, then the median of 3 runs between
 * events; it waits for the stream) and caches the fastest; off (the
 * default, and what jx_cuda_gemm_algorithm always does): the heuristic's
 * first. The executor turns it on where the driver is a GPU's, so that
 * the fake driver's runs stay deterministic. JX_LOG_COMPILES=1 prints each
 * choice with its time and the first candidate's. */
void jx_cuda_blas_set_autotune(jx_cuda_blas *b, int on);
/* Problems whose algorithm was chosen by timing. */
int64_t jx_cuda_blas_autotuned(const jx_cuda_blas *b);

/* The index of the smallest of ms[0..n) that is a time (not NaN, negative
 * or infinite: a candidate that did not run), the first on ties; -1 if
 * none. Pure: the autotuner's choice, for tests. */
int jx_cuda_gemm_fastest(const float *ms, int n);

/* Queues C = act(A B + bias) on `stream`; a, b, c, bias are device pointers
 * (bias NULL unless desc->has_bias). Thread-safe per jx_cuda_blas. */
jx_status jx_cuda_gemm(jx_cuda_blas *blas, const jx_cuda_gemm_desc *desc, CUdeviceptr a,
                       CUdeviceptr b, CUdeviceptr c, CUdeviceptr bias, CUstream stream);

/* The heuristic's best algorithm for desc with every operand 16-byte
 * aligned (cached), and the workspace bytes it needs, for benches that call
 * cublasLtMatmul themselves. */
jx_status jx_cuda_gemm_algorithm(jx_cuda_blas *blas, const jx_cuda_gemm_desc *desc,
                                 cublasLtMatmulAlgo_t *algo, size_t *workspace_bytes);

#endif
