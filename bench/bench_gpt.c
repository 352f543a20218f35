/* The GPT train step of docs/performance.md: 4 layers, d 256, 8 heads, context
 * 128, batch 16, byte vocabulary, AdamW (Optax's), one jitted step with the
 * forward, backward and update; `bench_gpt RUNS LAYERS D_MODEL CONTEXT
 * BATCH` runs another size (heads of width 32), as compare.py's --sizes.
 * Prints JSON lines: the median step time with tokens/s and MFU against
 * this machine's peak f32 FLOP/s (jx_peak_flops: JX_PEAK_FLOPS or an FMA
 * loop, cached) and, named apart, against jx's GEMM throughput measured in
 * the same run; the first call (trace + compile + run, with its CPU seconds
 * and those of the trace and compile alone, the compiler's counted; with
 * JX_CACHE_DIR naming an empty directory it is the cold first call of
 * compare.py --workload cold); and the peak memory
 * measured next to jx_fn_cost's estimate made before running.
 * bench/compare.py runs the same step in JAX + Optax and PyTorch. */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

/* CPU seconds of this process and of its waited-for children (the C
 * compiler runs that build the kernels) */
static double cpu_s(void) {
  struct rusage self, kids;
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &kids);
  const struct timeval tv[4] = {self.ru_utime, self.ru_stime, kids.ru_utime, kids.ru_stime};
  double s = 0;
  for (int i = 0; i < 4; i++) s += (double)tv[i].tv_sec + 1e-6 * (double)tv[i].tv_usec;
  return s;
}

enum { MAX_RUNS = 1000 };

typedef struct {
  jx_gpt_config cfg;
  jx_optimizer *opt;
  int np, ns;
  jx_fn *loss;
} model;

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 7;
  if (runs < 1) runs = 1;
  if (runs > MAX_RUNS) runs = MAX_RUNS;
  int64_t layers = 4, width = 256, context = 128, batch = 16;
  if (argc == 6) {
    layers = atoll(argv[2]);
    width = atoll(argv[3]);
    context = atoll(argv[4]);
    batch = atoll(argv[5]);
  }
  if ((argc != 1 && argc != 2 && argc != 6) || layers < 1 || width < 32 || width % 32 ||
      context < 1 || batch < 1) {
    fprintf(stderr, "usage: bench_gpt [RUNS [LAYERS D_MODEL CONTEXT BATCH]] "
                    "(D_MODEL a multiple of 32)\n");
    return 2;
  }
  model m = {.cfg = {.vocab = 256,
                     .n_layers = layers,
                     .d_model = width,
                     .n_heads = width / 32,
                     .context = context,
                     .mlp_ratio = 4}};
  jx_tree *params = jx_gpt_init(&m.cfg, jx_random_key(0), JX_F32);
  m.np = jx_tree_size(params);
  m.opt = jx_optim_adamw(3e-4, 0.9, 0.95, 1e-8, 0.1);
  jx_tree *state = jx_optim_init(m.opt, params);
  m.ns = jx_tree_size(state);
  m.loss = jx_gpt_loss_fn(&m.cfg, params);
  int nin = m.np + m.ns + 2, nout = 1 + m.np + m.ns;
  jx_fn *step_fn = jx_train_step(m.loss, params, state, m.opt);
  /* the step takes the parameters and optimizer state over (donated, as
   * JAX's donate_argnums below): the new ones are written into the old
   * buffers, which the loop releases right after each step anyway */
  int *donate = calloc((size_t)nin, sizeof *donate);
  for (int i = 0; i < m.np + m.ns; i++) donate[i] = 1;
  jx_fn *step = jx_jit(step_fn, &(jx_jit_options){.donate = donate});

  jx_array *key = jx_random_key(1);
  jx_array *tokens = jx_keep(jx_astype(
      jx_floor(jx_random_uniform(key, JX_F32, JX_SHAPE(batch, context + 1), 0, 255.99)), JX_I32));
  jx_array *x = jx_keep(jx_slice(tokens, JX_SHAPE(0, 0), JX_SHAPE(batch, context), JX_SHAPE()));
  jx_array *y = jx_keep(jx_slice(tokens, JX_SHAPE(0, 1), JX_SHAPE(batch, context + 1), JX_SHAPE()));
  jx_array **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nout, sizeof *out);
  jx_tree_flatten(params, in);
  jx_tree_flatten(state, in + m.np);
  in[m.np + m.ns] = x;
  in[m.np + m.ns + 1] = y;
  for (int i = 0; i < m.np + m.ns; i++) in[i] = jx_keep(in[i]);

  /* the first call counts from here: jx_fn_cost traces and compiles the step */
  double first_t0 = bench_now_s(), first_cpu = cpu_s();
  jx_cost cost = {0};
  jx_fn_cost(step, in, &cost); /* before running: the plan's estimate */
  jx_memory_reset_peak(-1);
  double t[MAX_RUNS], first = 0, cost_s = bench_now_s() - first_t0;
  double compile_cpu = cpu_s() - first_cpu; /* tracing, the passes and the compiler runs */
  for (int r = -1; r < runs; r++) {
    jx_scope_begin();
    double t0 = bench_now_s();
    if (jx_call(step, in, out)) {
      fprintf(stderr, "bench_gpt: %s\n", jx_last_error());
      return 1;
    }
    jx_block_until_ready(out[0]);
    double dt = bench_now_s() - t0;
    if (r < 0) {
      first = cost_s + dt;
      first_cpu = cpu_s() - first_cpu;
    } else {
      t[r] = dt;
    }
    for (int i = 0; i < m.np + m.ns; i++) { /* the next step takes this one's state */
      jx_release(in[i]);
      in[i] = jx_keep(out[1 + i]);
    }
    jx_scope_end();
  }
  qsort(t, (size_t)runs, sizeof *t, bench_cmp_double);
  double med = t[runs / 2];
  int64_t nparams = jx_tree_numel(params);
  double tokens_per_step = (double)batch * context;
  double flops = 6.0 * (double)nparams * tokens_per_step +
                 12.0 * (double)(m.cfg.n_layers * m.cfg.d_model * context) * tokens_per_step;
  double peak = jx_peak_flops(), gemm = jx_gemm_flops();
  jx_memory_stats ms = {0};
  jx_memory_stats(0, &ms);
  printf("{\"bench\": \"gpt_step\", \"impl\": \"jx\", \"median_ns\": %.0f, \"runs\": %d, "
         "\"tokens_per_s\": %.0f, \"mfu\": %.3f, \"peak_flops\": %.4g, \"mfu_vs_gemm\": %.3f, "
         "\"params\": %lld}\n",
         med * 1e9, runs, tokens_per_step / med, flops / med / peak, peak, flops / med / gemm,
         (long long)nparams);
  printf("{\"bench\": \"gpt_step_first_call\", \"impl\": \"jx\", \"median_ns\": %.0f, \"runs\": 1, "
         "\"cpu_s\": %.3f, \"compile_cpu_s\": %.3f}\n",
         first * 1e9, first_cpu, compile_cpu);
  printf("{\"bench\": \"gpt_step_peak_bytes\", \"impl\": \"jx\", \"measured\": %lld, "
         "\"estimated\": %.0f}\n",
         (long long)ms.peak_bytes, cost.peak_bytes_per_device);
  for (int i = 0; i < m.np + m.ns; i++) jx_release(in[i]);
  jx_release(x);
  jx_release(y);
  jx_release(tokens);
  free(in);
  free(out);
  free(donate);
  jx_fn_release(step);
  jx_fn_release(step_fn);
  jx_fn_release(m.loss);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(m.opt);
  jx_shutdown();
  return 0;
}
