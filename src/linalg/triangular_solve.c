/* triangular_solve: x with op(a) x = b (left_side) or x op(a) = b, op(a) = a
 * or a^T (transpose_a), a lower or upper triangular (lower; only that
 * triangle is read), its diagonal ones when unit_diagonal. The kernel is a
 * plain substitution in f64 per matrix of the stack; a zero on the diagonal
 * gives infs/NaNs as BLAS's trsm does.
 *
 * Rules, after JAX's lax/linalg.py:
 *  - JVP (_triangular_solve_jvp_rule_a and the linear b rule): with x the
 *    result, dx = op(a)^-1 (db - op(da) x) (left) or (db - x op(da)) op(a)^-1
 *    (right), da cut to a's triangle (strict when unit_diagonal): one more
 *    solve, linear in (da, db) through its b operand;
 *  - transpose (linear in b only): the cotangent solved with op(a)^T;
 *  - batching: both operands' batch axes to the front (an unbatched one
 *    broadcast). */
#include <stdlib.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_triangular_solve(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  const char *op = "triangular_solve";
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  jx_status st = jx_linalg_check_square(op, "a", &in[0]);
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

/* One solve. op(a) y = c with c and y the columns of b/x (left) or, for the
 * right side, x op(a) = b read as op(a)^T x^T = b^T: the rows of b/x. */
typedef struct {
  int64_t m, ncol;
  int trans, lower, unit;          /* of the matrix M actually solved with */
  int64_t col_stride, elem_stride; /* of c/y: column j, element i at j*col_stride + i*elem_stride */
} solve_plan;

static double load(jx_dtype dt, const void *base, int64_t i) {
  return dt == JX_F64 ? ((const double *)base)[i] : (double)((const float *)base)[i];
}

static void store(jx_dtype dt, void *base, int64_t i, double v) {
  if (dt == JX_F64)
    ((double *)base)[i] = v;
  else
    ((float *)base)[i] = (float)v;
}

static void solve_one(const solve_plan *s, jx_dtype dt, const void *a, const void *b, void *x,
                      double *y) {
  int64_t m = s->m;
  for (int64_t j = 0; j < s->ncol; j++) {
    for (int64_t step = 0; step < m; step++) {
      int64_t i = s->lower ? step : m - 1 - step;
      double v = load(dt, b, j * s->col_stride + i * s->elem_stride);
      int64_t lo = s->lower ? 0 : i + 1, hi = s->lower ? i : m;
      for (int64_t k = lo; k < hi; k++) v -= load(dt, a, s->trans ? k * m + i : i * m + k) * y[k];
      y[i] = s->unit ? v : v / load(dt, a, i * m + i);
    }
    for (int64_t i = 0; i < m; i++) store(dt, x, j * s->col_stride + i * s->elem_stride, y[i]);
  }
}

static void eval_triangular_solve(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  const jx_tensor *a = &in[0], *b = &in[1];
  int r = b->shape.rank, left = p->i[0] != 0;
  int64_t m = a->shape.dims[r - 1], rows = b->shape.dims[r - 2], cols = b->shape.dims[r - 1];
  solve_plan s = {.m = m, .unit = p->i[3] != 0};
  /* right side: solve with op(a)^T, so the transpose flag flips */
  s.trans = left ? p->i[2] != 0 : p->i[2] == 0;
  /* the transpose of a lower triangle is an upper one */
  s.lower = (p->i[1] != 0) != s.trans;
  if (left) {
    s.ncol = cols, s.col_stride = 1, s.elem_stride = cols;
  } else {
    s.ncol = rows, s.col_stride = cols, s.elem_stride = 1;
  }
  int64_t count = jx_linalg_batch_count(b->shape);
  if (count * m * s.ncol == 0) return;
  double *y = malloc(sizeof *y * (size_t)m);
  if (!y) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "triangular_solve: out of memory for %lld values",
                 (long long)m);
    return;
  }
  size_t es = jx_dtype_size(b->dtype);
  for (int64_t k = 0; k < count; k++)
    solve_one(&s, b->dtype, (const char *)a->data + es * (size_t)(k * m * m),
              (const char *)b->data + es * (size_t)(k * rows * cols),
              (char *)out->data + es * (size_t)(k * rows * cols), y);
  free(y);
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
    .params = "left_side=i0 lower=i1 transpose_a=i2 unit_diagonal=i3",
    .infer = infer_triangular_solve,
    .eval = eval_triangular_solve,
    .jvp = jvp_triangular_solve,
    .transpose = transpose_triangular_solve,
    .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(triangular_solve, &jx_prim_triangular_solve)
