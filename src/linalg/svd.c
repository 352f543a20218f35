/* svd: the singular value decomposition of each matrix of a stack, through
 * LAPACK's gesdd (divide and conquer, as JAX's CPU lowering), as
 * lax.linalg.svd: a[..., m, n] = u diag(s) vt with s [..., k] descending,
 * k = min(m, n), u [..., m, k] and vt [..., k, n] (full_matrices=i0: u
 * [..., m, m], vt [..., n, n]). Without compute_uv (i1 = 0) gesdd computes
 * the values alone and u, vt are empty ([..., m, 0], [..., 0, n]). A matrix
 * holding a NaN or an infinity, or one gesdd fails to converge on, gives
 * NaNs in every output, as JAX's lowering does when LAPACK reports failure.
 *
 * c64 and c128 matrices go through cgesdd/zgesdd: s is real (f32, f64), u
 * and vt complex.
 *
 * JVP (JAX's _svd_jvp_rule): from the reduced factors, with dS = u^H dA v,
 * ds = re(diag(dS)) and F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (0 on
 * it, built as 1 / (d + I) - I with no special case for equal values, as
 * JAX), du = u (F o (dS S + S dS^H) + D) and dv = v (F o (S dS + dS^H S)),
 * D the imaginary diagonal (dS - dS^H) / 2s that only complex matrices have,
 * plus the parts outside u's (m > n) or v's (n > m) span,
 * (I - u u^H) dA v / s. As in
 * JAX, full_matrices with u or vt not square has no JVP. Batching moves the
 * batch axis to the front. */
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_svd(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_inexact_matrix(ctx->prim->name, "operand", in);
  if (st) return st;
  const jx_params *p = ctx->params;
  int r = in->shape.rank;
  int64_t m = in->shape.dims[r - 2], n = in->shape.dims[r - 1], k = m < n ? m : n;
  jx_shape s = in->shape, u = in->shape, vt = in->shape;
  s.rank--;
  s.dims[r - 2] = k;
  u.dims[r - 1] = !p->i[1] ? 0 : p->i[0] ? m : k;
  vt.dims[r - 2] = !p->i[1] ? 0 : p->i[0] ? n : k;
  out[0] = (jx_aval){jx_complex_part(in->dtype), 0, s, 0};
  out[1] = (jx_aval){in->dtype, 0, u, 0};
  out[2] = (jx_aval){in->dtype, 0, vt, 0};
  return JX_OK;
}

/* gesdd as JAX's CPU kernel calls it, on the transpose: the row-major m x n
 * matrix a is, byte for byte, the column-major n x m matrix a^T = conj(v) s
 * u^T, whose left factor (n x k, column-major) has vt's bytes (row-major
 * k x n) and whose right factor (k x m, column-major) has u's: LAPACK writes
 * the outputs in place, and the one copy is a's into the scratch gesdd
 * overwrites (a plain copy, no transposes). The workspace is asked for and
 * allocated once per range of matrices, not per matrix.
 *
 * A real matrix whose shape takes gesdd down its path 5 (neither side 11/6
 * of the other or more, so no QR first), with the reduced vectors or square,
 * runs that path's steps here instead, so that both cores work on a lone
 * matrix without OpenBLAS's threads (blas_threads.h says why they stay
 * off): gebrd and bdsdc, then the two back-transformations (ormbr, 30 % of
 * the time at 512 x 512 on one thread), split into column blocks of
 * the left factor and row blocks of the right one, the blocks spread over
 * jx's pool (jx_linalg_vector_block). The blocks follow from the shape
 * alone, not from the threads or the load, and the bits are gesdd's
 * (test_linalg_svd checks a square, a tall and a wide matrix). */
typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t m, n, k, ucols, vrows;
  char jobz;
  int path5;      /* gesdd's path 5 run here, its back-transformations split */
  int64_t blocks; /* into this many blocks */
  atomic_int out_of_memory;
} svd_job;

/* gesdd with one signature for the four dtypes: a complex one also takes
 * rwork, real scratch of rwork_size entries. */
#define DEFINE_GESDD(T, R, L, ...)                                                                 \
  static lapack_int gesdd_##L(char jobz, int64_t m, int64_t n, T *a, int64_t lda, R *s, T *u,      \
                              int64_t ldu, T *vt, int64_t ldvt, T *work, lapack_int lwork,         \
                              R *rwork, lapack_int *iwork) {                                       \
    (void)rwork;                                                                                   \
    return LAPACKE_##L##gesdd_work(LAPACK_COL_MAJOR, jobz, m, n, a, lda, s, u, ldu, vt, ldvt,      \
                                   work, lwork, __VA_ARGS__ iwork);                                \
  }
DEFINE_GESDD(double, double, d, )
DEFINE_GESDD(float, float, s, )
DEFINE_GESDD(double complex, double, z, rwork, )
DEFINE_GESDD(float complex, float, c, rwork, )

/* The real scratch complex gesdd asks for (LAPACK's documented lrwork). */
static size_t rwork_size(const svd_job *j) {
  size_t mn = (size_t)j->k, mx = (size_t)(j->m > j->n ? j->m : j->n);
  if (j->jobz == 'N') return 7 * mn + 1;
  size_t a = 5 * mn * mn + 5 * mn, b = 2 * mx * mn + 2 * mn * mn + mn;
  return (a > b ? a : b) + 1;
}

/* One matrix in the column-major view: a (rows = n, cols = m), its factors
 * left (rows x k or rows x rows, vt's bytes) and right (k x cols or cols x
 * cols, u's bytes). work holds lwork entries: gesdd's, or for path 5 e,
 * tauq, taup (k each), gebrd's and bdsdc's scratch (path5_lwork), then one
 * ormbr scratch of block_lwork per block. */
typedef struct {
  const svd_job *job;
  void *a, *s, *left, *right, *work, *rwork;
  lapack_int lwork, path5_lwork, block_lwork, *iwork;
} svd_matrix;

/* gesdd's path 5 for the real dtypes. */
#define DEFINE_PATH5(T, L)                                                                         \
  /* gebrd and bdsdc as gesdd's path 5 calls them, with gesdd's scaling */                         \
  static lapack_int bidiagonal_svd_##L(const svd_matrix *x, T anrm) {                              \
    lapack_int rows = x->job->n, cols = x->job->m, k = x->job->k;                                  \
    T *a = x->a, *s = x->s, *e = x->work, *tauq = e + k, *taup = tauq + k, *w = taup + k;          \
    T small = sqrt(LAPACKE_##L##lamch_work('S')) / LAPACKE_##L##lamch_work('P'), big = 1 / small;  \
    T scaled = anrm > 0 && anrm < small ? small : anrm > big ? big : 0;                            \
    if (scaled)                                                                                    \
      LAPACKE_##L##lascl_work(LAPACK_COL_MAJOR, 'G', 0, 0, anrm, scaled, rows, cols, a, rows);     \
    lapack_int info = LAPACKE_##L##gebrd_work(LAPACK_COL_MAJOR, rows, cols, a, rows, s, e, tauq,   \
                                              taup, w, x->path5_lwork);                            \
    if (rows >= cols)                                                                              \
      LAPACKE_##L##laset_work(LAPACK_COL_MAJOR, 'F', rows, k, 0, 0, x->left, rows);                \
    else                                                                                           \
      LAPACKE_##L##laset_work(LAPACK_COL_MAJOR, 'F', k, cols, 0, 0, x->right, k);                  \
    if (!info)                                                                                     \
      info = LAPACKE_##L##bdsdc_work(LAPACK_COL_MAJOR, rows >= cols ? 'U' : 'L', 'I', k, s, e,     \
                                     x->left, rows, x->right, k, NULL, NULL, w, x->iwork);         \
    if (scaled && !info)                                                                           \
      LAPACKE_##L##lascl_work(LAPACK_COL_MAJOR, 'G', 0, 0, scaled, anrm, k, 1, s, k);              \
    return info;                                                                                   \
  }                                                                                                \
  /* ormbr on blocks [b0, b1): columns of left, rows of right */                                   \
  static void back_transform_##L(void *ctx, int64_t b0, int64_t b1) {                              \
    const svd_matrix *x = ctx;                                                                     \
    lapack_int rows = x->job->n, cols = x->job->m, k = x->job->k;                                  \
    T *a = x->a, *tauq = (T *)x->work + k, *taup = tauq + k;                                       \
    for (int64_t b = b0; b < b1; b++) {                                                            \
      int64_t c0, c1;                                                                              \
      jx_linalg_vector_block(k, x->job->blocks, b, &c0, &c1);                                      \
      T *w = (T *)x->work + 3 * k + x->path5_lwork + x->block_lwork * b;                           \
      LAPACKE_##L##ormbr_work(LAPACK_COL_MAJOR, 'Q', 'L', 'N', rows, c1 - c0, cols, a, rows, tauq, \
                              (T *)x->left + (size_t)c0 * rows, rows, w, x->block_lwork);          \
      LAPACKE_##L##ormbr_work(LAPACK_COL_MAJOR, 'P', 'R', 'T', c1 - c0, cols, k, a, rows, taup,    \
                              (T *)x->right + c0, k, w, x->block_lwork);                           \
    }                                                                                              \
  }                                                                                                \
  /* path 5's scratch: sets path5_lwork and block_lwork, returns lwork */                          \
  static lapack_int path5_work_##L(svd_matrix *x) {                                                \
    const svd_job *j = x->job;                                                                     \
    lapack_int rows = j->n, cols = j->m, k = j->k,                                                 \
               widest = jx_linalg_widest_vector_block(k, j->blocks);                               \
    T q[3] = {0}, any = 0;                                                                         \
    LAPACKE_##L##gebrd_work(LAPACK_COL_MAJOR, rows, cols, &any, rows, &any, &any, &any, &any,      \
                            &q[0], -1);                                                            \
    LAPACKE_##L##ormbr_work(LAPACK_COL_MAJOR, 'Q', 'L', 'N', rows, widest, cols, &any, rows, &any, \
                            &any, rows, &q[1], -1);                                                \
    LAPACKE_##L##ormbr_work(LAPACK_COL_MAJOR, 'P', 'R', 'T', widest, cols, k, &any, rows, &any,    \
                            &any, k, &q[2], -1);                                                   \
    T bdsdc = 3 * (T)k * (T)k + 4 * (T)k; /* LAPACK's documented size for compq 'I' */             \
    x->path5_lwork = (lapack_int)(q[0] > bdsdc ? q[0] : bdsdc) + 1;                                \
    x->block_lwork = (lapack_int)(q[1] > q[2] ? q[1] : q[2]) + JX_LINALG_ORM_TSIZE;                \
    return 3 * k + x->path5_lwork + x->block_lwork * (lapack_int)j->blocks;                        \
  }
DEFINE_PATH5(double, d)
DEFINE_PATH5(float, s)

/* Copies the count entries of a into at: 1 when all are finite, their
 * largest magnitude (LAPACK's lange 'M', for path 5's scaling; 0 for a
 * complex matrix, which gesdd scales itself) in *anrm. NaNs fill s, u and
 * vt of a matrix LAPACK is not given or fails on. */
#define DEFINE_COPY_IN(T, R, L, FINITE, ABS)                                                       \
  static int copy_in_##L(const T *a, T *at, int64_t count, double *anrm) {                         \
    memcpy(at, a, sizeof(T) * (size_t)count);                                                      \
    int finite = 1;                                                                                \
    R largest = 0;                                                                                 \
    for (int64_t i = 0; i < count; i++) {                                                          \
      if (!(FINITE(at[i]))) finite = 0;                                                            \
      R mag = ABS(at[i]);                                                                          \
      if (mag > largest) largest = mag;                                                            \
    }                                                                                              \
    *anrm = largest;                                                                               \
    return finite;                                                                                 \
  }                                                                                                \
  static void fill_nan_##L(const svd_job *j, R *s, T *u, T *vt) {                                  \
    for (int64_t i = 0; i < j->m * j->ucols; i++) u[i] = NAN;                                      \
    for (int64_t i = 0; i < j->vrows * j->n; i++) vt[i] = NAN;                                     \
    for (int64_t i = 0; i < j->k; i++) s[i] = NAN;                                                 \
  }
#define FINITE_REAL(x) isfinite(x)
#define FINITE_Z(x)    (isfinite(creal(x)) && isfinite(cimag(x)))
#define FINITE_C(x)    (isfinite(crealf(x)) && isfinite(cimagf(x)))
DEFINE_COPY_IN(double, double, d, FINITE_REAL, fabs)
DEFINE_COPY_IN(float, float, s, FINITE_REAL, fabsf)
#define NOT_NEEDED(x) 0
DEFINE_COPY_IN(double complex, double, z, FINITE_Z, NOT_NEEDED)
DEFINE_COPY_IN(float complex, float, c, FINITE_C, NOT_NEEDED)

/* Decomposes the row-major m x n matrix a into s and the outputs u and vt
 * (the factors in the transpose's view, above). */
static void decompose(const svd_matrix *x, const void *a, void *s, void *u, void *vt) {
  const svd_job *j = x->job;
  int64_t count = j->m * j->n, ldright = j->ucols > 0 ? j->ucols : 1;
  svd_matrix y = *x;
  y.s = s;
  y.left = vt;
  y.right = u;
  double anrm = 0;
  lapack_int info = 1;
  switch (j->in->dtype) {
  case JX_F64:
    if (!copy_in_d(a, x->a, count, &anrm)) break;
    if (!j->path5) {
      info = gesdd_d(j->jobz, j->n, j->m, x->a, j->n, s, vt, j->n, u, ldright, x->work, x->lwork,
                     NULL, x->iwork);
    } else if (!(info = bidiagonal_svd_d(&y, anrm)))
      jx_parallel_for(j->blocks, 1, back_transform_d, &y);
    break;
  case JX_F32:
    if (!copy_in_s(a, x->a, count, &anrm)) break;
    if (!j->path5) {
      info = gesdd_s(j->jobz, j->n, j->m, x->a, j->n, s, vt, j->n, u, ldright, x->work, x->lwork,
                     NULL, x->iwork);
    } else if (!(info = bidiagonal_svd_s(&y, (float)anrm)))
      jx_parallel_for(j->blocks, 1, back_transform_s, &y);
    break;
  case JX_C128:
    if (copy_in_z(a, x->a, count, &anrm))
      info = gesdd_z(j->jobz, j->n, j->m, x->a, j->n, s, vt, j->n, u, ldright, x->work, x->lwork,
                     x->rwork, x->iwork);
    break;
  default:
    if (copy_in_c(a, x->a, count, &anrm))
      info = gesdd_c(j->jobz, j->n, j->m, x->a, j->n, s, vt, j->n, u, ldright, x->work, x->lwork,
                     x->rwork, x->iwork);
    break;
  }
  if (!info) return;
  switch (j->in->dtype) {
  case JX_F64: fill_nan_d(j, s, u, vt); break;
  case JX_F32: fill_nan_s(j, s, u, vt); break;
  case JX_C128: fill_nan_z(j, s, u, vt); break;
  default: fill_nan_c(j, s, u, vt); break;
  }
}

/* gesdd's workspace for x's job, asked for by a query: lwork entries. */
static lapack_int gesdd_work(const svd_matrix *x) {
  const svd_job *j = x->job;
  int64_t ldright = j->ucols > 0 ? j->ucols : 1;
  union {
    double d;
    float s;
    double complex z;
    float complex c;
  } q = {0}, any = {0};
  switch (j->in->dtype) {
  case JX_F64:
    gesdd_d(j->jobz, j->n, j->m, &any.d, j->n, &any.d, &any.d, j->n, &any.d, ldright, &q.d, -1,
            NULL, x->iwork);
    return (lapack_int)q.d + 1;
  case JX_F32:
    gesdd_s(j->jobz, j->n, j->m, &any.s, j->n, &any.s, &any.s, j->n, &any.s, ldright, &q.s, -1,
            NULL, x->iwork);
    return (lapack_int)q.s + 1;
  case JX_C128:
    gesdd_z(j->jobz, j->n, j->m, &any.z, j->n, &any.d, &any.z, j->n, &any.z, ldright, &q.z, -1,
            x->rwork, x->iwork);
    return (lapack_int)creal(q.z) + 1;
  default:
    gesdd_c(j->jobz, j->n, j->m, &any.c, j->n, &any.s, &any.c, j->n, &any.c, ldright, &q.c, -1,
            x->rwork, x->iwork);
    return (lapack_int)crealf(q.c) + 1;
  }
}

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  svd_job *j = ctx;
  jx_dtype dt = j->in->dtype;
  size_t es = jx_dtype_size(dt), rs = jx_dtype_size(j->out[0].dtype);
  int64_t m = j->m, n = j->n;
  size_t lrwork = jx_is_complex(dt) ? rwork_size(j) : 0;
  svd_matrix x = {.job = j};
  x.iwork = malloc(sizeof(lapack_int) * (size_t)(8 * j->k) + rs * lrwork);
  if (x.iwork) {
    x.rwork = x.iwork + 8 * j->k;
    x.lwork = !j->path5 ? gesdd_work(&x) : dt == JX_F64 ? path5_work_d(&x) : path5_work_s(&x);
    x.a = malloc(es * ((size_t)(m * n) + (size_t)x.lwork));
  }
  if (!x.a) {
    free(x.iwork);
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  x.work = (char *)x.a + es * (size_t)(m * n);
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * (size_t)(b * m * n);
    char *s = (char *)j->out[0].data + rs * (size_t)(b * j->k);
    char *u = (char *)j->out[1].data + es * (size_t)(b * m * j->ucols);
    char *vt = (char *)j->out[2].data + es * (size_t)(b * j->vrows * n);
    decompose(&x, a, s, u, vt);
  }
  free(x.a);
  free(x.iwork);
}

static void set_one(jx_dtype dt, void *data, int64_t i) {
  switch (dt) {
  case JX_F64: ((double *)data)[i] = 1; break;
  case JX_F32: ((float *)data)[i] = 1; break;
  case JX_C128: ((double complex *)data)[i] = 1; break;
  default: ((float complex *)data)[i] = 1; break;
  }
}

static void eval_svd(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int r = in->shape.rank;
  svd_job j = {.in = in, .out = out};
  j.m = in->shape.dims[r - 2];
  j.n = in->shape.dims[r - 1];
  j.k = j.m < j.n ? j.m : j.n;
  j.ucols = out[1].shape.dims[r - 1];
  j.vrows = out[2].shape.dims[r - 2];
  j.jobz = !ctx->params->i[1] ? 'N' : ctx->params->i[0] ? 'A' : 'S';
  int64_t longer = j.m > j.n ? j.m : j.n, mnthr = (int64_t)((double)j.k * 11.0 / 6.0);
  j.path5 =
      !jx_is_complex(in->dtype) && j.jobz != 'N' && (j.jobz == 'S' || j.m == j.n) && longer < mnthr;
  j.blocks = jx_linalg_vector_blocks(j.k);
  int64_t count = jx_linalg_batch_count(in->shape);
  if (j.k == 0) { /* nothing to decompose: u and vt are the identity's columns */
    size_t es = jx_dtype_size(in->dtype);
    memset(out[1].data, 0, es * (size_t)(count * j.m * j.ucols));
    memset(out[2].data, 0, es * (size_t)(count * j.vrows * j.n));
    for (int64_t b = 0; b < count; b++) {
      for (int64_t i = 0; i < j.m && i < j.ucols; i++)
        set_one(in->dtype, out[1].data, (b * j.m + i) * j.ucols + i);
      for (int64_t i = 0; i < j.n && i < j.vrows; i++)
        set_one(in->dtype, out[2].data, (b * j.vrows + i) * j.n + i);
    }
    return;
  }
  jx_linalg_for_each_matrix(count, decompose_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "svd: out of memory for a %lldx%lld matrix", (long long)j.m,
                 (long long)j.n);
}

/* u and vt's shape for compute_uv off: no columns, no rows. */
static jx_array *empty_factor(jx_array *a, int rows) {
  jx_shape sh = a->shape;
  sh.dims[sh.rank - (rows ? 2 : 1)] = 0;
  return jx_zeros(a->dtype, sh);
}

static jx_status jvp_svd(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                         jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  jx_array *a = x[0];
  int rank = a->shape.rank;
  int64_t m = a->shape.dims[rank - 2], n = a->shape.dims[rank - 1];
  ty[0] = ty[1] = ty[2] = NULL;
  if (p->i[1] && p->i[0] && m != n)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "svd: the derivative with full_matrices of a non-square matrix %lldx%lld "
                        "is not implemented (nor in JAX); use full_matrices=0",
                        (long long)m, (long long)n);
  /* the reduced factors, which are the full ones of a square matrix */
  jx_params reduced = JX_PARAMS_INIT;
  reduced.i[1] = 1;
  jx_array *uv[3];
  jx_status st = jx_bind(&jx_prim_svd, 1, x, &reduced, uv);
  if (st) return st;
  y[0] = uv[0];
  y[1] = p->i[1] ? uv[1] : empty_factor(a, 0);
  y[2] = p->i[1] ? uv[2] : empty_factor(a, 1);
  if (!t[0]) return jx_last_status();
  jx_array *da = t[0], *s = uv[0], *u = uv[1], *vt = uv[2];
  int cplx = jx_is_complex(a->dtype);
  jx_array *ut = jx_linalg_adjoint(u), *v = jx_linalg_adjoint(vt);
  jx_array *s_row = jx_expand_dims(s, -2), *s_col = jx_linalg_swap_last(s_row); /* [..., 1, k] */
  jx_array *sa_row = jx_astype(s_row, a->dtype), *sa_col = jx_astype(s_col, a->dtype);
  jx_array *ds_mat = jx_matmul(jx_matmul(ut, da), v), *ds = jx_linalg_diagonal(ds_mat);
  ty[0] = cplx ? jx_real(ds) : ds;
  if (!p->i[1]) return jx_last_status();
  /* F_ij = 1 / (s_j^2 - s_i^2), the identity keeping the diagonal's reciprocal finite */
  jx_array *diffs = jx_mul(jx_add(s_row, s_col), jx_sub(s_row, s_col)),
           *eye = jx_linalg_eye_like(diffs);
  jx_array *f = jx_astype(jx_sub(jx_reciprocal(jx_add(diffs, eye)), eye), a->dtype);
  jx_array *dss = jx_mul(sa_row, ds_mat), *sds = jx_mul(sa_col, ds_mat);
  jx_array *du_inner = jx_mul(f, jx_add(dss, jx_linalg_adjoint(dss)));
  if (cplx) { /* JAX's dUdV_diag, (dS - dS^H) / 2 / s on the diagonal: zero for real matrices */
    jx_array *zero = jx_astype(jx_eq(s_row, jx_zeros(s->dtype, JX_SHAPE())), s->dtype);
    jx_array *s_inv = jx_sub(jx_reciprocal(jx_add(s_row, zero)), zero);
    jx_array *half_skew =
        jx_mul(jx_sub(ds_mat, jx_linalg_adjoint(ds_mat)), jx_complex_scalar(a->dtype, 0.5, 0));
    du_inner = jx_add(du_inner, jx_mul(half_skew, jx_astype(jx_mul(eye, s_inv), a->dtype)));
  }
  jx_array *du = jx_matmul(u, du_inner);
  jx_array *dv = jx_matmul(v, jx_mul(f, jx_add(sds, jx_linalg_adjoint(sds))));
  if (m > n) {
    jx_array *dav = jx_matmul(da, v);
    du = jx_add(du, jx_div(jx_sub(dav, jx_matmul(u, jx_matmul(ut, dav))), sa_row));
  }
  if (n > m) {
    jx_array *dahu = jx_matmul(jx_linalg_adjoint(da), u);
    dv = jx_add(dv, jx_div(jx_sub(dahu, jx_matmul(v, jx_matmul(vt, dahu))), sa_row));
  }
  ty[1] = du;
  ty[2] = jx_linalg_adjoint(dv);
  return jx_last_status();
}

const jx_prim jx_prim_svd = {.name = "svd",
                             .id = JX_PRIM_svd,
                             .nin = 1,
                             .nout = 3,
                             .params = "full_matrices=i0 compute_uv=i1",
                             .infer = infer_svd,
                             .eval = eval_svd,
                             .jvp = jvp_svd,
                             .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(svd, &jx_prim_svd)
