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
 * its row-major data is its column-major data too: LAPACK runs on a plain
 * copy, the lower triangle in its column-major view being the one LAPACKE's
 * row-major 'L' would give it, and only the eigenvectors, which come back in
 * columns of a column-major matrix, are transposed into v. A matrix holding
 * a NaN or an infinity is not handed to LAPACK: it gives NaNs.
 *
 * A real matrix runs syevd's steps here rather than syevd itself, so that
 * both cores work on a lone matrix without OpenBLAS's threads
 * (blas_threads.h says why they stay off): syevd's scaling, sytrd and stedc,
 * then the back-transformation ormtr (a third of the time at 512 x 512) and
 * the transposition into v, split into column blocks of the eigenvectors
 * spread over jx's pool. The blocks follow from the shape alone, not from
 * the threads or the load; the bits are syevd's. */
typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
  int64_t blocks; /* of the real back-transformation */
  atomic_int out_of_memory;
} eigh_job;

/* One real matrix: m the copy, w and v the outputs, work syevd's workspace
 * (e, tau, the tridiagonal's eigenvectors z, then stedc's scratch), one
 * ormtr scratch of block_lwork entries per block after it. */
typedef struct {
  const eigh_job *job;
  void *m, *w, *v, *work;
  lapack_int block_lwork, *iwork;
} eigh_matrix;

#define SYEVD_LWORK(n) (1 + 6 * (n) + 2 * (n) * (n))

#define DEFINE_DECOMPOSE(T, L)                                                                     \
  /* syevd's steps up to the back-transformation; 0 or LAPACK's info */                            \
  static lapack_int tridiagonal_eigh_##L(const eigh_matrix *x, const T *a) {                       \
    lapack_int n = x->job->n;                                                                      \
    T *m = x->m, *w = x->w, *e = x->work, *tau = e + n, *z = tau + n, *scratch = z + n * n;        \
    memcpy(m, a, sizeof(T) * (size_t)(n * n));                                                     \
    T anrm = 0; /* LAPACK's lansy('M', 'L'): the largest magnitude in the lower triangle */        \
    for (int64_t j = 0; j < n; j++)                                                                \
      for (int64_t i = 0; i < n; i++) {                                                            \
        if (!isfinite(m[j * n + i])) return 1;                                                     \
        if (i >= j && fabs(m[j * n + i]) > anrm) anrm = fabs(m[j * n + i]);                        \
      }                                                                                            \
    if (n == 1) { /* syevd's quick return: no scaling */                                           \
      w[0] = m[0];                                                                                 \
      z[0] = 1;                                                                                    \
      return 0;                                                                                    \
    }                                                                                              \
    T small = LAPACKE_##L##lamch_work('S') / LAPACKE_##L##lamch_work('P'), big = 1 / small;        \
    T rmin = sqrt(small), rmax = sqrt(big);                                                        \
    T sigma = anrm > 0 && anrm < rmin ? rmin / anrm : anrm > rmax ? rmax / anrm : 0;               \
    if (sigma) LAPACKE_##L##lascl_work(LAPACK_COL_MAJOR, 'L', 0, 0, 1, sigma, n, n, m, n);         \
    lapack_int info = LAPACKE_##L##sytrd_work(LAPACK_COL_MAJOR, 'L', n, m, n, w, e, tau, z,        \
                                              SYEVD_LWORK(n) - 2 * n);                             \
    if (!info)                                                                                     \
      info = LAPACKE_##L##stedc_work(LAPACK_COL_MAJOR, 'I', n, w, e, z, n, scratch,                \
                                     SYEVD_LWORK(n) - 2 * n - n * n, x->iwork, 3 + 5 * n);         \
    if (sigma && !info) {                                                                          \
      T unscale = 1 / sigma;                                                                       \
      for (int64_t i = 0; i < n; i++) w[i] *= unscale;                                             \
    }                                                                                              \
    return info;                                                                                   \
  }                                                                                                \
  /* ormtr on the eigenvectors' column blocks [b0, b1), each into v's columns */                   \
  static void back_transform_##L(void *ctx, int64_t b0, int64_t b1) {                              \
    const eigh_matrix *x = ctx;                                                                    \
    lapack_int n = x->job->n;                                                                      \
    T *tau = (T *)x->work + n, *z = tau + n, *v = x->v;                                            \
    for (int64_t b = b0; b < b1; b++) {                                                            \
      int64_t c0, c1;                                                                              \
      jx_linalg_vector_block(n, x->job->blocks, b, &c0, &c1);                                      \
      T *scratch = (T *)x->work + SYEVD_LWORK(n) + x->block_lwork * b;                             \
      LAPACKE_##L##ormtr_work(LAPACK_COL_MAJOR, 'L', 'L', 'N', n, c1 - c0, x->m, n, tau,           \
                              z + (size_t)c0 * n, n, scratch, x->block_lwork);                     \
      for (int64_t i = 0; i < n; i++)                                                              \
        for (int64_t j = c0; j < c1; j++) v[i * n + j] = z[j * n + i];                             \
    }                                                                                              \
  }                                                                                                \
  /* ormtr's scratch for the widest block, in entries */                                           \
  static lapack_int block_lwork_##L(const eigh_job *j) {                                           \
    lapack_int n = j->n, widest = jx_linalg_widest_vector_block(n, j->blocks);                     \
    T q = 0, any = 0;                                                                              \
    LAPACKE_##L##ormtr_work(LAPACK_COL_MAJOR, 'L', 'L', 'N', n, widest, &any, n, &any, &any, n,    \
                            &q, -1);                                                               \
    return (lapack_int)q + JX_LINALG_ORM_TSIZE;                                                    \
  }                                                                                                \
  static void decompose_##L(const eigh_matrix *x, const T *a) {                                    \
    if (!tridiagonal_eigh_##L(x, a)) {                                                             \
      jx_parallel_for(x->job->blocks, 1, back_transform_##L, (void *)x);                           \
      return;                                                                                      \
    }                                                                                              \
    int64_t n = x->job->n;                                                                         \
    for (int64_t i = 0; i < n * n; i++) ((T *)x->v)[i] = NAN;                                      \
    for (int64_t i = 0; i < n; i++) ((T *)x->w)[i] = NAN;                                          \
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
  /* real: syevd's work, then the blocks' ormtr scratch; complex: work 2n + n^2 entries, then
   * rwork */
  eigh_matrix x = {.job = j};
  size_t work_bytes;
  if (jx_is_complex(dt))
    work_bytes = es * (2 * (size_t)n + nn) + ws * (1 + 5 * (size_t)n + 2 * nn);
  else {
    x.block_lwork = dt == JX_F64 ? block_lwork_d(j) : block_lwork_s(j);
    work_bytes = es * ((size_t)SYEVD_LWORK(n) + (size_t)(x.block_lwork * j->blocks));
  }
  char *m = malloc(es * nn + work_bytes + sizeof(lapack_int) * (size_t)(3 + 5 * n));
  if (!m) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  char *work = m + es * nn, *iwork = work + work_bytes, *rwork = work + es * (2 * (size_t)n + nn);
  x.m = m;
  x.work = work;
  x.iwork = (lapack_int *)iwork;
  for (int64_t b = b0; b < b1; b++) {
    const char *a = (const char *)j->in->data + es * nn * (size_t)b;
    char *w = (char *)j->out[0].data + ws * (size_t)(n * b);
    char *v = (char *)j->out[1].data + es * nn * (size_t)b;
    x.w = w;
    x.v = v;
    if (dt == JX_C128)
      decompose_z(n, (const double complex *)a, (double *)w, (double complex *)v,
                  (double complex *)m, (double complex *)work, (double *)rwork,
                  (lapack_int *)iwork);
    else if (dt == JX_C64)
      decompose_c(n, (const float complex *)a, (float *)w, (float complex *)v, (float complex *)m,
                  (float complex *)work, (float *)rwork, (lapack_int *)iwork);
    else if (dt == JX_F64)
      decompose_d(&x, (const double *)a);
    else
      decompose_s(&x, (const float *)a);
  }
  free(m);
}

static void eval_eigh(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx;
  int r = in->shape.rank;
  eigh_job j = {.in = in, .out = out, .n = in->shape.dims[r - 1]};
  if (j.n == 0) return;
  j.blocks = jx_linalg_vector_blocks(j.n);
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
