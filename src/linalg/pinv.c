/* pinv: the Moore-Penrose pseudo-inverse of each matrix of a stack, as
 * jnp.linalg.pinv: from the reduced SVD a = u diag(s) vt (LAPACK's gesdd),
 * vt^T diag(1/s) u^T with the singular values at or below rtol * s[0]
 * (param rtol=f0) dropped. A primitive so that its JVP can be JAX's custom
 * one (jnp.linalg._pinv_jvp, after Golub and Pereyra), which stays finite
 * where the SVD's would not (equal or dropped singular values):
 *   m >= n: S = p p^T da^T, T = da^T p^T p,
 *   m < n:  the same products associated the other way,
 *   dp = -p da p + S - S a p + T - p a T,
 * linear in da, so reverse mode transposes it. A matrix holding a NaN or
 * infinity, or one gesdd fails on, gives NaNs. Batching moves the batch axis
 * to the front.
 *
 * With hermitian=i0 (jnp.linalg.pinv(hermitian=True)) a is symmetric
 * (square): its symmetric part (a + a^T) / 2 is decomposed by syevd instead,
 * the singular values being |w| and the pseudo-inverse v diag(1/w) v^T over
 * the eigenvalues with |w| above rtol max |w|; the JVP symmetrizes a and da
 * first, as JAX's. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_pinv(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_matrix(ctx->prim->name, "operand", in);
  if (st) return st;
  int r = in->shape.rank;
  jx_shape s = in->shape;
  s.dims[r - 2] = in->shape.dims[r - 1];
  s.dims[r - 1] = in->shape.dims[r - 2];
  out[0] = (jx_aval){in->dtype, 0, s, 0};
  return JX_OK;
}

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t m, n, k;
  double rtol;
  int hermitian;
  atomic_int out_of_memory;
} pinv_job;

/* The pseudo-inverse of the row-major m x n matrix a (destroyed) into the
 * n x m matrix p; scratch holds s (k), u (m k) and vt (k n). */
#define DEFINE_PINV(T, L, GEMM)                                                                    \
  static void pinv_##L(const pinv_job *j, T *a, T *p, T *scratch) {                                \
    int64_t m = j->m, n = j->n, k = j->k;                                                          \
    T *s = scratch, *u = s + k, *vt = u + m * k;                                                   \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < m * n && finite; i++) finite = isfinite(a[i]);                         \
    if (!finite || LAPACKE_##L##gesdd(LAPACK_ROW_MAJOR, 'S', m, n, a, n, s, u, k, vt, n) != 0) {   \
      for (int64_t i = 0; i < m * n; i++) p[i] = NAN;                                              \
      return;                                                                                      \
    }                                                                                              \
    T cutoff = (T)j->rtol * s[0];                                                                  \
    for (int64_t i = 0; i < k; i++) {                                                              \
      T inv = s[i] > cutoff ? 1 / s[i] : 0;                                                        \
      for (int64_t c = 0; c < n; c++) vt[i * n + c] *= inv;                                        \
    }                                                                                              \
    /* p = (diag(1/s) vt)^T u^T */                                                                 \
    GEMM(CblasRowMajor, CblasTrans, CblasTrans, (int)n, (int)m, (int)k, 1, vt, (int)n, u, (int)k,  \
         0, p, (int)m);                                                                            \
  }
DEFINE_PINV(double, d, cblas_dgemm)
DEFINE_PINV(float, s, cblas_sgemm)

/* The pseudo-inverse of the symmetric part of the row-major n x n matrix a
 * (destroyed) into p; scratch holds w (n) and v (n n). */
#define DEFINE_PINV_SYMMETRIC(T, L, GEMM)                                                          \
  static void pinv_symmetric_##L(const pinv_job *j, T *a, T *p, T *scratch) {                      \
    int64_t n = j->n;                                                                              \
    T *w = scratch, *v = w + n;                                                                    \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < n * n && finite; i++) finite = isfinite(a[i]);                         \
    for (int64_t r = 0; r < n; r++)                                                                \
      for (int64_t c = 0; c < n; c++) v[r * n + c] = (a[r * n + c] + a[c * n + r]) / 2;            \
    if (!finite || LAPACKE_##L##syevd(LAPACK_ROW_MAJOR, 'V', 'L', n, v, n, w) != 0) {              \
      for (int64_t i = 0; i < n * n; i++) p[i] = NAN;                                              \
      return;                                                                                      \
    }                                                                                              \
    T largest = 0;                                                                                 \
    for (int64_t i = 0; i < n; i++) largest = fabs(w[i]) > largest ? (T)fabs(w[i]) : largest;      \
    T cutoff = (T)j->rtol * largest;                                                               \
    /* a = v diag(w) v^T: a's columns scaled into a, then p = (v diag(1/w)) v^T */                 \
    for (int64_t r = 0; r < n; r++)                                                                \
      for (int64_t c = 0; c < n; c++)                                                              \
        a[r * n + c] = fabs(w[c]) > cutoff ? v[r * n + c] / w[c] : 0;                              \
    GEMM(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n, (int)n, (int)n, 1, a, (int)n, v, (int)n, \
         0, p, (int)n);                                                                            \
  }
DEFINE_PINV_SYMMETRIC(double, d, cblas_dgemm)
DEFINE_PINV_SYMMETRIC(float, s, cblas_sgemm)

static void pinv_range(void *ctx, int64_t b0, int64_t b1) {
  pinv_job *j = ctx;
  int64_t mn = j->m * j->n;
  size_t es = jx_dtype_size(j->in->dtype);
  char *work = malloc(es * (size_t)(mn + j->k + j->m * j->k + j->k * j->n));
  if (!work) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  char *scratch = work + es * (size_t)mn;
  for (int64_t b = b0; b < b1; b++) {
    memcpy(work, (const char *)j->in->data + es * (size_t)(b * mn), es * (size_t)mn);
    char *p = (char *)j->out->data + es * (size_t)(b * mn);
    int f64 = j->in->dtype == JX_F64;
    if (j->hermitian && f64)
      pinv_symmetric_d(j, (double *)work, (double *)p, (double *)scratch);
    else if (j->hermitian)
      pinv_symmetric_s(j, (float *)work, (float *)p, (float *)scratch);
    else if (f64)
      pinv_d(j, (double *)work, (double *)p, (double *)scratch);
    else
      pinv_s(j, (float *)work, (float *)p, (float *)scratch);
  }
  free(work);
}

static void eval_pinv(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  int r = in->shape.rank;
  pinv_job j = {.in = in, .out = out, .rtol = ctx->params->f[0], .hermitian = ctx->params->i[0]};
  j.m = in->shape.dims[r - 2];
  j.n = in->shape.dims[r - 1];
  j.k = j.m < j.n ? j.m : j.n;
  if (j.k == 0) return; /* an empty result */
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), pinv_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "pinv: out of memory for a %lldx%lld matrix", (long long)j.m,
                 (long long)j.n);
}

static jx_status jvp_pinv(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                          jx_array **y, jx_array **ty) {
  jx_status st = jx_bind(&jx_prim_pinv, 1, x, ctx->params, y);
  ty[0] = NULL;
  if (st || !t[0]) return st;
  jx_array *a = x[0], *da = t[0], *p = y[0];
  if (ctx->params->i[0]) { /* the kernel decomposed (a + a^T) / 2: so does the JVP */
    jx_array *half = jx_scalar(a->dtype, 0.5);
    a = jx_mul(jx_add(a, jx_linalg_swap_last(a)), half);
    da = jx_mul(jx_add(da, jx_linalg_swap_last(da)), half);
  }
  jx_array *pt = jx_linalg_swap_last(p), *dat = jx_linalg_swap_last(da);
  int r = a->shape.rank;
  jx_array *s, *tt, *dp;
  if (a->shape.dims[r - 2] >= a->shape.dims[r - 1]) {
    s = jx_matmul(jx_matmul(p, pt), dat);
    tt = jx_matmul(jx_matmul(dat, pt), p);
    dp = jx_sub(jx_add(jx_neg(jx_matmul(jx_matmul(p, da), p)), s), jx_matmul(jx_matmul(s, a), p));
    dp = jx_sub(jx_add(dp, tt), jx_matmul(jx_matmul(p, a), tt));
  } else {
    s = jx_matmul(p, jx_matmul(pt, dat));
    tt = jx_matmul(dat, jx_matmul(pt, p));
    dp = jx_sub(jx_add(jx_neg(jx_matmul(p, jx_matmul(da, p))), s), jx_matmul(s, jx_matmul(a, p)));
    dp = jx_sub(jx_add(dp, tt), jx_matmul(p, jx_matmul(a, tt)));
  }
  ty[0] = dp;
  return jx_last_status();
}

const jx_prim jx_prim_pinv = {.name = "pinv",
                              .id = JX_PRIM_pinv,
                              .nin = 1,
                              .nout = 1,
                              .params = "rtol=f0 hermitian=i0",
                              .infer = infer_pinv,
                              .eval = eval_pinv,
                              .jvp = jvp_pinv,
                              .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(pinv, &jx_prim_pinv)
