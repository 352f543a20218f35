/* The jax.numpy surface on a sharded batch: functions of a batch of rows,
 * jitted on rows laid out over a mesh of 4 CPU devices, give what they give
 * on one device, and so do their gradients (the oracle: the unsharded
 * run, itself checked against JAX by the other test_np_* tests). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "unit/test_util.h"

static jx_mesh *mesh;

typedef jx_array *(*row_fn)(jx_array *x);

static jx_array *r_quantile(jx_array *x) {
  return jx_quantile(x, jx_array_from(JX_F32, JX_SHAPE(2), (float[]){0.2f, 0.7f}), JX_AXES(1), NULL,
                     0);
}
static jx_array *r_median(jx_array *x) { return jx_median(x, JX_AXES(1), 1); }
static jx_array *r_roll(jx_array *x) { return jx_roll(x, -2, 1); }
static jx_array *r_at(jx_array *x) {
  jx_array *i = jx_array_from(JX_I32, JX_SHAPE(3), (int32_t[]){1, 1, 4});
  return jx_at_add(x, 2, (jx_index[]){JX_ALL, JX_IDX(i)}, jx_scalar(JX_F32, 2));
}
static jx_array *r_pad(jx_array *x) {
  return jx_pad_mode(x, JX_SHAPE(0, 3), JX_SHAPE(0, 2), "reflect", 0);
}
static jx_array *r_logaddexp(jx_array *x) { return jx_logaddexp(x, jx_flip(x, JX_AXES(1))); }
static jx_array *r_tril(jx_array *x) { return jx_tril(jx_reshape(x, JX_SHAPE(8, 2, 3)), 0); }
static jx_array *r_diff(jx_array *x) { return jx_diff(x, 1, 1); }

static const struct {
  const char *name;
  row_fn f;
} fns[] = {{"quantile", r_quantile}, {"median", r_median},   {"roll", r_roll},
           {"at_add", r_at},         {"pad_reflect", r_pad}, {"logaddexp", r_logaddexp},
           {"tril", r_tril},         {"diff", r_diff}};

static void value_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = ((row_fn)ctx)(in[0]);
}
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y = ((row_fn)ctx)(in[0]);
  out[0] = jx_sum(jx_mul(y, jx_sin(y)), JX_AXES(), 0);
}

static double max_diff(jx_array *a, jx_array *b) {
  return jx_item(jx_max(jx_abs(jx_sub(a, b)), JX_AXES(), 0));
}

static void sharded_rows_match_one_device(void **state) {
  (void)state;
  uint64_t seed = 19;
  float h[48];
  for (int i = 0; i < 48; i++) h[i] = (float)test_rng_uniform(&seed) * 3;
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(8, 6), h);
  jx_sharding *rows = jx_sharding_create(mesh, "x");
  jx_array *xs = jx_device_put(x, rows);
  for (size_t k = 0; k < sizeof fns / sizeof fns[0]; k++) {
    jx_fn *f = jx_fn_create(fns[k].name, 1, 1, value_body, (void *)fns[k].f);
    jx_fn *loss = jx_fn_create(fns[k].name, 1, 1, loss_body, (void *)fns[k].f);
    jx_fn *g = jx_grad(loss, JX_AXES());
    jx_fn *jf = jx_jit(f, NULL), *jg = jx_jit(g, NULL);
    jx_array *want, *got, *gwant, *ggot;
    check_ok(jx_call(f, &x, &want));
    check_ok(jx_call(jf, &xs, &got));
    check_ok(jx_call(g, &x, &gwant));
    check_ok(jx_call(jg, &xs, &ggot));
    assert_non_null(jx_sharding_of(got)); /* it ran on the mesh */
    double dv = max_diff(got, want), dg = max_diff(ggot, gwant);
    if (!(dv <= 1e-5 && dg <= 1e-5))
      fprintf(stderr, "%s: value differs by %g, gradient by %g\n", fns[k].name, dv, dg);
    assert_true(dv <= 1e-5 && dg <= 1e-5);
    jx_fn_release(jg);
    jx_fn_release(jf);
    jx_fn_release(g);
    jx_fn_release(loss);
    jx_fn_release(f);
  }
  jx_sharding_release(rows);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const char *x[] = {"x"};
  mesh = jx_mesh_create(JX_SHAPE(4), x);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(sharded_rows_match_one_device, setup, teardown),
  };
  int r = cmocka_run_group_tests(tests, NULL, NULL);
  jx_mesh_release(mesh);
  return r;
}
