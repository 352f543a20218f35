/* Optimizers and schedules against Optax's trajectories
 * (tests/golden/gen_optim.py): the same start and gradients give the same
 * parameters after every step, eagerly and inside a jitted update. Also
 * trees and the optimizers' errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

#define DIR JX_TEST_DATA "/optim/"
enum { STEPS = 8 };

static jx_array *load(const char *name) {
  char path[512];
  snprintf(path, sizeof path, DIR "%s.npy", name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* |got - want| <= atol + rtol |want| elementwise, naming the place on failure. */
static void assert_close(jx_array *got, jx_array *want, double atol, double rtol, const char *what,
                         int step) {
  int64_t n = jx_size(want);
  assert_int_equal(jx_size(got), n);
  float *g = malloc(sizeof *g * (size_t)n), *w = malloc(sizeof *w * (size_t)n);
  check_ok(jx_read(got, g, sizeof *g * (size_t)n));
  check_ok(jx_read(want, w, sizeof *w * (size_t)n));
  for (int64_t i = 0; i < n; i++)
    if (!(fabs((double)g[i] - (double)w[i]) <= atol + rtol * fabs((double)w[i]))) {
      fprintf(stderr, "%s step %d element %lld: %.9g, Optax %.9g\n", what, step, (long long)i,
              (double)g[i], (double)w[i]);
      fail();
    }
  free(g);
  free(w);
}

static jx_optimizer *make(const char *name) {
  if (!strcmp(name, "sgd")) return jx_optim_sgd(0.1, 0);
  if (!strcmp(name, "sgd_momentum")) return jx_optim_sgd(0.1, 0.9);
  if (!strcmp(name, "sgd_nesterov")) return jx_optim_sgd_nesterov(0.1, 0.9);
  if (!strcmp(name, "adam")) return jx_optim_adam(0.01, 0.9, 0.999, 1e-8);
  if (!strcmp(name, "adamw")) return jx_optim_adamw(0.01, 0.9, 0.99, 1e-6, 0.1);
  if (!strcmp(name, "adamw_clip_cosine"))
    return jx_optim_chain_clip(
        jx_optim_with_schedule(jx_optim_adamw(0, 0.9, 0.999, 1e-8, 0.01),
                               jx_schedule_warmup_cosine(0.0, 0.05, 3, STEPS, 0.005)),
        0.5);
  if (!strcmp(name, "multisteps_momentum")) return jx_optim_accumulate(jx_optim_sgd(0.1, 0.9), 3);
  return NULL;
}

static const char *const NAMES[] = {"sgd",   "sgd_momentum",      "sgd_nesterov",       "adam",
                                    "adamw", "adamw_clip_cosine", "multisteps_momentum"};

typedef struct {
  jx_optimizer *opt;
  jx_tree *state_like; /* the state's names, in order */
} update_ctx;

/* (w, b, gw, gb, state...) -> (w', b', state'...) */
static void update_body(void *arg, jx_array *const *in, jx_array **out) {
  update_ctx *c = arg;
  jx_tree *params = jx_tree_create(), *grads = jx_tree_create();
  jx_tree_set(params, "w", in[0]);
  jx_tree_set(params, "b", in[1]);
  jx_tree_set(grads, "w", in[2]);
  jx_tree_set(grads, "b", in[3]);
  jx_tree *state = jx_tree_unflatten(c->state_like, in + 4);
  jx_optim_update(c->opt, grads, state, params);
  out[0] = jx_tree_get(params, "w");
  out[1] = jx_tree_get(params, "b");
  jx_tree_flatten(state, out + 2);
  /* the trees may go: the trace's scope still holds the outputs */
  jx_tree_release(params);
  jx_tree_release(grads);
  jx_tree_release(state);
}

static void run_trajectory(const char *name, int jitted) {
  char buf[128];
  jx_optimizer *opt = make(name);
  assert_non_null(opt);
  jx_array *gw = load("gw"), *gb = load("gb");
  snprintf(buf, sizeof buf, "%s_w", name);
  jx_array *want_w = load(buf);
  snprintf(buf, sizeof buf, "%s_b", name);
  jx_array *want_b = load(buf);

  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "w", load("w0"));
  jx_tree_set(params, "b", load("b0"));
  jx_tree *state = jx_optim_init(opt, params);
  update_ctx c = {opt, state};
  int ns = jx_tree_size(state);
  jx_fn *upd = jx_fn_create("update", 4 + ns, 2 + ns, update_body, &c);
  jx_fn *jupd = jx_jit(upd, NULL);
  for (int t = 0; t < STEPS; t++) {
    jx_scope_begin();
    jx_array *g_w =
        jx_squeeze(jx_slice(gw, JX_SHAPE(t, 0, 0), JX_SHAPE(t + 1, 3, 4), JX_SHAPE()), JX_AXES(0));
    jx_array *g_b =
        jx_squeeze(jx_slice(gb, JX_SHAPE(t, 0), JX_SHAPE(t + 1, 4), JX_SHAPE()), JX_AXES(0));
    if (jitted) {
      jx_array *in[32], *out[32];
      in[0] = jx_tree_get(params, "w");
      in[1] = jx_tree_get(params, "b");
      in[2] = g_w;
      in[3] = g_b;
      jx_tree_flatten(state, in + 4);
      check_ok(jx_call(jupd, in, out));
      jx_tree_set(params, "w", out[0]);
      jx_tree_set(params, "b", out[1]);
      for (int i = 0; i < ns; i++) jx_tree_set(state, jx_tree_name(state, i), out[2 + i]);
    } else {
      jx_tree *grads = jx_tree_create();
      jx_tree_set(grads, "w", g_w);
      jx_tree_set(grads, "b", g_b);
      jx_optim_update(opt, grads, state, params);
      check_ok(jx_last_status());
      jx_tree_release(grads);
    }
    jx_array *ww = jx_squeeze(
        jx_slice(want_w, JX_SHAPE(t, 0, 0), JX_SHAPE(t + 1, 3, 4), JX_SHAPE()), JX_AXES(0));
    jx_array *wb =
        jx_squeeze(jx_slice(want_b, JX_SHAPE(t, 0), JX_SHAPE(t + 1, 4), JX_SHAPE()), JX_AXES(0));
    assert_close(jx_tree_get(params, "w"), ww, 2e-6, 2e-6, name, t);
    assert_close(jx_tree_get(params, "b"), wb, 2e-6, 2e-6, name, t);
    jx_scope_end();
  }
  if (jitted) assert_int_equal(jx_fn_trace_count(jupd), 1);
  jx_fn_release(jupd);
  jx_fn_release(upd);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(opt);
}

static void optimizers_match_optax(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) run_trajectory(NAMES[i], 0);
}

static void optimizers_match_optax_jitted(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof NAMES / sizeof *NAMES; i++) run_trajectory(NAMES[i], 1);
}

static void schedules_match_optax(void **state) {
  (void)state;
  jx_schedule *wc = jx_schedule_warmup_cosine(0.0, 0.05, 3, STEPS, 0.005);
  jx_schedule *lin = jx_schedule_linear(0.1, 0.01, 5);
  jx_array *want_wc = load("warmup_cosine"), *want_lin = load("linear");
  float a[12], b[12];
  check_ok(jx_read(want_wc, a, sizeof a));
  check_ok(jx_read(want_lin, b, sizeof b));
  for (int t = 0; t < 12; t++) {
    jx_array *count = jx_full(JX_I32, JX_SHAPE(), t);
    assert_true(fabs(jx_item(jx_schedule_value(wc, count)) - a[t]) <= 1e-7);
    assert_true(fabs(jx_item(jx_schedule_value(lin, count)) - b[t]) <= 1e-7);
  }
  jx_schedule_release(wc);
  jx_schedule_release(lin);
  assert_null(jx_schedule_warmup_cosine(0, 1, 5, 3, 0));
  assert_non_null(strstr(jx_last_error(), "warmup (5) <= decay_steps (3)"));
}

static void trees_hold_named_arrays(void **state) {
  (void)state;
  jx_tree *t = jx_tree_create();
  jx_tree_set(t, "a", jx_ones(JX_F32, JX_SHAPE(2, 3)));
  jx_tree_set(t, "b", jx_zeros(JX_I32, JX_SHAPE(4)));
  jx_tree_set(t, "a", jx_full(JX_F32, JX_SHAPE(2), 5)); /* replaced in place */
  assert_int_equal(jx_tree_size(t), 2);
  assert_string_equal(jx_tree_name(t, 0), "a");
  assert_int_equal(jx_tree_numel(t), 6);
  assert_true(jx_item(jx_sum(jx_tree_get(t, "a"), JX_AXES(), 0)) == 10);
  assert_null(jx_tree_get(t, "c"));
  jx_array *flat[2];
  jx_tree_flatten(t, flat);
  jx_tree *u = jx_tree_unflatten(t, flat);
  assert_ptr_equal(jx_tree_at(u, 1), jx_tree_get(t, "b"));
  jx_tree_release(u);
  jx_tree_set(t, NULL, flat[0]);
  assert_non_null(strstr(jx_last_error(), "jx_tree_set: the name is NULL"));
  jx_clear_error();
  /* a tree keeps its arrays beyond the scope they were made in */
  jx_scope_begin();
  jx_tree_set(t, "c", jx_full(JX_F32, JX_SHAPE(), 7));
  jx_scope_end();
  assert_true(jx_item(jx_tree_get(t, "c")) == 7);
  jx_tree_release(t);
}

static void update_errors_name_the_parameter(void **state) {
  (void)state;
  jx_optimizer *o = jx_optim_adam(0.1, 0.9, 0.999, 1e-8);
  jx_tree *p = jx_tree_create(), *g = jx_tree_create();
  jx_tree_set(p, "w", jx_ones(JX_F32, JX_SHAPE(3)));
  jx_tree *s = jx_optim_init(o, p);
  jx_optim_update(o, g, s, p);
  assert_non_null(strstr(jx_last_error(), "no gradient for parameter 'w'"));
  jx_clear_error();
  jx_tree *empty = jx_tree_create();
  jx_tree_set(g, "w", jx_ones(JX_F32, JX_SHAPE(3)));
  jx_optim_update(o, g, empty, p);
  assert_non_null(strstr(jx_last_error(), "the state has no 'count'"));
  jx_clear_error();
  float w[3]; /* failed updates leave the parameters alone */
  check_ok(jx_read(jx_tree_get(p, "w"), w, sizeof w));
  assert_true(w[0] == 1 && w[1] == 1 && w[2] == 1);
  jx_tree_release(empty);
  jx_tree_release(s);
  jx_tree_release(p);
  jx_tree_release(g);
  jx_optim_release(o);
  jx_optim_release(jx_optim_chain_clip(jx_optim_sgd(0.1, 0), -1));
  assert_non_null(strstr(jx_last_error(), "max_global_norm must be positive, got -1"));
}

/* loss(w, b, x, y) = mean((x w + b - y)^2) */
static void linreg_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *err = jx_sub(jx_add(jx_matmul(in[2], in[0]), in[1]), in[3]);
  out[0] = jx_mean(jx_mul(err, err), JX_AXES(), 0);
}

/* jx_train_step = value_and_grad + jx_optim_update, in one jitted function */
static void train_step_is_grad_then_update(void **state) {
  (void)state;
  jx_fn *loss = jx_fn_create("linreg", 4, 1, linreg_body, NULL);
  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "w", jx_full(JX_F32, JX_SHAPE(3), 0.5));
  jx_tree_set(params, "b", jx_full(JX_F32, JX_SHAPE(), 0.1));
  jx_optimizer *opt = jx_optim_sgd(0.1, 0.9);
  jx_tree *st = jx_optim_init(opt, params);
  jx_fn *step = jx_train_step(loss, params, st, opt), *jstep = jx_jit(step, NULL);
  jx_array *x = jx_reshape(jx_arange(JX_F32, 0, 12, 1), JX_SHAPE(4, 3));
  jx_array *y = jx_arange(JX_F32, 0, 4, 1);
  /* the same step by hand */
  jx_fn *vg = jx_value_and_grad(loss, JX_AXES(0, 1), 0);
  jx_array *args[4] = {jx_tree_get(params, "w"), jx_tree_get(params, "b"), x, y}, *g[3];
  check_ok(jx_call(vg, args, g));
  jx_tree *grads = jx_tree_create(), *p2 = jx_tree_unflatten(params, args);
  jx_tree *s2 = jx_optim_init(opt, params);
  jx_tree_set(grads, "w", g[1]);
  jx_tree_set(grads, "b", g[2]);
  jx_optim_update(opt, grads, s2, p2);

  jx_array *in[2 + 3 + 2], *out[1 + 2 + 3];
  jx_tree_flatten(params, in);
  jx_tree_flatten(st, in + 2);
  in[5] = x;
  in[6] = y;
  check_ok(jx_call(jstep, in, out));
  assert_true(jx_item(out[0]) == jx_item(g[0]));
  assert_close(out[1], jx_tree_get(p2, "w"), 1e-7, 1e-6, "train_step w", 0);
  assert_close(out[2], jx_tree_get(p2, "b"), 1e-7, 1e-6, "train_step b", 0);
  assert_close(out[4], jx_tree_get(s2, "trace/w"), 1e-7, 1e-6, "train_step trace", 0);
  jx_tree_release(grads);
  jx_tree_release(p2);
  jx_tree_release(s2);
  jx_fn_release(vg);
  jx_fn_release(jstep);
  jx_fn_release(step);
  jx_tree_release(st);
  jx_tree_release(params);
  jx_optim_release(opt);
  jx_fn_release(loss);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(trees_hold_named_arrays, setup, teardown),
      cmocka_unit_test_setup_teardown(optimizers_match_optax, setup, teardown),
      cmocka_unit_test_setup_teardown(optimizers_match_optax_jitted, setup, teardown),
      cmocka_unit_test_setup_teardown(schedules_match_optax, setup, teardown),
      cmocka_unit_test_setup_teardown(update_errors_name_the_parameter, setup, teardown),
      cmocka_unit_test_setup_teardown(train_step_is_grad_then_update, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
