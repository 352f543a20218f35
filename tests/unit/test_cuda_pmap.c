/* pmap and shard_map on CUDA meshes (docs/cuda.md, "CUDA meshes"): with
 * JX_PLATFORM=cuda the per-device body runs on the mesh's GPUs (the fake
 * NCCL's four devices with the kernel emulator), its collectives through
 * the NCCL engine. Each case is compared with the same function run on the
 * CPU devices (JX_PLATFORM=cpu): a pmap whose body psums over its axis
 * (eager and jitted), and a shard_map over a 2x2 mesh ('data', 'model')
 * whose body psums over 'data', all_gathers over 'model' along an inner dim
 * and sends the result around a ring over 'data' with ppermute (eager and
 * jitted). Counters prove where the bodies ran: 4 CUDA runs per call and
 * every collective of every device through the engine.
 *
 * Run with --wide (8 CPU devices, twice the fake's GPUs), a pmap over all 8
 * devices and a shard_map on jx devices 4..7 do not fit the GPUs: they run
 * on the CPU devices with the same values, nothing on CUDA, and say so
 * under JX_LOG_COMPILES=1. */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "cuda/cuda_mesh.h"
#include "unit/test_util.h"

static double wave(int64_t i, const void *ctx) {
  double k = ctx ? *(const double *)ctx : 1.0;
  return sin(0.37 * (double)i * k + k) * 0.8;
}

static jx_array *arr(jx_shape s, double k) { return test_array_of(JX_F32, s, wave, &k); }

/* ---- the functions ---- */

/* pmap body over 'i': tanh(x) * psum(x * w) (w replicated) */
static void f_pmap(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_tanh(in[0]), jx_psum(jx_mul(in[0], in[1]), "i"));
}

/* shard_map body on ('data', 'model'), x's block [4, 3]: sin(x) plus x's
 * sum over 'data', gathered over 'model' along dim 1 ([4, 6]), then sent
 * to the other 'data' row (a ring of two); and an elementwise output laid
 * out like x */
static void f_smap(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *t = jx_add(jx_sin(in[0]), jx_psum(in[0], "data"));
  jx_array *g = jx_all_gather(t, "model", 1, 1);
  const int ring[2][2] = {{0, 1}, {1, 0}};
  out[0] = jx_ppermute(g, "data", 2, ring);
  out[1] = jx_mul(in[0], jx_scalar(JX_F32, 3));
}

typedef struct {
  jx_mesh *mesh; /* NULL: a pmap over every device */
  int jitted;
} variant;

/* A fresh function each time: a body is compiled for the platform of its
 * first call, so the CPU and CUDA runs must not share one. */
static jx_fn *make(const variant *v, jx_fn **inner, jx_fn **mapped) {
  if (!v->mesh) {
    *inner = jx_fn_create("pmapped", 2, 1, f_pmap, NULL);
    *mapped = jx_pmap(*inner, "i", (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  } else {
    *inner = jx_fn_create("smapped", 1, 2, f_smap, NULL);
    *mapped = jx_shard_map(*inner, v->mesh, (const char *[]){"data,model"},
                           (const char *[]){"data", "data,model"});
  }
  assert_non_null(*mapped);
  if (v->jitted) return jx_jit(*mapped, NULL);
  jx_fn *f = *mapped;
  *mapped = NULL; /* released once, as f */
  return f;
}

typedef struct {
  long runs, collectives; /* CUDA mesh counters over the CUDA call */
  int bit_exact;
} outcome;

static outcome run_both(const char *name, const variant *v, jx_array **in, int nout) {
  jx_fn *inner, *mapped, *f;
  jx_array *want[2], *got[2];
  outcome r = {0};

  setenv("JX_PLATFORM", "cpu", 1);
  f = make(v, &inner, &mapped);
  check_ok(jx_call(f, in, want));
  jx_fn_release(f);
  jx_fn_release(mapped);
  jx_fn_release(inner);

  setenv("JX_PLATFORM", "cuda", 1);
  f = make(v, &inner, &mapped);
  jx_cuda_mesh_stats s0, s1;
  jx_cuda_mesh_stats_get(&s0);
  check_ok(jx_call(f, in, got));
  jx_cuda_mesh_stats_get(&s1);
  unsetenv("JX_PLATFORM");
  r.runs = s1.runs - s0.runs;
  r.collectives = s1.collectives - s0.collectives;
  double err = test_max_rel_diff(got, want, nout, &r.bit_exact);
  printf("  %-16s %ld CUDA runs, %ld engine collectives; max error %.3g%s\n", name, r.runs,
         r.collectives, err, r.bit_exact ? " (bit for bit)" : "");
  assert_true(err <= 1e-6);
  jx_fn_release(f);
  jx_fn_release(mapped);
  jx_fn_release(inner);
  return r;
}

/* ---- four devices: every body on CUDA ---- */

static void pmap_psum(void **state) {
  (void)state;
  jx_array *in[2] = {arr(JX_SHAPE(4, 8), 1), arr(JX_SHAPE(8), 2)};
  for (int jitted = 0; jitted < 2; jitted++) {
    variant v = {NULL, jitted};
    outcome r = run_both(jitted ? "jit(pmap)" : "pmap", &v, in, 1);
    assert_int_equal(r.runs, 4);        /* each device's body on its GPU */
    assert_int_equal(r.collectives, 4); /* the psum of each device, by the engine */
  }
}

static void shard_map_collectives(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  assert_non_null(m);
  jx_array *in[1] = {arr(JX_SHAPE(8, 6), 3)};
  for (int jitted = 0; jitted < 2; jitted++) {
    variant v = {m, jitted};
    outcome r = run_both(jitted ? "jit(shard_map)" : "shard_map", &v, in, 2);
    assert_int_equal(r.runs, 4);
    assert_int_equal(r.collectives, 4 * 3); /* psum, all_gather, ppermute on every device */
    assert_true(r.bit_exact);               /* sums of two: rounded once either way */
  }
  jx_mesh_release(m);
}

/* the values themselves (an oracle independent of the CPU's collectives):
 * row i of out[0] is in data block d = i / 4 and comes from the other
 * block's row: sin(x[(1 - d) * 4 + i % 4]) + x[i % 4] + x[i % 4 + 4] */
static void shard_map_values(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"data", "model"});
  jx_array *x = arr(JX_SHAPE(8, 6), 3), *out[2];
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *inner = jx_fn_create("smapped", 1, 2, f_smap, NULL);
  jx_fn *s = jx_shard_map(inner, m, (const char *[]){"data,model"},
                          (const char *[]){"data", "data,model"});
  check_ok(jx_call(s, &x, out));
  unsetenv("JX_PLATFORM");
  float xs[48], got[48];
  check_ok(jx_read(x, xs, sizeof xs));
  check_ok(jx_read(out[0], got, sizeof got));
  for (int i = 0; i < 8; i++)
    for (int j = 0; j < 6; j++) {
      int d = i / 4, r = i % 4;
      float want = sinf(xs[((1 - d) * 4 + r) * 6 + j]) + (xs[r * 6 + j] + xs[(r + 4) * 6 + j]);
      assert_true(fabsf(got[i * 6 + j] - want) <= 1e-5f);
    }
  jx_fn_release(s);
  jx_fn_release(inner);
  jx_mesh_release(m);
}

/* ---- eight devices (--wide): the mesh does not fit the four GPUs ---- */

/* Runs v on CUDA-asked-for and on the CPU with JX_LOG_COMPILES=1, stderr
 * into a file; asserts nothing ran on CUDA and the log says why. */
static void falls_back(const char *name, const variant *v, jx_array **in, int nout) {
  FILE *tmp = tmpfile();
  assert_non_null(tmp);
  int fd = fileno(tmp);
  fflush(stderr);
  int saved = dup(2);
  dup2(fd, 2);
  setenv("JX_LOG_COMPILES", "1", 1);
  outcome r = run_both(name, v, in, nout);
  unsetenv("JX_LOG_COMPILES");
  fflush(stderr);
  dup2(saved, 2);
  close(saved);
  char log[8192] = {0};
  lseek(fd, 0, SEEK_SET);
  ssize_t n = read(fd, log, sizeof log - 1);
  fclose(tmp);
  assert_true(n > 0);
  if (!strstr(log, "CUDA devices: runs on the CPU devices")) fprintf(stderr, "log: %s\n", log);
  assert_non_null(strstr(log, "but there are 4 CUDA devices: runs on the CPU devices"));
  assert_int_equal(r.runs, 0);
  assert_int_equal(r.collectives, 0);
  assert_true(r.bit_exact); /* the same CPU devices ran both */
}

static void wide_pmap_on_cpu(void **state) {
  (void)state;
  jx_array *in[2] = {arr(JX_SHAPE(8, 8), 1), arr(JX_SHAPE(8), 2)};
  for (int jitted = 0; jitted < 2; jitted++) {
    variant v = {NULL, jitted};
    falls_back(jitted ? "jit(pmap) x8" : "pmap x8", &v, in, 1);
  }
}

static void wide_shard_map_on_cpu(void **state) {
  (void)state;
  jx_mesh *m =
      jx_mesh_create_on(JX_SHAPE(2, 2), (const char *[]){"data", "model"}, (int[]){4, 5, 6, 7});
  assert_non_null(m);
  jx_array *in[1] = {arr(JX_SHAPE(8, 6), 3)};
  variant v = {m, 0};
  falls_back("shard_map 4..7", &v, in, 2);
  jx_mesh_release(m);
}

int main(int argc, char **argv) {
  int wide = argc > 1 && !strcmp(argv[1], "--wide");
  setenv("JX_NUM_CPU_DEVICES", wide ? "8" : "4", 1);
  setenv("JX_CUDA_DRIVER_PATH", JX_NCCL_FAKE, 1);
  setenv("JX_NCCL_PATH", JX_NCCL_FAKE, 1);
  setenv("JX_CUDA_MODULE_SOURCE", "1", 1); /* the emulator compiles the kernels' source */
  unsetenv("JX_PLATFORM");
  const struct CMUnitTest four[] = {
      cmocka_unit_test_setup_teardown(pmap_psum, setup, teardown),
      cmocka_unit_test_setup_teardown(shard_map_collectives, setup, teardown),
      cmocka_unit_test_setup_teardown(shard_map_values, setup, teardown),
  };
  const struct CMUnitTest eight[] = {
      cmocka_unit_test_setup_teardown(wide_pmap_on_cpu, setup, teardown),
      cmocka_unit_test_setup_teardown(wide_shard_map_on_cpu, setup, teardown),
  };
  int failed = wide ? cmocka_run_group_tests_name("wide", eight, NULL, NULL)
                    : cmocka_run_group_tests(four, NULL, NULL);
  jx_cuda_mesh_shutdown();
  return failed;
}
