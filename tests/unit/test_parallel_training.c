/* Training recipes on 8 CPU devices: the same MLP trained for 20 SGD steps
 * with data parallelism, Megatron-style tensor parallelism (column- then
 * row-parallel), FSDP (parameters sharded over the data axis) and a 4x2
 * data x model mesh gives the losses and parameters of one device, to f32
 * tolerance. The sharded step is jx_jit of the whole step (grad included)
 * with in/out shardings; the compiler inserts the communication. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "parallel/collective.h"
#include "parallel/partition.h"
#include "test_util.h"

enum { BATCH = 32, DIN = 16, DHID = 32, DOUT = 8, STEPS = 20, NPARAM = 4 };

/* loss(W1, b1, W2, b2, x, y) = mean((tanh(x W1 + b1) W2 + b2 - y)^2) */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[4], in[0]), in[1]));
  jx_array *pred = jx_add(jx_matmul(h, in[2]), in[3]);
  jx_array *err = jx_sub(pred, in[5]);
  out[0] = jx_mean(jx_mul(err, err), JX_AXES(), 0);
}

typedef struct {
  jx_fn *value_and_grad;
} step_ctx;

/* step(W1, b1, W2, b2, x, y) -> (loss, W1', b1', W2', b2') with SGD, lr 0.1 */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  step_ctx *c = ctx;
  jx_array *vg[1 + NPARAM];
  if (jx_call(c->value_and_grad, in, vg)) return;
  out[0] = vg[0];
  for (int i = 0; i < NPARAM; i++)
    out[1 + i] = jx_sub(in[i], jx_mul(vg[1 + i], jx_scalar(JX_F32, 0.1)));
}

static jx_array *random_array(jx_shape s, uint32_t seed, double scale) {
  jx_array *key = jx_random_key(seed);
  return jx_mul(jx_random_normal(key, JX_F32, s), jx_scalar(JX_F32, scale));
}

typedef struct {
  const char *name;
  jx_shape mesh;
  const char *axes[2];
  const char *spec[NPARAM + 2]; /* W1, b1, W2, b2, x, y */
  const char *collectives[3];   /* the per-device step must contain these */
} recipe;

/* Runs STEPS steps of fn from the same start; writes the losses. */
static void train(jx_fn *fn, jx_sharding *const *sh, float *losses, jx_array **final) {
  jx_array *state[NPARAM + 2] = {
      random_array(JX_SHAPE(DIN, DHID), 1, 0.3),  jx_zeros(JX_F32, JX_SHAPE(DHID)),
      random_array(JX_SHAPE(DHID, DOUT), 2, 0.3), jx_zeros(JX_F32, JX_SHAPE(DOUT)),
      random_array(JX_SHAPE(BATCH, DIN), 3, 1.0), random_array(JX_SHAPE(BATCH, DOUT), 4, 1.0),
  };
  if (sh)
    for (int i = 0; i < NPARAM + 2; i++) state[i] = jx_device_put(state[i], sh[i]);
  for (int s = 0; s < STEPS; s++) {
    jx_array *out[1 + NPARAM];
    check_ok(jx_call(fn, state, out));
    losses[s] = (float)jx_item(out[0]);
    for (int i = 0; i < NPARAM; i++) {
      if (sh) assert_ptr_equal(jx_sharding_of(out[1 + i]), sh[i]); /* stays laid out */
      state[i] = out[1 + i];
    }
  }
  for (int i = 0; i < NPARAM; i++) final[i] = state[i];
}

static void recipe_matches_one_device(const recipe *r) {
  jx_fn *loss = jx_fn_create("mlp_loss", NPARAM + 2, 1, loss_body, NULL);
  step_ctx c = {jx_value_and_grad(loss, JX_AXES(0, 1, 2, 3), 0)};
  jx_fn *step = jx_fn_create("sgd_step", NPARAM + 2, 1 + NPARAM, step_body, &c);

  float want[STEPS], got[STEPS];
  jx_array *want_p[NPARAM], *got_p[NPARAM];
  jx_fn *plain = jx_jit(step, NULL);
  train(plain, NULL, want, want_p);

  jx_mesh *m = jx_mesh_create(r->mesh, r->axes);
  assert_non_null(m);
  jx_sharding *sh[NPARAM + 2], *out_sh[1 + NPARAM];
  for (int i = 0; i < NPARAM + 2; i++) sh[i] = jx_sharding_create(m, r->spec[i]);
  out_sh[0] = jx_sharding_create(m, "");
  for (int i = 0; i < NPARAM; i++) out_sh[1 + i] = jx_sharding_retain(sh[i]);
  jx_jit_options opts = {.in_shardings = sh, .out_shardings = out_sh};
  jx_fn *sharded = jx_jit(step, &opts);
  assert_non_null(sharded);
  long ahead = jx_collective_async_started();
  train(sharded, sh, got, got_p);
  /* the per-device steps start their collectives ahead of their first use
   * when each device has a core, and run them where they are reached when
   * the devices time-share the cores (JX_ASYNC_COLLECTIVES unset) */
  if (jx_mesh_device_count(m) <= sysconf(_SC_NPROCESSORS_ONLN))
    assert_true(jx_collective_async_started() > ahead);
  else
    assert_int_equal(jx_collective_async_started(), ahead);

  for (int s = 0; s < STEPS; s++) {
    if (fabsf(got[s] - want[s]) > 1e-5f * fmaxf(1.0f, fabsf(want[s])))
      fprintf(stderr, "%s: step %d loss %.8g, one device %.8g\n", r->name, s, got[s], want[s]);
    assert_true(fabsf(got[s] - want[s]) <= 1e-5f * fmaxf(1.0f, fabsf(want[s])));
  }
  assert_true(want[STEPS - 1] < 0.8f * want[0]); /* it trains */
  for (int i = 0; i < NPARAM; i++) {
    jx_array *d = jx_max(jx_abs(jx_sub(got_p[i], want_p[i])), JX_AXES(), 0);
    assert_true(jx_item(d) <= 1e-5);
  }
  assert_int_equal(jx_fn_trace_count(sharded), 1); /* one partition for all 20 steps */
  assert_int_equal(jx_sharded_jit_partitions(sharded), 1);
  jx_array *args[NPARAM + 2];
  for (int i = 0; i < NPARAM + 2; i++)
    args[i] = jx_zeros(JX_F32, jx_shape_of(got_p[i < NPARAM ? i : 0]));
  args[4] = jx_zeros(JX_F32, JX_SHAPE(BATCH, DIN));
  args[5] = jx_zeros(JX_F32, JX_SHAPE(BATCH, DOUT));
  char *text = jx_sharded_jit_device_text(sharded, args);
  assert_non_null(text);
  if (getenv("JX_TEST_SHOW_PROGRAMS")) fprintf(stderr, "%s:\n%s\n", r->name, text);
  for (int k = 0; k < 3 && r->collectives[k]; k++) {
    if (!strstr(text, r->collectives[k]))
      fprintf(stderr, "%s: no %s in the per-device step:\n%s\n", r->name, r->collectives[k], text);
    assert_non_null(strstr(text, r->collectives[k]));
  }
  free(text);

  for (int i = 0; i < NPARAM + 2; i++) jx_sharding_release(sh[i]);
  for (int i = 0; i < 1 + NPARAM; i++) jx_sharding_release(out_sh[i]);
  jx_mesh_release(m);
  jx_fn_release(sharded);
  jx_fn_release(plain);
  jx_fn_release(step);
  jx_fn_release(c.value_and_grad);
  jx_fn_release(loss);
}

static void data_parallel(void **state) {
  (void)state;
  recipe r = {"data parallel", JX_SHAPE(8), {"data"}, {"", "", "", "", "data", "data"}, {"psum"}};
  recipe_matches_one_device(&r);
}

/* Megatron: W1 split by columns, W2 by rows: the hidden activations stay
 * split and one all-reduce joins the partial products of the second layer. */
static void tensor_parallel(void **state) {
  (void)state;
  recipe r = {"tensor parallel",
              JX_SHAPE(8),
              {"model"},
              {"None,model", "model", "model", "", "", ""},
              {"psum"}};
  recipe_matches_one_device(&r);
}

/* FSDP / ZeRO-3: every parameter (and so its update) is split over the data
 * axis with the batch; parameters are gathered for use and their gradients
 * reduce-scattered. */
static void fully_sharded(void **state) {
  (void)state;
  recipe r = {"fsdp",
              JX_SHAPE(8),
              {"data"},
              {"data", "data", "data", "data", "data", "data"},
              {"all_gather", "psum_scatter"}};
  recipe_matches_one_device(&r);
}

static void data_times_model(void **state) {
  (void)state;
  recipe r = {"4x2 data x model",
              JX_SHAPE(4, 2),
              {"data", "model"},
              {"None,model", "model", "model", "", "data", "data"},
              {"psum[axes=(1,)]", "psum[axes=(2,)]"}};
  recipe_matches_one_device(&r);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(data_parallel, setup, teardown),
      cmocka_unit_test_setup_teardown(tensor_parallel, setup, teardown),
      cmocka_unit_test_setup_teardown(fully_sharded, setup, teardown),
      cmocka_unit_test_setup_teardown(data_times_model, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
