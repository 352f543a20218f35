/* pinv: the Moore-Penrose pseudo-inverse of each matrix of a stack, as
 * jnp.linalg.pinv: from the reduced SVD a = u diag(s) vt (LAPACK's gesdd),
 * vt^H diag(1/s) u^H with the singular values at or below rtol * s[0]
 * (param rtol=f0) dropped; f32, f64, c64 and c128 (cgesdd/zgesdd). A primitive so that its JVP can
 * be JAX's custom one (jnp.linalg._pinv_jvp, after Golub and Pereyra), which stays finite where the
 * SVD's would not (equal or dropped singular values): m >= n: S = p p^H da^H, T = da^H p^H p, m <
 * n:  the same products associated the other way, dp = -p da p + S - S a p + T - p a T, linear in
 * da, so reverse mode transposes it. A matrix holding a NaN or infinity, or one gesdd fails on,
 * gives NaNs. Batching moves the batch axis to the front.
 *
 * With hermitian=i0 (jnp.linalg.pinv(hermitian=True)) a is Hermitian
 * (square): its Hermitian part (a + a^H) / 2 is decomposed by syevd or heevd
 * instead, the singular values being |w| and the pseudo-inverse
 * v diag(1/w) v^H over the eigenvalues with |w| above rtol max |w|; the JVP
 * takes the Hermitian part of a and da first, as JAX's. */
#include <cblas.h>
#include <complex.h>
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
  jx_status st = jx_linalg_check_inexact_matrix(ctx->prim->name, "operand", in);
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

/* p = op(x) op(y) with alpha 1, beta 0, in one signature for the four dtypes
 * (complex gemm takes its scalars by pointer). */
#define DEFINE_GEMM(T, L, ONE, ZERO)                                                               \
  static void gemm_##L(enum CBLAS_TRANSPOSE tx, enum CBLAS_TRANSPOSE ty, int64_t m, int64_t n,     \
                       int64_t k, const T *x, int64_t ldx, const T *y, int64_t ldy, T *p,          \
                       int64_t ldp) {                                                              \
    cblas_##L##gemm(CblasRowMajor, tx, ty, (int)m, (int)n, (int)k, ONE, x, (int)ldx, y, (int)ldy,  \
                    ZERO, p, (int)ldp);                                                            \
  }
static const double complex Z_ONE = 1, Z_ZERO = 0;
static const float complex C_ONE = 1, C_ZERO = 0;
DEFINE_GEMM(double, d, 1, 0)
DEFINE_GEMM(float, s, 1, 0)
DEFINE_GEMM(double complex, z, &Z_ONE, &Z_ZERO)
DEFINE_GEMM(float complex, c, &C_ONE, &C_ZERO)

#define FINITE_REAL(x) isfinite(x)
#define FINITE_Z(x)    (isfinite(creal(x)) && isfinite(cimag(x)))
#define FINITE_C(x)    (isfinite(crealf(x)) && isfinite(cimagf(x)))
#define SAME(x)        (x)

/* The pseudo-inverse of the row-major m x n matrix a (destroyed) into the
 * n x m matrix p; scratch holds s (k reals), u (m k) and vt (k n). TRANS is
 * the (conjugate) transpose of T, FINITE whether an entry is finite. */
#define DEFINE_PINV(T, R, L, TRANS, FINITE)                                                        \
  static void pinv_##L(const pinv_job *j, T *a, T *p, T *scratch) {                                \
    int64_t m = j->m, n = j->n, k = j->k;                                                          \
    R *s = (R *)scratch;                                                                           \
    T *u = scratch + k, *vt = u + m * k;                                                           \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < m * n && finite; i++) finite = FINITE(a[i]);                           \
    if (!finite || LAPACKE_##L##gesdd(LAPACK_ROW_MAJOR, 'S', m, n, a, n, s, u, k, vt, n) != 0) {   \
      for (int64_t i = 0; i < m * n; i++) p[i] = NAN;                                              \
      return;                                                                                      \
    }                                                                                              \
    R cutoff = (R)j->rtol * s[0];                                                                  \
    for (int64_t i = 0; i < k; i++) {                                                              \
      R inv = s[i] > cutoff ? 1 / s[i] : 0;                                                        \
      for (int64_t c = 0; c < n; c++) vt[i * n + c] *= inv;                                        \
    }                                                                                              \
    /* p = (diag(1/s) vt)^H u^H */                                                                 \
    gemm_##L(TRANS, TRANS, n, m, k, vt, n, u, k, p, m);                                            \
  }
DEFINE_PINV(double, double, d, CblasTrans, FINITE_REAL)
DEFINE_PINV(float, float, s, CblasTrans, FINITE_REAL)
DEFINE_PINV(double complex, double, z, CblasConjTrans, FINITE_Z)
DEFINE_PINV(float complex, float, c, CblasConjTrans, FINITE_C)

/* The pseudo-inverse of the Hermitian part of the row-major n x n matrix a
 * (destroyed) into p, through EVD (syevd or heevd); scratch holds w (n
 * reals) and v (n n). */
#define DEFINE_PINV_HERMITIAN(T, R, L, TRANS, FINITE, CONJ, ABS, EVD)                              \
  static void pinv_hermitian_##L(const pinv_job *j, T *a, T *p, T *scratch) {                      \
    int64_t n = j->n;                                                                              \
    R *w = (R *)scratch;                                                                           \
    T *v = scratch + n;                                                                            \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < n * n && finite; i++) finite = FINITE(a[i]);                           \
    for (int64_t r = 0; r < n; r++)                                                                \
      for (int64_t c = 0; c < n; c++) v[r * n + c] = (a[r * n + c] + CONJ(a[c * n + r])) / 2;      \
    if (!finite || LAPACKE_##L##EVD(LAPACK_ROW_MAJOR, 'V', 'L', n, v, n, w) != 0) {                \
      for (int64_t i = 0; i < n * n; i++) p[i] = NAN;                                              \
      return;                                                                                      \
    }                                                                                              \
    R largest = 0;                                                                                 \
    for (int64_t i = 0; i < n; i++) largest = ABS(w[i]) > largest ? ABS(w[i]) : largest;           \
    R cutoff = (R)j->rtol * largest;                                                               \
    /* a = v diag(w) v^H: v's columns scaled into a, then p = (v diag(1/w)) v^H */                 \
    for (int64_t r = 0; r < n; r++)                                                                \
      for (int64_t c = 0; c < n; c++) a[r * n + c] = ABS(w[c]) > cutoff ? v[r * n + c] / w[c] : 0; \
    gemm_##L(CblasNoTrans, TRANS, n, n, n, a, n, v, n, p, n);                                      \
  }
DEFINE_PINV_HERMITIAN(double, double, d, CblasTrans, FINITE_REAL, SAME, fabs, syevd)
DEFINE_PINV_HERMITIAN(float, float, s, CblasTrans, FINITE_REAL, SAME, fabsf, syevd)
DEFINE_PINV_HERMITIAN(double complex, double, z, CblasConjTrans, FINITE_Z, conj, fabs, heevd)
DEFINE_PINV_HERMITIAN(float complex, float, c, CblasConjTrans, FINITE_C, conjf, fabsf, heevd)

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
#define PINV_CASE(L, T)                                                                            \
  if (j->hermitian)                                                                                \
    pinv_hermitian_##L(j, (T *)work, (T *)p, (T *)scratch);                                        \
  else                                                                                             \
    pinv_##L(j, (T *)work, (T *)p, (T *)scratch);                                                  \
  break;
    switch (j->in->dtype) {
    case JX_F64: PINV_CASE(d, double)
    case JX_F32: PINV_CASE(s, float)
    case JX_C128: PINV_CASE(z, double complex)
    default: PINV_CASE(c, float complex)
    }
#undef PINV_CASE
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
  if (ctx->params->i[0]) { /* the kernel decomposed (a + a^H) / 2: so does the JVP */
    a = jx_linalg_hermitian_part(a);
    da = jx_linalg_hermitian_part(da);
  }
  jx_array *pt = jx_linalg_adjoint(p), *dat = jx_linalg_adjoint(da);
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
