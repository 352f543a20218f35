/* Helpers shared by the linear algebra primitives and their rules. */
#include <jx/ops.h>

#include "../base/error.h"
#include "../base/threadpool.h"
#include "../prims/blas_threads.h"
#include "../trace/dispatch.h"
#include "linalg_prims.h"

/* The checks below: av's dtype among f32, f64 (and c64, c128 when
 * complex_ok), then a stack of matrices (square ones when square). */
static jx_status check(const char *op, const char *what, const jx_aval *av, int complex_ok,
                       int square) {
  char s[JX_AVAL_STR_CAP];
  int r = av->shape.rank;
  int ok = av->dtype == JX_F32 || av->dtype == JX_F64 || (complex_ok && jx_is_complex(av->dtype));
  if (!ok)
    return jx_error_set(JX_ERR_DTYPE, "%s: %s %s must be %s", op, what,
                        jx_aval_str(av->dtype, av->shape, s),
                        complex_ok ? "f32, f64, c64 or c128" : "f32 or f64");
  if (r < 2 || (square && av->shape.dims[r - 1] != av->shape.dims[r - 2]))
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: %s %s must be a %smatrix (or a stack of them) in its last two axes",
                        op, what, jx_aval_str(av->dtype, av->shape, s), square ? "square " : "");
  return JX_OK;
}

jx_status jx_linalg_check_matrix(const char *op, const char *what, const jx_aval *av) {
  return check(op, what, av, 0, 0);
}

jx_status jx_linalg_check_square(const char *op, const char *what, const jx_aval *av) {
  return check(op, what, av, 0, 1);
}

jx_status jx_linalg_check_inexact_matrix(const char *op, const char *what, const jx_aval *av) {
  return check(op, what, av, 1, 0);
}

jx_status jx_linalg_check_inexact_square(const char *op, const char *what, const jx_aval *av) {
  return check(op, what, av, 1, 1);
}

void jx_linalg_for_each_matrix(int64_t count, jx_range_fn fn, void *ctx) {
  jx_blas_own_threads(); /* the pool's threads each factor whole matrices */
  jx_parallel_for(count, 1, fn, ctx);
}

enum { BLOCK_VECTORS = 256, MAX_BLOCKS = 8, BLOCK_ALIGN = 64 };

int64_t jx_linalg_vector_blocks(int64_t k) {
  int64_t blocks = (k + BLOCK_VECTORS / 2) / BLOCK_VECTORS;
  return blocks < 1 ? 1 : blocks > MAX_BLOCKS ? MAX_BLOCKS : blocks;
}

void jx_linalg_vector_block(int64_t k, int64_t blocks, int64_t b, int64_t *v0, int64_t *v1) {
  *v0 = b == 0 ? 0 : k * b / blocks / BLOCK_ALIGN * BLOCK_ALIGN;
  *v1 = b + 1 == blocks ? k : k * (b + 1) / blocks / BLOCK_ALIGN * BLOCK_ALIGN;
}

int64_t jx_linalg_widest_vector_block(int64_t k, int64_t blocks) {
  int64_t widest = 0, v0, v1;
  for (int64_t b = 0; b < blocks; b++) {
    jx_linalg_vector_block(k, blocks, b, &v0, &v1);
    widest = v1 - v0 > widest ? v1 - v0 : widest;
  }
  return widest;
}

int64_t jx_linalg_batch_count(jx_shape s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank - 2; d++) n *= s.dims[d];
  return n;
}

jx_array *jx_linalg_triangle(jx_array *x, int lower, int k) {
  int r = x->shape.rank;
  jx_shape s = JX_SHAPE(x->shape.dims[r - 2], x->shape.dims[r - 1]);
  jx_array *row = jx_add(jx_iota(JX_I32, s, 0), jx_scalar(JX_I32, k)), *col = jx_iota(JX_I32, s, 1);
  jx_array *keep = lower ? jx_ge(row, col) : jx_ge(col, row);
  return jx_where(keep, x, jx_zeros(x->dtype, JX_SHAPE()));
}

jx_array *jx_linalg_diagonal(jx_array *x) {
  int r = x->shape.rank;
  jx_shape s = JX_SHAPE(x->shape.dims[r - 1], x->shape.dims[r - 1]);
  jx_array *on_diag = jx_eq(jx_iota(JX_I32, s, 0), jx_iota(JX_I32, s, 1));
  return jx_sum(jx_where(on_diag, x, jx_zeros(x->dtype, JX_SHAPE())), JX_AXES(r - 1), 0);
}

jx_array *jx_linalg_block(jx_array *x, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
  jx_shape start = x->shape, stop = x->shape, step = x->shape;
  int r = x->shape.rank;
  for (int d = 0; d < r; d++) start.dims[d] = 0, step.dims[d] = 1;
  start.dims[r - 2] = r0, stop.dims[r - 2] = r1;
  start.dims[r - 1] = c0, stop.dims[r - 1] = c1;
  return jx_slice(x, start, stop, step);
}

jx_array *jx_linalg_eye_like(jx_array *x) {
  return jx_eye(x->dtype, x->shape.dims[x->shape.rank - 1]);
}

jx_array *jx_linalg_permute_rows(jx_array *x, jx_array *perm) {
  jx_array *rows = jx_broadcast_to(jx_expand_dims(perm, -1), x->shape);
  return jx_take_along_axis(x, rows, x->shape.rank - 2);
}

jx_array *jx_linalg_swap_last(jx_array *x) {
  int r = x->shape.rank, perm[JX_MAX_RANK];
  for (int d = 0; d < r; d++) perm[d] = d;
  perm[r - 2] = r - 1;
  perm[r - 1] = r - 2;
  return jx_transpose(x, jx_axes_make(r, perm));
}

jx_array *jx_linalg_adjoint(jx_array *x) {
  /* jx_conj of a real array would stop its gradient: a real x is only transposed */
  jx_array *t = jx_linalg_swap_last(x);
  return jx_is_complex(x->dtype) ? jx_conj(t) : t;
}

jx_array *jx_linalg_hermitian_part(jx_array *x) {
  return jx_mul(jx_add(x, jx_linalg_adjoint(x)), jx_scalar(jx_complex_part(x->dtype), 0.5));
}

jx_array *jx_linalg_bind_triangular_solve(jx_array *a, jx_array *b, const jx_params *p) {
  jx_array *in[2] = {a, b};
  return jx_bind1(&jx_prim_triangular_solve, 2, in, p);
}
