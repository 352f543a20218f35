/* svd: the singular value decomposition of each matrix of a stack, through
 * LAPACK's gesdd (divide and conquer, as JAX's CPU lowering), as
 * lax.linalg.svd: a[..., m, n] = u diag(s) vt with s [..., k] descending,
 * k = min(m, n), u [..., m, k] and vt [..., k, n] (full_matrices=i0: u
 * [..., m, m], vt [..., n, n]). Without compute_uv (i1 = 0) gesdd computes
 * the values alone and u, vt are empty ([..., m, 0], [..., 0, n]). A matrix
 * holding a NaN or an infinity, or one gesdd fails to converge on, gives
 * NaNs in every output, as JAX's lowering does when LAPACK reports failure.
 *
 * JVP (JAX's _svd_jvp_rule): from the reduced factors, with dS = u^T dA v,
 * ds = diag(dS) and F_ij = 1 / (s_j^2 - s_i^2) off the diagonal (0 on it,
 * built as 1 / (d + I) - I with no special case for equal values, as JAX),
 * du = u (F o (dS S + S dS^T)) and dv = v (F o (S dS + dS^T S)), plus the
 * parts outside u's (m > n) or v's (n > m) span, (I - u u^T) dA v / s. As in
 * JAX, full_matrices with u or vt not square has no JVP. Batching moves the
 * batch axis to the front. */
#include <lapacke.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_svd(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_matrix(ctx->prim->name, "operand", in);
  if (st) return st;
  const jx_params *p = ctx->params;
  int r = in->shape.rank;
  int64_t m = in->shape.dims[r - 2], n = in->shape.dims[r - 1], k = m < n ? m : n;
  jx_shape s = in->shape, u = in->shape, vt = in->shape;
  s.rank--;
  s.dims[r - 2] = k;
  u.dims[r - 1] = !p->i[1] ? 0 : p->i[0] ? m : k;
  vt.dims[r - 2] = !p->i[1] ? 0 : p->i[0] ? n : k;
  out[0] = (jx_aval){in->dtype, 0, s, 0};
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

/* Decomposes the row-major m x n matrix a into s, u, vt with gesdd through
 * the column-major scratch at (m n), ut (m ucols), vtt (vrows n); NaNs in
 * all three when a is not finite or gesdd fails. lwork < 0 asks for the
 * workspace size instead, into work[0]. */
#define DEFINE_DECOMPOSE(T, L)                                                                     \
  static lapack_int decompose_##L(const svd_job *j, const T *a, T *s, T *u, T *vt, T *at, T *ut,   \
                                  T *vtt, T *work, lapack_int lwork, lapack_int *iwork) {          \
    int64_t m = j->m, n = j->n, ldu = m > 0 ? m : 1, ldvt = j->vrows > 0 ? j->vrows : 1;           \
    if (lwork < 0)                                                                                 \
      return LAPACKE_##L##gesdd_work(LAPACK_COL_MAJOR, j->jobz, m, n, at, ldu, s, ut, ldu, vtt,    \
                                     ldvt, work, -1, iwork);                                       \
    int finite = 1;                                                                                \
    for (int64_t r = 0; r < m; r++)                                                                \
      for (int64_t c = 0; c < n; c++) {                                                            \
        T x = a[r * n + c];                                                                        \
        at[c * m + r] = x;                                                                         \
        if (!isfinite(x)) finite = 0;                                                              \
      }                                                                                            \
    lapack_int info = finite ? LAPACKE_##L##gesdd_work(LAPACK_COL_MAJOR, j->jobz, m, n, at, ldu,   \
                                                       s, ut, ldu, vtt, ldvt, work, lwork, iwork)  \
                             : 1;                                                                  \
    for (int64_t r = 0; r < m; r++)                                                                \
      for (int64_t c = 0; c < j->ucols; c++) u[r * j->ucols + c] = info ? NAN : ut[c * m + r];     \
    for (int64_t r = 0; r < j->vrows; r++)                                                         \
      for (int64_t c = 0; c < n; c++) vt[r * n + c] = info ? NAN : vtt[c * j->vrows + r];          \
    if (info)                                                                                      \
      for (int64_t i = 0; i < j->k; i++) s[i] = NAN;                                               \
    return info;                                                                                   \
  }
DEFINE_DECOMPOSE(double, d)
DEFINE_DECOMPOSE(float, s)

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  svd_job *j = ctx;
  int f64 = j->in->dtype == JX_F64;
  size_t es = jx_dtype_size(j->in->dtype);
  int64_t m = j->m, n = j->n;
  size_t scratch = (size_t)(m * n + m * j->ucols + j->vrows * n);
  lapack_int *iwork = malloc(sizeof(lapack_int) * (size_t)(8 * j->k));
  double query = 0; /* the workspace size gesdd asks for */
  if (iwork) {
    float fq = 0;
    if (f64)
      decompose_d(j, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &query, -1, iwork);
    else
      decompose_s(j, NULL, NULL, NULL, NULL, NULL, NULL, NULL, &fq, -1, iwork), query = fq;
  }
  lapack_int lwork = (lapack_int)query + 1;
  char *at = iwork ? malloc(es * (scratch + (size_t)lwork)) : NULL;
  if (!at) {
    free(iwork);
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  char *ut = at + es * (size_t)(m * n), *vtt = ut + es * (size_t)(m * j->ucols);
  char *work = at + es * scratch;
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * (size_t)(b * m * n);
    char *s = (char *)j->out[0].data + es * (size_t)(b * j->k);
    char *u = (char *)j->out[1].data + es * (size_t)(b * m * j->ucols);
    char *vt = (char *)j->out[2].data + es * (size_t)(b * j->vrows * n);
    if (f64)
      decompose_d(j, (const double *)a, (double *)s, (double *)u, (double *)vt, (double *)at,
                  (double *)ut, (double *)vtt, (double *)work, lwork, iwork);
    else
      decompose_s(j, (const float *)a, (float *)s, (float *)u, (float *)vt, (float *)at,
                  (float *)ut, (float *)vtt, (float *)work, lwork, iwork);
  }
  free(at);
  free(iwork);
}

static void set_one(jx_dtype dt, void *data, int64_t i) {
  if (dt == JX_F64)
    ((double *)data)[i] = 1;
  else
    ((float *)data)[i] = 1;
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
  jx_array *ut = jx_linalg_swap_last(u), *v = jx_linalg_swap_last(vt);
  jx_array *s_row = jx_expand_dims(s, -2), *s_col = jx_linalg_swap_last(s_row); /* [..., 1, k] */
  jx_array *ds_mat = jx_matmul(jx_matmul(ut, da), v);
  ty[0] = jx_linalg_diagonal(ds_mat);
  if (!p->i[1]) return jx_last_status();
  /* F_ij = 1 / (s_j^2 - s_i^2), the identity keeping the diagonal's reciprocal finite */
  jx_array *eye = jx_linalg_eye_like(ds_mat);
  jx_array *diffs = jx_mul(jx_add(s_row, s_col), jx_sub(s_row, s_col));
  jx_array *f = jx_sub(jx_reciprocal(jx_add(diffs, eye)), eye);
  jx_array *dss = jx_mul(s_row, ds_mat), *sds = jx_mul(s_col, ds_mat);
  /* JAX's dUdV_diag term, (dS - dS^T) / 2 on the diagonal, is zero for real matrices */
  jx_array *du = jx_matmul(u, jx_mul(f, jx_add(dss, jx_linalg_swap_last(dss))));
  jx_array *dv = jx_matmul(v, jx_mul(f, jx_add(sds, jx_linalg_swap_last(sds))));
  if (m > n) {
    jx_array *dav = jx_matmul(da, v);
    du = jx_add(du, jx_div(jx_sub(dav, jx_matmul(u, jx_matmul(ut, dav))), s_row));
  }
  if (n > m) {
    jx_array *datu = jx_matmul(jx_linalg_swap_last(da), u);
    dv = jx_add(dv, jx_div(jx_sub(datu, jx_matmul(v, jx_matmul(vt, datu))), s_row));
  }
  ty[1] = du;
  ty[2] = jx_linalg_swap_last(dv);
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
