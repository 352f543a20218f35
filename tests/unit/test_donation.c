/* Buffer donation (jx_jit_options.donate, as JAX's donate_argnums): a
 * donated input's buffer is written in place or reused, results equal the
 * undonated call's, the donated array errors on every later use, aliasing
 * falls back to no donation, and a donating GPT train step gives the same
 * losses as an undonating one with a lower memory peak. */
#define _GNU_SOURCE /* setenv */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/array/array.h"
#include "test_util.h"

enum { N = 64 }; /* 64x64 f32: 16 KiB, a size the buffer cache keeps */

static void affine_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

static void pair_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sub(jx_mul(in[0], in[1]), in[1]);
}

static void identity_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = in[0];
  out[1] = jx_exp(in[0]);
}

static jx_array *ramp(double scale) {
  float v[N * N];
  for (int i = 0; i < N * N; i++) v[i] = (float)(scale * sin(0.01 * i));
  return jx_array_from(JX_F32, JX_SHAPE(N, N), v);
}

static int64_t live_bytes(void) {
  jx_memory_stats ms = {0};
  check_ok(jx_memory_stats(0, &ms));
  return ms.live_bytes;
}

static int64_t peak_bytes(void) {
  jx_memory_stats ms = {0};
  check_ok(jx_memory_stats(0, &ms));
  return ms.peak_bytes;
}

static void assert_same(jx_array *a, jx_array *b) {
  static float x[N * N], y[N * N];
  assert_int_equal(jx_size(a), jx_size(b));
  size_t n = sizeof *x * (size_t)jx_size(a);
  check_ok(jx_read(a, x, n));
  check_ok(jx_read(b, y, n));
  assert_memory_equal(x, y, n);
}

static void donated_buffer_is_written_in_place(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  const int donate[] = {1};
  jx_jit_options o = {.donate = donate};
  jx_fn *jd = jx_jit(f, &o), *jp = jx_jit(f, NULL);
  jx_array *warm = ramp(1), *out = NULL;
  check_ok(jx_call(jd, &warm, &out)); /* compiles; the timed call below allocates nothing */
  jx_array *x = ramp(3), *want = NULL;
  check_ok(jx_call(jp, &x, &want));     /* the oracle: the same function, undonated */
  check_ok(jx_block_until_ready(want)); /* made (a dispatched run) before live0 is taken */
  void *data = x->buf->data;
  int64_t live0 = live_bytes();
  jx_memory_reset_peak(-1);
  check_ok(jx_call(jd, &x, &out));
  assert_ptr_equal(out->buf->data, data); /* the output took the input's buffer */
  assert_int_equal(live_bytes(), live0);  /* and no new one */
  assert_int_equal(peak_bytes(), live0);
  assert_same(out, want);
  jx_fn_release(jd);
  jx_fn_release(jp);
  jx_fn_release(f);
}

/* cache (donated), row, slot -> cache with the row written at slot: a
 * KV cache's update per decode step */
static void update_row_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *starts[2] = {in[2], jx_scalar(JX_I32, 0)};
  out[0] = jx_dynamic_update_slice(in[0], jx_reshape(in[1], JX_SHAPE(1, N)), starts);
}

static void donated_update_slice_writes_in_place(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("update_row", 3, 1, update_row_body, NULL);
  const int donate[] = {1, 0, 0};
  jx_fn *jd = jx_jit(f, &(jx_jit_options){.donate = donate}), *jp = jx_jit(f, NULL);
  for (int32_t slot = 0; slot < 3; slot++) {
    jx_array *in[3] = {ramp(5 + slot), ramp(1), jx_array_from(JX_I32, JX_SHAPE(), &slot)};
    in[1] = jx_reshape(jx_slice(in[1], JX_SHAPE(0, 0), JX_SHAPE(1, N), JX_SHAPE()), JX_SHAPE(N));
    jx_array *want = NULL, *out = NULL;
    check_ok(jx_call(jp, in, &want));
    check_ok(jx_block_until_ready(want));
    void *data = in[0]->buf->data;
    check_ok(jx_call(jd, in, &out));
    check_ok(jx_block_until_ready(out));
    assert_ptr_equal(out->buf->data, data); /* the cache was not copied */
    assert_same(out, want);
  }
  jx_fn_release(jd);
  jx_fn_release(jp);
  jx_fn_release(f);
}

/* x (donated) -> exp(x), reshape(x) . m: the reshape's result shares x's
 * buffer, so the exp kernel, x's last reader, must not write over it in
 * place while the product still reads the reshape. */
static void reshape_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *flat = jx_reshape(in[0], JX_SHAPE(N / 2, 2 * N));
  out[0] = jx_exp(in[0]);
  out[1] = jx_matmul(flat, in[1]);
}

static void donated_buffer_shared_by_a_reshape_is_not_overwritten(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("reshape_exp", 2, 2, reshape_body, NULL);
  const int donate[] = {1, 0};
  jx_fn *jd = jx_jit(f, &(jx_jit_options){.donate = donate}), *jp = jx_jit(f, NULL);
  float mv[2 * N * 4];
  for (int i = 0; i < 2 * N * 4; i++) mv[i] = (float)cos(0.3 * i);
  jx_array *m = jx_keep(jx_array_from(JX_F32, JX_SHAPE(2 * N, 4), mv));
  jx_array *in[2] = {ramp(2), m}, *want[2], *out[2];
  check_ok(jx_call(jp, in, want));
  check_ok(jx_block_until_ready(want[1]));
  check_ok(jx_call(jd, in, out));
  assert_same(out[0], want[0]);
  assert_same(out[1], want[1]);
  jx_release(m);
  jx_fn_release(jd);
  jx_fn_release(jp);
  jx_fn_release(f);
}

static void donated_array_errors_on_use(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  const int donate[] = {1};
  jx_jit_options o = {.donate = donate};
  jx_fn *jd = jx_jit(f, &o);
  jx_array *x = jx_keep(ramp(1)), *out = NULL;
  check_ok(jx_call(jd, &x, &out));
  float buf[N * N];
  assert_int_equal(jx_read(x, buf, sizeof buf), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "jx_read: the array was donated to 'affine' (input 0)"));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_add(x, x)));
  assert_non_null(strstr(jx_last_error(), "donated to 'affine'"));
  jx_clear_error();
  assert_true(jx_is_poisoned(jx_reshape(x, JX_SHAPE(N * N))));
  jx_clear_error();
  assert_int_not_equal(jx_call(jd, &x, &out), JX_OK);
  assert_non_null(strstr(jx_last_error(), "jx_call: the array was donated"));
  assert_true(jx_is_poisoned(out));
  jx_clear_error();
  assert_true(isnan(jx_item(x)));
  jx_clear_error();
  assert_int_not_equal(jx_block_until_ready(x), JX_OK);
  jx_clear_error();
  jx_release(x); /* frees the header (the leak checker watches) */
  jx_fn_release(jd);
  jx_fn_release(f);
}

/* A donated input that cannot give its buffer is used as it is. */
static void aliasing_falls_back_to_no_donation(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("pair", 2, 1, pair_body, NULL);
  const int both[] = {1, 1}, first[] = {1, 0};
  jx_jit_options ob = {.donate = both}, of = {.donate = first};
  jx_fn *jb = jx_jit(f, &ob), *jf = jx_jit(f, &of), *jp = jx_jit(f, NULL);
  jx_array *x = ramp(1), *y = ramp(2), *want = NULL, *got = NULL;
  /* the same array twice: donated twice, or donated and passed undonated */
  jx_array *xx[] = {x, x};
  check_ok(jx_call(jp, xx, &want));
  check_ok(jx_call(jb, xx, &got));
  assert_same(got, want);
  check_ok(jx_call(jf, xx, &got));
  assert_same(got, want);
  assert_false(jx_array_donated(x));
  /* another array shares x's buffer (a view, as a reshape may be): x cannot be taken */
  jx_array *view = jx_array_alias(x, JX_SHAPE(N * N));
  jx_array *xy[] = {x, y};
  check_ok(jx_call(jp, xy, &want));
  check_ok(jx_call(jf, xy, &got));
  assert_same(got, want);
  assert_false(jx_array_donated(x));
  assert_false(jx_is_poisoned(jx_reshape(view, JX_SHAPE(N, N))));
  /* y's buffer is its own: taken, and the result is still right */
  jx_array *yx[] = {y, x};
  check_ok(jx_call(jp, yx, &want));
  check_ok(jx_call(jf, yx, &got));
  assert_same(got, want);
  assert_true(jx_array_donated(y));
  jx_fn_release(jb);
  jx_fn_release(jf);
  jx_fn_release(jp);
  jx_fn_release(f);
}

/* An input returned as it is: the output takes over its buffer. */
static void donated_input_returned_as_output(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("identity", 1, 2, identity_body, NULL);
  const int donate[] = {1};
  jx_jit_options o = {.donate = donate};
  jx_fn *jd = jx_jit(f, &o), *jp = jx_jit(f, NULL);
  jx_array *x = ramp(1), *want[2], *got[2];
  static float w[2][N * N];
  jx_scope_begin(); /* the oracle's outputs may share x's buffer: gone before the donation */
  check_ok(jx_call(jp, &x, want));
  check_ok(jx_read(want[0], w[0], sizeof w[0]));
  check_ok(jx_read(want[1], w[1], sizeof w[1]));
  jx_scope_end();
  want[0] = jx_array_from(JX_F32, JX_SHAPE(N, N), w[0]);
  want[1] = jx_array_from(JX_F32, JX_SHAPE(N, N), w[1]);
  void *data = x->buf->data;
  check_ok(jx_call(jd, &x, got));
  assert_true(jx_array_donated(x));
  assert_ptr_equal(got[0]->buf->data, data); /* donated, a new array takes its buffer */
  assert_same(got[0], want[0]);
  assert_same(got[1], want[1]);
  jx_fn_release(jd);
  jx_fn_release(jp);
  jx_fn_release(f);
}

/* Jit with shardings ignores donation: the inputs stay usable, the results
 * equal the plain jit's. */
static void sharded_jit_ignores_donation(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  assert_non_null(m);
  jx_sharding *rows = jx_sharding_create(m, "x");
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  const int donate[] = {1};
  jx_fn *js = jx_jit(f, &(jx_jit_options){.in_shardings = &rows, .donate = donate});
  jx_fn *jp = jx_jit(f, NULL);
  jx_array *x = ramp(1), *want = NULL, *got = NULL;
  check_ok(jx_call(jp, &x, &want));
  check_ok(jx_call(js, &x, &got));
  assert_false(jx_array_donated(x));
  assert_same(got, want);
  check_ok(jx_call(jp, &x, &got)); /* x is still usable */
  assert_same(got, want);
  jx_fn_release(js);
  jx_fn_release(jp);
  jx_fn_release(f);
  jx_sharding_release(rows);
  jx_mesh_release(m);
}

/* ---- the train step ---- */
enum { STEPS = 3, B = 2, T = 8 };

typedef struct {
  float loss[STEPS];
  int64_t peak; /* above the live bytes before the first step */
  double estimate;
  jx_tree *params;
} run_result;

static run_result train(int donating) {
  /* synchronous runs: the memory is measured between steps (a donating call
   * runs synchronously anyway; an undispatched one is compared with it) */
  setenv("JX_ASYNC_DISPATCH", "0", 1);
  jx_gpt_config cfg = jx_gpt_config_default();
  cfg.vocab = 64; /* parameters dominate the activations, as in a large model */
  cfg.d_model = 128;
  cfg.context = T;
  jx_tree *p = jx_gpt_init(&cfg, jx_random_key(0), JX_F32);
  jx_optimizer *opt = jx_optim_adamw(1e-2, 0.9, 0.999, 1e-8, 0.01);
  jx_tree *st = jx_optim_init(opt, p);
  int np = jx_tree_size(p), ns = jx_tree_size(st), nin = np + ns + 2;
  jx_fn *loss = jx_gpt_loss_fn(&cfg, p);
  jx_fn *step = jx_train_step(loss, p, st, opt);
  int *donate = calloc((size_t)nin, sizeof *donate);
  for (int i = 0; i < np + ns; i++) donate[i] = donating; /* the step gives back new trees */
  jx_jit_options o = {.donate = donate};
  jx_fn *jstep = jx_jit(step, &o);
  jx_array *tokens = jx_keep(jx_astype(
      jx_floor(jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(B, T + 1), 0, 63.99)), JX_I32));
  jx_array *x = jx_keep(jx_slice(tokens, JX_SHAPE(0, 0), JX_SHAPE(B, T), JX_SHAPE()));
  jx_array *y = jx_keep(jx_slice(tokens, JX_SHAPE(0, 1), JX_SHAPE(B, T + 1), JX_SHAPE()));
  jx_array **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nin, sizeof *out);
  run_result r = {{0}, 0, 0, NULL};
  jx_tree_flatten(p, in);
  jx_tree_flatten(st, in + np);
  in[np + ns] = x;
  in[np + ns + 1] = y;
  jx_cost cost = {0};
  check_ok(jx_fn_cost(jstep, in, &cost));
  r.estimate = cost.peak_bytes_per_device;
  int64_t base = 0;
  for (int s = 0; s < STEPS; s++) {
    jx_scope_begin();
    jx_tree_flatten(p, in);
    jx_tree_flatten(st, in + np);
    if (s == 1) { /* after the compilation */
      base = live_bytes();
      jx_memory_reset_peak(-1);
    }
    check_ok(jx_call(jstep, in, out));
    r.loss[s] = (float)jx_item(out[0]);
    for (int i = 0; i < np; i++) jx_tree_set(p, jx_tree_name(p, i), out[1 + i]);
    for (int i = 0; i < ns; i++) jx_tree_set(st, jx_tree_name(st, i), out[1 + np + i]);
    jx_scope_end();
  }
  r.peak = peak_bytes() - base;
  r.params = p;
  free(in);
  free(out);
  free(donate);
  jx_release(x);
  jx_release(y);
  jx_release(tokens);
  jx_fn_release(jstep);
  jx_fn_release(step);
  jx_fn_release(loss);
  jx_tree_release(st);
  jx_optim_release(opt);
  unsetenv("JX_ASYNC_DISPATCH");
  return r;
}

static void train_step_donation_same_losses_lower_peak(void **state) {
  (void)state;
  run_result plain = train(0), donated = train(1);
  for (int s = 0; s < STEPS; s++) {
    fprintf(stderr, "step %d: loss %.7f (donated %.7f)\n", s, (double)plain.loss[s],
            (double)donated.loss[s]);
    assert_true(plain.loss[s] == donated.loss[s]);
  }
  assert_true(plain.loss[STEPS - 1] < plain.loss[0]); /* it trains */
  for (int i = 0; i < jx_tree_size(plain.params); i++) {
    jx_array *a = jx_tree_at(plain.params, i), *b = jx_tree_at(donated.params, i);
    size_t n = sizeof(float) * (size_t)jx_size(a);
    float *u = malloc(n), *v = malloc(n);
    check_ok(jx_read(a, u, n));
    check_ok(jx_read(b, v, n));
    assert_memory_equal(u, v, n);
    free(u);
    free(v);
  }
  fprintf(stderr, "peak above live: %lld bytes plain, %lld donated; estimate %.0f, %.0f\n",
          (long long)plain.peak, (long long)donated.peak, plain.estimate, donated.estimate);
  assert_true(donated.peak < plain.peak);
  assert_true(donated.estimate < plain.estimate);
  jx_tree_release(plain.params);
  jx_tree_release(donated.params);
}

int main(void) {
  jx_set_cpu_device_count(2);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(donated_buffer_is_written_in_place, setup, teardown),
      cmocka_unit_test_setup_teardown(donated_update_slice_writes_in_place, setup, teardown),
      cmocka_unit_test_setup_teardown(donated_buffer_shared_by_a_reshape_is_not_overwritten, setup,
                                      teardown),
      cmocka_unit_test_setup_teardown(donated_array_errors_on_use, setup, teardown),
      cmocka_unit_test_setup_teardown(aliasing_falls_back_to_no_donation, setup, teardown),
      cmocka_unit_test_setup_teardown(donated_input_returned_as_output, setup, teardown),
      cmocka_unit_test_setup_teardown(sharded_jit_ignores_donation, setup, teardown),
      cmocka_unit_test_setup_teardown(train_step_donation_same_losses_lower_peak, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
