/* Device-resident arrays, donation and asynchronous calls under
 * JX_PLATFORM=cuda (src/cuda/cuda_resident.h, cuda_exec.h), against
 * tests/cuda_fake's driver (device memory is host memory, kernels run in
 * tests/cuda_emu's emulator; skips with a message where there is no C++
 * compiler for it). The oracle is the CPU jit: the same training steps give
 * the same bits. The bytes copied each way are counted by the copy layer
 * (jx_cuda_copy_stats_get), the device blocks by the allocator. With
 * --real it runs the same against the machine's GPU.
 *
 * A small MLP regressor, y_hat[b] = sum_h relu(x[b] . w1[h]) w2[h] + b2, trained 5 steps by SGD
 * with momentum inside one jitted step whose parameters and momenta are fed back (and donated). Its
 * products are broadcast-multiply-reduce, so forward and backward are all kernels (the fake has no
 * cuBLASLt and would run a dot_general on the host). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/cuda.h>
#include <jx/jx.h>

#include "array/array.h"
#include "cuda/cuda_copy.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_exec.h"
#include "cuda/cuda_resident.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "ir/program.h"
#include "test_util.h"
#include "trace/fn.h"

enum { BATCH = 16, IN = 12, HIDDEN = 24, STEPS = 5, NPARAM = 3 };
enum { NSTATE = 2 * NPARAM, NSTEP_IN = NSTATE + 2, NSTEP_OUT = NSTATE + 1 };

static jx_array *values(jx_shape s, int seed, double scale) {
  int64_t n = jx_shape_numel(s);
  float *f = malloc(sizeof *f * (size_t)(n ? n : 1));
  assert_non_null(f);
  for (int64_t i = 0; i < n; i++) f[i] = (float)(sin(0.37 * (double)i + seed) * scale);
  jx_array *a = jx_array_from(JX_F32, s, f);
  free(f);
  return a;
}

static jx_cuda_device *device(void) {
  jx_cuda_device *d = NULL;
  check_ok(jx_cuda_device_open(0, &d));
  return d;
}
static jx_cuda_alloc_stats device_memory(void) { return jx_cuda_allocator_stats(device()->memory); }

static size_t nbytes(const jx_array *a) {
  return (size_t)jx_size(a) * jx_dtype_size(jx_dtype_of(a));
}

/* loss(w1 [H,I], w2 [H], b2 [], x [B,I], y [B]) = mean((y_hat - y)^2); one
 * statement per step, so the trace has the order written here */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_shape bhi = {3, {BATCH, HIDDEN, IN}}, bh = {2, {BATCH, HIDDEN}};
  jx_array *xs = jx_broadcast_in_dim(in[3], bhi, JX_AXES(0, 2));
  jx_array *ws = jx_broadcast_in_dim(in[0], bhi, JX_AXES(1, 2));
  jx_array *h = jx_relu(jx_sum(jx_mul(xs, ws), JX_AXES(2), 0));
  jx_array *w2 = jx_broadcast_in_dim(in[1], bh, JX_AXES(1));
  jx_array *y = jx_sum(jx_mul(h, w2), JX_AXES(1), 0);
  jx_array *b2 = jx_broadcast_in_dim(in[2], (jx_shape){1, {BATCH}}, JX_AXES());
  y = jx_add(y, b2);
  out[0] = jx_mean(jx_square(jx_sub(y, in[4])), JX_AXES(0), 0);
}

/* (params[3], momenta[3], x, y) -> (params'[3], momenta'[3], loss):
 * m' = 0.9 m + g, p' = p - 0.05 m' */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *value_and_grad = ctx;
  jx_array *args[NPARAM + 2] = {in[0], in[1], in[2], in[NSTATE], in[NSTATE + 1]};
  jx_array *res[1 + NPARAM];
  if (jx_call(value_and_grad, args, res)) {
    for (int o = 0; o < NSTEP_OUT; o++) out[o] = jx_poison();
    return;
  }
  for (int k = 0; k < NPARAM; k++) {
    jx_array *m = jx_add(jx_mul(in[NPARAM + k], jx_scalar(JX_F32, 0.9)), res[1 + k]);
    out[NPARAM + k] = m;
    out[k] = jx_sub(in[k], jx_mul(m, jx_scalar(JX_F32, 0.05)));
  }
  out[NSTATE] = res[0];
}

typedef struct {
  jx_fn *loss, *vg, *step, *jitted;
} trainer;

static trainer trainer_new(const char *platform, int donate) {
  trainer t;
  t.loss = jx_fn_create("mlp_loss", NPARAM + 2, 1, loss_body, NULL);
  t.vg = jx_value_and_grad(t.loss, JX_AXES(0, 1, 2), 0);
  t.step = jx_fn_create("train_step", NSTEP_IN, NSTEP_OUT, step_body, t.vg);
  int donated[NSTEP_IN] = {1, 1, 1, 1, 1, 1, 0, 0}; /* the state, not the batch */
  jx_jit_options o = {.donate = donated};
  setenv("JX_PLATFORM", platform, 1);
  t.jitted = jx_jit(t.step, donate ? &o : NULL);
  return t;
}

static void trainer_free(trainer *t) {
  jx_fn_release(t->jitted);
  jx_fn_release(t->step);
  jx_fn_release(t->vg);
  jx_fn_release(t->loss);
}

static void initial_state(jx_array **state) {
  jx_shape shapes[NPARAM] = {{2, {HIDDEN, IN}}, {1, {HIDDEN}}, {0, {0}}};
  for (int k = 0; k < NPARAM; k++) {
    state[k] = values(shapes[k], k + 1, 0.4);
    state[NPARAM + k] = jx_zeros(JX_F32, shapes[k]);
  }
}

static void batch(int step, jx_array **xy) {
  xy[0] = values((jx_shape){2, {BATCH, IN}}, 10 + step, 1.0);
  xy[1] = values((jx_shape){1, {BATCH}}, 20 + step, 0.7);
}

/* Per step, what the CUDA run moved and held. */
typedef struct {
  uint64_t up, down;     /* bytes copied during the call (no reads) */
  uint64_t read_down;    /* bytes copied by reading the loss */
  size_t in_use;         /* allocator bytes in use after the step */
  int in_place;          /* state outputs in the very blocks of the state passed in */
  int64_t device_allocs; /* blocks taken from the device so far */
  float loss;
} step_record;

/* Runs STEPS steps of t from the initial state, feeding the state back: the
 * caller's scope holds the initial state (*initial, may be NULL) and the
 * final one (final); each step's batch and the states in between are freed
 * after their step (donated ones, or as the user would drop them), so the
 * device memory in use is what one step needs. rec (may be NULL): per step. */
static void train(trainer *t, jx_array **initial, jx_array **final, step_record *rec) {
  jx_array *state[NSTATE], *first[NSTATE];
  initial_state(first);
  if (initial) memcpy(initial, first, sizeof first);
  for (int k = 0; k < NSTATE; k++) state[k] = jx_keep(first[k]); /* ours, as each later state */
  for (int s = 0; s < STEPS; s++) {
    jx_array *in[NSTEP_IN], *out[NSTEP_OUT];
    jx_scope_begin(); /* the batch and the step's outputs */
    memcpy(in, state, sizeof state);
    batch(s, in + NSTATE);
    uint64_t old_block[NSTATE];
    for (int k = 0; k < NSTATE; k++) old_block[k] = jx_cuda_resident_ptr(state[k], device());
    jx_cuda_copy_stats c0 = jx_cuda_copy_stats_get();
    check_ok(jx_call(t->jitted, in, out));
    int in_place = 0;
    for (int k = 0; k < NSTATE; k++)
      in_place += old_block[k] && jx_cuda_resident_ptr(out[k], device()) == old_block[k];
    jx_cuda_copy_stats c1 = jx_cuda_copy_stats_get();
    check_ok(jx_block_until_ready(out[NSTATE])); /* waits on the device, copies nothing */
    jx_cuda_copy_stats c2 = jx_cuda_copy_stats_get();
    float loss = (float)jx_item(out[NSTATE]);
    jx_cuda_copy_stats c3 = jx_cuda_copy_stats_get();
    for (int k = 0; k < NSTATE; k++) {
      jx_release(state[k]); /* the old state (donated: only the header is left) */
      state[k] = jx_keep(out[k]);
    }
    jx_scope_end();
    if (rec) {
      jx_cuda_alloc_stats m = device_memory();
      rec[s] = (step_record){c1.to_device_bytes - c0.to_device_bytes,
                             c1.to_host_bytes - c0.to_host_bytes,
                             c3.to_host_bytes - c2.to_host_bytes,
                             m.in_use,
                             in_place,
                             m.device_allocs,
                             loss};
      assert_int_equal(c2.to_host_bytes, c1.to_host_bytes);
    }
  }
  for (int k = 0; k < NSTATE; k++) {
    final[k] = state[k];
    jx_scope_adopt(final[k]); /* our reference, to the caller's scope */
  }
}

static void expect_same_bits(jx_array *want, jx_array *got, const char *what) {
  size_t n = nbytes(want);
  assert_int_equal(n, nbytes(got));
  char *a = malloc(n + 1), *b = malloc(n + 1);
  assert_non_null(a);
  assert_non_null(b);
  check_ok(jx_read(want, a, n));
  check_ok(jx_read(got, b, n));
  if (memcmp(a, b, n) != 0) fail_msg("%s: CUDA differs from the CPU jit", what);
  free(a);
  free(b);
}

/* The training loop on CUDA with donation against the CPU jit: the same
 * bits; copies up only at step 1 (the state) plus each step's batch; copies
 * down only the loss that is read; no device memory growth after step 1;
 * the donated arrays refuse use; everything returns to the allocator. */
static void test_train_loop_resident(void **state) {
  (void)state;
  jx_cuda_alloc_stats start = device_memory();
  assert_int_equal(start.in_use, 0);
  trainer cpu = trainer_new("cpu", 0), gpu = trainer_new("cuda", 1);
  jx_array *want[NSTATE], *got[NSTATE], *initial[NSTATE];
  jx_scope_begin();
  train(&cpu, NULL, want, NULL);
  step_record rec[STEPS];
  train(&gpu, initial, got, rec);
  setenv("JX_PLATFORM", "cpu", 1);
  /* all of the step on the device: nothing else to copy */
  jx_aval av[NSTEP_IN];
  for (int k = 0; k < NSTATE; k++) av[k] = (jx_aval){JX_F32, 0, jx_shape_of(got[k]), 0};
  av[NSTATE] = (jx_aval){JX_F32, 0, {2, {BATCH, IN}}, 0};
  av[NSTATE + 1] = (jx_aval){JX_F32, 0, {1, {BATCH}}, 0};
  jx_program *p = jx_fn_program(gpu.jitted, av);
  assert_non_null(p);
  int host = -1, kernels = jx_cuda_executable_kernels(jx_program_executable(p), &host, NULL);
  jx_program_release(p);
  size_t state_bytes = 0, batch_bytes = (BATCH * IN + BATCH) * sizeof(float);
  for (int k = 0; k < NSTATE; k++) state_bytes += nbytes(got[k]);
  fprintf(stderr, "train step: %d kernels, %d equations on the host; state %zu B, batch %zu B\n",
          kernels, host, state_bytes, batch_bytes);
  assert_int_equal(host, 0);
  for (int s = 0; s < STEPS; s++) {
    fprintf(stderr,
            "step %d: loss %.6f; copied up %llu B, down %llu B during the call, %llu B reading "
            "the loss; device memory in use %zu B, blocks taken so far %lld; %d of %d state "
            "outputs written in place\n",
            s + 1, rec[s].loss, (unsigned long long)rec[s].up, (unsigned long long)rec[s].down,
            (unsigned long long)rec[s].read_down, rec[s].in_use, (long long)rec[s].device_allocs,
            rec[s].in_place, NSTATE);
    /* step 1 copies the state and its constants up; later steps only the batch */
    if (s == 0)
      assert_true(rec[s].up >= state_bytes + batch_bytes);
    else
      assert_int_equal(rec[s].up, batch_bytes);
    assert_int_equal(rec[s].down, 0);
    assert_int_equal(rec[s].read_down, sizeof(float));
    if (s > 0) { /* donation: the update writes into the old state's blocks */
      assert_int_equal(rec[s].in_place, NSTATE);
      assert_int_equal(rec[s].in_use, rec[0].in_use);
      assert_int_equal(rec[s].device_allocs, rec[1].device_allocs); /* the cache serves the rest */
    }
  }
  /* the result, read from the device: the CPU jit's bits */
  for (int k = 0; k < NSTATE; k++) expect_same_bits(want[k], got[k], "final state");
  /* the first state was donated to the first step */
  float w[HIDDEN * IN];
  assert_int_not_equal(jx_read(initial[0], w, sizeof w), JX_OK);
  fprintf(stderr, "the donated array: %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), "donated to 'train_step' (input 0)"));
  jx_clear_error();
  jx_scope_end();
  trainer_free(&cpu);
  trainer_free(&gpu);
  assert_int_equal(device_memory().in_use, 0);
}

/* (tanh(x * y) + 1, x): a device-resident output and an input passed through */
static void pair_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_tanh(jx_mul(in[0], in[1])), jx_scalar(JX_F32, 1));
  out[1] = in[0];
}

static uint64_t downloaded(void) { return jx_cuda_copy_stats_get().to_host_bytes; }
static uint64_t uploaded(void) { return jx_cuda_copy_stats_get().to_device_bytes; }

/* Every reader of a device-resident array sees its value (the CPU jit's
 * bits), copied down once: jx_block_until_ready (copies nothing), an eager
 * op, jx_read, jx_format, the CPU jit; passed back to CUDA it is read in
 * place. */
static void test_readers_of_resident_arrays(void **state) {
  (void)state;
  jx_shape s = {2, {20, 33}};
  size_t bytes = 20 * 33 * sizeof(float);
  jx_scope_begin();
  jx_array *in[2] = {values(s, 1, 1.0), values(s, 2, 1.0)}, *want[2], *got[2], *again[2];
  jx_fn *f = jx_fn_create("pair", 2, 2, pair_body, NULL);
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = jx_jit(f, NULL);
  check_ok(jx_call(cpu, in, want));
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(f, NULL);
  uint64_t up0 = uploaded(), down0 = downloaded();
  check_ok(jx_call(gpu, in, got));
  uint64_t up1 = uploaded(); /* both inputs once, and the constant 1 */
  assert_int_equal(up1 - up0, 2 * bytes + sizeof(float));
  assert_ptr_equal(got[1], in[0]); /* an input returned is the same array */
  assert_non_null(jx_array_device_copy(got[0]));
  assert_null(got[0]->buf); /* on the device only */
  check_ok(jx_block_until_ready(got[0]));
  assert_int_equal(downloaded(), down0);
  /* the result fed back: read in place, nothing copied */
  jx_array *back[2] = {got[0], in[1]};
  check_ok(jx_call(gpu, back, again));
  assert_int_equal(uploaded(), up1);
  assert_int_equal(downloaded(), down0);
  /* an eager op copies it down, once; then jx_read reads the host copy */
  jx_array *plus = jx_add(got[0], jx_scalar(JX_F32, 2));
  assert_int_equal(downloaded() - down0, bytes);
  jx_array *want_plus = jx_add(want[0], jx_scalar(JX_F32, 2));
  expect_same_bits(want_plus, plus, "eager op on a resident array");
  expect_same_bits(want[0], got[0], "jx_read of a resident array");
  assert_int_equal(downloaded() - down0, bytes);
  /* printing, and the CPU jit, on a second resident array */
  jx_array *want_again[2];
  check_ok(jx_call(cpu, (jx_array *[]){want[0], in[1]}, want_again));
  char *text = jx_format(again[0]), *want_text = jx_format(want_again[0]);
  assert_non_null(text);
  assert_string_equal(text, want_text);
  free(text);
  free(want_text);
  jx_array *resident_cpu[2];
  check_ok(jx_call(gpu, back, again)); /* a fresh resident output */
  check_ok(jx_call(cpu, (jx_array *[]){again[0], in[1]}, resident_cpu));
  jx_array *want_twice[2];
  check_ok(jx_call(cpu, (jx_array *[]){want_again[0], in[1]}, want_twice));
  expect_same_bits(want_twice[0], resident_cpu[0], "the CPU jit on a resident array");
  jx_scope_end();
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(f);
  assert_int_equal(device_memory().in_use, 0);
}

/* (none): the fake driver; --real: the machine's driver and NVRTC (skips
 * without a GPU; the step has no GEMM, so the bits still match the CPU). */
int main(int argc, char **argv) {
  int real = argc > 1 && !strcmp(argv[1], "--real");
  if (!real) {
    if (!cuda_emu_available()) {
      printf("test_cuda_resident: skipped: %s (the fake driver runs kernels through it)\n",
             cuda_emu_missing());
      return 0;
    }
    setenv("JX_CUDA_DRIVER_PATH", JX_CUDA_FAKE_DRIVER, 1);
    setenv("JX_CUDA_MODULE_SOURCE", "1", 1);
  }
  if (jx_cuda_device_count() == 0) {
    printf("test_cuda_resident: %s: %s\n", real ? "skipped" : "the fake driver did not load",
           jx_cuda_status());
    return real ? 0 : 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_train_loop_resident, setup, teardown),
      cmocka_unit_test_setup_teardown(test_readers_of_resident_arrays, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
