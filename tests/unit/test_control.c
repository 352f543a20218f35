/* Control flow: cond/switch, while, scan and fori, eagerly and under jit,
 * grad, jvp and vmap. Expected numbers come from JAX (x64), computed by the
 * snippet next to each test. */
#include <jx/jx.h>

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <cmocka.h>
#include "test_util.h"

/* step((h, w, acc), x) = (h*w + x, w, acc + (h*w+x)^2), y = (h*w+x)^2 */
static void step(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_add(jx_mul(in[0], in[1]), in[3]);
  out[0] = h;
  out[1] = in[1];
  out[2] = jx_add(in[2], jx_mul(h, h));
  out[3] = jx_mul(h, h);
}
static jx_fn *step_fn;
static void rnn_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *init[3] = {in[0], in[1], jx_scalar(JX_F64, 0)}, *xs[1] = {in[2]}, *o[4];
  jx_scan(step_fn, 3, init, 1, xs, -1, 0, o);
  out[0] = o[2];
}

/* def step(c, x): h, w = c; h = h*w + x; return (h, w), h*h
   loss = lambda h, w, xs: lax.scan(step, (h, w), xs)[1].sum()
   xs = [0.5, -1, 2, 0.25]; loss(0.3, 0.9, xs); jax.grad(loss, (0, 1, 2))(0.3, 0.9, xs) */
static void scan_value_and_grad_match_jax(void **state) {
  (void)state;
  step_fn = jx_fn_create("step", 4, 4, step, NULL);
  jx_fn *loss = jx_fn_create("rnn_loss", 3, 1, rnn_loss, NULL);
  double xs[4] = {0.5, -1, 2, 0.25};
  jx_array *in[3] = {jx_scalar(JX_F64, 0.3), jx_scalar(JX_F64, 0.9),
                     jx_array_from(JX_F64, JX_SHAPE(4), xs)};
  jx_array *out[3];
  check_ok(jx_call(loss, in, out));
  assert_float_equal(jx_item(out[0]), 6.9030804589, 1e-9);
  jx_fn *g = jx_grad(loss, JX_AXES(0, 1, 2));
  check_ok(jx_call(g, in, out));
  assert_float_equal(jx_item(out[0]), 5.76551983, 1e-8);
  assert_float_equal(jx_item(out[1]), 10.24122547, 1e-8);
  double gx[4], want[4] = {6.40613314, 5.4068146, 6.689794, 3.60266};
  check_ok(jx_read(out[2], gx, sizeof gx));
  for (int i = 0; i < 4; i++) assert_float_equal(gx[i], want[i], 1e-7);
  check_ok(jx_check_grads(loss, in, 2, 0, 0));
  /* jax.vmap(loss, (0, None, None))(jnp.array([0.3, -0.2]), 0.9, xs) */
  jx_fn *v = jx_vmap(loss, JX_AXES(0, JX_NONE, JX_NONE), JX_AXES(0));
  double h0[2] = {0.3, -0.2};
  jx_array *vin[3] = {jx_array_from(JX_F64, JX_SHAPE(2), h0), in[1], in[2]};
  check_ok(jx_call(v, vin, out));
  double vy[2];
  check_ok(jx_read(out[0], vy, sizeof vy));
  assert_float_equal(vy[0], 6.90308046, 1e-7);
  assert_float_equal(vy[1], 4.6273226, 1e-7);
  jx_fn *jl = jx_jit(loss, NULL);
  check_ok(jx_call(jl, in, out));
  assert_float_equal(jx_item(out[0]), 6.9030804589, 1e-9);
  jx_fn_release(jl);
  jx_fn_release(v);
  jx_fn_release(g);
  jx_fn_release(loss);
  jx_fn_release(step_fn);
}

static void square(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], in[0]);
}
static void triple(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], jx_scalar(JX_F64, 3));
}
static void negate(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sub(jx_scalar(JX_F64, 0), in[0]);
}
static jx_fn *branches[3];
static void piecewise(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_cond(jx_gt(in[0], jx_scalar(JX_F64, 0)), branches[0], branches[1], 1, in, out);
}

/* f = lambda x: lax.cond(x > 0, lambda x: x * x, lambda x: 3 * x, x) */
static void cond_grad_and_vmap(void **state) {
  (void)state;
  branches[0] = jx_fn_create("square", 1, 1, square, NULL);
  branches[1] = jx_fn_create("triple", 1, 1, triple, NULL);
  jx_fn *f = jx_fn_create("piecewise", 1, 1, piecewise, NULL);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  jx_array *in[1] = {jx_scalar(JX_F64, 2.5)}, *out[1];
  check_ok(jx_call(g, in, out));
  assert_float_equal(jx_item(out[0]), 5.0, 1e-12);
  in[0] = jx_scalar(JX_F64, -1.5);
  check_ok(jx_call(g, in, out));
  assert_float_equal(jx_item(out[0]), 3.0, 1e-12);
  check_ok(jx_check_grads(f, in, 2, 0, 0));
  jx_fn *v = jx_vmap(f, JX_AXES(0), JX_AXES(0)); /* a batched predicate selects per lane */
  double xs[3] = {-1, 2, 3}, ys[3];
  in[0] = jx_array_from(JX_F64, JX_SHAPE(3), xs);
  check_ok(jx_call(v, in, out));
  check_ok(jx_read(out[0], ys, sizeof ys));
  assert_float_equal(ys[0], -3, 1e-12);
  assert_float_equal(ys[1], 4, 1e-12);
  assert_float_equal(ys[2], 9, 1e-12);
  jx_fn *gv = jx_vmap(g, JX_AXES(0), JX_AXES(0)); /* per-example gradients */
  check_ok(jx_call(gv, in, out));
  check_ok(jx_read(out[0], ys, sizeof ys));
  assert_float_equal(ys[0], 3, 1e-12);
  assert_float_equal(ys[1], 4, 1e-12);
  assert_float_equal(ys[2], 6, 1e-12);
  jx_fn_release(gv);
  jx_fn_release(v);
  jx_fn_release(g);
  jx_fn_release(f);
  jx_fn_release(branches[0]);
  jx_fn_release(branches[1]);
}

static void switch_clamps_its_index(void **state) {
  (void)state;
  jx_fn *br[3] = {jx_fn_create("square", 1, 1, square, NULL),
                  jx_fn_create("triple", 1, 1, triple, NULL),
                  jx_fn_create("negate", 1, 1, negate, NULL)};
  jx_array *x[1] = {jx_scalar(JX_F64, 2)}, *out[1];
  int idx[4] = {-5, 0, 1, 7};
  double want[4] = {4, 4, 6, -2}; /* lax.switch clamps the index into [0, 2] */
  for (int k = 0; k < 4; k++) {
    check_ok(jx_switch(jx_scalar(JX_I32, idx[k]), 3, br, 1, x, out));
    assert_float_equal(jx_item(out[0]), want[k], 1e-12);
  }
  for (int k = 0; k < 3; k++) jx_fn_release(br[k]);
}

/* while: x -> x * 1.5 while x < 10 */
static void below_ten(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_lt(in[0], jx_scalar(JX_F64, 10));
}
static void grow(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], jx_scalar(JX_F64, 1.5));
}
static jx_fn *cond_fn, *body_fn;
static void grow_until_ten(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_while(cond_fn, body_fn, 1, in, out);
}

static void while_forward_mode_and_batched_predicate(void **state) {
  (void)state;
  cond_fn = jx_fn_create("below_ten", 1, 1, below_ten, NULL);
  body_fn = jx_fn_create("grow", 1, 1, grow, NULL);
  jx_fn *f = jx_fn_create("grow_until_ten", 1, 1, grow_until_ten, NULL);
  jx_array *in[2] = {jx_scalar(JX_F64, 1), jx_scalar(JX_F64, 1)}, *out[2];
  check_ok(jx_call(f, in, out));
  assert_float_equal(jx_item(out[0]), 11.390625, 1e-12); /* 1.5^6 */
  jx_fn *j = jx_jvp(f);                                  /* d/dx = 1.5^6 */
  check_ok(jx_call(j, in, out));
  assert_float_equal(jx_item(out[1]), 11.390625, 1e-12);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  assert_int_equal(jx_call(g, in, out), JX_ERR_UNIMPLEMENTED);
  assert_non_null(strstr(jx_last_error(), "use jx_scan or jx_fori"));
  jx_clear_error();
  /* jax.vmap(f)(jnp.array([1., 4., 12.])): lanes stop at different steps */
  double xs[3] = {1, 4, 12}, ys[3];
  jx_fn *v = jx_vmap(f, JX_AXES(0), JX_AXES(0));
  in[0] = jx_array_from(JX_F64, JX_SHAPE(3), xs);
  check_ok(jx_call(v, in, out));
  check_ok(jx_read(out[0], ys, sizeof ys));
  assert_float_equal(ys[0], 11.390625, 1e-12);
  assert_float_equal(ys[1], 13.5, 1e-12);
  assert_float_equal(ys[2], 12, 1e-12);
  jx_fn_release(v);
  jx_fn_release(g);
  jx_fn_release(j);
  jx_fn_release(f);
  jx_fn_release(cond_fn);
  jx_fn_release(body_fn);
}

/* fori: acc -> acc * x + i for i in [2, 6) */
static void horner(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[1], in[2]), jx_astype(in[0], JX_F64));
  out[1] = in[2];
}
static jx_fn *horner_fn;
static void run_horner(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *init[2] = {jx_scalar(JX_F64, 1), in[0]}, *res[2];
  jx_fori(2, 6, horner_fn, 2, init, res);
  out[0] = res[0];
}

/* f = lambda x: lax.fori_loop(2, 6, lambda i, c: (c[0] * c[1] + i, c[1]), (1., x))[0]
   f(0.5) = 8.0625; jax.grad(f)(0.5) = 9.0 */
static void fori_is_reverse_differentiable(void **state) {
  (void)state;
  horner_fn = jx_fn_create("horner", 3, 2, horner, NULL);
  jx_fn *f = jx_fn_create("run_horner", 1, 1, run_horner, NULL);
  jx_array *in[1] = {jx_scalar(JX_F64, 0.5)}, *out[1];
  check_ok(jx_call(f, in, out));
  assert_float_equal(jx_item(out[0]), 8.0625, 1e-12);
  jx_fn *g = jx_grad(f, JX_AXES(0));
  check_ok(jx_call(g, in, out));
  assert_float_equal(jx_item(out[0]), 9.0, 1e-12);
  check_ok(jx_check_grads(f, in, 2, 0, 0));
  jx_fn_release(g);
  jx_fn_release(f);
  jx_fn_release(horner_fn);
}

static void bad_bodies_are_errors(void **state) {
  (void)state;
  cond_fn = jx_fn_create("grow", 1, 1, grow, NULL); /* returns f64, not bool */
  body_fn = jx_fn_create("grow", 1, 1, grow, NULL);
  jx_array *in[1] = {jx_scalar(JX_F64, 1)}, *out[1];
  assert_int_equal(jx_while(cond_fn, body_fn, 1, in, out), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "must return one bool scalar"));
  jx_clear_error();
  jx_fn *br[2] = {jx_fn_create("square", 1, 1, square, NULL),
                  jx_fn_create("below_ten", 1, 1, below_ten, NULL)};
  assert_int_equal(jx_cond(jx_scalar(JX_BOOL, 1), br[0], br[1], 1, in, out), JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "every branch must give the same types"));
  jx_clear_error();
  double xs[3] = {1, 2, 3};
  jx_array *x[1] = {jx_array_from(JX_F64, JX_SHAPE(3), xs)};
  jx_array *init[1] = {jx_scalar(JX_F64, 0)};
  jx_fn *s = jx_fn_create("square", 1, 1, square, NULL);
  assert_int_equal(jx_scan(s, 1, init, 1, x, 3, 0, out), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "takes 1 inputs but gets 2"));
  jx_fn_release(s);
  jx_fn_release(br[0]);
  jx_fn_release(br[1]);
  jx_fn_release(cond_fn);
  jx_fn_release(body_fn);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(scan_value_and_grad_match_jax, setup, teardown),
      cmocka_unit_test_setup_teardown(cond_grad_and_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(switch_clamps_its_index, setup, teardown),
      cmocka_unit_test_setup_teardown(while_forward_mode_and_batched_predicate, setup, teardown),
      cmocka_unit_test_setup_teardown(fori_is_reverse_differentiable, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_bodies_are_errors, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
