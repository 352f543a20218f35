/* Sharded workloads on CPU devices (8 devices, meshes over the first k):
 *   dp_mlp_step_<k>dev: a data-parallel SGD step of the MLP 784-512-512-10,
 *     batch 256 split over k devices, parameters replicated (gradients
 *     all-reduced by the partitioner);
 *   follow_data_mlp_step_8dev: the same step on 8 devices as a plain
 *     jx_jit(step, NULL) on the sharded arguments (computation follows
 *     data), next to the jit with in_shardings: 9 x runs calls of each,
 *     alternating call for call, their medians and the ratio (1 when the
 *     plain jit runs the same per-device program), and the ratio of the
 *     medians of the process's CPU time per call (steadier on a busy
 *     machine);
 *   matmul_1024_rows_8dev: C = A B with A's rows split over 8 devices (no
 *     communication); matmul_1024_contract_8dev: the contracting dim split
 *     (local products, then a psum).
 * One JSON line per figure; bench/compare.py runs the same in JAX with 8
 * forced host devices. */
#include "bench_util.h"
#include "bench_mlp_model.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { BATCH = 256, IN = 784, H = 512, OUT = 10, NPARAM = 6, MAX_RUNS = 1000 };

static jx_fn *grad_fn;
/* step(params..., x, y) -> (loss, params'...), SGD with lr 0.01 */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *g[1 + NPARAM];
  if (jx_call(grad_fn, in, g)) return;
  out[0] = g[0];
  for (int i = 0; i < NPARAM; i++)
    out[1 + i] = jx_sub(in[i], jx_mul(jx_scalar(JX_F32, 0.01), g[1 + i]));
}

static void matmul_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

/* One call of f, in ns of wall time (*cpu: of the process's CPU time, when
 * not NULL); feed_params: the next step takes this one's parameters. */
static double timed_call(jx_fn *f, jx_array **in, jx_array **out, int feed_params, double *cpu) {
  jx_scope_begin();
  double c0 = bench_cpu_ns(), t0 = bench_now_ns();
  if (jx_call(f, in, out)) {
    fprintf(stderr, "bench_sharded: %s\n", jx_last_error());
    exit(1);
  }
  jx_block_until_ready(out[0]);
  double dt = bench_now_ns() - t0;
  if (cpu) *cpu = bench_cpu_ns() - c0;
  if (feed_params)
    for (int i = 0; i < NPARAM; i++) {
      jx_release(in[i]);
      in[i] = jx_keep(out[1 + i]);
    }
  jx_scope_end();
  return dt;
}

static double median_call(jx_fn *f, jx_array **in, jx_array **out, int runs, int feed_params) {
  double t[MAX_RUNS];
  for (int r = -2; r < runs; r++) { /* two warm-up calls: trace, partition, compile */
    double dt = timed_call(f, in, out, feed_params, NULL);
    if (r >= 0) t[r] = dt;
  }
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  return t[runs / 2];
}

/* Fresh parameters (replicated) and a batch (rows split) for the step. */
static void step_inputs(jx_array *key, jx_sharding *all, jx_sharding *rows, jx_array **in) {
  const int64_t dims[4] = {IN, H, H, OUT};
  for (int l = 0; l < 3; l++) {
    jx_array *w = jx_mul(jx_random_normal(jx_random_fold_in(key, (uint32_t)l), JX_F32,
                                          JX_SHAPE(dims[l], dims[l + 1])),
                         jx_scalar(JX_F32, 0.05));
    in[2 * l] = jx_keep(jx_device_put(w, all));
    in[2 * l + 1] = jx_keep(jx_device_put(jx_zeros(JX_F32, JX_SHAPE(dims[l + 1])), all));
  }
  in[6] = jx_keep(jx_device_put(jx_random_normal(key, JX_F32, JX_SHAPE(BATCH, IN)), rows));
  in[7] = jx_keep(jx_device_put(jx_full(JX_F32, JX_SHAPE(BATCH, OUT), 0.1), rows));
}

enum { PAIRS_PER_RUN = 9 };

/* follow_data_mlp_step_8dev: the plain jit of the step on sharded arguments
 * against the jit with the same layouts as in_shardings, call for call in
 * alternating order (each pair sees the same load on the machine). */
static void follow_data_figure(jx_fn *step, jx_array *key, jx_mesh *m, int runs) {
  jx_sharding *rows = jx_sharding_create(m, "data"), *all = jx_sharding_create(m, "");
  jx_sharding *in_sh[8];
  for (int i = 0; i < 8; i++) in_sh[i] = i < NPARAM ? all : rows;
  jx_fn *given = jx_jit(step, &(jx_jit_options){.in_shardings = in_sh});
  jx_fn *plain = jx_jit(step, NULL);
  jx_array *in_given[8], *in_plain[8], *out[1 + NPARAM];
  step_inputs(key, all, rows, in_given);
  step_inputs(key, all, rows, in_plain);
  int n = runs * PAIRS_PER_RUN > MAX_RUNS ? MAX_RUNS : runs * PAIRS_PER_RUN;
  /* wall and CPU times of each: [0] plain, [1] given */
  static double wall[2][MAX_RUNS], cpu[2][MAX_RUNS];
  for (int r = -2; r < n; r++) { /* two warm-up pairs */
    double w[2], c[2];
    if (r % 2 == 0) {
      w[1] = timed_call(given, in_given, out, 1, &c[1]);
      w[0] = timed_call(plain, in_plain, out, 1, &c[0]);
    } else {
      w[0] = timed_call(plain, in_plain, out, 1, &c[0]);
      w[1] = timed_call(given, in_given, out, 1, &c[1]);
    }
    for (int k = 0; k < 2 && r >= 0; k++) wall[k][r] = w[k], cpu[k][r] = c[k];
  }
  for (int k = 0; k < 2; k++) {
    qsort(wall[k], (size_t)n, sizeof *wall[k], bench_cmp_double);
    qsort(cpu[k], (size_t)n, sizeof *cpu[k], bench_cmp_double);
  }
  double a = wall[0][n / 2], b = wall[1][n / 2];
  printf("{\"bench\": \"follow_data_mlp_step_8dev\", \"impl\": \"jx\", \"median_ns\": %.0f, "
         "\"in_shardings_median_ns\": %.0f, \"ratio\": %.4f, \"cpu_ratio\": %.4f, \"runs\": "
         "%d}\n",
         a, b, a / b, cpu[0][n / 2] / cpu[1][n / 2], n);
  for (int i = 0; i < 8; i++) {
    jx_release(in_given[i]);
    jx_release(in_plain[i]);
  }
  jx_fn_release(plain);
  jx_fn_release(given);
  jx_sharding_release(rows);
  jx_sharding_release(all);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  if (runs < 1) runs = 1;
  if (runs > MAX_RUNS) runs = MAX_RUNS;
  jx_set_cpu_device_count(8);
  const int devs[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  const char *data[1] = {"data"}, *x[1] = {"x"};

  jx_fn *loss = jx_fn_create("mlp_loss", 8, 1, bench_mlp_loss_body, NULL);
  grad_fn = jx_value_and_grad(loss, JX_AXES(0, 1, 2, 3, 4, 5), 0);
  jx_fn *step = jx_fn_create("dp_step", 8, 1 + NPARAM, step_body, NULL);
  jx_array *key = jx_keep(jx_random_key(0));
  for (int k = 1; k <= 8; k *= 2) {
    jx_mesh *m = jx_mesh_create_on(JX_SHAPE(k), data, devs);
    jx_sharding *rows = jx_sharding_create(m, "data"), *all = jx_sharding_create(m, "");
    jx_sharding *in_sh[8], *out_sh[1 + NPARAM];
    for (int i = 0; i < 8; i++) in_sh[i] = i < NPARAM ? all : rows;
    for (int i = 0; i < 1 + NPARAM; i++) out_sh[i] = all;
    jx_jit_options o = {.in_shardings = in_sh, .out_shardings = out_sh};
    jx_fn *jstep = jx_jit(step, &o);
    jx_array *in[8], *out[1 + NPARAM];
    step_inputs(key, all, rows, in);
    double t = median_call(jstep, in, out, runs, 1);
    printf(
        "{\"bench\": \"dp_mlp_step_%ddev\", \"impl\": \"jx\", \"median_ns\": %.0f, \"runs\": %d}\n",
        k, t, runs);
    for (int i = 0; i < 8; i++) jx_release(in[i]);
    if (k == 8) follow_data_figure(step, key, m, runs);
    jx_fn_release(jstep);
    jx_sharding_release(rows);
    jx_sharding_release(all);
    jx_mesh_release(m);
  }

  jx_mesh *m8 = jx_mesh_create(JX_SHAPE(8), x);
  jx_fn *mm = jx_fn_create("matmul", 2, 1, matmul_body, NULL);
  const char *layouts[2][3] = {{"rows", "x,None", ""}, {"contract", "None,x", "x,None"}};
  for (int v = 0; v < 2; v++) {
    jx_sharding *a = jx_sharding_create(m8, layouts[v][1]),
                *b = jx_sharding_create(m8, layouts[v][2]);
    jx_sharding *in_sh[2] = {a, b};
    jx_jit_options o = {.in_shardings = in_sh};
    jx_fn *jmm = jx_jit(mm, &o);
    jx_array *in[2] = {
        jx_keep(jx_device_put(jx_random_normal(key, JX_F32, JX_SHAPE(1024, 1024)), a)),
        jx_keep(jx_device_put(jx_ones(JX_F32, JX_SHAPE(1024, 1024)), b))};
    jx_array *out[1];
    double t = median_call(jmm, in, out, runs, 0);
    printf("{\"bench\": \"matmul_1024_%s_8dev\", \"impl\": \"jx\", \"median_ns\": %.0f, \"runs\": "
           "%d}\n",
           layouts[v][0], t, runs);
    jx_release(in[0]);
    jx_release(in[1]);
    jx_fn_release(jmm);
    jx_sharding_release(a);
    jx_sharding_release(b);
  }
  jx_fn_release(mm);
  jx_mesh_release(m8);
  jx_release(key);
  jx_fn_release(step);
  jx_fn_release(grad_fn);
  jx_fn_release(loss);
  jx_shutdown();
  return 0;
}
