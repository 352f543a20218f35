/* The transformations beyond grad: jvp, vjp, value_and_grad with aux,
 * jacfwd/jacrev/hessian, checkpoint, custom_vjp/custom_jvp, composition, and
 * errors that name the transformation chain. Expected numbers come from JAX
 * (x64), computed by the snippet next to each test. */
#include <jx/jx.h>

#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

static void read_doubles(jx_array *a, double *d, int n) {
  check_ok(jx_read(jx_astype(a, JX_F64), d, sizeof *d * (size_t)n));
}

/* f(x, y) = sum(sin(x) * y) ; aux = x * 2 */
static void sin_dot(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(jx_sin(in[0]), in[1]), JX_AXES(), 0);
  out[1] = jx_mul(in[0], jx_scalar(JX_F64, 2));
}
static const double X[3] = {0.3, -1.2, 2.0}, Y[3] = {1.5, 0.5, -2.0};

/* jax.value_and_grad(lambda x, y: (jnp.sum(jnp.sin(x) * y), x * 2), (0, 1), has_aux=True) */
static void value_and_grad_with_aux(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sin_dot", 2, 2, sin_dot, NULL);
  jx_fn *vg = jx_value_and_grad(f, JX_AXES(0, 1), 1);
  assert_int_equal(jx_fn_nout(vg), 4);
  jx_array *in[2] = {jx_array_from(JX_F64, JX_SHAPE(3), X), jx_array_from(JX_F64, JX_SHAPE(3), Y)};
  jx_array *out[4];
  check_ok(jx_call(vg, in, out));
  double v = 0;
  for (int i = 0; i < 3; i++) v += sin(X[i]) * Y[i];
  assert_float_equal(jx_item(out[0]), v, 1e-12);
  double aux[3], gx[3], gy[3];
  read_doubles(out[1], aux, 3);
  read_doubles(out[2], gx, 3);
  read_doubles(out[3], gy, 3);
  for (int i = 0; i < 3; i++) {
    assert_float_equal(aux[i], 2 * X[i], 1e-12);
    assert_float_equal(gx[i], cos(X[i]) * Y[i], 1e-12);
    assert_float_equal(gy[i], sin(X[i]), 1e-12);
  }
  jx_fn_release(vg);
  jx_fn_release(f);
}

/* jvp and vjp against each other and the analytic derivative */
static void jvp_and_vjp(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("sin_dot", 2, 2, sin_dot, NULL);
  jx_fn *j = jx_jvp(f), *v = jx_vjp(f);
  double tx[3] = {1, 0.5, -1}, ty[3] = {0, 2, 1};
  jx_array *x = jx_array_from(JX_F64, JX_SHAPE(3), X), *y = jx_array_from(JX_F64, JX_SHAPE(3), Y);
  jx_array *jin[4] = {x, y, jx_array_from(JX_F64, JX_SHAPE(3), tx),
                      jx_array_from(JX_F64, JX_SHAPE(3), ty)};
  jx_array *jout[4];
  check_ok(jx_call(j, jin, jout));
  double want = 0;
  for (int i = 0; i < 3; i++) want += cos(X[i]) * Y[i] * tx[i] + sin(X[i]) * ty[i];
  assert_float_equal(jx_item(jout[2]), want, 1e-12);
  jx_array *vin[4] = {x, y, jx_scalar(JX_F64, 1), jx_zeros(JX_F64, JX_SHAPE(3))};
  jx_array *vout[4];
  check_ok(jx_call(v, vin, vout));
  double gx[3];
  read_doubles(vout[2], gx, 3);
  for (int i = 0; i < 3; i++) assert_float_equal(gx[i], cos(X[i]) * Y[i], 1e-12);
  jx_fn_release(j);
  jx_fn_release(v);
  jx_fn_release(f);
}

/* g(x) = sin(x) * x[::-1] (elementwise, 3 -> 3);
   jax.jacfwd(g)(x) == jax.jacrev(g)(x); jax.hessian(lambda x: jnp.sum(g(x)**2))(x) */
static void cube_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_sin(in[0]), jx_flip(in[0], JX_AXES()));
}
static void energy_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *g = jx_mul(jx_sin(in[0]), jx_flip(in[0], JX_AXES()));
  out[0] = jx_sum(jx_mul(g, g), JX_AXES(), 0);
}

static void jacobians_and_hessian(void **state) {
  (void)state;
  jx_fn *g = jx_fn_create("g", 1, 1, cube_body, NULL);
  jx_fn *jf = jx_jacfwd(g, 0), *jr = jx_jacrev(g, 0);
  jx_array *in[1] = {jx_array_from(JX_F64, JX_SHAPE(3), X)}, *a[1], *b[1];
  check_ok(jx_call(jf, in, a));
  check_ok(jx_call(jr, in, b));
  assert_int_equal(jx_ndim(a[0]), 2);
  double ja[9], jb[9];
  read_doubles(a[0], ja, 9);
  read_doubles(b[0], jb, 9);
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) {
      /* d g_i / d x_k = cos(x_i) x_{2-i} [i==k] + sin(x_i) [k == 2-i] */
      double want = (i == k ? cos(X[i]) * X[2 - i] : 0) + (k == 2 - i ? sin(X[i]) : 0);
      assert_float_equal(ja[i * 3 + k], want, 1e-12);
      assert_float_equal(jb[i * 3 + k], want, 1e-12);
    }
  jx_fn *e = jx_fn_create("energy", 1, 1, energy_body, NULL);
  jx_fn *h = jx_hessian(e, 0);
  check_ok(jx_call(h, in, a));
  double hv[9];
  read_doubles(a[0], hv, 9);
  /* a symmetric matrix, and the finite-difference check of jacrev(energy) agrees */
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 3; k++) assert_float_equal(hv[i * 3 + k], hv[k * 3 + i], 1e-10);
  jx_fn *gr = jx_grad(e, JX_AXES(0));
  check_ok(jx_check_grads(gr, in, 1, 0, 0));
  jx_fn_release(gr);
  jx_fn_release(h);
  jx_fn_release(e);
  jx_fn_release(jf);
  jx_fn_release(jr);
  jx_fn_release(g);
}

static int count(const char *text, const char *word) {
  int n = 0;
  for (const char *p = text; (p = strstr(p, word)); p += strlen(word)) n++;
  return n;
}

/* checkpoint: same gradient; the backward pass recomputes sin instead of storing it */
static void chain_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sin(jx_sin(in[0]));
}
static jx_fn *chain_fn;
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *inner = ctx;
  jx_array *r[1];
  jx_call(inner, in, r);
  out[0] = jx_sum(r[0], JX_AXES(), 0);
}

static void checkpoint_recomputes(void **state) {
  (void)state;
  chain_fn = jx_fn_create("chain", 1, 1, chain_body, NULL);
  jx_fn *remat = jx_checkpoint(chain_fn);
  jx_fn *plain = jx_fn_create("loss", 1, 1, loss_body, chain_fn);
  jx_fn *ckpt = jx_fn_create("loss_ckpt", 1, 1, loss_body, remat);
  jx_fn *g1 = jx_grad(plain, JX_AXES(0)), *g2 = jx_grad(ckpt, JX_AXES(0));
  jx_array *in[1] = {jx_array_from(JX_F64, JX_SHAPE(3), X)}, *a[1], *b[1];
  check_ok(jx_call(g1, in, a));
  check_ok(jx_call(g2, in, b));
  double ga[3], gb[3];
  read_doubles(a[0], ga, 3);
  read_doubles(b[0], gb, 3);
  for (int i = 0; i < 3; i++) {
    assert_float_equal(gb[i], ga[i], 1e-12);
    assert_float_equal(ga[i], cos(sin(X[i])) * cos(X[i]), 1e-12);
  }
  char *ir = jx_fn_ir(g2, in);
  assert_non_null(ir);
  assert_non_null(strstr(ir, "remat"));
  assert_true(count(ir, "= sin ") >= 3); /* forward twice, plus recomputed in the backward region */
  free(ir);
  jx_fn_release(g1);
  jx_fn_release(g2);
  jx_fn_release(plain);
  jx_fn_release(ckpt);
  jx_fn_release(remat);
  jx_fn_release(chain_fn);
}

/* custom_vjp: a "straight-through" clip whose gradient is the identity */
static void clip_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_clip(in[0], -1, 1);
}
static void clip_fwd(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_clip(in[0], -1, 1);
  out[1] = in[0]; /* a residual, unused by bwd but checked for shape */
}
static void clip_bwd(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[1], jx_scalar(JX_F64, 1));
}
/* custom_jvp: f(x) = log(1 + exp(x)) with the stable derivative logistic(x) */
static void softplus_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_log1p(jx_exp(in[0]));
}
static void softplus_jvp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_log1p(jx_exp(in[0]));
  out[1] = jx_mul(jx_logistic(in[0]), in[1]);
}
static jx_fn *custom_fn;
static void sum_of(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *r[1];
  jx_call(custom_fn, in, r);
  out[0] = jx_sum(r[0], JX_AXES(), 0);
}

static void custom_rules(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("clip", 1, 1, clip_body, NULL),
        *fw = jx_fn_create("clip_fwd", 1, 2, clip_fwd, NULL);
  jx_fn *bw = jx_fn_create("clip_bwd", 2, 1, clip_bwd, NULL);
  custom_fn = jx_custom_vjp(f, fw, bw);
  jx_fn_release(f);
  jx_fn_release(fw);
  jx_fn_release(bw);
  jx_fn *s = jx_fn_create("sum_of", 1, 1, sum_of, NULL);
  jx_fn *g = jx_grad(s, JX_AXES(0));
  double xs[3] = {-3, 0.5, 4}, gs[3];
  jx_array *in[1] = {jx_array_from(JX_F64, JX_SHAPE(3), xs)}, *out[1];
  check_ok(jx_call(g, in, out));
  read_doubles(out[0], gs, 3);
  for (int i = 0; i < 3; i++) assert_float_equal(gs[i], 1.0, 1e-12); /* not clip's 0, 1, 0 */
  jx_fn *j = jx_jvp(s);
  jx_array *jin[2] = {in[0], jx_ones(JX_F64, JX_SHAPE(3))}, *jout[2];
  assert_int_equal(jx_call(j, jin, jout), JX_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(jx_last_error(), "forward mode"));
  jx_clear_error();
  jx_fn_release(j);
  jx_fn_release(g);
  jx_fn_release(custom_fn);

  jx_fn *sp = jx_fn_create("softplus", 1, 1, softplus_body, NULL),
        *spj = jx_fn_create("softplus_jvp", 2, 2, softplus_jvp, NULL);
  custom_fn = jx_custom_jvp(sp, spj);
  jx_fn_release(sp);
  jx_fn_release(spj);
  g = jx_grad(s, JX_AXES(0)); /* s's cache was filled for custom_vjp: a new function */
  jx_fn_release(g);
  jx_fn *s2 = jx_fn_create("sum_of2", 1, 1, sum_of, NULL);
  g = jx_grad(s2, JX_AXES(0));
  check_ok(jx_call(g, in, out));
  read_doubles(out[0], gs, 3);
  for (int i = 0; i < 3; i++) assert_float_equal(gs[i], 1 / (1 + exp(-xs[i])), 1e-12);
  check_ok(jx_check_grads(s2, in, 2, 0, 0));
  jx_fn_release(g);
  jx_fn_release(s2);
  jx_fn_release(s);
  jx_fn_release(custom_fn);
}

/* per-example gradients: vmap(grad(f)) over rows */
static void row_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_mul(jx_sin(in[0]), in[1]), JX_AXES(), 0);
}

static void per_example_gradients(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("row_loss", 2, 1, row_loss, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *pg = jx_vmap(g, JX_AXES(0, JX_NONE), JX_AXES(0));
  double xs[6] = {0.1, 0.2, 0.3, -1, 2, 0.5}, got[6];
  jx_array *in[2] = {jx_array_from(JX_F64, JX_SHAPE(2, 3), xs),
                     jx_array_from(JX_F64, JX_SHAPE(3), Y)};
  jx_array *out[1];
  check_ok(jx_call(pg, in, out));
  read_doubles(out[0], got, 6);
  for (int r = 0; r < 2; r++)
    for (int i = 0; i < 3; i++)
      assert_float_equal(got[r * 3 + i], cos(xs[r * 3 + i]) * Y[i], 1e-12);
  jx_fn_release(pg);
  jx_fn_release(g);
  jx_fn_release(f);
}

static void bad_row(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_add(in[0], jx_zeros(JX_F64, JX_SHAPE(4))), JX_AXES(), 0);
}

static void errors_name_the_transformation_chain(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("bad_row", 1, 1, bad_row, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_fn *v = jx_vmap(g, JX_AXES(0), JX_AXES(0));
  jx_fn_release(g); /* v keeps its own reference */
  jx_array *in[1] = {jx_zeros(JX_F64, JX_SHAPE(2, 3))}, *out[1];
  assert_int_equal(jx_call(v, in, out), JX_ERR_SHAPE);
  const char *msg = jx_last_error();
  assert_non_null(strstr(msg, "jx_add"));
  assert_non_null(strstr(msg, "test_transforms.c:"));
  assert_non_null(strstr(msg, "vmap \u2218 grad"));
  assert_non_null(strstr(msg, "'bad_row'"));
  jx_fn_release(v);
  jx_fn_release(f);
  /* inconsistent batch sizes */
  jx_fn *s = jx_fn_create("row_loss", 2, 1, row_loss, NULL);
  jx_fn *vs = jx_vmap(s, JX_AXES(0, 0), JX_AXES(0));
  jx_array *bad[2] = {jx_zeros(JX_F64, JX_SHAPE(2, 3)), jx_zeros(JX_F64, JX_SHAPE(4, 3))};
  jx_clear_error();
  assert_int_equal(jx_call(vs, bad, out), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "inconsistent batch sizes"));
  jx_fn_release(vs);
  jx_fn_release(s);
}

/* x * axis_index("i") + axis_size("i"), and a nested axis "j" */
static void indexed(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *i = jx_astype(jx_axis_index("i"), JX_F64);
  jx_array *j = jx_astype(jx_axis_index("j"), JX_F64);
  out[0] = jx_add(jx_mul(in[0], i), jx_mul(j, jx_scalar(JX_F64, 10 * jx_axis_size("i"))));
}

static void named_axes(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("indexed", 1, 1, indexed, NULL);
  jx_fn *vi = jx_vmap_axis(f, JX_AXES(0), JX_AXES(0), "i");
  jx_fn *vj = jx_vmap_axis(vi, JX_AXES(0), JX_AXES(0), "j");
  double xs[6] = {1, 2, 3, 4, 5, 6}, ys[6];
  jx_array *in[1] = {jx_array_from(JX_F64, JX_SHAPE(2, 3), xs)}, *out[1];
  check_ok(jx_call(vj, in, out));
  read_doubles(out[0], ys, 6);
  for (int j = 0; j < 2; j++)
    for (int i = 0; i < 3; i++)
      assert_float_equal(ys[j * 3 + i], xs[j * 3 + i] * i + j * 30, 1e-12);
  /* outside a named vmap the axis is unbound */
  jx_array *one[1] = {jx_scalar(JX_F64, 1)};
  assert_int_equal(jx_call(f, one, out), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "no enclosing transformation binds an axis named 'i'"));
  jx_clear_error();
  jx_fn_release(vj);
  jx_fn_release(vi);
  jx_fn_release(f);
}

/* f(x0, ..., x11, w) = sum_i (i + 1) sum(x_i^2) * w */
static void many_params_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *total = jx_scalar(JX_F32, 0);
  for (int i = 0; i < 12; i++)
    total =
        jx_add(total, jx_mul(jx_scalar(JX_F32, i + 1), jx_sum(jx_mul(in[i], in[i]), JX_AXES(), 0)));
  out[0] = jx_mul(total, in[12]);
}

/* More parameters than an argnums list holds: the first n inputs. */
static void value_and_grad_of_many_parameters(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("many", 13, 1, many_params_body, NULL);
  jx_fn *raw = jx_value_and_grad_first(f, 12, 0), *vg = jx_jit(raw, NULL);
  jx_array *in[13], *out[13];
  for (int i = 0; i < 12; i++) in[i] = jx_full(JX_F32, JX_SHAPE(2), i);
  in[12] = jx_scalar(JX_F32, 3);
  check_ok(jx_call(vg, in, out));
  double value = 0;
  for (int i = 0; i < 12; i++) value += (i + 1) * 2.0 * i * i * 3;
  assert_true(jx_item(out[0]) == value);
  for (int i = 0; i < 12; i++) {
    float g[2];
    check_ok(jx_read(out[1 + i], g, sizeof g));
    assert_true(g[0] == (float)(2 * (i + 1) * i * 3) && g[1] == g[0]);
  }
  assert_null(jx_value_and_grad_first(f, 14, 0));
  assert_non_null(strstr(jx_last_error(), "n = 14 must be in 1..13"));
  jx_clear_error();
  jx_fn_release(vg);
  jx_fn_release(raw);
  jx_fn_release(f);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(value_and_grad_with_aux, setup, teardown),
      cmocka_unit_test_setup_teardown(jvp_and_vjp, setup, teardown),
      cmocka_unit_test_setup_teardown(jacobians_and_hessian, setup, teardown),
      cmocka_unit_test_setup_teardown(checkpoint_recomputes, setup, teardown),
      cmocka_unit_test_setup_teardown(custom_rules, setup, teardown),
      cmocka_unit_test_setup_teardown(per_example_gradients, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_transformation_chain, setup, teardown),
      cmocka_unit_test_setup_teardown(named_axes, setup, teardown),
      cmocka_unit_test_setup_teardown(value_and_grad_of_many_parameters, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
