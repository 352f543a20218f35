/* Pipeline efficiency on CPU devices: a training step (loss and gradients)
 * of a residual MLP of LAYERS layers x + tanh(x W1 + b1) W2 (width D,
 * hidden 2D, batch BATCH) on one device (jx_value_and_grad of the layers in
 * sequence, jitted) against jx_pipeline_value_and_grad over S = 2 and 4
 * stages (LAYERS / S layers each) with 8 microbatches, GPipe, 1F1B and
 * interleaved 1F1B with 2 virtual stages per device, jitted. The calls alternate, one of each per
 * round, so a busy machine disturbs them alike; each figure is the median over the rounds, with the
 * pipeline's speedup over one device (the ideal is S (1 - bubble), bubble = (S - 1) / (V M + S -
 * 1)), the range of the per-round ratios, and the process's CPU time per step against one device's
 * (the work the pipeline adds, which a machine with fewer free cores than stages shows better than
 * wall time). One JSON line per figure. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { LAYERS = 8, D = 256, BATCH = 512, M = 8, ROUNDS = 7, NCONF = 6 };

/* A stage of `layers` layers: (W1 [layers, D, 2D], b1 [layers, 2D], W2 [layers, 2D, D], x). */
static void layers_body(void *ctx, jx_array *const *in, jx_array **out) {
  int layers = *(const int *)ctx;
  jx_array *x = in[3];
  for (int l = 0; l < layers; l++) {
    jx_array *w1 = jx_squeeze(
        jx_slice(in[0], JX_SHAPE(l, 0, 0), JX_SHAPE(l + 1, D, 2 * D), JX_SHAPE()), JX_AXES(0));
    jx_array *b1 =
        jx_squeeze(jx_slice(in[1], JX_SHAPE(l, 0), JX_SHAPE(l + 1, 2 * D), JX_SHAPE()), JX_AXES(0));
    jx_array *w2 = jx_squeeze(
        jx_slice(in[2], JX_SHAPE(l, 0, 0), JX_SHAPE(l + 1, 2 * D, D), JX_SHAPE()), JX_AXES(0));
    x = jx_add(x, jx_matmul(jx_tanh(jx_add(jx_matmul(x, w1), b1)), w2));
  }
  out[0] = x;
}

static void mse_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_sub(in[0], in[1]);
  out[0] = jx_mean(jx_mul(e, e), JX_AXES(), 0);
}

static jx_fn *whole, *mse;
/* (W1, b1, W2, x, t) -> mse(all layers(x), t) */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y = NULL;
  if (jx_call(whole, in, &y) || jx_call(mse, (jx_array *[]){y, in[4]}, out)) out[0] = NULL;
}

/* One call's wall time in ns; *cpu: the process's CPU time (all threads). */
static double timed(jx_fn *f, jx_array **in, double *cpu) {
  jx_scope_begin();
  jx_array *out[4];
  double c0 = bench_cpu_ns(), t0 = bench_now_ns();
  if (jx_call(f, in, out) || jx_block_until_ready(out[1])) {
    fprintf(stderr, "bench_pipeline: %s\n", jx_last_error());
    exit(1);
  }
  double dt = bench_now_ns() - t0;
  if (cpu) *cpu = bench_cpu_ns() - c0;
  jx_scope_end();
  return dt;
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof *v, bench_cmp_double);
  return v[n / 2];
}

int main(void) {
  jx_set_cpu_device_count(4);
  jx_scope_begin(); /* the operands, until the end */
  static int all = LAYERS, per_stage[NCONF];
  whole = jx_fn_create("layers", 4, 1, layers_body, &all);
  mse = jx_fn_create("mse", 2, 1, mse_body, NULL);
  jx_fn *one = jx_jit(
      jx_value_and_grad(jx_fn_create("loss", 5, 1, loss_body, NULL), JX_AXES(0, 1, 2), 0), NULL);
  struct {
    int stages, virtual_stages;
    jx_pipeline_schedule schedule;
    const char *name;
    jx_fn *step;
    jx_array *in[5];
  } conf[NCONF] = {{.stages = 2, .schedule = JX_PIPELINE_GPIPE, .name = "gpipe"},
                   {.stages = 2, .schedule = JX_PIPELINE_1F1B, .name = "1f1b"},
                   {.stages = 4, .schedule = JX_PIPELINE_GPIPE, .name = "gpipe"},
                   {.stages = 4, .schedule = JX_PIPELINE_1F1B, .name = "1f1b"},
                   {.stages = 2,
                    .virtual_stages = 2,
                    .schedule = JX_PIPELINE_INTERLEAVED,
                    .name = "interleaved2"},
                   {.stages = 4,
                    .virtual_stages = 2,
                    .schedule = JX_PIPELINE_INTERLEAVED,
                    .name = "interleaved2"}};
  jx_array *key = jx_random_key(0);
  jx_array *w1 = jx_random_normal(jx_random_fold_in(key, 1), JX_F32, JX_SHAPE(LAYERS, D, 2 * D));
  jx_array *w2 = jx_random_normal(jx_random_fold_in(key, 2), JX_F32, JX_SHAPE(LAYERS, 2 * D, D));
  w1 = jx_mul(w1, jx_scalar(JX_F32, 0.03));
  w2 = jx_mul(w2, jx_scalar(JX_F32, 0.03));
  jx_array *b1 = jx_zeros(JX_F32, JX_SHAPE(LAYERS, 2 * D));
  jx_array *x = jx_random_normal(jx_random_fold_in(key, 3), JX_F32, JX_SHAPE(BATCH, D));
  jx_array *t = jx_random_normal(jx_random_fold_in(key, 4), JX_F32, JX_SHAPE(BATCH, D));
  jx_array *in1[5] = {w1, b1, w2, x, t};
  for (int c = 0; c < NCONF; c++) {
    int S = conf[c].stages, G = S * (conf[c].virtual_stages ? conf[c].virtual_stages : 1);
    jx_mesh *m = jx_mesh_create(JX_SHAPE(S), (const char *const[]){"stage"});
    per_stage[c] = LAYERS / G;
    jx_fn *stage = jx_fn_create("stage", 4, 1, layers_body, &per_stage[c]);
    jx_pipeline_train_options o = {.virtual_stages = conf[c].virtual_stages};
    conf[c].step =
        jx_jit(jx_pipeline_value_and_grad(stage, mse, m, "stage", M, conf[c].schedule, &o), NULL);
    /* stage g's layers g L/G .. (g + 1) L/G - 1, stacked [G, L/G, ...] in global stage order
     * (placed by stage when that is the devices' order) */
    jx_sharding *by_stage = jx_sharding_create(m, "stage");
    jx_array *p[3] = {w1, b1, w2};
    for (int k = 0; k < 3; k++) {
      jx_shape s = jx_shape_of(p[k]), r = {s.rank + 1, {G, LAYERS / G}};
      for (int a = 1; a < s.rank; a++) r.dims[a + 1] = s.dims[a];
      conf[c].in[k] = G == S ? jx_device_put(jx_reshape(p[k], r), by_stage) : jx_reshape(p[k], r);
    }
    conf[c].in[3] = x;
    conf[c].in[4] = t;
    timed(conf[c].step, conf[c].in, NULL); /* compiled and warm */
  }
  timed(one, in1, NULL);
  double t_one[ROUNDS], c_one[ROUNDS], t_pipe[NCONF][ROUNDS], c_pipe[NCONF][ROUNDS];
  double ratio[NCONF][ROUNDS];
  for (int r = 0; r < ROUNDS; r++) {
    t_one[r] = timed(one, in1, &c_one[r]);
    for (int c = 0; c < NCONF; c++) {
      t_pipe[c][r] = timed(conf[c].step, conf[c].in, &c_pipe[c][r]);
      ratio[c][r] = t_one[r] / t_pipe[c][r];
    }
  }
  double one_ms = median(t_one, ROUNDS) / 1e6, one_cpu = median(c_one, ROUNDS) / 1e6;
  printf("{\"bench\": \"mlp_%dx%d_step_1dev\", \"ms\": %.2f, \"cpu_ms\": %.2f}\n", LAYERS, D,
         one_ms, one_cpu);
  for (int c = 0; c < NCONF; c++) {
    int S = conf[c].stages;
    int V = conf[c].virtual_stages ? conf[c].virtual_stages : 1;
    double ideal = S * (1.0 - (double)(S - 1) / (V * M + S - 1));
    double ms = median(t_pipe[c], ROUNDS) / 1e6, lo, hi;
    qsort(ratio[c], ROUNDS, sizeof(double), bench_cmp_double);
    lo = ratio[c][0];
    hi = ratio[c][ROUNDS - 1];
    double cpu = median(c_pipe[c], ROUNDS) / 1e6;
    printf("{\"bench\": \"mlp_%dx%d_step_pipeline_%s_%dstages_%dmb\", \"ms\": %.2f, "
           "\"speedup\": %.2f, \"speedup_range\": [%.2f, %.2f], \"ideal\": %.2f, "
           "\"cpu_ms\": %.2f, \"cpu_vs_1dev\": %.2f}\n",
           LAYERS, D, conf[c].name, S, M, ms, one_ms / ms, lo, hi, ideal, cpu, cpu / one_cpu);
  }
  jx_scope_end();
  return 0;
}
