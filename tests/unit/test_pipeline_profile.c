/* The profiler on a pipeline: jx_pipeline_value_and_grad on 8 CPU devices
 * (8 stages, 8 microbatches), jitted and profiled over two steps. The trace
 * holds, on each device's track, the action it ran at each tick with its
 * microbatch ("forward 3", "backward 3", the last stage's "forward+backward
 * 3", "idle"), as many of each as the schedule gives; the summary's bubble
 * measured from those events is within 5 points of (p - 1) / (m + p - 1)
 * (the schedule's) for GPipe and 1F1B, and of (p - 1) / (v m + p - 1) for
 * interleaved 1F1B. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "../../src/debug/debug_internal.h"
#include "test_util.h"
#include "test_close.h"

enum { BATCH = 32, D = 4, H = 6, M = 8, STEPS = 2 };

/* x + tanh(x @ w1) @ w2, with w1 [D, H], w2 [H, D]. */
static void mlp_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(in[2], jx_matmul(jx_tanh(jx_matmul(in[2], in[0])), in[1]));
}

static void mse_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_sub(in[0], in[1]);
  out[0] = jx_mean(jx_mul(e, e), JX_AXES(), 0);
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = s ? fread(s, 1, (size_t)n, f) : 0;
  if (s) s[got] = '\0';
  fclose(f);
  return s;
}

/* How many "branch" events of the trace on device tid are named name. */
static int count_actions(const cJSON *events, int tid, const char *name) {
  int n = 0;
  const cJSON *e;
  cJSON_ArrayForEach(e, events) {
    const cJSON *cat = cJSON_GetObjectItem(e, "cat"), *nm = cJSON_GetObjectItem(e, "name");
    const cJSON *t = cJSON_GetObjectItem(e, "tid");
    if (cJSON_IsString(cat) && !strcmp(cat->valuestring, "branch") && cJSON_IsNumber(t) &&
        t->valueint == tid && cJSON_IsString(nm) && !strcmp(nm->valuestring, name))
      n++;
  }
  return n;
}

/* S devices of V virtual stages each: the profile of STEPS jitted steps. */
static void profile_schedule(jx_pipeline_schedule schedule, int S, int V) {
  jx_mesh *mesh = jx_mesh_create(JX_SHAPE(S), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 3, 1, mlp_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  jx_pipeline_train_options o = {.virtual_stages = V};
  jx_fn *pipe = jx_pipeline_value_and_grad(stage, loss, mesh, "stage", M, schedule, &o);
  assert_non_null(pipe);
  jx_fn *step = jx_jit(pipe, NULL);
  int G = S * V;
  jx_array *in[4] = {
      jx_keep(jx_astype(jx_mul(val(JX_SHAPE(G, D, H), 0.7), jx_scalar(JX_F64, 0.5)), JX_F32)),
      jx_keep(jx_astype(jx_mul(val(JX_SHAPE(G, H, D), 1.9), jx_scalar(JX_F64, 0.5)), JX_F32)),
      jx_keep(jx_astype(val(JX_SHAPE(BATCH, D), 0.3), JX_F32)),
      jx_keep(jx_astype(val(JX_SHAPE(BATCH, D), 1.3), JX_F32))};
  jx_array *out[3];
  check_ok(jx_call(step, in, out)); /* compiles outside the profile */

  char path[] = "/tmp/jx_pipeline_profile_XXXXXX.json";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  close(fd);
  check_ok(jx_profiler_start(path));
  for (int s = 0; s < STEPS; s++) {
    check_ok(jx_call(step, in, out));
    check_ok(jx_block_until_ready(out[0]));
  }
  check_ok(jx_profiler_stop());

  jx_pipeline_stats stats;
  check_ok(jx_pipeline_schedule_stats(schedule, S, V, M, &stats));
  jx_profile_pipeline p;
  assert_int_equal(jx_profiler_last_pipeline(0, &p), 0);
  assert_int_not_equal(jx_profiler_last_pipeline(1, &p), 0); /* one schedule ran */
  check_ok(jx_profiler_last_pipeline(0, &p));
  assert_int_equal(p.schedule, schedule);
  assert_int_equal(p.stages, S);
  assert_int_equal(p.virtual_stages, V);
  assert_int_equal(p.microbatches, M);
  assert_int_equal(p.devices, S);
  assert_int_equal(p.runs, STEPS);
  /* every device ran a tick of each of the table's, and the schedule's actions */
  assert_int_equal(p.ticks, (int64_t)STEPS * S * stats.ticks);
  assert_int_equal(p.forwards, (int64_t)STEPS * (G - 1) * M);
  assert_int_equal(p.backwards, (int64_t)STEPS * (G - 1) * M);
  assert_int_equal(p.forward_backwards, (int64_t)STEPS * M);
  double theory = (double)(S - 1) / ((double)V * M + S - 1);
  assert_true(fabs(p.theory - theory) < 1e-12);
  assert_true(fabs(p.schedule_bubble - stats.bubble_fraction) < 1e-12);
  fprintf(stderr, "%d stages x %d: bubble measured %.4f of ticks, %.4f of wall time; theory %.4f\n",
          S, V, p.tick_bubble, p.time_bubble, theory);
  assert_true(fabs(p.tick_bubble - theory) <= 0.05);
  assert_true(p.time_bubble >= 0 && p.time_bubble < 1);

  /* the trace: each device's actions by microbatch, the bubbles as idle */
  char *text = slurp(path);
  assert_non_null(text);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  const cJSON *events = cJSON_GetObjectItem(root, "traceEvents");
  assert_true(cJSON_IsArray(events));
  char name[64];
  for (int mb = 0; mb < M; mb++) {
    snprintf(name, sizeof name, "forward %d", mb);
    assert_int_equal(count_actions(events, 0, name), STEPS * V);
    snprintf(name, sizeof name, "backward %d", mb);
    assert_int_equal(count_actions(events, 0, name), STEPS * V);
    snprintf(name, sizeof name, "forward+backward %d", mb);
    assert_int_equal(count_actions(events, S - 1, name), STEPS);
    assert_int_equal(count_actions(events, 0, name), 0);
  }
  /* device 0 waits p - 1 ticks for the first cotangent to come back */
  int idle0 = count_actions(events, 0, "idle");
  assert_int_equal(idle0, STEPS * (stats.ticks - 2 * V * M));
  assert_true(idle0 > 0);
  cJSON_Delete(root);
  free(text);
  unlink(path);

  for (int k = 0; k < 4; k++) jx_release(in[k]);
  jx_fn_release(step);
  jx_fn_release(pipe);
  jx_fn_release(loss);
  jx_fn_release(stage);
  jx_mesh_release(mesh);
}

static void gpipe_eight_stages(void **state) {
  (void)state;
  profile_schedule(JX_PIPELINE_GPIPE, 8, 1);
}

static void one_f_one_b_eight_stages(void **state) {
  (void)state;
  profile_schedule(JX_PIPELINE_1F1B, 8, 1);
}

static void interleaved_four_stages(void **state) {
  (void)state;
  profile_schedule(JX_PIPELINE_INTERLEAVED, 4, 2);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(gpipe_eight_stages),
      cmocka_unit_test(one_f_one_b_eight_stages),
      cmocka_unit_test(interleaved_four_stages),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
