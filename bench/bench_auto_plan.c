/* The automatic sharding planner against the hand recipes: for a workload
 * (a 2-layer tanh MLP's SGD step, or the reference GPT's AdamW training step)
 * on a mesh of CPU devices, each recipe's layouts (the plan's, data
 * parallel, Megatron over "model", FSDP over "data") are jitted, their
 * estimate taken (jx_sharding_estimate_of) and their step timed in
 * alternating rounds; the loss each gives is checked against the
 * unsharded step's.
 *
 *   bench_auto_plan mlp|gpt DEVICES MESH [ROUNDS] [--gpt L,D,T,B] [--limit P] [--dp-peak B]
 *                   [--auto-only]
 *
 * prints one line per recipe: median step time, its range, the estimate
 * (compute, communication and the cores' idle time), the estimated and
 * measured peak per device, and the loss's difference.
 * --gpt sets the GPT's layers, width, context and batch (default 2,64,32,16);
 * --limit plans under P % of data parallel's measured peak (data parallel
 * runs two steps first for it, unless --dp-peak gives it: it is
 * deterministic, a figure of an earlier run); --auto-only times the plan
 * alone.
 *
 * Each recipe trains as a user's loop does: the parameters and optimizer
 * state are donated (jx_jit_options.donate), so the plan gives each back
 * in the layout it takes it in, and a call's updated parameters and state
 * are the next call's inputs as they come; the plan's first inputs are put
 * in its layouts (untimed), as a user places the initial state.
 * The step time is the wall time of one call until every output is ready;
 * "CPU per core" is its CPU time (every thread) over the cores the devices
 * share, the cores' busy time had the process the machine alone (median
 * and range), the figure of the estimate's compute and communication;
 * "share of the cores"
 * the part of the machine's cores the process had during the step (those
 * it ran on and those left idle, from /proc/stat: the rest ran other
 * jobs; idle: the part left idle), median and range over the rounds;
 * "each step at its share" the estimate over each step's own share against
 * that step's time (estimate / share / time - 1), median and range.
 * The measured peak is the most bytes jx's allocator held on any device but
 * device 0 (which also holds the unsharded arrays made outside the step)
 * during one call, inputs included, as jx_fn_cost's peak counts them. */
#include "bench_util.h"
#include "bench_mesh.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jx/jx.h>

#include "parallel/auto/machine_model.h"
#include "parallel/sharded_jit.h"

enum { RECIPES = 4, MAX_IN = 256 };
static const char *recipe_names[RECIPES] = {"auto", "data parallel", "Megatron", "FSDP"};

/* ---- the MLP: (w1, w2, x, y) -> mean((tanh(x w1) w2 - y)^2) ---- */
static void mlp_loss(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  jx_array *h = jx_tanh(jx_matmul(in[2], in[0]));
  out[0] = jx_mean(jx_square(jx_sub(jx_matmul(h, in[1]), in[3])), JX_AXES(), 0);
}

typedef struct {
  jx_fn *step;
  int nin, nout;
  jx_array *in[MAX_IN];
  const char *in_spec[RECIPES - 1][MAX_IN]; /* the hand recipes' layouts */
} workload;

/* How much slower the cores compute now than in the mesh's kept figures
 * (the ones the estimate is of): the compute figures measured again, the
 * geometric mean of the matmul's and the elementwise kernel's slowdowns.
 * Other jobs on the cores slow the devices' CPU time down (their caches,
 * the hyperthread beside them); the step's CPU time over this is its time
 * on the cores as the estimate's figures found them. 1 when unmeasured. */
static double cores_slowdown(jx_mesh *m) {
  jx_comm_model kept, now;
  if (jx_comm_model_measured(&kept, m)) return 1;
  now = kept;
  if (jx_compute_rate_calibrate(m, &now) || !(now.flops_per_s > 0) || !(now.mem_bytes_per_s > 0))
    return 1;
  return sqrt(kept.flops_per_s / now.flops_per_s * kept.mem_bytes_per_s / now.mem_bytes_per_s);
}

static int axis(jx_mesh *m, const char *name) { return jx_mesh_axis_size(m, name) > 0; }

static void make_mlp(workload *w, jx_mesh *m) {
  const int64_t b = 256, d = 512, h = 1024, o = 64;
  jx_array *key = jx_random_key(1);
  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "w1",
              jx_mul(jx_scalar(JX_F32, 0.05),
                     jx_random_normal(jx_random_fold_in(key, 1), JX_F32, JX_SHAPE(d, h))));
  jx_tree_set(params, "w2",
              jx_mul(jx_scalar(JX_F32, 0.05),
                     jx_random_normal(jx_random_fold_in(key, 2), JX_F32, JX_SHAPE(h, o))));
  jx_optimizer *opt = jx_optim_sgd(0.1, 0);
  jx_tree *state = jx_optim_init(opt, params);
  int np = jx_tree_size(params), ns = jx_tree_size(state);
  w->step = jx_train_step(jx_fn_create("mlp_loss", 4, 1, mlp_loss, NULL), params, state, opt);
  w->nin = np + ns + 2;
  w->nout = 1 + np + ns;
  jx_tree_flatten(params, w->in);
  jx_tree_flatten(state, w->in + np);
  for (int i = 0; i < np + ns; i++) jx_keep(w->in[i]);
  w->in[np + ns] = jx_keep(jx_random_normal(jx_random_fold_in(key, 0), JX_F32, JX_SHAPE(b, d)));
  w->in[np + ns + 1] = jx_keep(jx_random_normal(jx_random_fold_in(key, 3), JX_F32, JX_SHAPE(b, o)));
  int model = axis(m, "model");
  const char *all = model ? "(data,model)" : "data";
  /* data parallel; Megatron (w1's columns, w2's rows over model); FSDP */
  const char *specs[3][2] = {
      {"", ""}, {model ? "None,model" : "", model ? "model" : ""}, {all, all}};
  for (int r = 0; r < 3; r++) {
    w->in_spec[r][0] = specs[r][0];
    w->in_spec[r][1] = specs[r][1];
    for (int i = 0; i < ns; i++) w->in_spec[r][np + i] = "";
    w->in_spec[r][np + ns] = w->in_spec[r][np + ns + 1] = r == 1 ? "data" : all;
  }
}

/* ---- the GPT's training step ---- */
static void make_gpt(workload *w, jx_mesh *m, jx_gpt_config *cfg, int64_t batch) {
  jx_tree *params = jx_gpt_init(cfg, jx_random_key(0), JX_F32);
  jx_optimizer *opt = jx_optim_chain_clip(jx_optim_adamw(3e-3, 0.9, 0.95, 1e-8, 0.1), 1.0);
  jx_tree *state = jx_optim_init(opt, params);
  w->step = jx_train_step(jx_gpt_loss_fn(cfg, params), params, state, opt);
  int np = jx_tree_size(params), ns = jx_tree_size(state);
  w->nin = np + ns + 2;
  w->nout = 1 + np + ns;
  jx_tree_flatten(params, w->in);
  jx_tree_flatten(state, w->in + np);
  for (int i = 0; i < np + ns; i++) jx_keep(w->in[i]);
  for (int t = 0; t < 2; t++) /* tokens and targets */
    w->in[np + ns + t] =
        jx_keep(jx_astype(jx_floor(jx_random_uniform(jx_random_key(7 + (uint64_t)t), JX_F32,
                                                     JX_SHAPE(batch, cfg->context), 0, 256)),
                          JX_I32));
  static char specs[2][MAX_IN][64];
  jx_gpt_param_specs(cfg, params, m, 0, specs[0]);
  jx_gpt_param_specs(cfg, params, m, 1, specs[1]);
  const char *all = axis(m, "model") ? "(data,model)" : "data";
  for (int r = 0; r < 3; r++) {
    for (int i = 0; i < np; i++) w->in_spec[r][i] = r == 0 ? "" : specs[r - 1][i];
    for (int i = 0; i < ns; i++) { /* moments like their parameters */
      const char *name = jx_tree_name(state, i), *slash = strchr(name, '/');
      w->in_spec[r][np + i] = "";
      for (int k = 0; slash && k < np; k++)
        if (!strcmp(slash + 1, jx_tree_name(params, k))) w->in_spec[r][np + i] = w->in_spec[r][k];
    }
    w->in_spec[r][np + ns] = w->in_spec[r][np + ns + 1] = r == 0 ? all : "data";
  }
}

/* Bytes of in's arrays one device holds: a sharded array's block, an
 * unsharded one whole (the small token batches: the jit slices them). */
static double inputs_per_device(jx_array *const *in, int nin) {
  double bytes = 0;
  for (int i = 0; i < nin; i++) {
    jx_shape s = jx_shape_of(in[i]);
    jx_sharding *sh = jx_sharding_of(in[i]);
    if (sh) jx_sharding_shard_shape(sh, s, &s);
    double n = (double)jx_dtype_size(jx_dtype_of(in[i]));
    for (int d = 0; d < s.rank; d++) n *= (double)s.dims[d];
    bytes += n;
  }
  return bytes;
}

/* One training call of f: in's parameters and state become the outputs'
 * (owned references, as they come), *secs its wall
 * time, *peak the most bytes one device
 * other than 0 held while it ran: its inputs' blocks and the most it
 * allocated beyond what it held before (other recipes' arrays), as the
 * profiler measures a jitted function's peak. */
static double last_cpu_s; /* the last step's CPU time, every thread of the process */
static double last_share; /* the last step's share of the cores (jx_machine_idle_s) */
static double last_idle;  /* ... of which idle */

static double step_of(jx_fn *f, jx_array **in, int nin, int nout, int ndev, double *secs,
                      double *peak) {
  jx_array *out[MAX_IN];
  int64_t live0[64] = {0};
  jx_scope_begin();
  double inputs = inputs_per_device(in, nin);
  for (int d = 0; d < ndev && d < 64; d++) {
    jx_memory_stats ms;
    if (!jx_memory_stats(d, &ms)) live0[d] = ms.live_bytes;
  }
  jx_memory_reset_peak(-1);
  double t0 = bench_now_s(), c0 = bench_cpu_ns(), i0 = jx_machine_idle_s();
  static int ntrace;
  int tracing = getenv("DBG_TRACE") && ++ntrace == 3;
  if (tracing) jx_profiler_start(getenv("DBG_TRACE"));
  if (jx_call(f, in, out)) {
    fprintf(stderr, "bench_auto_plan: %s\n", jx_last_error());
    exit(1);
  }
  for (int o = 0; o < nout; o++) jx_block_until_ready(out[o]);
  *secs = bench_now_s() - t0;
  if (tracing) jx_profiler_stop();
  last_cpu_s = 1e-9 * (bench_cpu_ns() - c0);
  /* the cores this process had: those it ran on and those left idle, the
   * rest went to other jobs */
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  double i1 = jx_machine_idle_s();
  last_share = i0 >= 0 && i1 >= 0 && online > 0 && *secs > 0
                   ? (last_cpu_s + (i1 - i0)) / (*secs * (double)online)
                   : 1;
  if (last_share > 1) last_share = 1;
  last_idle =
      i0 >= 0 && i1 >= 0 && online > 0 && *secs > 0 ? (i1 - i0) / (*secs * (double)online) : 0;
  *peak = 0;
  for (int d = ndev > 1 ? 1 : 0; d < ndev && d < 64; d++) {
    jx_memory_stats ms;
    if (!jx_memory_stats(d, &ms) && inputs + (double)(ms.peak_bytes - live0[d]) > *peak)
      *peak = inputs + (double)(ms.peak_bytes - live0[d]);
  }
  double l = jx_item(out[0]);
  for (int o = 1; o < nout; o++) {
    jx_release(in[o - 1]);
    in[o - 1] = jx_keep(out[o]);
  }
  jx_scope_end();
  return l;
}

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: bench_auto_plan mlp|gpt DEVICES MESH [ROUNDS] [--gpt L,D,T,B] "
                    "[--limit P] [--dp-peak BYTES] [--auto-only]\n");
    return 2;
  }
  /* the steps are timed with their final kernels: compiled at -O3 from the
   * start, not first at -O1 then again on a thread of their own, whose
   * compiler would share the cores with the steps it times */
  setenv("JX_KERNEL_OPT", "3", 0);
  int devices = atoi(argv[2]), rounds = 7, auto_only = 0;
  double limit_percent = 0, dp_peak = 0;
  int64_t batch = 16;
  jx_gpt_config cfg = {
      .vocab = 256, .n_layers = 2, .d_model = 64, .n_heads = 4, .context = 32, .mlp_ratio = 4};
  for (int a = 4; a < argc; a++) {
    if (!strcmp(argv[a], "--gpt") && a + 1 < argc) {
      long l, d, t, b;
      if (sscanf(argv[++a], "%ld,%ld,%ld,%ld", &l, &d, &t, &b) != 4) {
        fprintf(stderr, "bench_auto_plan: --gpt wants L,D,T,B, not '%s'\n", argv[a]);
        return 2;
      }
      cfg.n_layers = (int)l, cfg.d_model = (int)d, cfg.context = (int)t, batch = b;
    } else if (!strcmp(argv[a], "--limit") && a + 1 < argc)
      limit_percent = atof(argv[++a]);
    else if (!strcmp(argv[a], "--dp-peak") && a + 1 < argc)
      dp_peak = atof(argv[++a]);
    else if (!strcmp(argv[a], "--auto-only"))
      auto_only = 1;
    else
      rounds = atoi(argv[a]);
  }
  jx_set_cpu_device_count(devices);
  jx_mesh *m = bench_mesh_parse(argv[3]);
  if (!m) return 2;
  workload w = {0};
  if (!strcmp(argv[1], "mlp"))
    make_mlp(&w, m);
  else
    make_gpt(&w, m, &cfg, batch);
  jx_fn *fn[RECIPES] = {0};
  jx_array *in[RECIPES][MAX_IN];
  jx_sharding *sh[RECIPES][MAX_IN], *out_sh[MAX_IN];
  jx_sharding_estimate est[RECIPES];
  double secs, peak[RECIPES] = {0};
  int have[RECIPES] = {1, 1, axis(m, "model") && !auto_only, !auto_only};
  int donate[MAX_IN] = {0}; /* the parameters and state: each step's are the next one's */
  for (int i = 0; i < w.nin - 2; i++) donate[i] = 1;
  for (int r = 0; r < RECIPES; r++)
    for (int i = 0; have[r] && i < w.nin; i++) in[r][i] = jx_keep(w.in[i]);
  for (int r = 1; r < RECIPES; r++) { /* the hand recipes */
    if (!have[r]) continue;
    for (int i = 0; i < w.nin; i++) sh[r][i] = jx_sharding_create(m, w.in_spec[r - 1][i]);
    jx_sharding *outs[MAX_IN]; /* the updated parameters and state as they came */
    outs[0] = jx_sharding_create(m, "");
    for (int o = 1; o < w.nout; o++) outs[o] = sh[r][o - 1];
    fn[r] = jx_jit(
        w.step, &(jx_jit_options){.in_shardings = sh[r], .out_shardings = outs, .donate = donate});
    if (jx_sharding_estimate_of(fn[r], w.in, &est[r])) {
      fprintf(stderr, "bench_auto_plan: %s: %s\n", recipe_names[r], jx_last_error());
      return 1;
    }
  }
  double loss[RECIPES];

  if (limit_percent > 0 && !dp_peak) { /* data parallel's measured peak, from its second step */
    step_of(fn[1], in[1], w.nin, w.nout, devices, &secs, &dp_peak);
    step_of(fn[1], in[1], w.nin, w.nout, devices, &secs, &dp_peak);
  }
  jx_sharding *replicated = jx_sharding_create(m, "");
  for (int o = 0; o < w.nout; o++) out_sh[o] = o ? JX_AUTO : replicated;
  for (int i = 0; i < w.nin; i++) sh[0][i] = JX_AUTO;
  double t0 = bench_now_s();
  fn[0] =
      jx_jit(w.step, &(jx_jit_options){.in_shardings = sh[0],
                                       .out_shardings = out_sh,
                                       .donate = donate,
                                       .mesh = m,
                                       .memory_limit = (int64_t)(limit_percent / 100 * dp_peak)});
  if (jx_sharding_estimate_of(fn[0], w.in, &est[0])) {
    fprintf(stderr, "bench_auto_plan: %s\n", jx_last_error());
    return 1;
  }
  double planning = bench_now_s() - t0;
  /* the plan's first inputs in its layouts; its outputs come back in them */
  jx_aval av[MAX_IN];
  for (int k = 0; k < w.nin; k++)
    av[k] = (jx_aval){jx_dtype_of(w.in[k]), jx_is_weak(w.in[k]), jx_shape_of(w.in[k]), 0};
  for (int i = 0; i < w.nin - 2; i++) {
    jx_sharding *layout = jx_sharded_jit_in_layout(fn[0], av, i);
    jx_array *placed = jx_keep(jx_device_put(in[0][i], layout));
    jx_sharding_release(layout);
    jx_block_until_ready(placed);
    jx_release(in[0][i]);
    in[0][i] = placed;
  }
  jx_fn *plain = jx_jit(w.step, NULL);
  jx_array *plain_in[MAX_IN];
  for (int i = 0; i < w.nin; i++) plain_in[i] = jx_keep(w.in[i]);
  double want = step_of(plain, plain_in, w.nin, w.nout, 1, &secs, &peak[0]);
  double *t = calloc((size_t)RECIPES * (size_t)rounds, sizeof *t),
         *tc = calloc((size_t)RECIPES * (size_t)rounds, sizeof *tc),
         *ts = calloc((size_t)RECIPES * (size_t)rounds, sizeof *ts),
         *ti = calloc((size_t)RECIPES * (size_t)rounds, sizeof *ti);
  for (int r = 0; r < RECIPES; r++) /* compiled, warmed: the second call's inputs are as made */
    if (have[r] && !(auto_only && r == 1))
      loss[r] = step_of(fn[r], in[r], w.nin, w.nout, devices, &secs, &peak[r]),
      step_of(fn[r], in[r], w.nin, w.nout, devices, &secs, &peak[r]);
  double slowdown = cores_slowdown(m); /* before the steps and after them: their mean */
  for (int k = 0; k < rounds; k++)
    for (int r = 0; r < RECIPES; r++)
      if (have[r] && !(auto_only && r == 1))
        step_of(fn[r], in[r], w.nin, w.nout, devices, &t[r * rounds + k], &secs),
            tc[r * rounds + k] = last_cpu_s, ts[r * rounds + k] = last_share,
                            ti[r * rounds + k] = last_idle;
  slowdown = (slowdown + cores_slowdown(m)) / 2;
  if (auto_only) have[1] = 0;
  /* the step's CPU time over the cores its devices share: its time had the
   * process the machine alone, less disturbed by other jobs than wall time */
  long online = sysconf(_SC_NPROCESSORS_ONLN);
  double cores = online > 0 && online < devices ? (double)online : (double)devices;
  printf("%s on %d devices, mesh %s (planned in %.2f s)", argv[1], devices, argv[3], planning);
  if (limit_percent > 0)
    printf(", limit %.0f %% of data parallel's measured peak %.0f bytes = %.0f bytes",
           limit_percent, dp_peak, limit_percent / 100 * dp_peak);
  printf("\n");
  double *paired = calloc((size_t)rounds, sizeof *paired);
  for (int r = 0; r < RECIPES; r++) {
    if (!have[r]) continue;
    double e = est[r].step_s;
    double *tr = t + r * rounds;
    /* each step against the estimate at its own share of the cores */
    for (int k = 0; k < rounds; k++) paired[k] = e / ts[r * rounds + k] / tr[k] - 1;
    qsort(paired, (size_t)rounds, sizeof *paired, bench_cmp_double);
    qsort(tr, (size_t)rounds, sizeof *tr, bench_cmp_double);
    double *tcr = tc + r * rounds;
    qsort(tcr, (size_t)rounds, sizeof *tcr, bench_cmp_double);
    double *tsr = ts + r * rounds;
    qsort(tsr, (size_t)rounds, sizeof *tsr, bench_cmp_double);
    double *tir = ti + r * rounds;
    qsort(tir, (size_t)rounds, sizeof *tir, bench_cmp_double);
    printf(
        "  %-14s measured %8.2f ms (%.2f-%.2f)  estimated %8.2f ms (compute %.2f, comm %.2f, "
        "idle %.2f, %d collectives)  est/measured %.2f  peak est %.0f measured %.0f bytes (%.2f)  "
        "loss diff %.1e  CPU per core %.2f ms (%.2f-%.2f)  at the cores' speed %.2f ms (slowdown "
        "%.3f)  share of the cores %.3f (%.3f-%.3f), idle %.3f  "
        "each step at its share %+.1f %% (%+.1f to %+.1f)\n",
        recipe_names[r], 1e3 * tr[rounds / 2], 1e3 * tr[0], 1e3 * tr[rounds - 1], 1e3 * e,
        1e3 * est[r].compute_s, 1e3 * est[r].comm_s, 1e3 * est[r].idle_s, est[r].collectives,
        e / tr[rounds / 2], est[r].peak_bytes, peak[r], est[r].peak_bytes / peak[r],
        fabs(loss[r] - want) / fabs(want), 1e3 * tcr[rounds / 2] / cores, 1e3 * tcr[0] / cores,
        1e3 * tcr[rounds - 1] / cores, 1e3 * tcr[rounds / 2] / cores / slowdown, slowdown,
        tsr[rounds / 2], tsr[0], tsr[rounds - 1], tir[rounds / 2], 100 * paired[rounds / 2],
        100 * paired[0], 100 * paired[rounds - 1]);
  }
  free(paired);
  free(t);
  free(tc);
  free(ts);
  free(ti);
  for (int r = 0; r < RECIPES; r++) jx_fn_release(fn[r]);
  jx_fn_release(plain);
  jx_shutdown(); /* frees the executables (JX_PROFILE_STEPS prints their profiles then) */
  return 0;
}
