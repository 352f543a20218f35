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

/* gesdd as JAX's CPU kernel calls it: on a column-major copy of each
 * matrix, with the workspace LAPACK asks for (one query) allocated once per
 * range rather than per matrix; u and vt come back column-major and are
 * transposed into the row-major outputs. */
typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t m, n, k, ucols, vrows;
  char jobz;
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

/* Decomposes the row-major m x n matrix a into s, u, vt with gesdd through
 * the column-major scratch at (m n), ut (m ucols), vtt (vrows n); NaNs in
 * all three when a is not finite or gesdd fails. lwork < 0 asks for the
 * workspace size instead, into work[0]. */
#define DEFINE_DECOMPOSE(T, R, L, FINITE)                                                          \
  static lapack_int decompose_##L(const svd_job *j, const T *a, R *s, T *u, T *vt, T *at, T *ut,   \
                                  T *vtt, T *work, lapack_int lwork, R *rwork,                     \
                                  lapack_int *iwork) {                                             \
    int64_t m = j->m, n = j->n, ldu = m > 0 ? m : 1, ldvt = j->vrows > 0 ? j->vrows : 1;           \
    if (lwork < 0)                                                                                 \
      return gesdd_##L(j->jobz, m, n, at, ldu, s, ut, ldu, vtt, ldvt, work, -1, rwork, iwork);     \
    int finite = 1;                                                                                \
    for (int64_t r = 0; r < m; r++)                                                                \
      for (int64_t c = 0; c < n; c++) {                                                            \
        T x = a[r * n + c];                                                                        \
        at[c * m + r] = x;                                                                         \
        if (!(FINITE(x))) finite = 0;                                                              \
      }                                                                                            \
    lapack_int info = finite ? gesdd_##L(j->jobz, m, n, at, ldu, s, ut, ldu, vtt, ldvt, work,      \
                                         lwork, rwork, iwork)                                      \
                             : 1;                                                                  \
    for (int64_t r = 0; r < m; r++)                                                                \
      for (int64_t c = 0; c < j->ucols; c++) u[r * j->ucols + c] = info ? NAN : ut[c * m + r];     \
    for (int64_t r = 0; r < j->vrows; r++)                                                         \
      for (int64_t c = 0; c < n; c++) vt[r * n + c] = info ? NAN : vtt[c * j->vrows + r];          \
    if (info)                                                                                      \
      for (int64_t i = 0; i < j->k; i++) s[i] = NAN;                                               \
    return info;                                                                                   \
  }
#define FINITE_REAL(x) isfinite(x)
#define FINITE_Z(x)    (isfinite(creal(x)) && isfinite(cimag(x)))
#define FINITE_C(x)    (isfinite(crealf(x)) && isfinite(cimagf(x)))
DEFINE_DECOMPOSE(double, double, d, FINITE_REAL)
DEFINE_DECOMPOSE(float, float, s, FINITE_REAL)
DEFINE_DECOMPOSE(double complex, double, z, FINITE_Z)
DEFINE_DECOMPOSE(float complex, float, c, FINITE_C)

/* decompose_<dtype> on untyped pointers (work's size query when a is NULL). */
static lapack_int decompose(const svd_job *j, const void *a, void *s, void *u, void *vt, void *at,
                            void *ut, void *vtt, void *work, lapack_int lwork, void *rwork,
                            lapack_int *iwork) {
  switch (j->in->dtype) {
  case JX_F64: return decompose_d(j, a, s, u, vt, at, ut, vtt, work, lwork, rwork, iwork);
  case JX_F32: return decompose_s(j, a, s, u, vt, at, ut, vtt, work, lwork, rwork, iwork);
  case JX_C128: return decompose_z(j, a, s, u, vt, at, ut, vtt, work, lwork, rwork, iwork);
  default: return decompose_c(j, a, s, u, vt, at, ut, vtt, work, lwork, rwork, iwork);
  }
}

/* The workspace size in work[0] after a query, of dtype dt. */
static double queried_size(jx_dtype dt, const void *work) {
  switch (dt) {
  case JX_F64: return *(const double *)work;
  case JX_F32: return *(const float *)work;
  case JX_C128: return creal(*(const double complex *)work);
  default: return crealf(*(const float complex *)work);
  }
}

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  svd_job *j = ctx;
  size_t es = jx_dtype_size(j->in->dtype), rs = jx_dtype_size(j->out[0].dtype);
  int64_t m = j->m, n = j->n;
  size_t scratch = (size_t)(m * n + m * j->ucols + j->vrows * n);
  size_t lrwork = jx_is_complex(j->in->dtype) ? rwork_size(j) : 1;
  lapack_int *iwork = malloc(sizeof(lapack_int) * (size_t)(8 * j->k));
  double query_work[4] = {0}; /* room for one entry of any dtype */
  char *rwork = iwork ? malloc(rs * lrwork) : NULL;
  if (rwork) decompose(j, NULL, NULL, NULL, NULL, NULL, NULL, NULL, query_work, -1, rwork, iwork);
  lapack_int lwork = (lapack_int)queried_size(j->in->dtype, query_work) + 1;
  char *at = rwork ? malloc(es * (scratch + (size_t)lwork)) : NULL;
  if (!at) {
    free(iwork);
    free(rwork);
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  char *ut = at + es * (size_t)(m * n), *vtt = ut + es * (size_t)(m * j->ucols);
  char *work = at + es * scratch;
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * (size_t)(b * m * n);
    char *s = (char *)j->out[0].data + rs * (size_t)(b * j->k);
    char *u = (char *)j->out[1].data + es * (size_t)(b * m * j->ucols);
    char *vt = (char *)j->out[2].data + es * (size_t)(b * j->vrows * n);
    decompose(j, a, s, u, vt, at, ut, vtt, work, lwork, rwork, iwork);
  }
  free(at);
  free(rwork);
  free(iwork);
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
