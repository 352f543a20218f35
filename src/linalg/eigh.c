/* eigh: the eigenvalues (ascending) and orthonormal eigenvectors of each
 * symmetric matrix of a stack, through LAPACK's syevd reading the lower
 * triangle: outputs (w [..., n], v [..., n, n]) with a = v diag(w) v^T, the
 * eigenvectors in v's columns (their signs are LAPACK's). A matrix syevd
 * fails to converge on gives NaNs in both outputs.
 *
 * JVP (JAX's _eigh_jvp_rule): with X = V^T dA V, dw = diag(X) and
 * dV = V (F o X), F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it, built
 * as 1 / (I + w_j - w_i) - I as JAX does: equal eigenvalues give infs in F
 * (and infs/NaNs in dV), no special case. Batching moves the batch axis to
 * the front. */
#include <lapacke.h>
#include <math.h>
#include <string.h>

#include <jx/ops.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_eigh(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_square(ctx->prim->name, "operand", in);
  if (st) return st;
  jx_shape values = in->shape;
  values.rank--; /* [..., n] */
  out[0] = (jx_aval){in->dtype, 0, values, 0};
  out[1] = (jx_aval){in->dtype, 0, in->shape, 0};
  return JX_OK;
}

/* Decomposes the row-major n x n matrix v in place (eigenvectors in its
 * columns), the eigenvalues into w; NaNs in both when syevd fails. */
static void decompose(jx_dtype dt, void *v, void *w, int64_t n) {
  lapack_int info = dt == JX_F64 ? LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, v, n, w)
                                 : LAPACKE_ssyevd(LAPACK_ROW_MAJOR, 'V', 'L', n, v, n, w);
  if (info == 0) return;
  for (int64_t i = 0; i < n * n; i++) {
    if (dt == JX_F64) {
      ((double *)v)[i] = NAN;
      if (i < n) ((double *)w)[i] = NAN;
    } else {
      ((float *)v)[i] = NAN;
      if (i < n) ((float *)w)[i] = NAN;
    }
  }
}

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
} eigh_job;

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  const eigh_job *j = ctx;
  int64_t n = j->n;
  size_t esize = jx_dtype_size(j->in->dtype), bytes = esize * (size_t)(n * n);
  for (int64_t b = b0; b < b1; b++) {
    char *v = (char *)j->out[1].data + bytes * (size_t)b;
    memcpy(v, (const char *)j->in->data + bytes * (size_t)b, bytes);
    decompose(j->in->dtype, v, (char *)j->out[0].data + esize * (size_t)(n * b), n);
  }
}

static void eval_eigh(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int r = in->shape.rank;
  eigh_job j = {.in = in, .out = out, .n = in->shape.dims[r - 1]};
  if (j.n == 0) return;
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), decompose_range, &j);
}

static jx_status jvp_eigh(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                          jx_array **y, jx_array **ty) {
  jx_status st = jx_bind(&jx_prim_eigh, 1, x, ctx->params, y);
  ty[0] = ty[1] = NULL;
  if (st || !t[0]) return st;
  jx_array *w = y[0], *v = y[1], *eye = jx_linalg_eye_like(v);
  /* gaps[i, j] = w_j - w_i; the identity keeps the diagonal's reciprocal finite */
  jx_array *gaps = jx_sub(jx_expand_dims(w, -2), jx_expand_dims(w, -1));
  jx_array *f = jx_sub(jx_reciprocal(jx_add(eye, gaps)), eye);
  jx_array *vt_da_v = jx_matmul(jx_matmul(jx_linalg_swap_last(v), t[0]), v);
  ty[0] = jx_linalg_diagonal(vt_da_v);
  ty[1] = jx_matmul(v, jx_mul(f, vt_da_v));
  return jx_last_status();
}

const jx_prim jx_prim_eigh = {.name = "eigh",
                              .id = JX_PRIM_eigh,
                              .nin = 1,
                              .nout = 2,
                              .params = "",
                              .infer = infer_eigh,
                              .eval = eval_eigh,
                              .jvp = jvp_eigh,
                              .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(eigh, &jx_prim_eigh)
