/* Gradients through jx_shard_map with JAX's default (check_vma): on the
 * data-parallel, Megatron (model-parallel MLP) and 2-D recipes, the gradient
 * taken inside the body and the gradient of the shard_map taken from outside
 * both equal the unsharded gradient (the oracle); a small Megatron MLP's
 * gradient inside the body equals JAX's (tests/golden/gen_shard_map_grad.py);
 * and jx_shard_map_ex's no_check_vma gives JAX's check_vma=False answers. */
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
#include "test_close.h"

/* An MLP's loss, laid out by a recipe: h = tanh(x @ w1), y = h @ w2 summed
 * over the model axis, loss = sum(y * y * c) summed over the data axis. */
typedef struct {
  const char *name;
  jx_shape mesh;
  const char *const *axes;
  const char *data, *model; /* the axes the batch and the hidden dim are split over, or NULL */
  const char *specs[4];     /* x, w1, w2, c */
  int64_t b, d, h;          /* x: [b, d], w1: [d, h], w2: [h, d], c: [d] */
} recipe;

static void mlp_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const recipe *r = ctx; /* NULL: unsharded */
  jx_array *y = jx_matmul(jx_tanh(jx_matmul(in[0], in[1])), in[2]);
  if (r && r->model) y = jx_psum(y, r->model);
  jx_array *loss = jx_sum(jx_mul(jx_mul(y, y), in[3]), JX_AXES(), 0);
  out[0] = r && r->data ? jx_psum(loss, r->data) : loss;
}

static const char *const DATA[] = {"data"}, *const MODEL[] = {"model"},
                         *const DM[] = {"data", "model"};

static const recipe DP = {"dp", {1, {8}}, DATA, "data", NULL, {"data", "", "", ""}, 16, 3, 5};
static const recipe MEGATRON = {
    "megatron", {1, {2}}, MODEL, NULL, "model", {"", "None,model", "model", ""}, 4, 3, 6};
static const recipe TWO_D = {
    "2d", {2, {4, 2}}, DM, "data", "model", {"data", "None,model", "model", ""}, 8, 3, 6};

static void inputs(const recipe *r, jx_array **in) {
  in[0] = val(JX_SHAPE(r->b, r->d), 0.1);
  in[1] = val(JX_SHAPE(r->d, r->h), 0.7);
  in[2] = val(JX_SHAPE(r->h, r->d), 1.3);
  in[3] = val(JX_SHAPE(r->d), 2.1);
}

/* The four gradients of the unsharded loss. */
static void unsharded_grads(const recipe *r, jx_array *const *in, jx_array **g) {
  jx_fn *loss = jx_fn_create("mlp_loss", 4, 1, mlp_loss, NULL);
  jx_fn *grad = jx_grad(loss, JX_AXES(0, 1, 2, 3));
  check_ok(jx_call(grad, in, g));
  jx_fn_release(grad);
  jx_fn_release(loss);
  (void)r;
}

/* The gradients taken inside the body: shard_map(grad(loss)), each gradient
 * laid out as its input. */
static jx_fn *grad_inside(const recipe *r, jx_mesh *m, const jx_shard_map_options *o) {
  jx_fn *loss = jx_fn_create("mlp_loss", 4, 1, mlp_loss, (void *)r);
  jx_fn *grad = jx_grad(loss, JX_AXES(0, 1, 2, 3));
  jx_fn *s = jx_shard_map_ex(grad, m, r->specs, r->specs, o);
  jx_fn_release(grad);
  jx_fn_release(loss);
  assert_non_null(s);
  return s;
}

/* The gradients of the shard_map of the loss (a replicated scalar). */
static jx_fn *grad_outside(const recipe *r, jx_mesh *m) {
  jx_fn *loss = jx_fn_create("mlp_loss", 4, 1, mlp_loss, (void *)r);
  jx_fn *s = jx_shard_map(loss, m, r->specs, (const char *[]){""});
  jx_fn *grad = jx_grad(s, JX_AXES(0, 1, 2, 3));
  jx_fn_release(s);
  jx_fn_release(loss);
  return grad;
}

static void assert_grads_close(jx_array *const *got, jx_array *const *want, double tol) {
  for (int k = 0; k < 4; k++) assert_close(got[k], want[k], tol);
}

static void check_recipe(const recipe *r) {
  jx_mesh *m = jx_mesh_create(r->mesh, r->axes);
  jx_array *in[4], *want[4], *got[4];
  inputs(r, in);
  unsharded_grads(r, in, want);
  jx_fn *inside = grad_inside(r, m, NULL);
  check_ok(jx_call(inside, in, got));
  assert_grads_close(got, want, 1e-12);
  jx_fn *jitted = jx_jit(inside, NULL);
  check_ok(jx_call(jitted, in, got));
  assert_grads_close(got, want, 1e-12);
  jx_fn *outside = grad_outside(r, m);
  check_ok(jx_call(outside, in, got));
  assert_grads_close(got, want, 1e-12);
  jx_fn_release(outside);
  jx_fn_release(jitted);
  jx_fn_release(inside);
  jx_mesh_release(m);
}

static void data_parallel(void **state) {
  (void)state;
  check_recipe(&DP);
}

static void megatron(void **state) {
  (void)state;
  check_recipe(&MEGATRON);
}

static void two_d(void **state) {
  (void)state;
  check_recipe(&TWO_D);
}

/* check_vma off: psum transposes to psum, so the gradient inside the body of
 * the model-split weights is the model axis's size (2) times the true one,
 * as JAX's check_vma=False; the gradient from outside stays right. */
static void unchecked_megatron_overcounts(void **state) {
  (void)state;
  const recipe *r = &MEGATRON;
  jx_mesh *m = jx_mesh_create(r->mesh, r->axes);
  jx_array *in[4], *want[4], *got[4];
  inputs(r, in);
  unsharded_grads(r, in, want);
  jx_shard_map_options o = {.no_check_vma = 1};
  jx_fn *inside = grad_inside(r, m, &o);
  check_ok(jx_call(inside, in, got));
  assert_close(got[1], jx_mul(want[1], jx_scalar(JX_F64, 2)), 1e-12);
  assert_close(got[2], jx_mul(want[2], jx_scalar(JX_F64, 2)), 1e-12);
  jx_fn_release(inside);
  jx_mesh_release(m);
}

/* vmap of the gradient taken inside the body (pvary's batching rule), over a
 * batch of c: each slice equals the unsharded gradient at that c. */
static void vmap_of_grad_inside(void **state) {
  (void)state;
  const recipe *r = &TWO_D;
  jx_mesh *m = jx_mesh_create(r->mesh, r->axes);
  jx_array *in[4], *got[4], *want[4];
  inputs(r, in);
  jx_array *cs = val(JX_SHAPE(2, r->d), 3.3);
  jx_fn *inside = grad_inside(r, m, NULL);
  jx_fn *v = jx_vmap(inside, (jx_axes){4, {JX_NONE, JX_NONE, JX_NONE, 0}}, JX_AXES(0));
  check_ok(jx_call(v, (jx_array *[]){in[0], in[1], in[2], cs}, got));
  for (int b = 0; b < 2; b++) {
    in[3] =
        jx_reshape(jx_slice(cs, JX_SHAPE(b, 0), JX_SHAPE(b + 1, r->d), JX_SHAPE()), JX_SHAPE(r->d));
    unsharded_grads(r, in, want);
    for (int k = 0; k < 4; k++) {
      jx_shape s = jx_shape_of(got[k]), lo = {s.rank, {b}}, hi = s;
      hi.dims[0] = b + 1;
      assert_close(jx_reshape(jx_slice(got[k], lo, hi, JX_SHAPE()), jx_shape_of(want[k])), want[k],
                   1e-12);
    }
  }
  jx_fn_release(v);
  jx_fn_release(inside);
  jx_mesh_release(m);
}

/* ---- a Megatron layer applied in a loop (jx_fori), and jx_axis_index ---- */
/* (i, h, w1, w2) -> (h + [psum over model of] tanh(h @ w1) @ w2, w1, w2) */
static void layer_step(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y = jx_matmul(jx_tanh(jx_matmul(in[1], in[2])), in[3]);
  out[0] = jx_add(in[1], ctx ? jx_psum(y, "model") : y);
  out[1] = in[2];
  out[2] = in[3];
}

/* (x, w1, w2) -> sum(h * h) after three layers from h = x */
static void looped_loss(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *step = jx_fn_create("layer_step", 4, 3, layer_step, ctx);
  jx_array *h[3];
  jx_fori(0, 3, step, 3, in, h);
  jx_fn_release(step);
  out[0] = jx_sum(jx_mul(h[0], h[0]), JX_AXES(), 0);
}

/* The carry is replicated over model and meets the model-split weights in
 * every step: its cotangent is summed over model inside the loop's transpose. */
static void loop_inside_the_body(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), MODEL);
  const char *specs[] = {"", "None,model", "model"};
  jx_array *in[3] = {val(JX_SHAPE(4, 3), 0.1),
                     jx_mul(val(JX_SHAPE(3, 6), 0.7), jx_scalar(JX_F64, 0.5)),
                     jx_mul(val(JX_SHAPE(6, 3), 1.3), jx_scalar(JX_F64, 0.5))},
           *want[3], *got[3];
  jx_fn *ref = jx_fn_create("looped_loss", 3, 1, looped_loss, NULL);
  jx_fn *gref = jx_grad(ref, JX_AXES(0, 1, 2));
  check_ok(jx_call(gref, in, want));
  jx_fn *loss = jx_fn_create("looped_loss", 3, 1, looped_loss, (void *)1);
  jx_fn *grad = jx_grad(loss, JX_AXES(0, 1, 2));
  jx_fn *inside = jx_shard_map(grad, m, specs, specs);
  check_ok(jx_call(inside, in, got));
  for (int k = 0; k < 3; k++) assert_close(got[k], want[k], 1e-12);
  jx_fn_release(inside);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_fn_release(gref);
  jx_fn_release(ref);
  jx_mesh_release(m);
}

/* loss = psum over i of sum(x * (axis_index + 1)) with x replicated: x is
 * used by every device, so its gradient is the sum 1 + 2 + ... + n. */
static void indexed_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *scale = jx_add(jx_astype(jx_axis_index("i"), JX_F64), jx_scalar(JX_F64, 1));
  out[0] = jx_psum(jx_sum(jx_mul(in[0], scale), JX_AXES(), 0), "i");
}

static void axis_index_varies(void **state) {
  (void)state;
  static const char *const I[] = {"i"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), I);
  jx_fn *loss = jx_fn_create("indexed_loss", 1, 1, indexed_loss, NULL);
  jx_fn *grad = jx_grad(loss, JX_AXES(0));
  jx_fn *inside = jx_shard_map(grad, m, (const char *[]){""}, (const char *[]){""});
  jx_array *x = val(JX_SHAPE(3), 0.4), *g;
  check_ok(jx_call(inside, &x, &g));
  assert_close(g, jx_full(JX_F64, JX_SHAPE(3), 10), 1e-15);
  jx_fn_release(inside);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_mesh_release(m);
}

/* An output whose type varies over i (all_gather keeps its operand's axes)
 * but that the out spec claims is replicated: from outside, its cotangent
 * is divided among the devices' copies, so the gradient is the unsharded
 * one, 2 x. */
static void gather_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_all_gather(in[0], "i", 0, 1);
}

static void sum_of_squares(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y;
  check_ok(jx_call((jx_fn *)ctx, in, &y));
  out[0] = jx_sum(jx_mul(y, y), JX_AXES(), 0);
}

static void unchecked_replicated_output(void **state) {
  (void)state;
  static const char *const I[] = {"i"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), I);
  jx_fn *gather = jx_fn_create("gather", 1, 1, gather_body, NULL);
  jx_fn *s = jx_shard_map(gather, m, (const char *[]){"i"}, (const char *[]){""});
  jx_fn *loss = jx_fn_create("sum_of_squares", 1, 1, sum_of_squares, s);
  jx_fn *grad = jx_grad(loss, JX_AXES(0));
  jx_array *x = val(JX_SHAPE(8, 2), 0.6), *g;
  check_ok(jx_call(grad, &x, &g));
  assert_close(g, jx_mul(x, jx_scalar(JX_F64, 2)), 1e-14);
  jx_fn_release(grad);
  jx_fn_release(loss);
  jx_fn_release(s);
  jx_fn_release(gather);
  jx_mesh_release(m);
}

static jx_array *golden(const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/shard_map_grad/%s.npy", JX_TEST_DATA, name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* JAX's gradients inside shard_map on a (data=2, model=2) mesh, with
 * check_vma on (the default) and off. */
static void matches_jax(void **state) {
  (void)state;
  static const recipe r = {
      "jax", {2, {2, 2}}, DM, "data", "model", {"data", "None,model", "model", ""}, 4, 3, 6};
  jx_mesh *m = jx_mesh_create(r.mesh, r.axes);
  jx_array *in[4] = {golden("x"), golden("w1"), golden("w2"), golden("c")}, *got[4];
  static const char *const names[] = {"dx", "dw1", "dw2", "dc"};
  jx_fn *inside = grad_inside(&r, m, NULL);
  check_ok(jx_call(inside, in, got));
  for (int k = 0; k < 4; k++) assert_close(got[k], golden(names[k]), 1e-12);
  jx_shard_map_options o = {.no_check_vma = 1};
  jx_fn *unchecked = grad_inside(&r, m, &o);
  check_ok(jx_call(unchecked, in, got));
  for (int k = 0; k < 4; k++) {
    char name[32];
    snprintf(name, sizeof name, "%s_unchecked", names[k]);
    assert_close(got[k], golden(name), 1e-12);
  }
  jx_fn_release(unchecked);
  jx_fn_release(inside);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(data_parallel, setup, teardown),
      cmocka_unit_test_setup_teardown(megatron, setup, teardown),
      cmocka_unit_test_setup_teardown(two_d, setup, teardown),
      cmocka_unit_test_setup_teardown(unchecked_megatron_overcounts, setup, teardown),
      cmocka_unit_test_setup_teardown(vmap_of_grad_inside, setup, teardown),
      cmocka_unit_test_setup_teardown(loop_inside_the_body, setup, teardown),
      cmocka_unit_test_setup_teardown(axis_index_varies, setup, teardown),
      cmocka_unit_test_setup_teardown(unchecked_replicated_output, setup, teardown),
      cmocka_unit_test_setup_teardown(matches_jax, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
