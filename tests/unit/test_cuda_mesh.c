/* CUDA devices in meshes (src/cuda/cuda_mesh.h): sharded jit with
 * JX_PLATFORM=cuda on a 2x2 mesh ('data', 'model') of four fake CUDA
 * devices (tests/cuda_fake: the fake NCCL's driver with the kernel
 * emulator), each mesh position's per-device program on its own device and
 * its collectives through the NCCL engine. Every result is compared with
 * the same sharded jit on the CPU devices (JX_PLATFORM=cpu): a
 * data-parallel matmul reduced over 'data' (psum), a Megatron-style
 * two-layer MLP (psum over 'model'), a loss + gradient train step of an MLP
 * sharded over 'data' (the gradients' psums), and layouts the partitioner
 * moves with all_gather, psum_scatter and all_to_all (leading and inner
 * dims). Counters prove where things ran: per-device programs run on CUDA
 * (4 per call), their collectives are device steps run by the engine (not
 * host equations), outputs stay on the devices and device_put inputs are
 * uploaded to the device that owns each block. Errors: a mesh with more
 * devices than GPUs, and a collective one device never joins (deadline). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "array/array.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_mesh.h"
#include "cuda/cuda_resident.h"
#include "ir/program.h"
#include "parallel/sharded_jit.h"
#include "parallel/shards.h"
#include "unit/test_util.h"

static jx_mesh *mesh; /* 2x2 ('data', 'model') over jx devices 0..3 */

static double wave(int64_t i, const void *ctx) {
  double k = ctx ? *(const double *)ctx : 1.0;
  return sin(0.37 * (double)i * k + k) * 0.8;
}

static jx_array *arr(jx_shape s, double k) { return test_array_of(JX_F32, s, wave, &k); }

static jx_sharding *sh(const char *spec) {
  jx_sharding *s = jx_sharding_create(mesh, spec);
  assert_non_null(s);
  return s;
}

/* ---- running one function on both platforms ---- */

typedef struct {
  jx_body body;
  int nin, nout;
  const char *in_spec[6];
  const char *out_spec[6]; /* NULL entries: the partitioner's choice */
} pcase;

/* f under jx_jit with the case's shardings, called with JX_PLATFORM set to
 * platform (read when the per-device program is compiled, at the first call). */
static jx_fn *sharded(jx_fn *f, const pcase *c, jx_sharding **ins, jx_sharding **outs) {
  int any_out = 0;
  for (int i = 0; i < c->nin; i++) ins[i] = sh(c->in_spec[i]);
  for (int o = 0; o < c->nout; o++) {
    outs[o] = c->out_spec[o] ? sh(c->out_spec[o]) : NULL;
    any_out |= outs[o] != NULL;
  }
  return jx_jit(f, &(jx_jit_options){.in_shardings = ins, .out_shardings = any_out ? outs : NULL});
}

static void release_shardings(jx_sharding **s, int n) {
  for (int k = 0; k < n; k++) jx_sharding_release(s[k]);
}

typedef struct {
  int kernels, host_eqns, collectives;
  long runs, engine_collectives;
  int bit_exact;
  double err;
} outcome;

/* Runs case c on the CPU and on CUDA with the same inputs; asserts the
 * outputs agree within tol and the CUDA outputs' blocks stay on their
 * devices; returns the counters. */
static outcome run_case(const char *name, const pcase *c, jx_array **in, double tol) {
  jx_fn *f = jx_fn_create(name, c->nin, c->nout, c->body, NULL);
  jx_sharding *ins[6], *outs[6];
  jx_array *want[6], *got[6];
  outcome r = {0};

  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = sharded(f, c, ins, outs);
  check_ok(jx_call(cpu, in, want));
  release_shardings(ins, c->nin);
  release_shardings(outs, c->nout);

  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = sharded(f, c, ins, outs);
  jx_cuda_mesh_stats s0, s1;
  jx_cuda_mesh_stats_get(&s0);
  check_ok(jx_call(gpu, in, got));
  jx_cuda_mesh_stats_get(&s1);
  r.runs = s1.runs - s0.runs;
  r.engine_collectives = s1.collectives - s0.collectives;
  jx_program *p = jx_sharded_jit_device_program(gpu, in);
  assert_non_null(p);
  r.kernels = jx_cuda_mesh_kernels(p, &r.host_eqns, &r.collectives);
  if (getenv("JX_TEST_VERBOSE")) {
    char *text = jx_program_print(p);
    fprintf(stderr, "%s\n", text);
    free(text);
  }
  jx_program_release(p);
  release_shardings(ins, c->nin);
  release_shardings(outs, c->nout);
  unsetenv("JX_PLATFORM");

  /* the outputs' blocks stay on their devices until read */
  for (int o = 0; o < c->nout; o++) {
    assert_non_null(jx_array_shards(got[o]));
    for (int q = 0; q < mesh->ndev; q++) {
      jx_cuda_device *d = NULL;
      check_ok(jx_cuda_device_open(mesh->device[q], &d));
      jx_array *b = jx_array_shards(got[o])->shard[q];
      assert_true(jx_cuda_resident_ptr(b, d) != 0);
    }
  }
  r.err = test_max_rel_diff(got, want, c->nout, &r.bit_exact);
  printf("  %-14s kernels %d, host equations %d, collective steps %d; %ld device runs, %ld "
         "engine collectives; max error %.3g%s\n",
         name, r.kernels, r.host_eqns, r.collectives, r.runs, r.engine_collectives, r.err,
         r.bit_exact ? " (bit for bit)" : "");
  assert_true(r.err <= tol);
  assert_int_equal(r.runs, 4); /* every mesh position ran on CUDA */
  /* every collective step ran through the engine, on every device */
  assert_int_equal(r.engine_collectives, 4L * r.collectives);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(f);
  return r;
}

/* ---- the cases ---- */

/* data-parallel: each device's rows, reduced over the batch (psum over 'data') */
static void f_dp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_tanh(jx_matmul(in[0], in[1])), JX_AXES(0), 0);
}

static void data_parallel_matmul(void **state) {
  (void)state;
  pcase c = {f_dp, 2, 1, {"data", ""}, {NULL}};
  jx_array *in[2] = {arr(JX_SHAPE(8, 16), 1), arr(JX_SHAPE(16, 8), 2)};
  outcome r = run_case("dp_matmul", &c, in, 1e-6);
  assert_true(r.kernels >= 1);
  assert_int_equal(r.collectives, 1); /* the psum over 'data' */
  assert_true(r.bit_exact);           /* a sum of two: rounded once either way */
}

/* Megatron: w1 split by columns, w2 by rows over 'model'; the batch over 'data' */
static void f_mlp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[0], in[1]), in[2]));
  out[0] = jx_add(jx_matmul(h, in[3]), in[4]);
}

static void megatron_mlp(void **state) {
  (void)state;
  pcase c = {f_mlp, 5, 1, {"data", "None,model", "model", "model", ""}, {"data"}};
  jx_array *in[5] = {arr(JX_SHAPE(8, 16), 1), arr(JX_SHAPE(16, 32), 2), arr(JX_SHAPE(32), 3),
                     arr(JX_SHAPE(32, 16), 4), arr(JX_SHAPE(16), 5)};
  outcome r = run_case("megatron_mlp", &c, in, 1e-6);
  assert_true(r.kernels >= 1);
  assert_true(r.collectives >= 1); /* the partial sums of the second layer over 'model' */
}

/* a train step: loss and gradients of a 2-layer MLP, the batch over 'data' */
static void f_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[4], in[0]), in[1]));
  jx_array *d = jx_sub(jx_add(jx_matmul(h, in[2]), in[3]), in[5]);
  out[0] = jx_mean(jx_mul(d, d), JX_AXES(), 0);
}

static void f_step(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *vg = ctx;
  jx_array *o[5];
  check_ok(jx_call(vg, in, o));
  out[0] = o[0];
  for (int k = 0; k < 4; k++) out[1 + k] = jx_sub(in[k], jx_mul(o[1 + k], jx_scalar(JX_F32, 0.1)));
}

static void train_step(void **state) {
  (void)state;
  jx_fn *loss = jx_fn_create("loss", 6, 1, f_loss, NULL);
  jx_fn *vg = jx_value_and_grad(loss, JX_AXES(0, 1, 2, 3), 0);
  jx_fn *step = jx_fn_create("train_step", 6, 5, f_step, vg);
  pcase c = {NULL, 6, 5, {"", "", "", "", "data", "data"}, {NULL}};
  jx_array *in[6] = {arr(JX_SHAPE(8, 16), 1), arr(JX_SHAPE(16), 2),    arr(JX_SHAPE(16, 4), 3),
                     arr(JX_SHAPE(4), 4),     arr(JX_SHAPE(16, 8), 5), arr(JX_SHAPE(16, 4), 6)};
  /* run_case makes its own jx_fn from a body: wrap the step's call */
  jx_sharding *ins[6], *outs[6];
  jx_array *want[5], *got[5];
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = sharded(step, &c, ins, outs);
  check_ok(jx_call(cpu, in, want));
  release_shardings(ins, 6);
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = sharded(step, &c, ins, outs);
  jx_cuda_mesh_stats s0, s1;
  jx_cuda_mesh_stats_get(&s0);
  check_ok(jx_call(gpu, in, got));
  jx_cuda_mesh_stats_get(&s1);
  unsetenv("JX_PLATFORM");
  release_shardings(ins, 6);
  jx_program *p = jx_sharded_jit_device_program(gpu, in);
  assert_non_null(p);
  int host = 0, coll = 0, kernels = jx_cuda_mesh_kernels(p, &host, &coll);
  jx_program_release(p);
  int exact = 0;
  double err = test_max_rel_diff(got, want, 5, &exact);
  printf("  %-14s kernels %d, host equations %d, collective steps %d; %ld device runs, %ld "
         "engine collectives; max error %.3g%s\n",
         "train_step", kernels, host, coll, s1.runs - s0.runs, s1.collectives - s0.collectives, err,
         exact ? " (bit for bit)" : "");
  assert_true(err <= 1e-6);
  assert_true(kernels >= 3);
  assert_true(coll >= 1); /* the gradients' (and the loss's) psums over 'data' */
  assert_int_equal(s1.runs - s0.runs, 4);
  assert_int_equal(s1.collectives - s0.collectives, 4L * coll);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(step);
  jx_fn_release(vg);
  jx_fn_release(loss);
}

/* An elementwise model: loss = mean((tanh(x * w + b) - y)^2), w and b of
 * x's shape, all laid out by 'data'; the step returns the loss and w, b
 * after one SGD update. Not a matmul, nor a replicated w: under the fake
 * driver a dot_general is a host equation, and the partitioner broadcasts
 * a replicated operand and slices it with host equations, which would copy
 * the parameters down in every call. */
static void f_eloss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *d = jx_sub(jx_tanh(jx_add(jx_mul(in[2], in[0]), in[1])), in[3]);
  out[0] = jx_mean(jx_mul(d, d), JX_AXES(), 0);
}

static void f_estep(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn *vg = ctx;
  jx_array *o[3];
  check_ok(jx_call(vg, in, o));
  out[0] = o[0];
  for (int k = 0; k < 2; k++) out[1 + k] = jx_sub(in[k], jx_mul(o[1 + k], jx_scalar(JX_F32, 0.5)));
}

/* The new parameters laid out as the old (the loss replicated), so they
 * feed back. */
static const pcase loop_case = {NULL, 4, 3, {"data", "data", "data", "data"}, {"", "data", "data"}};

/* Three train steps on one platform, the parameters fed back and the batch
 * put on the devices once; out[0..2]: the losses, out[3..4]: the final
 * parameters. downloads[k]: device values copied down before call k + 1
 * (k = 3: after the loop). *host_eqns: the per-device program's host
 * equations (CUDA). */
static void train_loop(jx_fn *step, const char *platform, jx_array **out, int64_t *downloads,
                       int *host_eqns) {
  jx_sharding *ins[4], *outs[3];
  setenv("JX_PLATFORM", platform, 1);
  jx_fn *g = sharded(step, &loop_case, ins, outs);
  jx_array *in[4] = {arr(JX_SHAPE(16, 8), 1), arr(JX_SHAPE(16, 8), 2), arr(JX_SHAPE(16, 8), 5),
                     arr(JX_SHAPE(16, 8), 6)};
  for (int i = 2; i < 4; i++) in[i] = jx_device_put(in[i], ins[i]);
  for (int k = 0; k < 3; k++) {
    jx_array *o[3];
    downloads[k] = jx_cuda_resident_downloads();
    check_ok(jx_call(g, in, o));
    out[k] = o[0];
    for (int i = 0; i < 2; i++) in[i] = o[1 + i];
  }
  downloads[3] = jx_cuda_resident_downloads();
  jx_program *p = jx_sharded_jit_device_program(g, in);
  assert_non_null(p);
  *host_eqns = -1;
  jx_cuda_mesh_kernels(p, host_eqns, NULL);
  if (getenv("JX_TEST_VERBOSE")) {
    char *text = jx_program_print(p);
    fprintf(stderr, "%s\n", text);
    free(text);
  }
  jx_program_release(p);
  unsetenv("JX_PLATFORM");
  for (int i = 0; i < 2; i++) out[3 + i] = in[i];
  release_shardings(ins, 4);
  release_shardings(outs, 3);
  jx_fn_release(g);
}

/* A train loop on CUDA: each call's outputs (the parameters, each block on
 * its own GPU) are the next call's inputs, read there in place:
 * nothing is copied down until the final read, which equals the same loop
 * on the CPU devices. */
static void train_loop_stays_on_devices(void **state) {
  (void)state;
  jx_fn *loss = jx_fn_create("eloss", 4, 1, f_eloss, NULL);
  jx_fn *vg = jx_value_and_grad(loss, JX_AXES(0, 1), 0);
  jx_fn *step = jx_fn_create("estep", 4, 3, f_estep, vg);
  jx_array *want[5], *got[5];
  int64_t cpu_dl[4], dl[4];
  int host_cpu = 0, host = 0;
  train_loop(step, "cpu", want, cpu_dl, &host_cpu);
  train_loop(step, "cuda", got, dl, &host);
  for (int o = 0; o < 5; o++)
    for (int q = 0; q < mesh->ndev; q++) {
      jx_cuda_device *d = NULL;
      check_ok(jx_cuda_device_open(mesh->device[q], &d));
      assert_true(jx_cuda_resident_ptr(jx_array_shards(got[o])->shard[q], d) != 0);
      assert_null(jx_array_shards(got[o])->shard[q]->buf); /* never copied down */
    }
  int exact = 0;
  double err = test_max_rel_diff(got, want, 5, &exact);
  int64_t after = jx_cuda_resident_downloads();
  float l[3];
  for (int k = 0; k < 3; k++) l[k] = (float)jx_item(got[k]);
  printf("  train loop: host equations %d; device values copied down per call %lld, %lld, %lld, "
         "by the final read %lld; losses %.5f %.5f %.5f; max error %.3g%s\n",
         host, (long long)(dl[1] - dl[0]), (long long)(dl[2] - dl[1]), (long long)(dl[3] - dl[2]),
         (long long)(after - dl[3]), l[0], l[1], l[2], err, exact ? " (bit for bit)" : "");
  /* the 3 calls copied nothing down (the program's 1 host equation reads
   * no parameter) */
  assert_int_equal(dl[3], dl[0]);
  /* the final read gathers each output once, one block of each replica
   * group: 1 of each replicated loss, 2 of each parameter */
  assert_int_equal(after - dl[3], 3 + 2 * 2);
  assert_true(l[2] < l[0]); /* it trains */
  assert_true(err <= 1e-6);
  jx_fn_release(step);
  jx_fn_release(vg);
  jx_fn_release(loss);
}

static void f_scale(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], jx_scalar(JX_F32, 2));
}

static void f_colsum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_tanh(in[0]), JX_AXES(0), 0);
}

static void f_colmax(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_max(jx_tanh(in[0]), JX_AXES(0), 0);
}

/* all_gather over both axes (dim 0 over 'data', dim 1 over 'model': an inner
 * dim, moved with copies), all_to_all (columns -> rows and back), and psum_scatter of
 * a sum's partial results along dim 0 and along dim 1 (an inner dim); pmax
 * of a max's */
static void relayouts(void **state) {
  (void)state;
  jx_array *x = arr(JX_SHAPE(8, 12), 7), *y = arr(JX_SHAPE(8, 16), 8);
  jx_array *z = arr(JX_SHAPE(8, 4, 16), 9);
  pcase gather = {f_scale, 1, 1, {"data,model"}, {""}};
  outcome r = run_case("all_gather", &gather, &x, 0);
  assert_int_equal(r.collectives, 2);
  pcase a2a = {f_scale, 1, 1, {"model"}, {"None,model"}};
  r = run_case("all_to_all", &a2a, &x, 0);
  assert_int_equal(r.collectives, 1);
  pcase a2a_back = {f_scale, 1, 1, {"None,model"}, {"model"}};
  r = run_case("all_to_all2", &a2a_back, &x, 0);
  assert_int_equal(r.collectives, 1);
  pcase pmax = {f_colmax, 1, 1, {"data"}, {NULL}};
  r = run_case("pmax", &pmax, &y, 0);
  assert_int_equal(r.collectives, 1);
  pcase scatter0 = {f_colsum, 1, 1, {"data"}, {"data"}};
  r = run_case("psum_scatter0", &scatter0, &y, 0);
  assert_int_equal(r.collectives, 1);
  pcase scatter1 = {f_colsum, 1, 1, {"data"}, {"None,data"}};
  r = run_case("psum_scatter1", &scatter1, &z, 0);
  assert_int_equal(r.collectives, 1);
}

/* device_put inputs: each block is uploaded to the device that owns it, once */
static void inputs_live_on_their_devices(void **state) {
  (void)state;
  jx_sharding *s = sh("data,model");
  jx_array *x = jx_device_put(arr(JX_SHAPE(8, 12), 3), s);
  jx_fn *f = jx_fn_create("scale", 1, 1, f_scale, NULL);
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *g = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){s}});
  jx_array *out[1];
  check_ok(jx_call(g, &x, out));
  unsetenv("JX_PLATFORM");
  for (int q = 0; q < 4; q++) {
    jx_cuda_device *d = NULL, *other = NULL;
    check_ok(jx_cuda_device_open(q, &d));
    check_ok(jx_cuda_device_open((q + 1) % 4, &other));
    assert_true(jx_cuda_resident_ptr(jx_array_shards(x)->shard[q], d) != 0);
    assert_true(jx_cuda_resident_ptr(jx_array_shards(x)->shard[q], other) == 0);
  }
  float got[96], want[96];
  check_ok(jx_read(out[0], got, sizeof got));
  check_ok(jx_read(x, want, sizeof want));
  for (int i = 0; i < 96; i++) assert_true(got[i] == 2 * want[i]);
  jx_fn_release(g);
  jx_fn_release(f);
  jx_sharding_release(s);
}

/* A device-resident sharded output (blocks on 4 GPUs, never read) re-laid:
 * by jx_device_put onto another sharding, and by a CUDA jit whose
 * in_shardings differ; read on this thread, not the devices' own. Equal to
 * the CPU's values, and each block is copied down once. */
static void relayout_device_resident(void **state) {
  (void)state;
  jx_array *x = arr(JX_SHAPE(8, 12), 11);
  jx_fn *f = jx_fn_create("scale", 1, 1, f_scale, NULL);
  jx_sharding *s = sh("data,model"), *cols = sh("None,model"), *rows = sh("model");
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *g = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){s},
                                         .out_shardings = (jx_sharding *[]){s}});
  jx_fn *g_rows = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){rows}});
  jx_array *y;
  check_ok(jx_call(g, &x, &y));
  for (int q = 0; q < 4; q++) assert_null(jx_array_shards(y)->shard[q]->buf);
  int64_t d0 = jx_cuda_resident_downloads();
  jx_array *moved = jx_device_put(y, cols), *twice;
  check_ok(jx_last_status());
  int64_t d1 = jx_cuda_resident_downloads();
  check_ok(jx_call(g_rows, &y, &twice)); /* y re-laid by 'model' on its way in */
  unsetenv("JX_PLATFORM");
  float xs[96], got[96], got2[96], got3[96];
  check_ok(jx_read(x, xs, sizeof xs));
  check_ok(jx_read(moved, got, sizeof got));
  check_ok(jx_read(twice, got2, sizeof got2));
  check_ok(jx_read(y, got3, sizeof got3));
  for (int i = 0; i < 96; i++) {
    assert_true(got[i] == 2 * xs[i]);
    assert_true(got2[i] == 4 * xs[i]);
    assert_true(got3[i] == 2 * xs[i]);
  }
  printf("  re-layouts of a device-resident output: %lld blocks copied down, then %lld\n",
         (long long)(d1 - d0), (long long)(jx_cuda_resident_downloads() - d1));
  assert_int_equal(d1 - d0, 4); /* the 4 blocks, once, for the gathered value */
  jx_fn_release(g_rows);
  jx_fn_release(g);
  jx_fn_release(f);
  jx_sharding_release(s);
  jx_sharding_release(cols);
  jx_sharding_release(rows);
}

/* a mesh of 8 jx devices on 4 GPUs: refused, naming the mesh and the counts */
static void mesh_larger_than_the_gpus(void **state) {
  (void)state;
  jx_mesh *big = jx_mesh_create(JX_SHAPE(8), (const char *[]){"x"});
  assert_non_null(big);
  jx_sharding *s = jx_sharding_create(big, "x");
  jx_fn *f = jx_fn_create("scale", 1, 1, f_scale, NULL);
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *g = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){s}});
  jx_array *in = arr(JX_SHAPE(16), 1), *out[1];
  assert_int_not_equal(jx_call(g, &in, out), JX_OK);
  unsetenv("JX_PLATFORM");
  printf("  %s\n", jx_last_error());
  assert_non_null(strstr(jx_last_error(), "x=8 over devices 0,1,2,3,4,5,6,7"));
  assert_non_null(strstr(jx_last_error(), "8 devices of this process"));
  assert_error_has("there are 4 CUDA devices");
  jx_fn_release(g);
  jx_fn_release(f);
  jx_sharding_release(s);
  jx_mesh_release(big);
}

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* mesh position 3 never joins the psum over 'data' (after a call where it
 * did): its peer (position 1) gets the engine's deadline error naming the
 * axis, after the timeout */
static void collective_deadline(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  jx_sharding *s = jx_sharding_create(m, "data"), *r = jx_sharding_create(m, "");
  jx_fn *f = jx_fn_create("dp", 2, 1, f_dp, NULL);
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *g = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){s, r}});
  jx_array *in[2] = {arr(JX_SHAPE(8, 16), 1), arr(JX_SHAPE(16, 8), 2)}, *out[1];
  /* compiled, and every device joins, under the default deadline: the
   * devices compile their kernels before they meet, which may outlast the
   * short one below on a loaded machine (the deadline is read per call) */
  check_ok(jx_call(g, in, out));
  setenv("JX_COLLECTIVE_TIMEOUT", "0.3", 1);
  jx_cuda_mesh_test_skip_collectives(3);
  double t0 = now();
  jx_status st = jx_call(g, in, out);
  double took = now() - t0;
  jx_cuda_mesh_test_skip_collectives(-1);
  unsetenv("JX_COLLECTIVE_TIMEOUT");
  unsetenv("JX_PLATFORM");
  printf("  after %.2f s: %s\n", took, jx_last_error());
  assert_int_equal(st, JX_ERR_TIMEOUT);
  assert_true(took >= 0.3 && took < 5);
  assert_non_null(strstr(jx_last_error(), "on device 1"));
  assert_non_null(strstr(jx_last_error(), "mesh axis 'data'"));
  assert_error_has("did not finish within 0.3 s");
  jx_fn_release(g);
  jx_fn_release(f);
  jx_sharding_release(s);
  jx_sharding_release(r);
  jx_mesh_release(m);
}

/* the CPU platform is untouched: nothing runs through the CUDA meshes */
static void cpu_stays_cpu(void **state) {
  (void)state;
  jx_sharding *s = sh("data"), *r = sh("");
  jx_fn *f = jx_fn_create("dp", 2, 1, f_dp, NULL);
  jx_fn *g = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){s, r}});
  jx_array *in[2] = {arr(JX_SHAPE(8, 16), 1), arr(JX_SHAPE(16, 8), 2)}, *out[1];
  jx_cuda_mesh_stats s0, s1;
  jx_cuda_mesh_stats_get(&s0);
  check_ok(jx_call(g, in, out));
  jx_cuda_mesh_stats_get(&s1);
  assert_int_equal(s1.runs, s0.runs);
  assert_null(jx_array_shards(out[0])->shard[0]->dev);
  jx_fn_release(g);
  jx_fn_release(f);
  jx_sharding_release(s);
  jx_sharding_release(r);
}

int main(void) {
  setenv("JX_NUM_CPU_DEVICES", "8", 1);
  setenv("JX_CUDA_DRIVER_PATH", JX_NCCL_FAKE, 1);
  setenv("JX_NCCL_PATH", JX_NCCL_FAKE, 1);
  setenv("JX_CUDA_MODULE_SOURCE", "1", 1); /* the emulator compiles the kernels' source */
  unsetenv("JX_PLATFORM");
  mesh = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  if (!mesh) {
    fprintf(stderr, "%s\n", jx_last_error());
    return 1;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(cpu_stays_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(data_parallel_matmul, setup, teardown),
      cmocka_unit_test_setup_teardown(megatron_mlp, setup, teardown),
      cmocka_unit_test_setup_teardown(train_step, setup, teardown),
      cmocka_unit_test_setup_teardown(relayouts, setup, teardown),
      cmocka_unit_test_setup_teardown(train_loop_stays_on_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(relayout_device_resident, setup, teardown),
      cmocka_unit_test_setup_teardown(inputs_live_on_their_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(mesh_larger_than_the_gpus, setup, teardown),
      cmocka_unit_test_setup_teardown(collective_deadline, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_mesh_release(mesh);
  jx_cuda_mesh_shutdown();
  return failed;
}
