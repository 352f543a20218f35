/* The CartPole example (examples/cartpole.{c,h}): the jx environment step
 * equals an independent NumPy implementation of gym's (goldens from
 * tests/golden/gen_cartpole.py) in f64 and, to f32 rounding, in f32; the
 * vmapped step equals a loop of single steps; the auto-resetting step
 * resets on termination and truncation; and a short PPO training on 1 and
 * on 4 devices gives the same metrics (to f32 reassociation) and improves
 * the return. The two trainings run in child processes forked before jx is
 * used, since the device count is fixed once per process. */
#define _POSIX_C_SOURCE 200809L /* fork, pipe */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "cartpole.h"
#include "test_util.h"

/* ---- goldens ---- */

static jx_array *golden(const char *name) {
  char path[1024];
  snprintf(path, sizeof path, "%s/cartpole/%s.npy", JX_TEST_DATA, name);
  jx_array *a = jx_load_npy(path);
  if (jx_is_poisoned(a)) fprintf(stderr, "%s\n", jx_last_error());
  assert_false(jx_is_poisoned(a));
  return a;
}

/* |got - want| <= atol + rtol |want| elementwise (read as f64) */
static void assert_close(jx_array *got, jx_array *want, double atol, double rtol,
                         const char *what) {
  if (jx_is_poisoned(got)) fprintf(stderr, "%s: %s\n", what, jx_last_error());
  assert_false(jx_is_poisoned(got));
  assert_int_equal(jx_size(got), jx_size(want));
  int64_t n = jx_size(got);
  double *g = malloc(sizeof(double) * (size_t)(n + 1)),
         *w = malloc(sizeof(double) * (size_t)(n + 1));
  check_ok(jx_read(jx_astype(got, JX_F64), g, sizeof(double) * (size_t)n));
  check_ok(jx_read(jx_astype(want, JX_F64), w, sizeof(double) * (size_t)n));
  int bad = 0;
  for (int64_t k = 0; k < n; k++)
    if (!(fabs(g[k] - w[k]) <= atol + rtol * fabs(w[k])) && bad++ < 5)
      fprintf(stderr, "%s: element %lld is %.17g, want %.17g\n", what, (long long)k, g[k], w[k]);
  free(g);
  free(w);
  assert_int_equal(bad, 0);
}

static void step_matches_numpy(void **state) {
  (void)state;
  jx_fn *f = cartpole_step_fn(), *v = jx_vmap(f, JX_AXES(), JX_AXES());
  jx_array *s = golden("states"), *a = golden("actions"), *want = golden("next_states");
  jx_array *term = golden("terminated"), *reward = golden("rewards");
  /* f64: gym's precision; f32 (the trainer's): to f32 rounding. The goldens
   * keep next states 1e-4 away from the thresholds, so both agree on
   * termination. */
  const jx_dtype dts[2] = {JX_F64, JX_F32};
  const double tol[2] = {1e-13, 2e-6};
  for (int k = 0; k < 2; k++) {
    jx_array *out[3];
    check_ok(jx_call(v, (jx_array *[]){jx_astype(s, dts[k]), a}, out));
    assert_int_equal(jx_dtype_of(out[0]), dts[k]);
    assert_close(out[0], want, tol[k], tol[k],
                 dts[k] == JX_F64 ? "f64 next state" : "f32 next state");
    assert_close(out[1], reward, 0, 0, "reward");
    assert_int_equal(jx_dtype_of(out[2]), JX_BOOL);
    assert_close(out[2], term, 0, 0, "terminated");
  }
  assert_true(jx_item(jx_sum(term, JX_AXES(), 0)) >= 10); /* the goldens do terminate */
  jx_fn_release(v);
  jx_fn_release(f);
}

/* 8 episodes of 60 steps, stepped by jit(vmap(step)) in f64: errors would
 * grow along the unstable pole's trajectory, so this checks accumulation */
static void trajectories_match_numpy(void **state) {
  (void)state;
  jx_fn *f = cartpole_step_fn(), *v = jx_vmap(f, JX_AXES(), JX_AXES()), *j = jx_jit(v, NULL);
  jx_array *s = golden("traj_start"), *actions = golden("traj_actions"),
           *want = golden("traj_states");
  int64_t B = jx_shape_of(actions).dims[0], L = jx_shape_of(actions).dims[1];
  jx_array *states[128];
  assert_true(L < 128);
  states[0] = s;
  for (int64_t k = 0; k < L; k++) {
    jx_array *a =
        jx_reshape(jx_slice(actions, JX_SHAPE(0, k), JX_SHAPE(B, k + 1), JX_SHAPE()), JX_SHAPE(B));
    jx_array *out[3];
    check_ok(jx_call(j, (jx_array *[]){states[k], a}, out));
    states[k + 1] = out[0];
  }
  assert_close(jx_stack((int)L + 1, states, 1), want, 1e-11, 1e-11, "trajectory");
  assert_int_equal(jx_fn_trace_count(j), 1);
  jx_fn_release(j);
  jx_fn_release(v);
  jx_fn_release(f);
}

/* the vmapped (and jitted) step is exactly a loop of single steps */
static void vmapped_step_equals_loop(void **state) {
  (void)state;
  enum { N = 24 };
  jx_fn *f = cartpole_step_fn(), *v = jx_vmap(f, JX_AXES(), JX_AXES()), *j = jx_jit(v, NULL);
  jx_array *s = jx_astype(
      jx_slice(golden("states"), JX_SHAPE(100, 0), JX_SHAPE(100 + N, 4), JX_SHAPE()), JX_F32);
  jx_array *a = jx_slice(golden("actions"), JX_SHAPE(100), JX_SHAPE(100 + N), JX_SHAPE());
  jx_array *next[N], *term[N], *vo[3], *jo[3];
  for (int i = 0; i < N; i++) {
    jx_array *out[3];
    jx_array *si =
        jx_reshape(jx_slice(s, JX_SHAPE(i, 0), JX_SHAPE(i + 1, 4), JX_SHAPE()), JX_SHAPE(4));
    jx_array *ai = jx_reshape(jx_slice(a, JX_SHAPE(i), JX_SHAPE(i + 1), JX_SHAPE()), JX_SHAPE());
    check_ok(jx_call(f, (jx_array *[]){si, ai}, out));
    next[i] = out[0];
    term[i] = out[2];
  }
  check_ok(jx_call(v, (jx_array *[]){s, a}, vo));
  check_ok(jx_call(j, (jx_array *[]){s, a}, jo));
  jx_array *loop_next = jx_stack(N, next, 0), *loop_term = jx_stack(N, term, 0);
  assert_close(vo[0], loop_next, 0, 0, "vmap vs loop");
  assert_close(jo[0], loop_next, 0, 0, "jit(vmap) vs loop");
  assert_close(vo[2], loop_term, 0, 0, "vmap terminated");
  assert_close(jo[2], loop_term, 0, 0, "jit(vmap) terminated");
  jx_fn_release(j);
  jx_fn_release(v);
  jx_fn_release(f);
}

/* a live step, a terminating one and a truncated one (t = 499) */
static void auto_step_resets(void **state) {
  (void)state;
  jx_fn *f = cartpole_auto_step_fn(), *v = jx_vmap(f, JX_AXES(), JX_AXES());
  float s[3][4] = {{0.01f, 0.1f, -0.02f, 0.05f}, {2.39f, 1.0f, 0.0f, 0.0f}, {0, 0, 0.01f, 0}};
  int32_t t[3] = {3, 10, CARTPOLE_MAX_STEPS - 1}, a[3] = {1, 1, 0};
  jx_array *keys = jx_random_split(jx_random_key(7), 3), *out[4];
  jx_array *states = jx_array_from(JX_F32, JX_SHAPE(3, 4), s);
  check_ok(jx_call(v,
                   (jx_array *[]){states, jx_array_from(JX_I32, JX_SHAPE(3), t), keys,
                                  jx_array_from(JX_I32, JX_SHAPE(3), a)},
                   out));
  uint8_t done[3];
  int32_t t1[3];
  float s1[3][4], r[3];
  check_ok(jx_read(out[0], s1, sizeof s1));
  check_ok(jx_read(out[1], t1, sizeof t1));
  check_ok(jx_read(out[2], r, sizeof r));
  check_ok(jx_read(out[3], done, sizeof done));
  assert_int_equal(done[0], 0);
  assert_int_equal(done[1], 1); /* x passes 2.4 */
  assert_int_equal(done[2], 1); /* the 500th step */
  assert_int_equal(t1[0], 4);
  assert_int_equal(t1[1], 0);
  assert_int_equal(t1[2], 0);
  for (int i = 0; i < 3; i++) assert_true(r[i] == 1.0f);
  /* the live one stepped; the others are fresh episodes from their keys */
  jx_array *step_out[3];
  jx_fn *step = cartpole_step_fn(), *vstep = jx_vmap(step, JX_AXES(), JX_AXES());
  check_ok(jx_call(vstep, (jx_array *[]){states, jx_array_from(JX_I32, JX_SHAPE(3), a)}, step_out));
  jx_fn_release(vstep);
  jx_fn_release(step);
  float stepped[3][4];
  check_ok(jx_read(step_out[0], stepped, sizeof stepped));
  for (int k = 0; k < 4; k++) assert_true(s1[0][k] == stepped[0][k]);
  for (int i = 1; i < 3; i++) {
    float fresh[4];
    jx_array *key =
        jx_reshape(jx_slice(keys, JX_SHAPE(i, 0), JX_SHAPE(i + 1, 2), JX_SHAPE()), JX_SHAPE(2));
    check_ok(jx_read(cartpole_reset(key, JX_F32), fresh, sizeof fresh));
    for (int k = 0; k < 4; k++) {
      assert_true(s1[i][k] == fresh[k]);
      assert_true(s1[i][k] >= -0.05f && s1[i][k] < 0.05f);
    }
  }
  jx_fn_release(v);
  jx_fn_release(f);
}

static void errors(void **state) {
  (void)state;
  jx_array *next, *term;
  assert_int_equal(
      cartpole_step(jx_zeros(JX_F32, JX_SHAPE(2, 4)), jx_scalar(JX_I32, 1), &next, &term),
      JX_ERR_SHAPE);
  assert_non_null(strstr(jx_last_error(), "cartpole_step: the state must have shape [4]"));
  assert_true(jx_is_poisoned(next) && jx_is_poisoned(term));
  jx_clear_error();
  cartpole_ppo_config c = cartpole_ppo_config_default();
  c.devices = 2; /* this process has one */
  assert_int_equal(cartpole_ppo_train(&c, NULL, NULL, NULL), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "cartpole_ppo_train: devices must equal"));
  jx_clear_error();
  c.devices = 1;
  c.steps = 10; /* not a multiple of 4 minibatches */
  assert_int_equal(cartpole_ppo_train(&c, NULL, NULL, NULL), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "steps must be a positive multiple of minibatches"));
  jx_clear_error();
}

/* ---- training on 1 and 4 devices, each in a child process ---- */

enum { ITERS = 6 };

typedef struct {
  int status, n;
  cartpole_ppo_metrics m[ITERS];
  char error[256];
} run_result;

static run_result runs[2];
static const int run_devices[2] = {1, 4};

static int record(void *ctx, const cartpole_ppo_metrics *m) {
  run_result *r = ctx;
  if (r->n < ITERS) r->m[r->n++] = *m;
  return 0;
}

/* In the child: a short training on `devices` devices. */
static void train_child(int devices, run_result *r) {
  memset(r, 0, sizeof *r);
  cartpole_ppo_config c = cartpole_ppo_config_default();
  c.devices = devices;
  c.envs = 32;
  c.steps = 32;
  c.epochs = 2;
  c.minibatches = 2;
  c.hidden = 32;
  c.iterations = ITERS;
  c.lr = 3e-3;
  c.seed = 3;
  c.solved_return = 0;
  r->status = jx_set_cpu_device_count(devices);
  if (!r->status) r->status = cartpole_ppo_train(&c, record, r, NULL);
  if (r->status) snprintf(r->error, sizeof r->error, "%s", jx_last_error());
}

/* Forks both trainings (before this process uses jx) and collects them. */
static void run_trainings(void) {
  int fds[2][2];
  pid_t pid[2];
  for (int k = 0; k < 2; k++) {
    runs[k].status = -1;
    if (pipe(fds[k])) return;
    fflush(NULL);
    pid[k] = fork();
    if (pid[k] == 0) {
      run_result r;
      train_child(run_devices[k], &r);
      ssize_t w = write(fds[k][1], &r, sizeof r); /* less than a pipe's buffer */
      _exit(w == (ssize_t)sizeof r ? 0 : 1);
    }
    close(fds[k][1]);
  }
  for (int k = 0; k < 2; k++) {
    if (pid[k] < 0) continue;
    ssize_t got = read(fds[k][0], &runs[k], sizeof runs[k]);
    if (got != (ssize_t)sizeof runs[k]) runs[k].status = -1;
    close(fds[k][0]);
    waitpid(pid[k], NULL, 0);
  }
}

static void training_same_on_1_and_4_devices(void **state) {
  (void)state;
  for (int k = 0; k < 2; k++) {
    if (runs[k].status)
      fprintf(stderr, "training on %d device(s) failed (%d): %s\n", run_devices[k], runs[k].status,
              runs[k].error);
    assert_int_equal(runs[k].status, 0);
    assert_int_equal(runs[k].n, ITERS);
  }
  const run_result *a = &runs[0], *b = &runs[1];
  for (int i = 0; i < ITERS; i++) {
    const cartpole_ppo_metrics *x = &a->m[i], *y = &b->m[i];
    fprintf(stderr,
            "iteration %d: return %.4f / %.4f (%lld / %lld episodes), loss %.6f / %.6f, "
            "entropy %.6f / %.6f\n",
            x->iteration, x->mean_return, y->mean_return, (long long)x->total_episodes,
            (long long)y->total_episodes, x->loss, y->loss, x->entropy, y->entropy);
    assert_int_equal(x->iteration, y->iteration);
    assert_int_equal(x->env_steps, y->env_steps);
    /* the same actions were taken: the same episodes ended with the same returns */
    assert_int_equal(x->total_episodes, y->total_episodes);
    assert_true(fabs(x->mean_return - y->mean_return) <= 1e-9 * x->mean_return);
    const double got[4] = {y->loss, y->pg_loss, y->value_loss, y->entropy};
    const double want[4] = {x->loss, x->pg_loss, x->value_loss, x->entropy};
    for (int k = 0; k < 4; k++) assert_true(fabs(got[k] - want[k]) <= 1e-4 * (1 + fabs(want[k])));
  }
  /* a random policy averages about 22; six iterations double that */
  assert_true(a->m[ITERS - 1].iter_return > 2 * a->m[0].iter_return);
}

int main(void) {
  run_trainings();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(step_matches_numpy, setup, teardown),
      cmocka_unit_test_setup_teardown(trajectories_match_numpy, setup, teardown),
      cmocka_unit_test_setup_teardown(vmapped_step_equals_loop, setup, teardown),
      cmocka_unit_test_setup_teardown(auto_step_resets, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
      cmocka_unit_test_setup_teardown(training_same_on_1_and_4_devices, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
