/* triangular_solve: x with op(a) x = b (left_side) or x op(a) = b, op(a) = a
 * or a^T (transpose_a), conjugated with conjugate_a (a^H with both), a lower or upper triangular
 * (lower; only that triangle is read), its diagonal ones when unit_diagonal. The kernel is BLAS's
 * trsm (s, d, c, z) per matrix of the stack, the matrices in parallel over the pool; a zero on the
 * diagonal gives infs/NaNs.
 *
 * Rules, after JAX's lax/linalg.py:
 *  - JVP (_triangular_solve_jvp_rule_a and the linear b rule): with x the
 *    result, dx = op(a)^-1 (db - op(da) x) (left) or (db - x op(da)) op(a)^-1
 *    (right), da cut to a's triangle (strict when unit_diagonal), op
 *    conjugating it with conjugate_a: one more solve, linear in (da, db)
 *    through its b operand;
 *  - transpose (linear in b only): the cotangent solved with transpose_a
 *    flipped and conjugate_a kept (the linear transpose, as JAX's);
 *  - batching: both operands' batch axes to the front (an unbatched one
 *    broadcast). */
#include <cblas.h>
#include <complex.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_triangular_solve(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const char *op = "triangular_solve";
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  jx_status st = jx_linalg_check_inexact_square(op, "a", &in[0]);
  if (st) return st;
  jx_shape a = in[0].shape, b = in[1].shape;
  int r = a.rank, left = ctx->params->i[0] != 0;
  int ok = in[1].dtype == in[0].dtype && b.rank == r;
  for (int d = 0; ok && d < r - 2; d++) ok = a.dims[d] == b.dims[d];
  if (ok) ok = b.dims[left ? r - 2 : r - 1] == a.dims[r - 1];
  if (!ok)
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: b %s does not fit a %s: b must have a's dtype and batch dims and "
                        "its %s dim equal to a's size (left_side=%d)",
                        op, jx_aval_str(in[1].dtype, b, sb), jx_aval_str(in[0].dtype, a, sa),
                        left ? "second-to-last" : "last", left);
  out[0] = (jx_aval){in[1].dtype, 0, b, 0};
  return JX_OK;
}

typedef struct {
  const jx_tensor *a, *b;
  jx_tensor *x;
  int64_t m, rows, cols;
  CBLAS_SIDE side;
  CBLAS_UPLO uplo;
  CBLAS_TRANSPOSE trans;
  CBLAS_DIAG diag;
  int conj_no_trans; /* conj(a) x = b: solved as a conj(x) = conj(b) */
} solve_job;

/* Conjugates the n complex numbers at x in place. */
static void conj_in_place(jx_dtype dt, void *x, size_t n) {
  if (dt == JX_C64)
    for (size_t i = 0; i < n; i++) ((float complex *)x)[i] = conjf(((float complex *)x)[i]);
  else if (dt == JX_C128)
    for (size_t i = 0; i < n; i++) ((double complex *)x)[i] = conj(((double complex *)x)[i]);
}

static void solve_range(void *ctx, int64_t k0, int64_t k1) {
  const solve_job *j = ctx;
  size_t es = jx_dtype_size(j->b->dtype), mm = (size_t)(j->m * j->m);
  size_t rc = (size_t)(j->rows * j->cols);
  for (int64_t k = k0; k < k1; k++) {
    const char *a = (const char *)j->a->data + es * mm * (size_t)k;
    char *x = (char *)j->x->data + es * rc * (size_t)k;
    memcpy(x, (const char *)j->b->data + es * rc * (size_t)k, es * rc);
    int rows = (int)j->rows, cols = (int)j->cols, m = (int)j->m;
    if (j->conj_no_trans) conj_in_place(j->b->dtype, x, rc);
    switch (jx_linalg_type_of(j->b->dtype)) {
    case JX_LINALG_S:
      cblas_strsm(CblasRowMajor, j->side, j->uplo, j->trans, j->diag, rows, cols, 1.0f,
                  (const float *)a, m, (float *)x, cols);
      break;
    case JX_LINALG_D:
      cblas_dtrsm(CblasRowMajor, j->side, j->uplo, j->trans, j->diag, rows, cols, 1.0,
                  (const double *)a, m, (double *)x, cols);
      break;
    case JX_LINALG_C: {
      const float complex one = 1;
      cblas_ctrsm(CblasRowMajor, j->side, j->uplo, j->trans, j->diag, rows, cols, &one, a, m, x,
                  cols);
      break;
    }
    case JX_LINALG_Z: {
      const double complex one = 1;
      cblas_ztrsm(CblasRowMajor, j->side, j->uplo, j->trans, j->diag, rows, cols, &one, a, m, x,
                  cols);
      break;
    }
    }
    if (j->conj_no_trans) conj_in_place(j->b->dtype, x, rc);
  }
}

static void eval_triangular_solve(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  int r = in[1].shape.rank;
  solve_job j = {.a = &in[0], .b = &in[1], .x = out};
  j.m = in[0].shape.dims[r - 1];
  j.rows = in[1].shape.dims[r - 2];
  j.cols = in[1].shape.dims[r - 1];
  j.side = p->i[0] ? CblasLeft : CblasRight;
  j.uplo = p->i[1] ? CblasLower : CblasUpper;
  int conjugate = p->i[4] && jx_is_complex(in[0].dtype);
  j.trans = p->i[2] ? (conjugate ? CblasConjTrans : CblasTrans) : CblasNoTrans;
  j.conj_no_trans = conjugate && !p->i[2];
  j.diag = p->i[3] ? CblasUnit : CblasNonUnit;
  int64_t count = jx_linalg_batch_count(in[1].shape);
  if (count * j.rows * j.cols == 0) return;
  jx_linalg_for_each_matrix(count, solve_range, &j);
}

static jx_status jvp_triangular_solve(const jx_rule_ctx *ctx, jx_array *const *x,
                                      jx_array *const *t, jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  jx_array *ans = jx_linalg_bind_triangular_solve(x[0], x[1], p);
  y[0] = ans;
  ty[0] = NULL;
  jx_array *rhs = t[1];
  if (t[0]) {
    int lower = p->i[1] != 0, unit = p->i[3] != 0;
    jx_array *da = jx_linalg_triangle(t[0], lower, lower ? -unit : unit);
    if (p->i[2]) da = jx_linalg_swap_last(da);
    if (p->i[4] && jx_is_complex(da->dtype)) da = jx_conj(da);
    rhs = jx_rule_sub(rhs, p->i[0] ? jx_matmul(da, ans) : jx_matmul(ans, da));
  }
  if (rhs) ty[0] = jx_linalg_bind_triangular_solve(x[0], rhs, p);
  return jx_last_status();
}

static jx_status transpose_triangular_solve(const jx_rule_ctx *ctx, jx_array *const *in,
                                            const jx_aval *in_avals, const uint8_t *linear,
                                            jx_array *const *ct, jx_array **ct_in) {
  (void)in_avals;
  ct_in[0] = ct_in[1] = NULL;
  if (linear[0])
    return jx_error_set(JX_ERR_INTERNAL, "triangular_solve: not linear in its matrix operand a");
  if (!ct[0]) return JX_OK;
  jx_params q = *ctx->params;
  q.i[2] = !q.i[2];
  ct_in[1] = jx_linalg_bind_triangular_solve(in[0], ct[0], &q);
  return jx_last_status();
}

const jx_prim jx_prim_triangular_solve = {
    .name = "triangular_solve",
    .id = JX_PRIM_triangular_solve,
    .nin = 2,
    .nout = 1,
    .params = "left_side=i0 lower=i1 transpose_a=i2 unit_diagonal=i3 conjugate_a=i4",
    .infer = infer_triangular_solve,
    .eval = eval_triangular_solve,
    .jvp = jvp_triangular_solve,
    .transpose = transpose_triangular_solve,
    .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(triangular_solve, &jx_prim_triangular_solve)
