/* The compiler: fused kernels give the reference's bits; a second call
 * compiles nothing; a new process finds its kernels in the disk cache; a
 * corrupt cache entry is rebuilt; two translation units compile at once;
 * a program's kernels move from their first tier to their final one with
 * the same bits. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <time.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "compile/async_dispatch.h"
#include "compile/executable.h"
#include "compile/toolchain.h"
#include "trace/fn.h"
#include "test_capture.h"
#include "test_util.h"

static const char *self;

/* a chain of six elementwise ops with a broadcast bias: one kernel */
static void chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = jx_mul(in[0], in[1]);
  jx_array *b = jx_add(a, jx_scalar(JX_F32, 0.5));
  jx_array *c = jx_tanh(b);
  jx_array *d = jx_exp(jx_neg(c));
  jx_array *e = jx_maximum(d, in[1]);
  out[0] = jx_sub(e, jx_sqrt(jx_abs(in[0])));
}

static jx_array *inputs[2];
static void make_inputs(void) {
  float x[1000], y[1000];
  for (int i = 0; i < 1000; i++) {
    x[i] = sinf((float)i) * 3;
    y[i] = cosf((float)i * 0.7f);
  }
  inputs[0] = jx_keep(jx_array_from(JX_F32, JX_SHAPE(10, 100), x));
  inputs[1] = jx_keep(jx_array_from(JX_F32, JX_SHAPE(10, 100), y));
}

static int run_chain(float *got, jx_kernel_stats *before, jx_kernel_stats *after) {
  jx_fn *f = jx_fn_create("chain", 2, 1, chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *out[1];
  *before = jx_kernel_cache_stats();
  jx_status st = jx_call(jf, inputs, out);
  *after = jx_kernel_cache_stats();
  if (!st) st = jx_read(out[0], got, 1000 * sizeof(float));
  jx_fn_release(jf);
  jx_fn_release(f);
  return st;
}

static void fused_kernel_matches_eager_bits(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("chain", 2, 1, chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[1], *got[1];
  assert_int_equal(jx_call(f, inputs, want), JX_OK);
  assert_int_equal(jx_call(jf, inputs, got), JX_OK);
  float a[1000], b[1000];
  jx_read(want[0], a, sizeof a);
  jx_read(got[0], b, sizeof b);
  assert_memory_equal(a, b, sizeof a);
  /* the whole chain is one kernel */
  jx_aval av[2] = {{JX_F32, 0, {2, {10, 100}}, 0}, {JX_F32, 0, {2, {10, 100}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  int fused = 0;
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    assert_int_equal(jx_executable_kernels(jx_program_executable(p), &fused), 1);
    assert_true(fused >= 7);
  }
  jx_program_release(p);
  /* a second call with the same signature traces and compiles nothing */
  jx_kernel_stats s0 = jx_kernel_cache_stats();
  assert_int_equal(jx_call(jf, inputs, got), JX_OK);
  jx_kernel_stats s1 = jx_kernel_cache_stats();
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.disk_hits, s0.disk_hits);
  assert_int_equal(jx_fn_trace_count(jf), 1);
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* JX_JIT_KERNELS=0: the jitted chain runs every equation as it is, with no
 * generated code and no compiler run, and gives the eager bits. */
static void jit_without_kernels(void **state) {
  (void)state;
  setenv("JX_JIT_KERNELS", "0", 1);
  jx_fn *f = jx_fn_create("chain_no_kernels", 2, 1, chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[1], *got[1];
  jx_kernel_stats s0 = jx_kernel_cache_stats();
  assert_int_equal(jx_call(f, inputs, want), JX_OK);
  assert_int_equal(jx_call(jf, inputs, got), JX_OK);
  float a[1000], b[1000];
  assert_int_equal(jx_read(want[0], a, sizeof a), JX_OK);
  assert_int_equal(jx_read(got[0], b, sizeof b), JX_OK);
  assert_memory_equal(a, b, sizeof a);
  jx_kernel_stats s1 = jx_kernel_cache_stats();
  assert_int_equal(s1.compiles, s0.compiles);
  assert_int_equal(s1.disk_hits, s0.disk_hits);
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    jx_aval av[2] = {{JX_F32, 0, {2, {10, 100}}, 0}, {JX_F32, 0, {2, {10, 100}}, 0}};
    jx_program *p = jx_fn_program(jf, av);
    assert_non_null(p);
    int fused = -1;
    assert_int_equal(jx_executable_kernels(jx_program_executable(p), &fused), 0);
    jx_program_release(p);
  }
  jx_fn_release(jf);
  jx_fn_release(f);
  unsetenv("JX_JIT_KERNELS");
}

/* An unknown JX_PLATFORM is an error naming it, for a plain jit and for one
 * with shardings (whose per-device program picks the platform too). */
static void unknown_platform_is_an_error(void **state) {
  (void)state;
  const char *was = getenv("JX_PLATFORM");
  char saved[32] = "";
  if (was) snprintf(saved, sizeof saved, "%s", was);
  setenv("JX_PLATFORM", "tpu", 1);
  jx_fn *f = jx_fn_create("chain_on_tpu", 2, 1, chain, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *out[1];
  assert_int_not_equal(jx_call(jf, inputs, out), JX_OK);
  assert_error_has("JX_PLATFORM='tpu' is not a platform (cpu or cuda)");
  jx_clear_error();
  jx_mesh *m = jx_mesh_create(JX_SHAPE(1), (const char *[]){"x"});
  jx_sharding *rows = jx_sharding_create(m, "x");
  jx_fn *sf = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){rows, rows}});
  assert_int_not_equal(jx_call(sf, inputs, out), JX_OK);
  assert_error_has("JX_PLATFORM='tpu' is not a platform (cpu or cuda)");
  jx_clear_error();
  jx_fn_release(sf);
  jx_sharding_release(rows);
  jx_mesh_release(m);
  jx_fn_release(jf);
  jx_fn_release(f);
  if (was)
    setenv("JX_PLATFORM", saved, 1);
  else
    unsetenv("JX_PLATFORM");
}

static void matmul_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_tanh(jx_matmul(in[0], in[1]));
}

/* a layer's backward pass: the input and weight gradients (independent
 * GEMMs, one with a transposed operand), then a product that reads one */
static void two_gradients(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *dy = in[0], *w = in[1], *x = in[2];
  out[0] = jx_matmul(dy, jx_transpose(w, JX_AXES())); /* dx = dy w^T */
  out[1] = jx_matmul(jx_transpose(x, JX_AXES()), dy); /* dw = x^T dy */
  out[2] = jx_matmul(out[0], w);                      /* reads dx */
}

static void independent_gemms_run_side_by_side(void **state) {
  (void)state;
  enum { B = 160, I = 192, O = 96 }; /* 2^21+ multiply-adds each: split into row blocks */
  static float dy[B * O], w[I * O], x[B * I];
  for (int i = 0; i < B * O; i++) dy[i] = sinf((float)i * 0.37f);
  for (int i = 0; i < I * O; i++) w[i] = cosf((float)i * 0.11f);
  for (int i = 0; i < B * I; i++) x[i] = sinf((float)i * 0.05f + 1);
  jx_array *in[3] = {jx_array_from(JX_F32, JX_SHAPE(B, O), dy),
                     jx_array_from(JX_F32, JX_SHAPE(I, O), w),
                     jx_array_from(JX_F32, JX_SHAPE(B, I), x)};
  jx_fn *f = jx_fn_create("two_gradients", 3, 3, two_gradients, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *want[3], *got[3];
  assert_int_equal(jx_call(f, in, want), JX_OK);
  assert_int_equal(jx_call(jf, in, got), JX_OK);
  static float a[B * I], b[B * I];
  int64_t sizes[3] = {B * I, I * O, B * O};
  for (int o = 0; o < 3; o++) { /* the same row blocks as alone: the same bits */
    assert_int_equal(jx_read(want[o], a, sizeof(float) * (size_t)sizes[o]), JX_OK);
    assert_int_equal(jx_read(got[o], b, sizeof(float) * (size_t)sizes[o]), JX_OK);
    assert_f32_close(b, a, (size_t)sizes[o], test_gemm_rtol());
  }
  /* dx and dw are one pair; the product reading dx is not in it */
  jx_aval av[3] = {
      {JX_F32, 0, {2, {B, O}}, 0}, {JX_F32, 0, {2, {I, O}}, 0}, {JX_F32, 0, {2, {B, I}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  if (TEST_CPU_ONLY("the CPU executable's GEMMs run side by side"))
    assert_int_equal(jx_executable_side_by_side(jx_program_executable(p)), 1);
  jx_program_release(p);
  /* dw against its definition, summed in f64 */
  assert_int_equal(jx_read(got[1], b, sizeof(float) * I * O), JX_OK);
  for (int i = 0; i < I; i += 17)
    for (int j = 0; j < O; j += 13) {
      double s = 0;
      for (int r = 0; r < B; r++) s += (double)x[r * I + i] * dy[r * O + j];
      assert_true(fabs(b[i * O + j] - s) <= 1e-4 * (1 + fabs(s)));
    }
  jx_fn_release(jf);
  jx_fn_release(f);
}

/* sum(tanh(x x^T)): the product is a temporary of the function's own */
static void gram_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_tanh(jx_matmul(in[0], jx_transpose(in[0], JX_AXES()))), JX_AXES(), 0);
}
static void gram_jvp(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *t = in[1];
  jx_array *th = jx_tanh(jx_matmul(x, jx_transpose(x, JX_AXES())));
  jx_array *dy =
      jx_add(jx_matmul(t, jx_transpose(x, JX_AXES())), jx_matmul(x, jx_transpose(t, JX_AXES())));
  out[0] = jx_sum(th, JX_AXES(), 0);
  out[1] = jx_sum(jx_mul(jx_sub(jx_scalar(JX_F32, 1), jx_mul(th, th)), dy), JX_AXES(), 0);
}

static void cost_before_running(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("chain", 2, 1, chain, NULL);
  jx_cost c;
  assert_int_equal(jx_fn_cost(f, inputs, &c), JX_OK);
  /* fused: read two f32[10,100] inputs (and a scalar), write one */
  assert_true(c.bytes_accessed >= 3 * 4000 && c.bytes_accessed <= 3 * 4000 + 64);
  assert_true(c.flops >= 8 * 1000);
  assert_true(c.peak_bytes_per_device >= 3 * 4000 && c.peak_bytes_per_device <= 3 * 4000 + 64);
  jx_fn_release(f);
  jx_fn *m = jx_fn_create("mm", 2, 1, matmul_body, NULL);
  jx_array *ab[2] = {jx_zeros(JX_F32, JX_SHAPE(8, 16)), jx_zeros(JX_F32, JX_SHAPE(16, 4))};
  assert_int_equal(jx_fn_cost(m, ab, &c), JX_OK);
  assert_true(c.flops >= 2.0 * 8 * 16 * 4 && c.flops <= 2.0 * 8 * 16 * 4 + 64); /* + tanh */
  /* inputs, the product, and tanh's result live at once */
  assert_true(c.peak_bytes_per_device == 4.0 * (8 * 16 + 16 * 4 + 8 * 4 + 8 * 4));
  jx_fn_release(m);
  /* inside a custom call (one equation of the jitted program), the inlined
   * equations the executable runs are costed: the product's flops and the
   * [64, 64] temporary */
  jx_fn *gram = jx_fn_create("gram", 1, 1, gram_body, NULL),
        *gram_tangent = jx_fn_create("gram_jvp", 2, 2, gram_jvp, NULL);
  jx_fn *g = jx_custom_jvp(gram, gram_tangent); /* holds its own references */
  jx_fn_release(gram);
  jx_fn_release(gram_tangent);
  jx_array *x[1] = {jx_zeros(JX_F32, JX_SHAPE(64, 32))};
  assert_int_equal(jx_fn_cost(g, x, &c), JX_OK);
  assert_true(c.flops >= 2.0 * 64 * 64 * 32);
  assert_true(c.peak_bytes_per_device >= 4.0 * (64 * 32 + 64 * 64));
  jx_fn_release(g);
}

/* ---- concurrent compiles: two threads load two sources at the same moment ---- */

typedef struct {
  char src[256];
  void *fn;
} load_job;

static pthread_barrier_t start_line;

static void *load_thread(void *arg) {
  load_job *j = arg;
  pthread_barrier_wait(&start_line);
  j->fn = jx_kernel_load(j->src, "jx_times");
  return NULL;
}

/* runs two loads on two threads released together; returns the stats' change */
static jx_kernel_stats load_pair(load_job *jobs) {
  jx_kernel_stats s0 = jx_kernel_cache_stats();
  pthread_t t[2];
  assert_int_equal(pthread_barrier_init(&start_line, NULL, 2), 0);
  for (int k = 0; k < 2; k++)
    assert_int_equal(pthread_create(&t[k], NULL, load_thread, &jobs[k]), 0);
  for (int k = 0; k < 2; k++) pthread_join(t[k], NULL);
  pthread_barrier_destroy(&start_line);
  jx_kernel_stats s1 = jx_kernel_cache_stats();
  return (jx_kernel_stats){s1.compiles - s0.compiles, s1.disk_hits - s0.disk_hits,
                           s1.memory_hits - s0.memory_hits, s1.max_concurrent};
}

static void two_programs_compile_concurrently(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("checks the CPU kernel loader (.so files), no jitted program");
  /* a nonce keeps the sources out of the disk cache of earlier runs */
  long nonce = (long)time(NULL) ^ (long)getpid() * 7919;
  load_job jobs[2];
  for (int k = 0; k < 2; k++)
    snprintf(jobs[k].src, sizeof jobs[k].src,
             "/* %ld %d */\ndouble jx_times(double x) { return %d * x; }\n", nonce, k, k + 2);
  jx_kernel_stats d = load_pair(jobs);
  for (int k = 0; k < 2; k++) {
    assert_non_null(jobs[k].fn);
    assert_true(((double (*)(double))jobs[k].fn)(3.0) == 3.0 * (k + 2));
  }
  assert_int_equal(d.compiles, 2);
  assert_true(d.max_concurrent >= 2); /* the compiler ran twice at once */
  /* one source asked for by two threads at once compiles once */
  for (int k = 0; k < 2; k++)
    snprintf(jobs[k].src, sizeof jobs[k].src,
             "/* %ld same */\ndouble jx_times(double x) { return 5 * x; }\n", nonce);
  d = load_pair(jobs);
  assert_non_null(jobs[0].fn);
  assert_ptr_equal(jobs[0].fn, jobs[1].fn);
  assert_int_equal(d.compiles, 1);
  assert_int_equal(d.memory_hits, 1);
}

/* runs this test program again as `self --child EXPECT` and returns its status */
static int child(const char *expect) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' --child %s", self, expect);
  int rc = system(cmd);
  return WIFEXITED(rc) ? WEXITSTATUS(rc) : 99;
}

static void new_process_hits_the_disk_cache(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("the CPU kernels' disk cache (.so files); CUDA's cubin cache is "
                    "test_cuda_runtime's");
  float got[1000];
  jx_kernel_stats b, a;
  assert_int_equal(run_chain(got, &b, &a), JX_OK); /* warm the disk cache */
  assert_int_equal(child("disk-hit"), 0);
}

static void corrupt_entry_is_rebuilt(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("the CPU kernels' disk cache (.so files); CUDA's cubin cache is "
                    "test_cuda_runtime's");
  const char *dir = getenv("JX_CACHE_DIR");
  assert_non_null(dir);
  char cmd[2048];
  /* every cached object becomes garbage (a new file: this process maps the old ones) */
  snprintf(cmd, sizeof cmd,
           "for f in '%s'/*.so; do echo garbage > \"$f.bad\" && mv \"$f.bad\" \"$f\"; done", dir);
  assert_int_equal(system(cmd), 0);
  assert_int_equal(child("rebuild"), 0);
}

/* ---- custom calls are inlined for execution, kept for tracing ---- */
static void scaled_softmax_relu(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_softmax(jx_mul(in[0], jx_scalar(JX_F32, 2)), -1);
  out[0] = jx_add(jx_relu(jx_sub(s, jx_scalar(JX_F32, 0.25))), jx_scalar(JX_F32, 1));
}

static void relu_sum(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_relu(in[0]), JX_AXES(), 0);
}

/* The jitted program keeps softmax's and relu's custom_jvp calls (grad of
 * the jitted function uses their rules: relu's derivative at 0 is 0), while
 * its executable runs them inlined: their equations fuse with the scale and
 * the additions around them, and the results keep the eager bits. */
static void custom_calls_inlined_for_execution(void **state) {
  (void)state;
  jx_scope_begin();
  jx_fn *f = jx_fn_create("scaled_softmax_relu", 1, 1, scaled_softmax_relu, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  float xs[3 * 5];
  for (int i = 0; i < 15; i++) xs[i] = (float)((i * 7) % 11) / 4 - 1;
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(3, 5), xs), *a, *b;
  assert_int_equal(jx_call(f, &x, &a), JX_OK);
  assert_int_equal(jx_call(jf, &x, &b), JX_OK);
  float ra[15], rb[15];
  assert_int_equal(jx_read(a, ra, sizeof ra), JX_OK);
  assert_int_equal(jx_read(b, rb, sizeof rb), JX_OK);
  assert_memory_equal(ra, rb, sizeof ra);
  jx_aval av = {JX_F32, 0, JX_SHAPE(3, 5), 0};
  jx_program *p = jx_fn_program(jf, &av);
  assert_non_null(p);
  char *ir = jx_program_print(p);
  assert_non_null(strstr(ir, "custom_jvp_call")); /* what traces see */
  free(ir);
  int fused = 0;
  if (TEST_CPU_ONLY("the CPU executable's kernel count")) {
    jx_executable_kernels(jx_program_executable(p), &fused);
    assert_true(fused >= 6); /* mul, sub, exp, div, relu's max and the adds, in kernels */
  }
  jx_program_release(p);
  jx_fn *g = jx_fn_create("relu_sum", 1, 1, relu_sum, NULL);
  jx_fn *jg = jx_jit(g, NULL), *djg = jx_grad(jg, JX_AXES());
  float zs[3] = {-1, 0, 2}, want[3] = {0, 0, 1}, got[3];
  jx_array *z = jx_array_from(JX_F32, JX_SHAPE(3), zs), *dz;
  assert_int_equal(jx_call(djg, &z, &dz), JX_OK);
  assert_int_equal(jx_read(dz, got, sizeof got), JX_OK);
  assert_memory_equal(got, want, sizeof got);
  jx_fn *fns[] = {djg, jg, g, jf, f};
  for (int i = 0; i < 5; i++) jx_fn_release(fns[i]);
  jx_scope_end();
}

/* ---- tiered kernels (compile/kernel_units.h) ---- */
enum { TIERED_POWERS = 16 }; /* distinct kernels from which a program compiles in tiers */

/* sixteen distinct kernels (x^(k+2) + y over the first 30 + k columns) and
 * a column sum that also stores its operand: a program large enough to
 * compile in tiers */
static void tiered(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  for (int k = 0; k < TIERED_POWERS; k++) {
    jx_array *x = jx_slice(in[0], JX_SHAPE(0, 0), JX_SHAPE(10, 30 + k), JX_SHAPE());
    jx_array *y = jx_slice(in[1], JX_SHAPE(0, 0), JX_SHAPE(10, 30 + k), JX_SHAPE());
    out[k] = jx_add(jx_integer_pow(x, k + 2), y);
  }
  jx_array *t = jx_mul(jx_tanh(jx_add(jx_mul(in[0], in[1]), jx_scalar(JX_F32, 0.25))), in[0]);
  out[TIERED_POWERS] = jx_sub(jx_exp(jx_neg(t)), in[1]);
  out[TIERED_POWERS + 1] = jx_sum(t, JX_AXES(0), 0);
}

/* The outputs of tiered, read into v (1000 floats each). */
static void read_tiered(jx_array **out, float (*v)[1000]) {
  for (int k = 0; k < TIERED_POWERS + 2; k++)
    assert_int_equal(jx_read(out[k], v[k], (size_t)jx_size(out[k]) * sizeof(float)), JX_OK);
}

/* With JX_KERNEL_OPT unset, a cold program of 16 distinct kernels or more
 * runs kernels compiled at -O1 first; with JX_KERNEL_TIER_UP=0 its first
 * run starts their -O3 compile on a thread of its own, and the calls after
 * that take the -O3 kernels: the eager bits at both tiers. A JX_KERNEL_TIER_UP
 * that is no number of seconds is an error naming it. */
static void kernels_tier_up(void **state) {
  (void)state;
  if (!TEST_CPU_ONLY("the CPU kernels' tiers")) return;
  char *opt = getenv("JX_KERNEL_OPT") ? strdup(getenv("JX_KERNEL_OPT")) : NULL;
  assert_non_null(getenv("JX_CACHE_DIR"));
  char *cache = strdup(getenv("JX_CACHE_DIR"));
  char dir[1024];
  snprintf(dir, sizeof dir, "%s/tiers-XXXXXX", cache);
  assert_non_null(mkdtemp(dir)); /* cold: no final kernels on disk */
  setenv("JX_CACHE_DIR", dir, 1);
  unsetenv("JX_KERNEL_OPT");
  setenv("JX_KERNEL_TIER_UP", "0", 1);
  enum { NOUT = TIERED_POWERS + 2 };
  jx_fn *f = jx_fn_create("tiered", 2, NOUT, tiered, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_array *out[NOUT];
  static float want[NOUT][1000], got[NOUT][1000];
  memset(want, 0, sizeof want);
  memset(got, 0, sizeof got);
  assert_int_equal(jx_call(f, inputs, out), JX_OK);
  read_tiered(out, want);
  jx_kernel_stats s0 = jx_kernel_cache_stats();
  if (jx_call(jf, inputs, out)) fail_msg("%s", jx_last_error());
  read_tiered(out, got);
  assert_memory_equal(got, want, sizeof got);
  jx_aval av[2] = {{JX_F32, 0, {2, {10, 100}}, 0}, {JX_F32, 0, {2, {10, 100}}, 0}};
  jx_program *p = jx_fn_program(jf, av);
  assert_non_null(p);
  const jx_executable *x = jx_program_executable(p);
  assert_non_null(x);
  /* the -O3 compile runs while the program keeps running at -O1 */
  for (int waited = 0; !jx_executable_final_tier(x); waited++) {
    if (waited > 12000) fail_msg("the kernels' final tier did not come in 120 s");
    assert_int_equal(jx_call(jf, inputs, out), JX_OK);
    read_tiered(out, got);
    assert_memory_equal(got, want, sizeof got);
    nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
  }
  jx_kernel_stats s1 = jx_kernel_cache_stats();
  /* a unit per core, at most one per 8 kernels: each at -O1, then at -O3 */
  long cores = sysconf(_SC_NPROCESSORS_ONLN), units = jx_executable_distinct_kernels(x) / 8;
  assert_true(jx_executable_distinct_kernels(x) >= TIERED_POWERS);
  units = units < cores ? units : cores;
  assert_int_equal(s1.compiles - s0.compiles, 2 * (units > 1 ? units : 1));
  assert_int_equal(jx_call(jf, inputs, out), JX_OK);
  read_tiered(out, got);
  assert_memory_equal(got, want, sizeof got);
  jx_program_release(p);
  jx_fn_release(jf);
  jx_fn_release(f);
  /* a bad threshold: a build that compiles fails, naming the variable */
  setenv("JX_KERNEL_TIER_UP", "soon", 1);
  f = jx_fn_create("chain", 2, 1, chain, NULL);
  jf = jx_jit(f, NULL);
  assert_int_not_equal(jx_call(jf, inputs, out), JX_OK);
  assert_non_null(strstr(jx_last_error(), "JX_KERNEL_TIER_UP is 'soon'"));
  jx_fn_release(jf);
  jx_fn_release(f);
  unsetenv("JX_KERNEL_TIER_UP");
  setenv("JX_CACHE_DIR", cache, 1);
  if (opt) setenv("JX_KERNEL_OPT", opt, 1);
  free(opt);
  char cmd[1200];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  free(cache);
}

static int child_main(const char *expect) {
  make_inputs();
  float got[1000], want[1000];
  jx_kernel_stats b, a;
  if (run_chain(got, &b, &a)) {
    fprintf(stderr, "child: %s\n", jx_last_error());
    return 1;
  }
  jx_fn *f = jx_fn_create("chain", 2, 1, chain, NULL);
  jx_array *out[1];
  jx_call(f, inputs, out);
  jx_read(out[0], want, sizeof want);
  jx_fn_release(f);
  if (memcmp(got, want, sizeof got) != 0) return 2;
  if (strcmp(expect, "disk-hit") == 0) return (a.compiles == 0 && a.disk_hits >= 1) ? 0 : 3;
  return a.compiles >= 1 ? 0 : 4; /* "rebuild" */
}

/* JX_PROFILE_STEPS=1: freed, the executable sums its steps' time by kind.
 * tanh(x y^T) of two [128, 256] arrays is one GEMM and one kernel: the
 * kinds' shares add up to the whole, and the GEMMs' rate is their 2 * 128
 * * 128 * 256 flops a run over their time; the CPU time by kind adds up to
 * the run's. */
enum { PROF_M = 128, PROF_K = 256 };
static void tanh_of_product(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_tanh(jx_dot_general(in[0], in[1], JX_AXES(1), JX_AXES(1), JX_AXES(), JX_AXES()));
}

static jx_status two_profiled_runs(void *ctx) {
  jx_array **in = ctx;
  jx_fn *f = jx_fn_create("profiled", 2, 1, tanh_of_product, NULL);
  jx_fn *jf = jx_jit(f, NULL);
  jx_status st = JX_OK;
  for (int run = 0; run < 2 && !st; run++) {
    jx_array *out[1];
    jx_scope_begin();
    st = jx_call(jf, in, out);
    if (!st) st = jx_block_until_ready(out[0]);
    jx_scope_end();
  }
  /* a queued run holds the executable until it ends on the dispatch thread:
   * once none is left, the release below is the last and prints the report */
  jx_dispatch_wait_all();
  jx_fn_release(jf); /* frees the executable: the report */
  jx_fn_release(f);
  return st;
}

static void profile_by_kind(void **state) {
  (void)state;
  TEST_SKIP_ON_CUDA("the CPU executable's report");
  static float x[PROF_M * PROF_K];
  for (int i = 0; i < PROF_M * PROF_K; i++) x[i] = sinf((float)i * 0.3f);
  jx_scope_begin();
  jx_array *in[2] = {jx_array_from(JX_F32, JX_SHAPE(PROF_M, PROF_K), x),
                     jx_array_from(JX_F32, JX_SHAPE(PROF_M, PROF_K), x)};
  setenv("JX_PROFILE_STEPS", "1", 1);
  jx_status st;
  const char *report = captured(two_profiled_runs, in, &st);
  unsetenv("JX_PROFILE_STEPS");
  jx_scope_end();
  assert_int_equal(st, JX_OK);
  assert_non_null(strstr(report, "profiled: 2 runs"));
  const char *line = strstr(report, "  by kind: dot_general ");
  assert_non_null(line);
  double ms[4], pct[4], rate;
  int n = sscanf(line,
                 "  by kind: dot_general %lf ms %lf%% (%lf GFLOP/s), attention %lf ms %lf%%, "
                 "kernels %lf ms %lf%%, the rest %lf ms %lf%%",
                 &ms[0], &pct[0], &rate, &ms[1], &pct[1], &ms[2], &pct[2], &ms[3], &pct[3]);
  if (n != 9) fprintf(stderr, "report:\n%s\n", report);
  assert_int_equal(n, 9);
  assert_true(fabs(pct[0] + pct[1] + pct[2] + pct[3] - 100) < 0.25);
  assert_true(ms[1] == 0 && ms[2] > 0);
  /* the printed time has 1 us steps: the rate within that rounding */
  const double flops = 2.0 * PROF_M * PROF_M * PROF_K;
  assert_true(ms[0] > 2e-3);
  double lo = flops / ((ms[0] + 6e-4) * 1e-3) / 1e9, hi = flops / ((ms[0] - 6e-4) * 1e-3) / 1e9;
  assert_true(rate >= lo * 0.999 - 0.05 && rate <= hi * 1.001 + 0.05);
  /* the running thread's CPU time by kind adds up to the header's */
  const char *head = strstr(report, "profiled: 2 runs, ");
  double wall_total, cpu_total, cpu[4];
  assert_int_equal(
      sscanf(head, "profiled: 2 runs, %lf ms per run in steps, %lf ms", &wall_total, &cpu_total),
      2);
  line = strstr(report, "  by kind, CPU: dot_general ");
  assert_non_null(line);
  assert_int_equal(sscanf(line,
                          "  by kind, CPU: dot_general %lf ms, attention %lf ms, kernels %lf ms, "
                          "the rest %lf ms",
                          &cpu[0], &cpu[1], &cpu[2], &cpu[3]),
                   4);
  assert_true(fabs(cpu[0] + cpu[1] + cpu[2] + cpu[3] - cpu_total) < 2.5e-3);
  assert_true(cpu[0] > 0 && cpu[1] == 0 && cpu[2] > 0);
}

int main(int argc, char **argv) {
  self = argv[0];
  if (argc == 3 && strcmp(argv[1], "--child") == 0) {
    int rc = child_main(argv[2]);
    jx_release(inputs[0]);
    jx_release(inputs[1]);
    jx_shutdown();
    return rc;
  }
  make_inputs();
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(fused_kernel_matches_eager_bits),
      cmocka_unit_test(jit_without_kernels),
      cmocka_unit_test(unknown_platform_is_an_error),
      cmocka_unit_test(independent_gemms_run_side_by_side),
      cmocka_unit_test(cost_before_running),
      cmocka_unit_test(new_process_hits_the_disk_cache),
      cmocka_unit_test(corrupt_entry_is_rebuilt),
      cmocka_unit_test(two_programs_compile_concurrently),
      cmocka_unit_test(custom_calls_inlined_for_execution),
      cmocka_unit_test(kernels_tier_up),
      cmocka_unit_test(profile_by_kind),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_release(inputs[0]);
  jx_release(inputs[1]);
  jx_shutdown();
  return rc;
}
