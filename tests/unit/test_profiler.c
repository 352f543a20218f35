/* The profiler: a data-parallel train step of a small linear model on 4
 * devices (shard_map: per-device gradients, psum) is profiled; the Chrome
 * trace parses (cJSON) and holds kernels on all 4 device tracks, psum events
 * with their bytes, the compile, the named scope and the step markers; the
 * summary's compute + communication + idle adds up to the wall time on each
 * device; JX_LOG_COMPILES gives the phases of a compilation; the summary's
 * per-function peak memory is jx_fn_cost's estimate beside the measured one. */
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

/* loss of a tanh layer on this device's rows */
static void local_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_matmul(in[1], in[0])); /* in: w [16,8], x [rows,16] */
  out[0] = jx_mean(jx_mul(h, h), JX_AXES(), 0);
}

static jx_fn *loss_fn;

/* w is replicated and the loss varies over data: w's gradient comes back
 * summed over data (one psum, the transpose of w's cast to varying) */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_fn *g = jx_grad(loss_fn, JX_AXES(0));
  jx_array *grad[1];
  jx_call(g, in, grad);
  jx_fn_release(g);
  out[0] = jx_sub(in[0], jx_mul(jx_scalar(JX_F32, 0.1), grad[0]));
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

static void test_sharded_train_step_profile(void **state) {
  (void)state;
  const char *axes[1] = {"data"}, *in_specs[2] = {"None", "data"}, *out_specs[1] = {"None"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), axes);
  loss_fn = jx_fn_create("local_loss", 2, 1, local_loss, NULL);
  jx_fn *body = jx_fn_create("train_step", 2, 1, step_body, NULL);
  jx_fn *step = jx_shard_map(body, m, in_specs, out_specs);
  jx_array *w = jx_keep(
      jx_mul(jx_random_normal(jx_random_key(0), JX_F32, JX_SHAPE(16, 8)), jx_scalar(JX_F32, 0.3)));
  jx_array *x = jx_keep(jx_random_normal(jx_random_key(1), JX_F32, JX_SHAPE(64, 16)));

  char path[] = "/tmp/jx_profile_XXXXXX.json";
  int fd = mkstemps(path, 5);
  assert_true(fd >= 0);
  close(fd);
  check_ok(jx_profiler_start(path));
  assert_int_equal(jx_profiler_start(path), JX_ERR_INVALID_ARGUMENT); /* one at a time */
  jx_clear_error();
  for (int s = 0; s < 3; s++) {
    jx_scope_begin();
    jx_profiler_step(s);
    jx_named_scope_begin("train step");
    jx_array *in[2] = {w, x}, *out[1];
    check_ok(jx_call(step, in, out));
    jx_named_scope_end();
    jx_release(w);
    w = jx_keep(out[0]);
    jx_scope_end();
  }
  /* laying an array out on the devices and reading it back are transfers */
  jx_sharding *rows = jx_sharding_create(m, "data");
  jx_scope_begin();
  static float host[64 * 16];
  check_ok(jx_read(jx_device_put(x, rows), host, sizeof host));
  jx_scope_end();
  jx_sharding_release(rows);
  check_ok(jx_profiler_stop());
  assert_int_equal(jx_profiler_stop(), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();

  char *text = slurp(path);
  assert_non_null(text);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
  assert_true(cJSON_IsArray(evs));
  int kernels[4] = {0}, psums[4] = {0}, steps = 0, scopes = 0, compiles = 0, tracks = 0, mem = 0;
  int to_devices = 0, to_host = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
    cJSON *tid = cJSON_GetObjectItem(e, "tid"), *args = cJSON_GetObjectItem(e, "args");
    assert_non_null(ph);
    assert_non_null(name);
    int t = tid ? tid->valueint : -1;
    if (!strcmp(ph, "M") && !strcmp(name, "thread_name")) tracks++;
    if (!cat) continue;
    if (!strcmp(ph, "X")) assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(e, "dur")) >= 0);
    if (!strcmp(cat, "compute") && !strncmp(name, "kernel ", 7) && t >= 0 && t < 4) kernels[t]++;
    if (!strcmp(cat, "collective") && !strcmp(name, "psum") && t >= 0 && t < 4) {
      assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "bytes")) == 16 * 8 * 4);
      assert_string_equal(cJSON_GetStringValue(cJSON_GetObjectItem(args, "group")), "data");
      psums[t]++;
    }
    if (!strcmp(cat, "collective") && !strncmp(name, "transfer to ", 12)) {
      assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "bytes")) == 64 * 16 * 4);
      to_devices += !strcmp(name, "transfer to devices");
      to_host += !strcmp(name, "transfer to host");
    }
    if (!strcmp(cat, "step") && !strcmp(ph, "i")) steps++;
    if (!strcmp(cat, "scope") && !strcmp(name, "train step")) scopes++;
    if (!strcmp(cat, "compile")) {
      assert_non_null(cJSON_GetObjectItem(args, "cc_ms"));
      compiles++;
    }
    if (!strcmp(cat, "memory") && !strcmp(ph, "C")) mem++;
  }
  for (int d = 0; d < 4; d++) {
    assert_true(kernels[d] >= 3); /* at least one kernel per step on every device */
    assert_int_equal(psums[d], 3);
  }
  assert_int_equal(steps, 3);
  assert_int_equal(to_devices, 1);
  assert_int_equal(to_host, 1);
  assert_int_equal(scopes, 3);
  assert_true(compiles >= 1); /* the per-device body, compiled in the first step */
  assert_true(tracks >= 5);   /* 4 devices and the host */
  assert_true(mem >= 1);
  cJSON_Delete(root);
  free(text);
  unlink(path);

  /* the summary: compute + communication + idle = wall, per device */
  for (int d = 0; d < 4; d++) {
    jx_profile_split s;
    assert_int_equal(jx_profiler_last_split(d, &s), 0);
    double sum = s.compute + s.comm + s.idle;
    if (fabs(sum - s.wall) > 0.05 * s.wall)
      fprintf(stderr, "device %d: %g + %g + %g vs %g\n", d, s.compute, s.comm, s.idle, s.wall);
    assert_true(fabs(sum - s.wall) <= 0.05 * s.wall);
    assert_true(s.compute > 0 && s.comm > 0 && s.idle >= 0);
  }
  jx_release(w);
  jx_release(x);
  jx_fn_release(step);
  jx_fn_release(body);
  jx_fn_release(loss_fn);
  jx_mesh_release(m);
}

static void test_profiler_errors(void **state) {
  (void)state;
  assert_int_equal(jx_profiler_start("/nonexistent-dir/x.json"), JX_ERR_IO);
  assert_non_null(strstr(jx_last_error(), "cannot write '/nonexistent-dir/x.json'"));
  jx_clear_error();
  assert_int_equal(jx_profiler_start(NULL), JX_ERR_INVALID_ARGUMENT);
  jx_clear_error();
  /* markers and scopes without a profiler are harmless */
  jx_named_scope_begin("idle");
  jx_profiler_step(1);
  jx_named_scope_end();
  jx_named_scope_end();
}

static void sin_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_sin(in[0]), jx_scalar(JX_F32, 3));
}

/* two layers whose intermediates make the peak: x [128,256], w [256,256] */
static void mlp_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_matmul(in[0], in[1]));
  jx_array *y = jx_matmul(h, in[1]);
  out[0] = jx_sum(jx_mul(y, y), JX_AXES(), 0);
}

/* The summary's per-function memory: the estimate is jx_fn_cost's for the
 * same function and inputs, to the byte; the measured peak (inputs plus what
 * the run allocated above where the device stood) is close to it, since the
 * model frees each intermediate after its last use as the executable does. */
static void test_function_memory_estimate(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("mlp", 2, 1, mlp_body, NULL);
  jx_fn *j = jx_jit(f, NULL);
  jx_array *x = jx_keep(jx_random_normal(jx_random_key(2), JX_F32, JX_SHAPE(128, 256)));
  jx_array *w = jx_keep(jx_random_normal(jx_random_key(3), JX_F32, JX_SHAPE(256, 256)));
  jx_array *in[2] = {x, w}, *out[1];
  jx_cost cost;
  check_ok(jx_fn_cost(j, in, &cost));
  assert_true(cost.peak_bytes_per_device > (128 * 256 + 256 * 256) * 4);

  char path[] = "/tmp/jx_profile_XXXXXX.json", log_path[] = "/tmp/jx_summary_XXXXXX";
  int fd = mkstemps(path, 5), log_fd = mkstemp(log_path);
  assert_true(fd >= 0 && log_fd >= 0);
  close(fd);
  fflush(stderr);
  int saved = dup(2);
  dup2(log_fd, 2);
  jx_status st = jx_profiler_start(path);
  for (int r = 0; r < 3 && !st; r++) {
    jx_scope_begin();
    st = jx_call(j, in, out);
    jx_scope_end();
  }
  jx_status stop = jx_profiler_stop();
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(log_fd);
  check_ok(st);
  check_ok(stop);
  char *summary = slurp(log_path);
  unlink(log_path);
  assert_non_null(summary);
  fprintf(stderr, "%s", summary);

  double estimated = 0, measured = 0;
  int runs = 0;
  assert_int_equal(jx_profiler_last_function("mlp", &estimated, &measured, &runs), 0);
  assert_int_equal(runs, 3);
  assert_true(estimated == cost.peak_bytes_per_device);
  assert_true(measured >= 0.5 * estimated && measured <= 2 * estimated);
  char want[128];
  snprintf(want, sizeof want, "estimated %10.0f B", cost.peak_bytes_per_device);
  assert_non_null(strstr(summary, "peak memory per jitted function"));
  char *line = strstr(summary, "    mlp ");
  assert_non_null(line);
  assert_non_null(strstr(line, want));
  assert_non_null(strstr(line, "measured/estimated "));
  free(summary);

  /* the trace holds each run as a "function" event with both figures */
  char *text = slurp(path);
  assert_non_null(text);
  cJSON *root = cJSON_Parse(text);
  assert_non_null(root);
  int functions = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    if (!cat || strcmp(cat, "function") || strcmp(name, "mlp")) continue;
    cJSON *args = cJSON_GetObjectItem(e, "args");
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "estimated_peak_bytes")) ==
                cost.peak_bytes_per_device);
    assert_true(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "measured_peak_bytes")) > 0);
    functions++;
  }
  assert_int_equal(functions, 3);
  cJSON_Delete(root);
  free(text);
  unlink(path);
  jx_release(x);
  jx_release(w);
  jx_fn_release(j);
  jx_fn_release(f);
}

/* JX_LOG_COMPILES=1 (set in main): a compilation's line splits its time by phase */
static void test_log_compiles_phases(void **state) {
  (void)state;
  fflush(stderr);
  char path[] = "/tmp/jx_log_XXXXXX";
  int fd = mkstemp(path), saved = dup(2);
  dup2(fd, 2);
  jx_fn *f = jx_fn_create("logged", 1, 1, sin_body, NULL);
  jx_fn *j = jx_jit(f, NULL);
  jx_array *x = jx_ones(JX_F32, JX_SHAPE(5)), *out[1];
  jx_status st = jx_call(j, &x, out);
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  close(fd);
  check_ok(st);
  char *log = slurp(path);
  unlink(path);
  assert_non_null(log);
  if (!strstr(log, "jx: compiled 'jit(logged)' in ")) fprintf(stderr, "log:\n%s", log);
  assert_non_null(strstr(log, "jx: traced 'logged' in "));
  assert_non_null(strstr(log, "jx: compiled 'jit(logged)' in "));
  assert_non_null(strstr(log, " ms: trace "));
  assert_non_null(strstr(log, ", simplify "));
  assert_non_null(strstr(log, ", fusion/codegen "));
  assert_non_null(strstr(log, ", C compile "));
  assert_non_null(strstr(log, "(1 kernels, "));
  free(log);
  jx_fn_release(j);
  jx_fn_release(f);
}

int main(void) {
  setenv("JX_LOG_COMPILES", "1", 1);
  setenv("JX_COLLECTIVE_TIMEOUT", "20", 0);
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_sharded_train_step_profile, setup, teardown),
      cmocka_unit_test_setup_teardown(test_profiler_errors, setup, teardown),
      cmocka_unit_test_setup_teardown(test_log_compiles_phases, setup, teardown),
      cmocka_unit_test_setup_teardown(test_function_memory_estimate, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
