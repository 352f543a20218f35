/* cholesky: the lower Cholesky factor of each matrix of a stack, through
 * LAPACK's potrf (f32, f64, and Hermitian c64, c128); a matrix that is not positive definite
 * (potrf's info > 0) gives NaNs in its lower triangle (zeros above), as JAX does.
 *
 * JVP (JAX's _cholesky_jvp_rule, after Murray, arXiv:1602.07527):
 * dL = L Phi(L^-1 dA L^-H), Phi taking the lower triangle with the diagonal
 * halved; the two solves are triangular_solve, linear in dA, so reverse mode
 * transposes them. Batching moves the batch axis to the front. */
#include <lapacke.h>
#include <math.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_cholesky(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_inexact_square(ctx->prim->name, "operand", in);
  if (!st) out[0] = (jx_aval){in->dtype, 0, in->shape, 0};
  return st;
}

/* Factors the row-major n x n matrix m in place: L in the lower triangle,
 * zeros above; NaNs throughout the lower triangle when m is not positive
 * definite (JAX's lowering masks the factor, then keeps its lower part). */
static void factor(jx_dtype dt, void *m, int64_t n) {
  /* the _work entry point skips LAPACKE's NaN check (a NaN stops potrf too) */
  lapack_int info = 0;
  switch (jx_linalg_type_of(dt)) {
  case JX_LINALG_S: info = LAPACKE_spotrf_work(LAPACK_ROW_MAJOR, 'L', n, m, n); break;
  case JX_LINALG_D: info = LAPACKE_dpotrf_work(LAPACK_ROW_MAJOR, 'L', n, m, n); break;
  case JX_LINALG_C: info = LAPACKE_cpotrf_work(LAPACK_ROW_MAJOR, 'L', n, m, n); break;
  case JX_LINALG_Z: info = LAPACKE_zpotrf_work(LAPACK_ROW_MAJOR, 'L', n, m, n); break;
  }
  for (int64_t i = 0; i < n; i++)
    for (int64_t j = 0; j < n; j++) {
      if (info == 0 && j <= i) continue;
      double v = j > i ? 0 : NAN; /* complex: both parts, as JAX's mask */
      int64_t k = i * n + j;
      switch (jx_linalg_type_of(dt)) {
      case JX_LINALG_S: ((float *)m)[k] = (float)v; break;
      case JX_LINALG_D: ((double *)m)[k] = v; break;
      case JX_LINALG_C: ((float *)m)[2 * k] = ((float *)m)[2 * k + 1] = (float)v; break;
      case JX_LINALG_Z: ((double *)m)[2 * k] = ((double *)m)[2 * k + 1] = v; break;
      }
    }
}

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
} cholesky_job;

static void factor_range(void *ctx, int64_t b0, int64_t b1) {
  const cholesky_job *j = ctx;
  size_t bytes = jx_dtype_size(j->in->dtype) * (size_t)(j->n * j->n);
  for (int64_t b = b0; b < b1; b++) {
    char *m = (char *)j->out->data + bytes * (size_t)b;
    memcpy(m, (const char *)j->in->data + bytes * (size_t)b, bytes);
    factor(j->in->dtype, m, j->n);
  }
}

static void eval_cholesky(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int r = in->shape.rank;
  cholesky_job j = {.in = in, .out = out, .n = in->shape.dims[r - 1]};
  if (j.n == 0) return;
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), factor_range, &j);
}

/* Phi(X): the lower triangle of X with its diagonal halved. */
static jx_array *phi(jx_array *x) {
  jx_array *strict = jx_linalg_triangle(x, 1, -1), *diag = jx_linalg_triangle(x, 1, 0);
  diag = jx_sub(diag, strict);
  return jx_add(strict, jx_mul(diag, jx_scalar(x->dtype, 0.5)));
}

static jx_status jvp_cholesky(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                              jx_array **y, jx_array **ty) {
  jx_array *l = jx_bind1(&jx_prim_cholesky, 1, x, ctx->params);
  y[0] = l;
  ty[0] = NULL;
  if (!t[0]) return jx_last_status();
  jx_params right_t = JX_PARAMS_INIT, left = JX_PARAMS_INIT;
  right_t.i[1] = right_t.i[2] = right_t.i[4] = 1; /* X L^H = dA: X = dA L^-H */
  left.i[0] = left.i[1] = 1;                      /* L Y = X: Y = L^-1 X */
  jx_array *tmp = jx_linalg_bind_triangular_solve(l, t[0], &right_t);
  tmp = jx_linalg_bind_triangular_solve(l, tmp, &left);
  ty[0] = jx_matmul(l, phi(tmp));
  return jx_last_status();
}

const jx_prim jx_prim_cholesky = {.name = "cholesky",
                                  .id = JX_PRIM_cholesky,
                                  .nin = 1,
                                  .nout = 1,
                                  .params = "",
                                  .infer = infer_cholesky,
                                  .eval = eval_cholesky,
                                  .jvp = jvp_cholesky,
                                  .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(cholesky, &jx_prim_cholesky)
