/* Matrix powers and the matrix exponential (jx/linalg.h), composed as
 * jnp.linalg.matrix_power and jax.scipy.linalg.expm compose them, so their
 * derivatives, batching and sharding are their parts'. */
#include <math.h>

#include <jx/linalg.h>
#include <jx/ops.h>

#include "../base/error.h"
#include "../trace/dispatch.h"
#include "linalg_prims.h"

/* Checks a as f32/f64/c64/c128 square matrices for op; 0 when fine. */
static jx_status check_square(const char *op, jx_array *a) {
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  jx_aval av = {a->dtype, a->weak, a->shape, 0};
  return jx_linalg_check_inexact_square(op, "operand", &av);
}

jx_array *jx_linalg_matrix_power(jx_array *a, int64_t n) {
  if (check_square("jx_linalg_matrix_power", a)) return jx_poison();
  if (n == 0) return jx_broadcast_to(jx_linalg_eye_like(a), a->shape);
  /* a negative power is the inverse's (|n| as an unsigned: INT64_MIN too) */
  uint64_t k = n < 0 ? 0 - (uint64_t)n : (uint64_t)n;
  if (n < 0) a = jx_linalg_inv(a);
  if (k == 1) return a;
  if (k == 2) return jx_matmul(a, a);
  if (k == 3) return jx_matmul(jx_matmul(a, a), a);
  /* binary powering, multiplying in the order JAX does */
  jx_array *z = NULL, *result = NULL;
  for (; k > 0; k >>= 1) {
    z = z ? jx_matmul(z, z) : a;
    if (k & 1) result = result ? jx_matmul(result, z) : z;
  }
  return result;
}

/* ---- expm: Pade approximants with scaling and squaring (Higham 2005), as
 * jax.scipy.linalg.expm. The degree and the number of squarings depend on
 * each matrix's 1-norm; where JAX branches (lax.switch, a scan of conds) the
 * composition computes every candidate and selects, as JAX does under vmap,
 * so it jits, batches and differentiates like any other. */

enum { MAX_TERMS = 14 };

typedef struct {
  int degree;
  double b[MAX_TERMS]; /* the coefficients b_0 .. b_degree */
} pade;

static const pade PADES[] = {
    {3, {120., 60., 12., 1.}},
    {5, {30240., 15120., 3360., 420., 30., 1.}},
    {7, {17297280., 8648640., 1995840., 277200., 25200., 1512., 56., 1.}},
    {9,
     {17643225600., 8821612800., 2075673600., 302702400., 30270240., 2162160., 110880., 3960., 90.,
      1.}},
    {13,
     {64764752532480000., 32382376266240000., 7771770303897600., 1187353796428800.,
      129060195264000., 10559470521600., 670442572800., 33522128640., 1323241920., 40840800.,
      960960., 16380., 182., 1.}},
};

/* The 1-norm thresholds between the degrees and the largest norm the last
 * degree takes unscaled, per dtype (JAX's). */
static const double F64_CONDS[] = {1.495585217958292e-002, 2.539398330063230e-001,
                                   9.504178996162932e-001, 2.097847961257068e+000};
static const double F32_CONDS[] = {4.258730016922831e-001, 1.880152677804762e+000};
#define F64_MAXNORM 5.371920351148152
#define F32_MAXNORM 3.925724783138660

static jx_array *scaled(jx_array *x, double c) {
  return jx_mul(x, jx_scalar(jx_complex_part(x->dtype), c));
}

/* c_a x + c_b y + c_c z (+ c_i I): the sums of the approximants. */
static jx_array *combo(jx_array *eye, double ci, jx_array *x, double cx, jx_array *y, double cy,
                       jx_array *z, double cz) {
  jx_array *s = scaled(eye, ci);
  if (x) s = jx_add(scaled(x, cx), s);
  if (y) s = jx_add(scaled(y, cy), s);
  if (z) s = jx_add(scaled(z, cz), s);
  return s;
}

/* JAX's _pade3 .. _pade13: the odd part U and even part V of the degree's
 * approximant at a, the products associated as JAX associates them. */
static void pade_parts(const pade *pd, jx_array *a, jx_array *eye, jx_array **u, jx_array **v) {
  const double *b = pd->b;
  jx_array *a2 = jx_matmul(a, a), *a4 = NULL, *a6 = NULL, *a8 = NULL;
  if (pd->degree >= 5) a4 = jx_matmul(a2, a2);
  if (pd->degree >= 7) a6 = jx_matmul(a4, a2);
  if (pd->degree == 9) a8 = jx_matmul(a6, a2);
  switch (pd->degree) {
  case 3:
    *u = jx_matmul(a, combo(eye, b[1], a2, b[3], NULL, 0, NULL, 0));
    *v = combo(eye, b[0], a2, b[2], NULL, 0, NULL, 0);
    return;
  case 5:
    *u = jx_matmul(a, combo(eye, b[1], a4, b[5], a2, b[3], NULL, 0));
    *v = combo(eye, b[0], a4, b[4], a2, b[2], NULL, 0);
    return;
  case 7:
    *u = jx_matmul(a, combo(eye, b[1], a6, b[7], a4, b[5], a2, b[3]));
    *v = combo(eye, b[0], a6, b[6], a4, b[4], a2, b[2]);
    return;
  case 9:
    *u = jx_matmul(a, jx_add(scaled(a8, b[9]), combo(eye, b[1], a6, b[7], a4, b[5], a2, b[3])));
    *v = jx_add(scaled(a8, b[8]), combo(eye, b[0], a6, b[6], a4, b[4], a2, b[2]));
    return;
  default: { /* 13 */
    jx_array *hi_u = jx_add(jx_add(scaled(a6, b[13]), scaled(a4, b[11])), scaled(a2, b[9]));
    jx_array *hi_v = jx_add(jx_add(scaled(a6, b[12]), scaled(a4, b[10])), scaled(a2, b[8]));
    *u = jx_matmul(a, jx_add(jx_matmul(a6, hi_u), combo(eye, b[1], a6, b[7], a4, b[5], a2, b[3])));
    *v = jx_add(jx_matmul(a6, hi_v), combo(eye, b[0], a6, b[6], a4, b[4], a2, b[2]));
  }
  }
}

/* x [...] as [..., 1, 1], to scale or select whole matrices. */
static jx_array *per_matrix(jx_array *x) { return jx_expand_dims(jx_expand_dims(x, -1), -1); }

static jx_array *expm(const char *op, jx_array *a, int upper_triangular, int max_squarings) {
  if (check_square(op, a)) return jx_poison();
  if (max_squarings < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: max_squarings %d is negative", op, max_squarings);
    return jx_poison();
  }
  /* the norm, the squarings and the thresholds are real (a complex a's
   * parts' dtype), as JAX's for c64 and c128 */
  jx_dtype dt = jx_complex_part(a->dtype);
  int f64 = dt == JX_F64;
  const double *conds = f64 ? F64_CONDS : F32_CONDS;
  int nconds = f64 ? 4 : 2;
  jx_array *l1 = jx_linalg_matrix_norm(a, JX_NORM_1);
  /* n_squarings = max(0, floor(log2(|a|_1 / maxnorm))) */
  jx_array *ratio = jx_div(l1, jx_scalar(dt, f64 ? F64_MAXNORM : F32_MAXNORM));
  jx_array *log2 = jx_div(jx_log(ratio), jx_log(jx_scalar(dt, 2)));
  jx_array *squarings = jx_maximum(jx_scalar(dt, 0), jx_floor(log2));
  jx_array *sq = per_matrix(squarings);
  jx_array *as = jx_div(a, jx_pow(jx_scalar(dt, 2), sq));
  /* the degree: jnp.digitize(|a|_1, conds), the count of thresholds <= the norm */
  jx_array *idx = jx_zeros(JX_I32, l1->shape);
  for (int i = 0; i < nconds; i++)
    idx = jx_add(idx, jx_astype(jx_ge(l1, jx_scalar(dt, conds[i])), JX_I32));
  idx = jx_broadcast_to(per_matrix(idx), a->shape);
  jx_array *eye = jx_linalg_eye_like(a), *us[5], *vs[5];
  for (int i = 0; i <= nconds; i++) {
    pade_parts(&PADES[i], as, eye, &us[i], &vs[i]);
    us[i] = jx_broadcast_to(us[i], a->shape);
    vs[i] = jx_broadcast_to(vs[i], a->shape);
  }
  jx_array *u = jx_select_n(idx, nconds + 1, us), *v = jx_select_n(idx, nconds + 1, vs);
  /* r = q^-1 p with p = v + u, q = v - u (upper triangular for an upper
   * triangular a: one triangular solve, as JAX's solve_triangular); then
   * squared n_squarings times */
  jx_array *q = jx_sub(v, u), *p = jx_add(v, u);
  jx_array *r =
      upper_triangular ? jx_linalg_triangular_solve(q, p, 1, 0, 0, 0) : jx_linalg_solve(q, p);
  for (int i = 0; i < max_squarings; i++)
    r = jx_where(jx_lt(jx_scalar(dt, i), sq), jx_matmul(r, r), r);
  /* more squarings than max_squarings: NaNs, as JAX */
  return jx_where(jx_gt(sq, jx_scalar(dt, max_squarings)), jx_scalar(dt, NAN), r);
}

jx_array *jx_linalg_expm(jx_array *a) { return expm("jx_linalg_expm", a, 0, 16); }

jx_array *jx_linalg_expm_ex(jx_array *a, int upper_triangular, int max_squarings) {
  return expm("jx_linalg_expm_ex", a, upper_triangular, max_squarings);
}
