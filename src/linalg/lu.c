/* lu: the LU factorization with partial pivoting of each square matrix of a
 * stack, through LAPACK's getrf (s, d, c, z): outputs (lu, pivots, permutation) as
 * lax.linalg.lu, where lu holds L's strict lower part (L has a unit
 * diagonal) and U's upper triangle, pivots[i] (i32, 0-based) is the row
 * swapped with row i at step i, and permutation (i32) the rows of a in the
 * order of P a = L U. A singular matrix factors all the same (a zero on U's
 * diagonal), as in JAX.
 *
 * JVP (JAX's _lu_jvp_rule for square matrices): with X = L^-1 P dA U^-1,
 * dLU = L tril(X, -1) + triu(X) U; the integer outputs have no tangent.
 * Batching moves the batch axis to the front. */
#include <lapacke.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_lu(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_inexact_square(ctx->prim->name, "operand", in);
  if (st) return st;
  jx_shape rows = in->shape;
  rows.rank--; /* [..., m] */
  out[0] = (jx_aval){in->dtype, 0, in->shape, 0};
  out[1] = out[2] = (jx_aval){JX_I32, 0, rows, 0};
  return JX_OK;
}

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
  atomic_int out_of_memory;
} lu_job;

static void factor_range(void *ctx, int64_t b0, int64_t b1) {
  lu_job *j = ctx;
  int64_t n = j->n;
  size_t bytes = jx_dtype_size(j->in->dtype) * (size_t)(n * n);
  lapack_int *ipiv = malloc(sizeof *ipiv * (size_t)n);
  if (!ipiv) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t b = b0; b < b1; b++) {
    char *m = (char *)j->out[0].data + bytes * (size_t)b;
    int32_t *piv = (int32_t *)j->out[1].data + b * n, *perm = (int32_t *)j->out[2].data + b * n;
    memcpy(m, (const char *)j->in->data + bytes * (size_t)b, bytes);
    /* info > 0 (a zero pivot) still leaves a complete factorization; the
     * _work entry point skips LAPACKE's NaN check, so a matrix holding NaNs
     * factors as LAPACK (and JAX) factor it instead of leaving ipiv unset */
    switch (jx_linalg_type_of(j->in->dtype)) {
    case JX_LINALG_S: LAPACKE_sgetrf_work(LAPACK_ROW_MAJOR, n, n, (float *)m, n, ipiv); break;
    case JX_LINALG_D: LAPACKE_dgetrf_work(LAPACK_ROW_MAJOR, n, n, (double *)m, n, ipiv); break;
    case JX_LINALG_C: LAPACKE_cgetrf_work(LAPACK_ROW_MAJOR, n, n, (void *)m, n, ipiv); break;
    case JX_LINALG_Z: LAPACKE_zgetrf_work(LAPACK_ROW_MAJOR, n, n, (void *)m, n, ipiv); break;
    }
    for (int64_t i = 0; i < n; i++) perm[i] = (int32_t)i;
    for (int64_t i = 0; i < n; i++) {
      /* a pivot out of range (none LAPACK gives, but a BLAS's NaN search
       * might) swaps nothing rather than writing outside perm */
      piv[i] = ipiv[i] >= 1 && ipiv[i] <= n ? (int32_t)(ipiv[i] - 1) : (int32_t)i;
      int32_t t = perm[i];
      perm[i] = perm[piv[i]];
      perm[piv[i]] = t;
    }
  }
  free(ipiv);
}

static void eval_lu(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int r = in->shape.rank;
  lu_job j = {.in = in, .out = out, .n = in->shape.dims[r - 1]};
  if (j.n == 0) return;
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), factor_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "lu: out of memory for %lld pivots", (long long)j.n);
}

static jx_status jvp_lu(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                        jx_array **y, jx_array **ty) {
  jx_status st = jx_bind(&jx_prim_lu, 1, x, ctx->params, y);
  ty[0] = ty[1] = ty[2] = NULL;
  if (st || !t[0]) return st;
  jx_array *lu = y[0];
  jx_params unit_lower = JX_PARAMS_INIT, upper_right = JX_PARAMS_INIT;
  unit_lower.i[0] = unit_lower.i[1] = unit_lower.i[3] = 1; /* L^-1 (.) */
  /* upper_right: (.) U^-1, all flags off */
  jx_array *x1 =
      jx_linalg_bind_triangular_solve(lu, jx_linalg_permute_rows(t[0], y[2]), &unit_lower);
  x1 = jx_linalg_bind_triangular_solve(lu, x1, &upper_right);
  jx_array *l = jx_add(jx_linalg_triangle(lu, 1, -1), jx_linalg_eye_like(lu));
  jx_array *u = jx_linalg_triangle(lu, 0, 0);
  ty[0] = jx_add(jx_matmul(l, jx_linalg_triangle(x1, 1, -1)),
                 jx_matmul(jx_linalg_triangle(x1, 0, 0), u));
  return jx_last_status();
}

const jx_prim jx_prim_lu = {.name = "lu",
                            .id = JX_PRIM_lu,
                            .nin = 1,
                            .nout = 3,
                            .params = "",
                            .infer = infer_lu,
                            .eval = eval_lu,
                            .jvp = jvp_lu,
                            .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(lu, &jx_prim_lu)
