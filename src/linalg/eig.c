/* eig: the eigendecomposition of each general square matrix of a stack,
 * through LAPACK's geev (as JAX's CPU lowering), as lax.linalg.eig. The
 * results are complex (f32 and c64 give c64, f64 and c128 give c128):
 * outputs (w [..., n], vl, vr, vl_inv, vr_inv), the eigenvalues in LAPACK's
 * order, the left eigenvectors (u_j^H a = w_j u_j^H) in vl's columns with
 * compute_left=i0, the right ones (a v_j = w_j v_j) in vr's with
 * compute_right=i1, each of unit 2-norm with its largest component real
 * (geev's normalization). With inverses=i2 the kernel also inverts vl and
 * vr (for the JVP below); an output not asked for is empty ([..., n, 0]). A
 * real geev returns a conjugate pair's vectors packed as (re, im) columns;
 * they are unpacked to v_j = re + i im, v_j+1 = re - i im. A matrix holding
 * a NaN or an infinity, or one geev fails to converge on, gives NaNs in
 * every output, as JAX's lowering does when LAPACK reports failure.
 *
 * JVP (JAX's eig_jvp_rule): with P = vr^-1 dA vr, dw = diag(P). The
 * eigenvectors' derivative is JAX's _eig_vec_jvp, taken under geev's
 * normalization and valid only for distinct eigenvalues and a unique
 * largest component per vector, which cannot be checked; as in JAX it needs
 * the opt-in eigvec_derivs=i3 and is an error otherwise:
 *   U = vr (F o P), F_ij = 1 / (w_j - w_i) off the diagonal, 0 on it,
 *   dv_j = U_j + c_j v_j, c_j = -Re(v_j^H U_j) - i Im(U_kj) / Re(v_kj),
 *   k = argmax_i |v_ij|;
 * the left vectors alike from conj(w), vl and dA^H. The inverses' tangents
 * are -vr^-1 dvr vr^-1, so second derivatives exist wherever JAX's do.
 * Batching moves the batch axis to the front. */
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

enum { OUT_W, OUT_VL, OUT_VR, OUT_VL_INV, OUT_VR_INV, NOUT };

jx_status jx_linalg_check_eig_operand(const char *op, const jx_aval *av) {
  char s[JX_AVAL_STR_CAP];
  int r = av->shape.rank;
  if (av->dtype != JX_F32 && av->dtype != JX_F64 && av->dtype != JX_C64 && av->dtype != JX_C128)
    return jx_error_set(JX_ERR_DTYPE, "%s: operand %s must be f32, f64, c64 or c128", op,
                        jx_aval_str(av->dtype, av->shape, s));
  if (r < 2 || av->shape.dims[r - 1] != av->shape.dims[r - 2])
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: operand %s must be a square matrix (or a stack of them) in its last "
                        "two axes",
                        op, jx_aval_str(av->dtype, av->shape, s));
  return JX_OK;
}

static jx_status infer_eig(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  jx_status st = jx_linalg_check_eig_operand(ctx->prim->name, in);
  if (st) return st;
  const jx_params *p = ctx->params;
  jx_dtype ct = jx_is_complex(in->dtype) ? in->dtype : in->dtype == JX_F64 ? JX_C128 : JX_C64;
  int r = in->shape.rank;
  jx_shape w = in->shape, empty = in->shape;
  w.rank--;
  empty.dims[r - 1] = 0;
  int asked[NOUT] = {1, p->i[0], p->i[1], p->i[0] && p->i[2], p->i[2]};
  out[OUT_W] = (jx_aval){ct, 0, w, 0};
  for (int o = OUT_VL; o < NOUT; o++) out[o] = (jx_aval){ct, 0, asked[o] ? in->shape : empty, 0};
  return JX_OK;
}

typedef struct {
  const jx_tensor *in;
  jx_tensor *out;
  int64_t n;
  int left, right, inverses;
  atomic_int out_of_memory;
} eig_job;

/* The complex vectors of a real geev's packed columns v (row-major n x n)
 * into z: a real eigenvalue's column as it is, a pair's (re, im) columns as
 * re + i im and re - i im. */
#define DEFINE_UNPACK(T, CT, L)                                                                    \
  static void unpack_##L(int64_t n, const T *wi, const T *v, CT *z) {                              \
    for (int64_t j = 0; j < n; j++) {                                                              \
      int pair_start = wi[j] != 0 && j + 1 < n;                                                    \
      for (int64_t i = 0; i < n; i++) {                                                            \
        T re = v[i * n + j], im = pair_start ? v[i * n + j + 1] : 0;                               \
        z[i * n + j] = re + im * (CT)I;                                                            \
        if (pair_start) z[i * n + j + 1] = re - im * (CT)I;                                        \
      }                                                                                            \
      j += pair_start;                                                                             \
    }                                                                                              \
  }
DEFINE_UNPACK(double, double complex, d)
DEFINE_UNPACK(float, float complex, s)

/* geev of the row-major n x n matrix a (destroyed) into the complex w, vl
 * and vr (vl, vr NULL when not asked); scratch holds 2n + 2n^2 reals.
 * Returns LAPACK's info, nonzero when a is not finite. */
#define DEFINE_GEEV_REAL(T, CT, L)                                                                 \
  static int geev_##L(int64_t n, T *a, CT *w, CT *vl, CT *vr, T *scratch) {                        \
    for (int64_t i = 0; i < n * n; i++)                                                            \
      if (!isfinite(a[i])) return 1;                                                               \
    T *wr = scratch, *wi = wr + n, *rvl = wi + n, *rvr = rvl + n * n;                              \
    int info = LAPACKE_##L##geev(LAPACK_ROW_MAJOR, vl ? 'V' : 'N', vr ? 'V' : 'N', n, a, n, wr,    \
                                 wi, rvl, n, rvr, n);                                              \
    if (info) return info;                                                                         \
    for (int64_t j = 0; j < n; j++) w[j] = wr[j] + wi[j] * (CT)I;                                  \
    if (vl) unpack_##L(n, wi, rvl, vl);                                                            \
    if (vr) unpack_##L(n, wi, rvr, vr);                                                            \
    return 0;                                                                                      \
  }
DEFINE_GEEV_REAL(double, double complex, d)
DEFINE_GEEV_REAL(float, float complex, s)

#define DEFINE_GEEV_COMPLEX(CT, L)                                                                 \
  static int geev_##L(int64_t n, CT *a, CT *w, CT *vl, CT *vr) {                                   \
    for (int64_t i = 0; i < n * n; i++)                                                            \
      if (!isfinite(creal(a[i])) || !isfinite(cimag(a[i]))) return 1;                              \
    return LAPACKE_##L##geev(LAPACK_ROW_MAJOR, vl ? 'V' : 'N', vr ? 'V' : 'N', n, a, n, w, vl, n,  \
                             vr, n);                                                               \
  }
DEFINE_GEEV_COMPLEX(double complex, z)
DEFINE_GEEV_COMPLEX(float complex, c)

/* inv = v^-1 for the complex row-major n x n v (copied into lu first), by
 * gesv against the identity; NaNs when v is singular. */
#define DEFINE_INVERT(CT, L)                                                                       \
  static void invert_##L(int64_t n, const CT *v, CT *inv, CT *lu, lapack_int *ipiv) {              \
    memcpy(lu, v, sizeof(CT) * (size_t)(n * n));                                                   \
    for (int64_t i = 0; i < n * n; i++) inv[i] = i % (n + 1) == 0;                                 \
    if (LAPACKE_##L##gesv(LAPACK_ROW_MAJOR, n, n, lu, n, ipiv, inv, n) != 0)                       \
      for (int64_t i = 0; i < n * n; i++) inv[i] = NAN;                                            \
  }
DEFINE_INVERT(double complex, z)
DEFINE_INVERT(float complex, c)

/* Output o of matrix b, or NULL when o is empty. */
static void *matrix_out(const eig_job *j, int o, int64_t b) {
  size_t es = jx_dtype_size(j->out[o].dtype);
  int64_t per = o == OUT_W ? j->n : j->out[o].shape.dims[j->out[o].shape.rank - 1] * j->n;
  return per ? (char *)j->out[o].data + es * (size_t)(b * per) : NULL;
}

/* Every output of matrix b NaN (geev failed or a was not finite). */
static void fill_nan(const eig_job *j, int64_t b) {
  for (int o = 0; o < NOUT; o++) {
    void *d = matrix_out(j, o, b);
    int64_t count = 2 * (o == OUT_W ? j->n : j->n * j->n);
    for (int64_t i = 0; d && i < count; i++) {
      if (j->out[o].dtype == JX_C128)
        ((double *)d)[i] = NAN;
      else
        ((float *)d)[i] = NAN;
    }
  }
}

static void decompose(const eig_job *j, int64_t b, char *a, char *scratch) {
  int64_t n = j->n;
  void *w = matrix_out(j, OUT_W, b), *vl = matrix_out(j, OUT_VL, b), *vr = matrix_out(j, OUT_VR, b);
  int info;
  switch (j->in->dtype) {
  case JX_F64: info = geev_d(n, (double *)a, w, vl, vr, (double *)scratch); break;
  case JX_F32: info = geev_s(n, (float *)a, w, vl, vr, (float *)scratch); break;
  case JX_C128: info = geev_z(n, (double complex *)a, w, vl, vr); break;
  default: info = geev_c(n, (float complex *)a, w, vl, vr); break;
  }
  if (info) {
    fill_nan(j, b);
    return;
  }
  lapack_int *ipiv = (lapack_int *)scratch; /* geev's scratch is free again */
  char *lu = scratch + sizeof(lapack_int) * (size_t)n;
  for (int o = OUT_VL_INV; o <= OUT_VR_INV; o++) {
    void *inv = matrix_out(j, o, b), *v = o == OUT_VL_INV ? vl : vr;
    if (!inv) continue;
    if (j->out[o].dtype == JX_C128)
      invert_z(n, v, inv, (double complex *)lu, ipiv);
    else
      invert_c(n, v, inv, (float complex *)lu, ipiv);
  }
}

static void decompose_range(void *ctx, int64_t b0, int64_t b1) {
  eig_job *j = ctx;
  int64_t n = j->n;
  size_t in_bytes = jx_dtype_size(j->in->dtype) * (size_t)(n * n);
  /* a's copy, then geev's real scratch (2n + 2n^2 reals) or the inverse's
   * pivots and LU (n ints and n^2 complex): room for either */
  size_t real_bytes = jx_dtype_size(j->in->dtype) * (size_t)(2 * n + 2 * n * n);
  size_t inv_bytes =
      sizeof(lapack_int) * (size_t)n + jx_dtype_size(j->out[0].dtype) * (size_t)(n * n);
  char *a = malloc(in_bytes + (real_bytes > inv_bytes ? real_bytes : inv_bytes));
  if (!a) {
    atomic_store(&j->out_of_memory, 1);
    return;
  }
  for (int64_t b = b0; b < b1; b++) {
    memcpy(a, (const char *)j->in->data + in_bytes * (size_t)b, in_bytes);
    decompose(j, b, a, a + in_bytes);
  }
  free(a);
}

static void eval_eig(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  const jx_params *p = ctx->params;
  eig_job j = {.in = in, .out = out, .left = p->i[0], .right = p->i[1], .inverses = p->i[2]};
  j.n = in->shape.dims[in->shape.rank - 1];
  if (j.n == 0) return; /* empty results */
  jx_linalg_for_each_matrix(jx_linalg_batch_count(in->shape), decompose_range, &j);
  if (atomic_load(&j.out_of_memory))
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "eig: out of memory for a %lldx%lld matrix", (long long)j.n,
                 (long long)j.n);
}

/* JAX's _eig_vec_jvp: (dw, dv) for eigenvalues w [..., n], eigenvectors v
 * [..., n, n] (columns) with inverse v_inv, and the complex tangent da. */
static void vec_jvp(jx_array *w, jx_array *v, jx_array *v_inv, jx_array *da, jx_array **dw,
                    jx_array **dv) {
  jx_array *p = jx_matmul(jx_matmul(v_inv, da), v);
  *dw = jx_linalg_diagonal(p);
  if (!dv) return;
  jx_array *eye = jx_linalg_eye_like(v);
  /* F_ij = 1 / (w_j - w_i), the identity keeping the diagonal's reciprocal finite */
  jx_array *gaps = jx_sub(jx_expand_dims(w, -2), jx_expand_dims(w, -1));
  jx_array *f = jx_sub(jx_reciprocal(jx_add(eye, gaps)), eye);
  jx_array *u = jx_matmul(v, jx_mul(f, p));
  /* the scalar c_j that keeps v_j of unit norm with its largest component real */
  int rows = v->shape.rank - 2;
  jx_array *k = jx_expand_dims(jx_argmax(jx_abs(v), rows), rows);
  jx_array *mask =
      jx_astype(jx_eq(jx_iota(JX_I32, v->shape, rows), jx_astype(k, JX_I32)), v->dtype);
  jx_array *re = jx_neg(jx_real(jx_sum(jx_mul(jx_conj(v), u), JX_AXES(rows), 0)));
  jx_array *im = jx_neg(jx_div(jx_imag(jx_sum(jx_mul(mask, u), JX_AXES(rows), 0)),
                               jx_real(jx_sum(jx_mul(mask, v), JX_AXES(rows), 0))));
  *dv = jx_add(u, jx_mul(v, jx_expand_dims(jx_complex(re, im), rows)));
}

static jx_status jvp_eig(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                         jx_array **y, jx_array **ty) {
  const jx_params *p = ctx->params;
  int left = p->i[0], right = p->i[1], inverses = p->i[2], derivs = p->i[3];
  for (int o = 0; o < NOUT; o++) ty[o] = NULL;
  if (!t[0]) return jx_bind(&jx_prim_eig, 1, x, p, y);
  if ((left || right || inverses) && !derivs)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "eig: the derivative of eigenvectors of a general matrix is only valid "
                        "where every eigenvalue is distinct and no eigenvector has two largest "
                        "components, which jx cannot check; opt in with enable_eigvec_derivs "
                        "(jx_linalg_eig_ex), as jax.lax.linalg.eig, or differentiate the "
                        "eigenvalues alone (jx_linalg_eigvals)");
  /* the eigenvectors and their inverses, which every tangent needs */
  jx_params full = *p;
  full.i[1] = full.i[2] = 1;
  jx_array *all[NOUT];
  jx_status st = jx_bind(&jx_prim_eig, 1, x, &full, all);
  if (st) return st;
  jx_array *w = all[OUT_W], *vr = all[OUT_VR], *vr_inv = all[OUT_VR_INV];
  jx_shape empty = vr->shape;
  empty.dims[empty.rank - 1] = 0;
  y[OUT_W] = w;
  y[OUT_VL] = all[OUT_VL]; /* empty unless asked, as the caller's */
  y[OUT_VR] = right ? vr : jx_zeros(w->dtype, empty);
  y[OUT_VL_INV] = all[OUT_VL_INV];
  y[OUT_VR_INV] = inverses ? vr_inv : jx_zeros(w->dtype, empty);
  jx_array *da = jx_astype(t[0], w->dtype);
  jx_array *dvr = NULL;
  vec_jvp(w, vr, vr_inv, da, &ty[OUT_W], left || right || inverses ? &dvr : NULL);
  if (right) ty[OUT_VR] = dvr;
  if (inverses) ty[OUT_VR_INV] = jx_neg(jx_matmul(jx_matmul(vr_inv, dvr), vr_inv));
  if (left) {
    jx_array *vl = all[OUT_VL], *vl_inv = all[OUT_VL_INV], *dw_unused, *dvl;
    vec_jvp(jx_conj(w), vl, vl_inv, jx_conj(jx_linalg_swap_last(da)), &dw_unused, &dvl);
    ty[OUT_VL] = dvl;
    if (inverses) ty[OUT_VL_INV] = jx_neg(jx_matmul(jx_matmul(vl_inv, dvl), vl_inv));
  }
  return jx_last_status();
}

const jx_prim jx_prim_eig = {.name = "eig",
                             .id = JX_PRIM_eig,
                             .nin = 1,
                             .nout = NOUT,
                             .params = "compute_left=i0 compute_right=i1 inverses=i2 "
                                       "eigvec_derivs=i3",
                             .infer = infer_eig,
                             .eval = eval_eig,
                             .jvp = jvp_eig,
                             .batch = jx_batch_vectorized};

JX_REGISTER_PRIMS(eig, &jx_prim_eig)
