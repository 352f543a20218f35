/* jx_pipeline with the GPipe schedule: the result and the gradients of a
 * loss through the pipeline equal those of the stages run one after another
 * on one device (the oracle), for 2 and 4 stages with 1, 2 and 4
 * microbatches (and 1 stage with 2) of a small residual MLP stage, eagerly,
 * under jx_jit, and on a data x stage mesh with the parameters placed by
 * stage and the batch replicated or split over data; bad input gets errors
 * naming the numbers. */
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

enum { BATCH = 8, D = 4, H = 6 };

/* One stage: x + tanh(x @ w1 + b1) @ w2, with w1 [D, H], b1 [H], w2 [H, D]. */
static void mlp_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[3], in[0]), in[1]));
  out[0] = jx_add(in[3], jx_matmul(h, in[2]));
}

/* Stage s's own parameter: entry s of the stacked one. */
static jx_array *stage_slice(jx_array *stacked, int s) {
  jx_shape start = jx_shape_of(stacked), stop = start;
  for (int d = 0; d < start.rank; d++) start.dims[d] = 0;
  start.dims[0] = s;
  stop.dims[0] = s + 1;
  return jx_squeeze(jx_slice(stacked, start, stop, JX_SHAPE()), JX_AXES(0));
}

typedef struct {
  jx_fn *stage, *pipeline; /* pipeline NULL: the stages in sequence */
  int nstages;
} model;

/* (W1, B1, W2, x) -> the model's output. */
static void forward(void *ctx, jx_array *const *in, jx_array **out) {
  const model *m = ctx;
  if (m->pipeline) {
    check_ok(jx_call(m->pipeline, in, out));
    return;
  }
  jx_array *x = in[3];
  for (int s = 0; s < m->nstages; s++) {
    jx_array *args[4] = {stage_slice(in[0], s), stage_slice(in[1], s), stage_slice(in[2], s), x};
    check_ok(jx_call(m->stage, args, &x));
  }
  out[0] = x;
}

/* sum(forward(...)^2 * c) with a fixed c, so that every element counts differently. */
static void loss(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y = NULL;
  forward(ctx, in, &y);
  jx_array *c = jx_astype(val(JX_SHAPE(D), 2.3), JX_F32);
  out[0] = jx_sum(jx_mul(jx_mul(y, y), c), JX_AXES(), 0);
}

static void stacked_inputs(int nstages, int64_t batch, jx_array **in) {
  in[0] = jx_astype(jx_mul(val(JX_SHAPE(nstages, D, H), 0.7), jx_scalar(JX_F64, 0.6)), JX_F32);
  in[1] = jx_astype(jx_mul(val(JX_SHAPE(nstages, H), 1.1), jx_scalar(JX_F64, 0.2)), JX_F32);
  in[2] = jx_astype(jx_mul(val(JX_SHAPE(nstages, H, D), 1.9), jx_scalar(JX_F64, 0.6)), JX_F32);
  in[3] = jx_astype(val(JX_SHAPE(batch, D), 0.3), JX_F32);
}

/* The pipeline on mesh (its stage axis "stage") against the sequence: the
 * output and the four gradients of the loss, with and without jx_jit. */
static void check_matches_sequence(jx_mesh *mesh, int nstages, int microbatches, int placed,
                                   const char *batch_spec) {
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_pipeline_options o = {.batch_spec = batch_spec};
  jx_fn *pipe = jx_pipeline_ex(stage, mesh, "stage", microbatches, JX_PIPELINE_GPIPE, &o);
  assert_non_null(pipe);
  model seq = {stage, NULL, nstages}, par = {stage, pipe, nstages};
  jx_array *in[4];
  stacked_inputs(nstages, BATCH, in);
  if (placed) { /* the parameters already on their stages' devices */
    jx_sharding *by_stage = jx_sharding_create(mesh, "stage");
    for (int k = 0; k < 3; k++) in[k] = jx_device_put(in[k], by_stage);
    jx_sharding_release(by_stage);
  }

  jx_array *want = NULL, *got = NULL, *jitted = NULL;
  jx_fn *fseq = jx_fn_create("sequence", 4, 1, forward, &seq);
  jx_fn *jpipe = jx_jit(pipe, NULL);
  check_ok(jx_call(fseq, in, &want));
  check_ok(jx_call(pipe, in, &got));
  check_ok(jx_call(jpipe, in, &jitted));
  assert_close(got, want, 1e-5);
  assert_close(jitted, want, 1e-5);

  jx_fn *lseq = jx_fn_create("loss_sequence", 4, 1, loss, &seq);
  jx_fn *lpar = jx_fn_create("loss_pipeline", 4, 1, loss, &par);
  jx_fn *gseq = jx_grad(lseq, JX_AXES(0, 1, 2, 3)), *gpar = jx_grad(lpar, JX_AXES(0, 1, 2, 3));
  jx_fn *jgpar = jx_jit(gpar, NULL);
  jx_array *gw[4], *gg[4], *gj[4];
  check_ok(jx_call(gseq, in, gw));
  check_ok(jx_call(gpar, in, gg));
  check_ok(jx_call(jgpar, in, gj));
  for (int k = 0; k < 4; k++) {
    assert_close(gg[k], gw[k], 1e-5);
    assert_close(gj[k], gw[k], 1e-5);
  }
  /* the oracle is not trivially satisfied: every gradient has nonzero entries */
  for (int k = 0; k < 4; k++) {
    double norm = 0;
    check_ok(jx_read(jx_astype(jx_sum(jx_abs(gw[k]), JX_AXES(), 0), JX_F64), &norm, sizeof norm));
    assert_true(norm > 1e-3);
  }
  jx_fn_release(jgpar);
  jx_fn_release(gpar);
  jx_fn_release(gseq);
  jx_fn_release(lpar);
  jx_fn_release(lseq);
  jx_fn_release(jpipe);
  jx_fn_release(fseq);
  jx_fn_release(pipe);
  jx_fn_release(stage);
}

static void stages_alone(int nstages) {
  jx_mesh *m = jx_mesh_create(JX_SHAPE(nstages), (const char *const[]){"stage"});
  for (int mb = 1; mb <= 4; mb *= 2) check_matches_sequence(m, nstages, mb, 0, NULL);
  jx_mesh_release(m);
}

/* One stage: no neighbours, the microbatches only. */
static void one_stage(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(1), (const char *const[]){"stage"});
  check_matches_sequence(m, 1, 2, 0, NULL);
  jx_mesh_release(m);
}

static void two_stages(void **state) {
  (void)state;
  stages_alone(2);
}

static void four_stages(void **state) {
  (void)state;
  stages_alone(4);
}

/* A second mesh axis sees the parameters and the batch replicated; the
 * parameters may already be laid out over the stage axis. */
static void stages_with_a_data_axis(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "stage"});
  check_matches_sequence(m, 2, 4, 1, NULL);
  jx_mesh_release(m);
}

/* Data parallelism inside the pipeline: the batch split over "data", each
 * device pipelining its rows of every microbatch; the parameters'
 * gradients are summed over "data". */
static void batch_split_over_data(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "stage"});
  check_matches_sequence(m, 2, 2, 1, "data");
  check_matches_sequence(m, 2, 4, 0, "data");
  jx_mesh_release(m);
}

/* The microbatches are computed separately: a stage that mixes the rows of
 * its activations (here, subtracting their mean) gives what the sequence
 * gives on each microbatch alone, not on the whole batch. */
static void mean_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *centered = jx_sub(in[1], jx_mean(in[1], JX_AXES(0), 1));
  out[0] = jx_mul(centered, in[0]);
}

static void microbatches_are_separate(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mean_stage", 2, 1, mean_stage, NULL);
  jx_fn *pipe = jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_GPIPE);
  jx_array *scale = jx_astype(val(JX_SHAPE(2, D), 0.5), JX_F32);
  jx_array *x = jx_astype(val(JX_SHAPE(BATCH, D), 0.9), JX_F32);
  jx_array *got = NULL;
  check_ok(jx_call(pipe, (jx_array *[]){scale, x}, &got));
  jx_array *halves[2];
  for (int h = 0; h < 2; h++) {
    jx_array *a =
        jx_slice(x, JX_SHAPE(h * BATCH / 2, 0), JX_SHAPE((h + 1) * BATCH / 2, D), JX_SHAPE());
    for (int s = 0; s < 2; s++)
      check_ok(jx_call(stage, (jx_array *[]){stage_slice(scale, s), a}, &a));
    halves[h] = a;
  }
  assert_close(got, jx_concatenate(2, halves, 0), 1e-6);
  jx_fn_release(pipe);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

/* ---- bad input ---- */
static void batch_not_divisible(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *pipe = jx_pipeline(stage, m, "stage", 4, JX_PIPELINE_GPIPE);
  jx_array *in[4], *out = NULL;
  stacked_inputs(2, 6, in);
  assert_int_equal(jx_call(pipe, in, &out), JX_ERR_SHAPE);
  assert_true(jx_is_poisoned(out));
  assert_non_null(strstr(jx_last_error(), "test_pipeline.c"));
  assert_error_has("leading dim 6 is not divisible into 4 microbatches");
  jx_fn_release(pipe);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

static void batch_not_divisible_over_data(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_pipeline_options o = {.batch_spec = "data"};
  jx_fn *pipe = jx_pipeline_ex(stage, m, "stage", 8, JX_PIPELINE_GPIPE, &o);
  jx_array *in[4], *out = NULL;
  stacked_inputs(2, BATCH, in);
  assert_int_equal(jx_call(pipe, in, &out), JX_ERR_SHAPE);
  assert_error_has("leading dim 8 is not divisible into 8 microbatches on each of the 2 shards "
                   "of the batch spec 'data'");
  o.batch_spec = "stage";
  assert_null(jx_pipeline_ex(stage, m, "stage", 2, JX_PIPELINE_GPIPE, &o));
  assert_error_has("the batch spec 'stage' splits the batch over the stage axis 'stage'");
  o.batch_spec = "model";
  assert_null(jx_pipeline_ex(stage, m, "stage", 2, JX_PIPELINE_GPIPE, &o));
  assert_error_has("jx_pipeline: the batch spec 'model'");
  jx_fn_release(pipe);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

static void stage_axis_missing(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "model"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  assert_null(jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_GPIPE));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("the mesh (data=2, model=2) has no stage axis 'stage'");
  jx_fn_release(stage);
  jx_mesh_release(m);
}

static void params_not_stacked_by_stage(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *pipe = jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_GPIPE);
  jx_array *in[4], *wrong[4], *out = NULL;
  stacked_inputs(2, BATCH, in);
  stacked_inputs(3, BATCH, wrong);
  in[1] = wrong[1]; /* b1 stacked for 3 stages */
  assert_int_equal(jx_call(pipe, in, &out), JX_ERR_SHAPE);
  assert_error_has("parameter 1 is f32[3,6]; its leading dim must be the 2 stages of mesh axis "
                   "'stage'");
  jx_fn_release(pipe);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

static void wide_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[1], in[0]);
}

static void stage_changes_the_activations(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("wide_stage", 2, 1, wide_stage, NULL);
  jx_fn *pipe = jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_GPIPE);
  jx_array *w = jx_astype(val(JX_SHAPE(2, D, H), 0.4), JX_F32), *out = NULL;
  jx_array *x = jx_astype(val(JX_SHAPE(BATCH, D), 0.3), JX_F32);
  assert_int_not_equal(jx_call(pipe, (jx_array *[]){w, x}, &out), JX_OK);
  assert_error_has("takes activations f32[4,4] but gives f32[4,6]");
  jx_fn_release(pipe);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

/* 1F1B and interleaved need the loss inside the pipeline. */
static void other_schedules_need_the_loss(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  assert_null(jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_1F1B));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("the schedule JX_PIPELINE_1F1B interleaves forwards and backwards, so it needs "
                   "the loss inside the pipeline: use jx_pipeline_value_and_grad");
  assert_null(jx_pipeline(stage, m, "stage", 2, JX_PIPELINE_INTERLEAVED));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("JX_PIPELINE_INTERLEAVED interleaves");
  assert_null(jx_pipeline(stage, m, "stage", 0, JX_PIPELINE_GPIPE));
  assert_error_has("0 microbatches");
  jx_fn_release(stage);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(one_stage, setup, teardown),
      cmocka_unit_test_setup_teardown(two_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(four_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(stages_with_a_data_axis, setup, teardown),
      cmocka_unit_test_setup_teardown(batch_split_over_data, setup, teardown),
      cmocka_unit_test_setup_teardown(microbatches_are_separate, setup, teardown),
      cmocka_unit_test_setup_teardown(batch_not_divisible, setup, teardown),
      cmocka_unit_test_setup_teardown(batch_not_divisible_over_data, setup, teardown),
      cmocka_unit_test_setup_teardown(stage_axis_missing, setup, teardown),
      cmocka_unit_test_setup_teardown(params_not_stacked_by_stage, setup, teardown),
      cmocka_unit_test_setup_teardown(stage_changes_the_activations, setup, teardown),
      cmocka_unit_test_setup_teardown(other_schedules_need_the_loss, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
