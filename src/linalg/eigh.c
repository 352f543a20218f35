/* eigh: the eigenvalues (ascending) and orthonormal eigenvectors of each
 * symmetric (real) or Hermitian (complex) matrix of a stack, through
 * LAPACK's syevd or heevd reading the lower triangle: outputs (w [..., n],
 * real, v [..., n, n], a's dtype) with a = v diag(w) v^H, the eigenvectors in
 * v's columns (their phases are LAPACK's). A matrix LAPACK fails to converge
 * on, or one holding a NaN, gives NaNs in both outputs.
 *
 * JVP (JAX's _eigh_jvp_rule): with X = V^H dA V, dw = re(diag(X)) and
 * dV = V (F o X), F_ij = 1 / (w_j - w_i) off the diagonal and 0 on it, built
 * as 1 / (I + w_j - w_i) - I as JAX does: equal eigenvalues give infs in F
 * (and infs/NaNs in dV), no special case. Batching moves the batch axis to
 * the front. */
#include <complex.h>
#include <lapacke.h>
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../prims/rules.h"
#include "linalg_prims.h"

static jx_status infer_eigh(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_inexact_square(ctx->prim->name, "operand", in);
  if (st) return st;
  jx_shape values = in->shape;
  values.rank--; /* [..., n] */
  out[0] = (jx_aval){jx_complex_part(in->dtype), 0, values, 0};
  out[1] = (jx_aval){in->dtype, 0, in->shape, 0};
  return JX_OK;
}

/* syevd as JAX's CPU kernel calls it: on a column-major copy, with the
 * workspace (1 + 6n + 2n^2 reals, 3 + 5n ints, LAPACK's sizes for vectors)
 * allocated once per range rather than per matrix. The operand is symmetric
 * (symmetrized by jx_linalg_eigh, or a tangent rule's symmetric matrix), so
 * its row-major data is its column-major data too: syevd runs on a plain
 * copy, the lower triangle in its column-major view being the one LAPACKE's
 * row-major 'L' would give it, and only the eigenvectors, which come back in
 * columns of a column-major matrix, are transposed into v. A matrix holding
 * a NaN or an infinity is not handed to LAPACK: it gives NaNs. */
typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
  atomic_int out_of_memory;
} eigh_job;

#define DEFINE_DECOMPOSE(T, L)                                                                     \
  static void decompose_##L(int64_t n, const T *a, T *w, T *v, T *m, T *work, lapack_int *iwork) { \
    memcpy(m, a, sizeof(T) * (size_t)(n * n));                                                     \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < n * n && finite; i++) finite = isfinite(m[i]);                         \
    lapack_int info = !finite                                                                      \
                          ? 1                                                                      \
                          : LAPACKE_##L##syevd_work(LAPACK_COL_MAJOR, 'V', 'L', n, m, n, w, work,  \
                                                    1 + 6 * n + 2 * n * n, iwork, 3 + 5 * n);      \
    for (int64_t i = 0; i < n; i++)                                                                \
      for (int64_t j = 0; j < n; j++) v[i * n + j] = info ? NAN : m[j * n + i];                    \
    if (info)                                                                                      \
      for (int64_t i = 0; i < n; i++) w[i] = NAN;                                                  \
  }
DEFINE_DECOMPOSE(double, d)
DEFINE_DECOMPOSE(float, s)

/* heevd likewise: the row-major data of a Hermitian matrix is the
 * column-major data of its conjugate, whose eigenvalues are the same and
 * whose eigenvectors are the conjugates, so v takes the conjugated
 * transpose. work holds 2n + n^2 entries, rwork 1 + 5n + 2n^2 reals. */
#define DEFINE_DECOMPOSE_COMPLEX(T, R, L, CONJ, RE, IM)                                            \
  static void decompose_##L(int64_t n, const T *a, R *w, T *v, T *m, T *work, R *rwork,            \
                            lapack_int *iwork) {                                                   \
    memcpy(m, a, sizeof(T) * (size_t)(n * n));                                                     \
    int finite = 1;                                                                                \
    for (int64_t i = 0; i < n * n && finite; i++)                                                  \
      finite = isfinite(RE(m[i])) && isfinite(IM(m[i]));                                           \
    lapack_int info = !finite ? 1                                                                  \
                              : LAPACKE_##L##heevd_work(LAPACK_COL_MAJOR, 'V', 'L', n, m, n, w,    \
                                                        work, 2 * n + n * n, rwork,                \
                                                        1 + 5 * n + 2 * n * n, iwork, 3 + 5 * n);  \
    for (int64_t i = 0; i < n; i++)                                                                \
      for (int64_t j = 0; j < n; j++) v[i * n + j] = info ? NAN : CONJ(m[j * n + i]);              \
    if (info)                                                                                      \
      for (int64_t i = 0; i < n; i++) w[i] = NAN;                                                  \
  }
DEFINE_DECOMPOSE_COMPLEX(double complex, double, z, conj, creal, cimag)
DEFINE_DECOMPOSE_COMPLEX(float complex, float, c, conjf, crealf, cimagf)

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  eigh_job *j = ctx;
  int64_t n = j->n;
  jx_dtype dt = j->in->dtype;
  size_t es = jx_dtype_size(dt), ws = jx_dtype_size(j->out[0].dtype), nn = (size_t)(n * n);
  /* real: work 1 + 6n + 2n^2; complex: work 2n + n^2 entries, then rwork */
  size_t work_bytes = es * (1 + 6 * (size_t)n + 2 * nn);
  if (jx_is_complex(dt)) work_bytes = es * (2 * (size_t)n + nn) + ws * (1 + 5 * (size_t)n + 2 * nn);
  char *m = malloc(es * nn + work_bytes + sizeof(lapack_int) * (size_t)(3 + 5 * n));
  if (!m) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  char *work = m + es * nn, *iwork = work + work_bytes, *rwork = work + es * (2 * (size_t)n + nn);
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * nn * (size_t)b;
    char *w = (char *)j->out[0].data + ws * (size_t)(n * b);
    char *v = (char *)j->out[1].data + es * nn * (size_t)b;
    if (dt == JX_C128)
      decompose_z(n, (const double complex *)a, (double *)w, (double complex *)v,
                  (double complex *)m, (double complex *)work, (double *)rwork,
                  (lapack_int *)iwork);
    else if (dt == JX_C64)
      decompose_c(n, (const float complex *)a, (float *)w, (float complex *)v, (float complex *)m,
                  (float complex *)work, (float *)rwork, (lapack_int *)iwork);
    else if (dt == JX_F64)
      decompose_d(n, (const double *)a, (double *)w, (double *)v, (double *)m, (double *)work,
                  (lapack_int *)iwork);
    else
      decompose_s(n, (const float *)a, (float *)w, (float *)v, (float *)m, (float *)work,
                  (lapack_int *)iwork);
  }
  free(m);
}

static void eval_eigh(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int r = in->shape.rank;
  eigh_job j = {.in = in, .out = out, .n = in->shape.dims[r - 1]};
  if (j.n == 0) return;
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), decompose_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "eigh: out of memory for a %lldx%lld matrix", (long long)j.n,
                 (long long)j.n);
}

static jx_status jvp_eigh(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                          jx_array **y, jx_array **ty) {
  jx_status st = jx_bind(&jx_prim_eigh, 1, x, ctx->params, y);
  ty[0] = ty[1] = NULL;
  if (st || !t[0]) return st;
  /* w in v's dtype, as JAX: F and the product with X are complex for complex a */
  jx_array *w = jx_astype(y[0], y[1]->dtype), *v = y[1], *eye = jx_linalg_eye_like(v);
  /* gaps[i, j] = w_j - w_i; the identity keeps the diagonal's reciprocal finite */
  jx_array *gaps = jx_sub(jx_expand_dims(w, -2), jx_expand_dims(w, -1));
  jx_array *f = jx_sub(jx_reciprocal(jx_add(eye, gaps)), eye);
  jx_array *vh_da_v = jx_matmul(jx_matmul(jx_linalg_adjoint(v), t[0]), v);
  jx_array *dw = jx_linalg_diagonal(vh_da_v);
  ty[0] = jx_is_complex(dw->dtype) ? jx_real(dw) : dw;
  ty[1] = jx_matmul(v, jx_mul(f, vh_da_v));
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
