/* qr: the QR factorization of each matrix of a stack, through LAPACK's
 * geqrf (Householder reflectors) and orgqr, or ungqr for c64 and c128 (Q
 * from them), as lax.linalg.qr: a[..., m, n] = q r with q [..., m, k]
 * orthonormal (unitary) columns
 * and r [..., k, n] upper triangular, k = m when full_matrices (param i0),
 * min(m, n) otherwise. An empty matrix gives the identity's columns and a
 * zero r, as JAX.
 *
 * JVP (JAX's qr_jvp_rule): for m >= n, with X = Q^H dA R^-1 and
 * dO = tril(X, -1) - tril(X, -1)^H + i im(diag(X)) (the imaginary diagonal
 * is zero for real matrices), dQ = Q (dO - X) + dA R^-1 and dR = (X - dO) R;
 * a wide matrix (m < n) applies that to its first m columns and gets dR's
 * rest as dQ^H A2 + Q^H dA2; a tall complete Q gets its last
 * m - n columns' tangent from the reduced one through a solve with
 * Q[:n, :n] - I, as JAX does. Batching moves the batch axis to the front. */
#include <complex.h>
#include <lapacke.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/linalg.h>
#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_qr(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_inexact_matrix("qr", "operand", in);
  if (st) return st;
  int r = in->shape.rank;
  int64_t m = in->shape.dims[r - 2], n = in->shape.dims[r - 1],
          k = ctx->params->i[0] || m < n ? m : n;
  jx_shape qs = in->shape, rs = in->shape;
  qs.dims[r - 1] = k;
  rs.dims[r - 2] = k;
  out[0] = (jx_aval){in->dtype, 0, qs, 0};
  out[1] = (jx_aval){in->dtype, 0, rs, 0};
  return JX_OK;
}

/* LAPACK's blocked workspace per column of a matrix (its block size). */
enum { WORK_PER_COLUMN = 64 };

/* Factors the row-major m x n matrix a into q (m x k) and r (k x n); work
 * holds m * n entries, tau min(m, n), lw lwork. The _work entry points skip
 * LAPACKE's NaN check, so a matrix holding NaNs factors as LAPACK (and JAX)
 * factor it instead of returning early with q and r unset. */
#define DEFINE_FACTOR(T, L, Q)                                                                     \
  static void factor_##L(const T *a, T *q, T *r, T *work, T *tau, T *lw, lapack_int lwork,         \
                         int64_t m, int64_t n, int64_t k) {                                        \
    int64_t kk = m < n ? m : n;                                                                    \
    memcpy(work, a, sizeof(T) * (size_t)(m * n));                                                  \
    if (kk > 0) LAPACKE_##L##geqrf_work(LAPACK_ROW_MAJOR, m, n, work, n, tau, lw, lwork);          \
    for (int64_t i = 0; i < k; i++)                                                                \
      for (int64_t j = 0; j < n; j++) r[i * n + j] = i <= j ? work[i * n + j] : 0;                 \
    for (int64_t i = 0; i < m; i++)                                                                \
      for (int64_t j = 0; j < k; j++) q[i * k + j] = j < kk ? work[i * n + j] : i == j;            \
    if (kk > 0) LAPACKE_##L##Q##gqr_work(LAPACK_ROW_MAJOR, m, k, kk, q, k, tau, lw, lwork);        \
  }
DEFINE_FACTOR(double, d, or)
DEFINE_FACTOR(float, s, or)
DEFINE_FACTOR(double complex, z, un)
DEFINE_FACTOR(float complex, c, un)

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t m, n, k;
  atomic_int out_of_memory;
} qr_job;

static void factor_range(void *ctx, int64_t b0, int64_t b1) {
  qr_job *j = ctx;
  int64_t m = j->m, n = j->n, k = j->k;
  size_t es = jx_dtype_size(j->in->dtype);
  lapack_int lwork = (lapack_int)((m > n ? m : n) + 1) * WORK_PER_COLUMN;
  void *work = malloc(es * (size_t)(m * n + 1)),
       *tau = malloc(es * (size_t)(m < n ? m + 1 : n + 1)), *lw = malloc(es * (size_t)lwork);
  if (!work || !tau || !lw) {
    free(work);
    free(tau);
    free(lw);
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * (size_t)(b * m * n);
    char *q = (char *)j->out[0].data + es * (size_t)(b * m * k);
    char *r = (char *)j->out[1].data + es * (size_t)(b * k * n);
    if (j->in->dtype == JX_C128)
      factor_z((const double complex *)a, (double complex *)q, (double complex *)r, work, tau, lw,
               lwork, m, n, k);
    else if (j->in->dtype == JX_C64)
      factor_c((const float complex *)a, (float complex *)q, (float complex *)r, work, tau, lw,
               lwork, m, n, k);
    else if (j->in->dtype == JX_F64)
      factor_d((const double *)a, (double *)q, (double *)r, work, tau, lw, lwork, m, n, k);
    else
      factor_s((const float *)a, (float *)q, (float *)r, work, tau, lw, lwork, m, n, k);
  }
  free(work);
  free(tau);
  free(lw);
}

static void eval_qr(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int rank = in->shape.rank;
  qr_job j = {.in = in, .out = out};
  j.m = in->shape.dims[rank - 2];
  j.n = in->shape.dims[rank - 1];
  j.k = out[0].shape.dims[rank - 1];
  int64_t count = jx_linalg_batch_count(in->shape);
  if (count == 0 || j.m * j.k == 0) return;
  jx_linalg_for_each_matrix(count, factor_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "qr: out of memory for a %lldx%lld matrix", (long long)j.m,
                 (long long)j.n);
}

/* JAX's _thin_qr_jvp: (dQ, dR) of q [m, n], r [n, n] (m >= n) along dx. */
static void thin_jvp(jx_array *q, jx_array *r, jx_array *dx, jx_array **dq, jx_array **dr) {
  jx_params right = JX_PARAMS_INIT; /* dx R^-1: right side, upper */
  jx_array *dx_rinv = jx_linalg_bind_triangular_solve(r, dx, &right);
  jx_array *x = jx_matmul(jx_linalg_adjoint(q), dx_rinv);
  jx_array *lower = jx_linalg_triangle(x, 1, -1);
  jx_array *d_o = jx_sub(lower, jx_linalg_adjoint(lower)); /* skew-Hermitian */
  if (jx_is_complex(x->dtype)) /* JAX's correction: X's imaginary diagonal */
    d_o = jx_add(d_o, jx_mul(jx_linalg_eye_like(x), jx_sub(x, jx_astype(jx_real(x), x->dtype))));
  *dq = jx_add(jx_matmul(q, jx_sub(d_o, x)), dx_rinv);
  *dr = jx_matmul(jx_sub(x, d_o), r);
}

static jx_status jvp_qr(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                        jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  jx_status st = jx_bind(&jx_prim_qr, 1, x, p, y);
  ty[0] = ty[1] = NULL;
  if (st || !t[0]) return st;
  jx_array *a = x[0], *da = t[0], *q = y[0], *r = y[1];
  int rank = a->shape.rank;
  int64_t m = a->shape.dims[rank - 2], n = a->shape.dims[rank - 1];
  if (m < n) { /* wide: a = q [r1 r2], r1 square */
    jx_array *dq, *dr1;
    thin_jvp(q, jx_linalg_block(r, 0, m, 0, m), jx_linalg_block(da, 0, m, 0, m), &dq, &dr1);
    jx_array *dr2 = jx_add(jx_matmul(jx_linalg_adjoint(dq), jx_linalg_block(a, 0, m, m, n)),
                           jx_matmul(jx_linalg_adjoint(q), jx_linalg_block(da, 0, m, m, n)));
    ty[0] = dq;
    ty[1] = jx_concatenate(2, (jx_array *[]){dr1, dr2}, rank - 1);
    return jx_last_status();
  }
  int complete = p->i[0] && m > n;
  jx_array *q_mn = complete ? jx_linalg_block(q, 0, m, 0, n) : q;
  jx_array *r_nn = complete ? jx_linalg_block(r, 0, n, 0, n) : r;
  jx_array *dq_mn, *dr_nn;
  thin_jvp(q_mn, r_nn, da, &dq_mn, &dr_nn);
  if (!complete) {
    ty[0] = dq_mn;
    ty[1] = dr_nn;
    return jx_last_status();
  }
  jx_array *q_nn = jx_linalg_block(q_mn, 0, n, 0, n), *q_pn = jx_linalg_block(q_mn, n, m, 0, n);
  jx_array *q_mp = jx_linalg_block(q, 0, m, n, m);
  jx_array *dq_nn = jx_linalg_block(dq_mn, 0, n, 0, n), *dq_pn = jx_linalg_block(dq_mn, n, m, 0, n);
  /* z_pn^H = (Q_nn - I)^-H Q_pn^H */
  jx_array *z_pn_h = jx_linalg_solve(jx_linalg_adjoint(jx_sub(q_nn, jx_linalg_eye_like(q_nn))),
                                     jx_linalg_adjoint(q_pn));
  jx_array *z_pn = jx_linalg_adjoint(z_pn_h);
  jx_array *dq_mp = jx_sub(jx_matmul(dq_mn, z_pn_h),
                           jx_matmul(jx_add(q_mn, jx_matmul(q_mp, z_pn)),
                                     jx_linalg_adjoint(jx_sub(dq_pn, jx_matmul(z_pn, dq_nn)))));
  ty[0] = jx_concatenate(2, (jx_array *[]){dq_mn, dq_mp}, rank - 1);
  jx_shape zs = r->shape;
  zs.dims[rank - 2] = m - n;
  ty[1] = jx_concatenate(2, (jx_array *[]){dr_nn, jx_zeros(a->dtype, zs)}, rank - 2);
  return jx_last_status();
}

const jx_prim jx_prim_qr = {.name = "qr",
                            .id = JX_PRIM_qr,
                            .nin = 1,
                            .nout = 2,
                            .params = "full_matrices=i0",
                            .infer = infer_qr,
                            .eval = eval_qr,
                            .jvp = jvp_qr,
                            .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(qr, &jx_prim_qr)
