/* jx plan: plans the reference GPT's training step (AdamW, the batch's
 * tokens and targets) with every layout JX_AUTO on a mesh under a memory
 * limit, and prints the plan beside the hand recipes' estimates (data
 * parallel, Megatron over "model", FSDP). With --link and --flops the
 * figures are given instead of measured: planning for a cluster on paper.
 * The parameters, optimizer state and batch are shapes alone
 * (jx_gpt_init_shapes, jx_optim_init_shapes, jx_shape_dtype_struct): nothing
 * of the model's size is allocated, so a model far larger than this
 * machine's memory plans in seconds.
 * Also the helpers of `jx train --mesh auto`. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jx/jx.h>

#include "cli.h"

int jx_cli_parse_size(const char *text, double *out) {
  char *end;
  double v = strtod(text, &end);
  static const struct {
    const char *suffix;
    double scale;
  } units[] = {{"", 1},
               {"B", 1},
               {"K", 1e3},
               {"KB", 1e3},
               {"KiB", 1024.0},
               {"M", 1e6},
               {"MB", 1e6},
               {"MiB", 1048576.0},
               {"G", 1e9},
               {"GB", 1e9},
               {"GiB", 1073741824.0},
               {"T", 1e12},
               {"TB", 1e12},
               {"TiB", 1099511627776.0},
               {"us", 1e-6},
               {"ms", 1e-3},
               {"s", 1},
               {"B/s", 1},
               {"KB/s", 1e3},
               {"MB/s", 1e6},
               {"GB/s", 1e9},
               {"TB/s", 1e12}};
  if (end == text || !(v >= 0)) return 0;
  for (size_t k = 0; k < sizeof units / sizeof units[0]; k++)
    if (!strcmp(end, units[k].suffix)) {
      *out = v * units[k].scale;
      return 1;
    }
  return 0;
}

int jx_cli_mesh_auto(const char **spec) {
  if (strncmp(*spec, "auto", 4) || ((*spec)[4] && (*spec)[4] != ':')) return 0;
  *spec += (*spec)[4] ? 5 : 4;
  return 1;
}

void jx_cli_auto_layouts(int nin, jx_sharding **in_sh, int nout, jx_sharding **out_sh,
                         int *donate) {
  for (int i = 0; i < nin; i++) in_sh[i] = JX_AUTO;
  for (int o = 1; o < nout; o++) out_sh[o] = JX_AUTO; /* the loss (0) stays as given */
  /* the parameters and state (outputs 1.. give them back): donated, so the
   * plan gives each back in the layout it takes it in */
  for (int i = 0; i < nin; i++) donate[i] = i < nout - 1;
}

/* ---- jx plan ---- */

typedef struct {
  int devices;
  const char *mesh, *link;
  double memory_limit, alpha_s, flops_per_s;
  int64_t batch, layers, width, heads, context, vocab;
  int measure;        /* --measure ROUNDS: 0, plan only */
  const char *limits; /* --limits: percents of data parallel's measured peak */
} options;

static void usage(FILE *f) {
  fprintf(f, "usage: jx plan [options]\n"
             "  --devices N        CPU devices (default: JX_NUM_CPU_DEVICES or 1)\n"
             "  --mesh data=A,model=B   the mesh (default data=<devices>)\n"
             "  --memory-limit X   bytes per device the plan may hold (200MiB, 80GiB; default:\n"
             "                     the device's memory)\n"
             "  --model gpt        the model (the reference GPT, the only one)\n"
             "  --layers N --width N --heads N --context N --batch N --vocab N   the GPT\n"
             "                     (default 4, 128, 4, 64, 32, 256)\n"
             "  --link AXIS=BW,... bandwidth per mesh axis (50GB/s; intra: the last axis,\n"
             "                     inter: the others), with --alpha T (latency\n"
             "                     per message, default 10us) and --flops F (per device,\n"
             "                     default 100T): figures given instead of measured\n"
             "  --measure ROUNDS   run the step with real arrays: the plan at each of --limits\n"
             "                     and the hand recipes (data parallel, Megatron, FSDP, 2-D),\n"
             "                     timed in ROUNDS alternating rounds, with each one's peak\n"
             "  --limits 100,50,30 the plans' memory limits, in percent of data parallel's\n"
             "                     measured peak per device (with --measure)\n");
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.mesh = "",
                 .alpha_s = 1e-5,
                 .flops_per_s = 1e14,
                 .batch = 32,
                 .layers = 4,
                 .width = 128,
                 .heads = 4,
                 .context = 64,
                 .vocab = 256,
                 .limits = "100,50,30"};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int64_t *field = !strcmp(a, "--batch")     ? &o->batch
                     : !strcmp(a, "--layers")  ? &o->layers
                     : !strcmp(a, "--width")   ? &o->width
                     : !strcmp(a, "--heads")   ? &o->heads
                     : !strcmp(a, "--context") ? &o->context
                     : !strcmp(a, "--vocab")   ? &o->vocab
                                               : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "jx plan: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 0;
    }
    i++;
    if (field)
      *field = strtoll(v, NULL, 10);
    else if (!strcmp(a, "--devices"))
      o->devices = (int)strtol(v, NULL, 10);
    else if (!strcmp(a, "--mesh"))
      o->mesh = v;
    else if (!strcmp(a, "--link"))
      o->link = v;
    else if (!strcmp(a, "--limits"))
      o->limits = v;
    else if (!strcmp(a, "--measure") && (o->measure = (int)strtol(v, NULL, 10)) > 0)
      continue;
    else if (!strcmp(a, "--model") && !strcmp(v, "gpt"))
      continue; /* the one model jx plan knows */
    else if ((!strcmp(a, "--memory-limit") && jx_cli_parse_size(v, &o->memory_limit)) ||
             (!strcmp(a, "--alpha") && jx_cli_parse_size(v, &o->alpha_s)) ||
             (!strcmp(a, "--flops") && jx_cli_parse_size(v, &o->flops_per_s)))
      continue;
    else {
      fprintf(stderr, "jx plan: bad option or value '%s %s'\n", a, v);
      usage(stderr);
      return 0;
    }
  }
  /* the steps are timed with their final kernels: compiled at -O3 from the
   * start, not first at -O1 then again on a thread of their own, whose
   * compiler would share the cores with the steps it times */
  if (o->measure) setenv("JX_KERNEL_OPT", "3", 0);
  char limits[128];
  snprintf(limits, sizeof limits, "%s", o->limits);
  for (char *tok = strtok(limits, ","), *end; o->measure && tok; tok = strtok(NULL, ","))
    if (!(strtod(tok, &end) > 0) || *end) {
      fprintf(stderr, "jx plan: --limits wants positive percents (100,50,30), got '%s'\n", tok);
      return 0;
    }
  if (o->batch < 1 || o->layers < 1 || o->heads < 1 || o->context < 2 || o->vocab < 2 ||
      o->width % o->heads) {
    fprintf(stderr,
            "jx plan: batch, layers and heads must be >= 1, context and vocab >= 2, and width "
            "a multiple of heads\n");
    return 0;
  }
  return 1;
}

/* --link data=50GB/s,model=900GB/s: the given figures for m's axes; "intra"
 * names the last (innermost) axis, the links within a node, and "inter"
 * every other axis, the links between nodes. */
static int give_figures(const options *o, jx_mesh *m) {
  int n = jx_mesh_ndim(m);
  double alpha[8], bw[8];
  for (int a = 0; a < n; a++) {
    alpha[a] = o->alpha_s;
    bw[a] = 0;
  }
  char buf[512];
  snprintf(buf, sizeof buf, "%s", o->link);
  for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
    char *eq = strchr(tok, '=');
    int a = 0;
    if (eq) *eq = 0;
    int intra = !strcmp(tok, "intra"), inter = !strcmp(tok, "inter");
    a = intra ? n - 1 : inter ? 0 : a;
    while (!intra && !inter && a < n && strcmp(jx_mesh_axis_name(m, a), tok)) a++;
    if (!eq || a == n || (inter && n < 2) || !jx_cli_parse_size(eq + 1, &bw[a])) {
      fprintf(stderr, "jx plan: --link wants AXIS=BANDWIDTH for the mesh's axes, got '%s'\n", tok);
      return 0;
    }
    for (int b = 1; inter && b < n - 1; b++) bw[b] = bw[0];
  }
  for (int a = 0; a < n; a++)
    if (!(bw[a] > 0)) {
      fprintf(stderr, "jx plan: --link gives no bandwidth for mesh axis '%s'\n",
              jx_mesh_axis_name(m, a));
      return 0;
    }
  return !jx_sharding_plan_figures(m, alpha, bw, o->flops_per_s);
}

/* FSDP: jx_gpt_param_specs's with fsdp (over "data", and Megatron over
 * "model" too when the mesh has it: 2-D); FSDP_ALL: the same matrices' dims
 * split over every axis of the mesh, the batch too. */
typedef enum { DATA_PARALLEL, MEGATRON, FSDP, FSDP_ALL } recipe;

/* The bytes per device of a's shard under s. */
static double shard_bytes(const jx_sharding *s, const jx_array *a) {
  jx_shape shard;
  if (jx_sharding_shard_shape(s, jx_shape_of(a), &shard)) return NAN;
  double n = 1;
  for (int d = 0; d < shard.rank; d++) n *= (double)shard.dims[d];
  return n * (double)jx_dtype_size(jx_dtype_of(a));
}

/* A hand recipe's layouts of the step's inputs and outputs: parameters as
 * jx_gpt_param_specs says (replicated for data parallel), moments like
 * their parameters, the batch over "data" (over every axis for data
 * parallel, when they divide it). *state_bytes receives the bytes per device of the parameters
 * and the optimizer state under those layouts. */
static jx_fn *recipe_step(recipe r, jx_fn *step_fn, const jx_gpt_config *cfg, jx_tree *params,
                          jx_tree *state, jx_mesh *m, int64_t batch, double *state_bytes) {
  int np = jx_tree_size(params), ns = jx_tree_size(state), nin = np + ns + 2;
  char(*specs)[64] = calloc((size_t)np, sizeof *specs);
  jx_sharding **sh = calloc((size_t)nin, sizeof *sh), **out = calloc((size_t)nin, sizeof *out);
  char all[256] = "";
  for (int a = 0; a < jx_mesh_ndim(m); a++)
    snprintf(all + strlen(all), sizeof all - strlen(all), "%s%s", a ? "," : "(",
             jx_mesh_axis_name(m, a));
  strncat(all, ")", sizeof all - strlen(all) - 1);
  /* the batch over the axes that divide it: every axis, else "data", else none */
  int64_t data = jx_mesh_axis_size(m, "data"), every = 1;
  for (int a = 0; a < jx_mesh_ndim(m); a++) every *= jx_mesh_axis_size(m, jx_mesh_axis_name(m, a));
  int has_data = data > 0 && batch % data == 0;
  jx_fn *step = NULL;
  int ok = specs && sh && out;
  if (ok && r == FSDP_ALL) { /* FSDP's specs on a 1-D mesh of every device, renamed */
    jx_mesh *flat = jx_mesh_create(JX_SHAPE(every), (const char *[]){"data"});
    ok = flat && !jx_gpt_param_specs(cfg, params, flat, 1, specs);
    for (int i = 0; ok && i < np; i++) {
      char *d = strstr(specs[i], "data");
      if (!d) continue;
      char renamed[64];
      snprintf(renamed, sizeof renamed, "%.*s%s%s", (int)(d - specs[i]), specs[i], all, d + 4);
      snprintf(specs[i], sizeof specs[i], "%s", renamed);
    }
    jx_mesh_release(flat);
  } else if (ok && r != DATA_PARALLEL)
    ok = !jx_gpt_param_specs(cfg, params, m, r == FSDP, specs);
  if (ok) {
    jx_sharding *replicated = jx_sharding_create(m, "");
    int whole_batch = (r == DATA_PARALLEL || r == FSDP_ALL) && batch % every == 0;
    jx_sharding *rows = jx_sharding_create(m, whole_batch ? all : has_data ? "data" : "");
    for (int i = 0; i < np; i++)
      sh[i] = r == DATA_PARALLEL ? replicated : jx_sharding_create(m, specs[i]);
    for (int i = 0; i < ns; i++) {
      const char *name = jx_tree_name(state, i), *slash = strchr(name, '/');
      sh[np + i] = replicated;
      for (int k = 0; slash && k < np; k++)
        if (!strcmp(slash + 1, jx_tree_name(params, k))) sh[np + i] = sh[k];
    }
    *state_bytes = 0;
    for (int i = 0; i < np + ns; i++)
      *state_bytes +=
          shard_bytes(sh[i], i < np ? jx_tree_at(params, i) : jx_tree_at(state, i - np));
    sh[np + ns] = sh[np + ns + 1] = rows;
    out[0] = replicated;
    for (int i = 0; i < np + ns; i++) out[1 + i] = sh[i];
    step = jx_jit(step_fn, &(jx_jit_options){.in_shardings = sh, .out_shardings = out});
    for (int i = 0; r != DATA_PARALLEL && i < np; i++) jx_sharding_release(sh[i]);
    jx_sharding_release(replicated);
    jx_sharding_release(rows);
  }
  free(specs);
  free(sh);
  free(out);
  return step;
}

static double clock_s(clockid_t clock) {
  struct timespec t;
  clock_gettime(clock, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ---- jx plan --measure: the plan against the hand recipes, run ---- */

/* Frees what a step's call was given: its inputs' and outputs' layouts
 * (the loss's, replicated, released), the input list and the trees. */
static void free_step_args(jx_sharding **in_sh, jx_sharding **out_sh, jx_array **in, jx_tree *state,
                           jx_tree *params) {
  jx_sharding_release(out_sh[0]);
  free(in_sh);
  free(out_sh);
  free(in);
  jx_tree_release(state);
  jx_tree_release(params);
}

enum { MAX_STEPS = 16 };

typedef struct {
  char name[48];
  jx_fn *fn;
  jx_array **in; /* the loop's inputs: its parameters and state as the last step gave them */
  double limit;  /* the plan's memory limit, 0 for a recipe */
  double est_peak, peak; /* estimated (jx_fn_cost) and measured bytes per device */
  double est_s, loss;    /* estimated seconds per step, the first step's loss */
  double *t;             /* rounds */
} run_entry;

/* Bytes of in's arrays one device holds: a sharded array's block, an
 * unsharded one whole (the token batches: the jit slices them). */
static double inputs_per_device(jx_array *const *in, int nin) {
  double bytes = 0;
  for (int i = 0; i < nin; i++) {
    jx_sharding *sh = jx_sharding_of(in[i]);
    jx_shape s = jx_shape_of(in[i]);
    double whole = (double)jx_dtype_size(jx_dtype_of(in[i]));
    for (int d = 0; d < s.rank; d++) whole *= (double)s.dims[d];
    bytes += sh ? shard_bytes(sh, in[i]) : whole;
  }
  return bytes;
}

/* One training step of e->fn as a user's loop runs it: its updated
 * parameters and state (outputs 1..) become the next step's inputs as they
 * come (the plan gives each back in the layout it takes it in: they are
 * donated). Returns its seconds (NAN on an error); *loss gets the loss
 * when not NULL and *peak (when not NULL) the most bytes any device but
 * the first held during the step (the first also holds the arrays made
 * outside the devices): its inputs' blocks and what the step allocated
 * beyond what the device held before (other entries' arrays), what
 * jx_fn_cost's peak counts. */
static double train_step(run_entry *e, int nin, int nout, double *loss, double *peak) {
  jx_array **out = calloc((size_t)nout, sizeof *out);
  int ndev = jx_device_count();
  int64_t *live0 = calloc((size_t)ndev, sizeof *live0);
  jx_scope_begin();
  double inputs = inputs_per_device(e->in, nin);
  for (int d = 0; live0 && d < ndev; d++) {
    jx_memory_stats ms;
    if (!jx_memory_stats_get(d, &ms)) live0[d] = ms.live_bytes;
  }
  jx_memory_reset_peak(-1);
  double t0 = clock_s(CLOCK_MONOTONIC);
  jx_status st = out && live0 ? jx_call(e->fn, e->in, out) : JX_ERR_OUT_OF_MEMORY;
  for (int o = 0; !st && o < nout; o++) jx_block_until_ready(out[o]);
  double secs = clock_s(CLOCK_MONOTONIC) - t0;
  if (!st && loss) *loss = jx_item(out[0]);
  if (!st && peak) {
    *peak = 0;
    for (int d = ndev > 1 ? 1 : 0; d < ndev; d++) {
      jx_memory_stats ms;
      if (!jx_memory_stats_get(d, &ms) && inputs + (double)(ms.peak_bytes - live0[d]) > *peak)
        *peak = inputs + (double)(ms.peak_bytes - live0[d]);
    }
  }
  for (int o = 1; !st && o < nout; o++) {
    jx_release(e->in[o - 1]);
    e->in[o - 1] = jx_keep(out[o]);
  }
  jx_scope_end();
  free(out);
  free(live0);
  return st ? NAN : secs;
}

/* e's loop from in (nin arrays, kept by e): a first step for its loss,
 * a second for its peak, whose inputs are laid out as the loop runs them.
 * 0 on an error. */
static int first_steps(run_entry *e, jx_array **in, int nin, int nout) {
  e->in = calloc((size_t)nin, sizeof *e->in);
  for (int i = 0; e->in && i < nin; i++) e->in[i] = jx_keep(in[i]);
  return e->in && !isnan(train_step(e, nin, nout, &e->loss, NULL)) &&
         !isnan(train_step(e, nin, nout, NULL, &e->peak));
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Plans the step at each of o->limits (percent of data parallel's measured
 * peak) and times the plans and the hand recipes with real arrays in
 * alternating rounds: per entry the median step and its range, the
 * estimate, the estimated and measured peak per device, and, for each
 * limit, the plan against the fastest recipe whose measured peak fits it. */
static int measure(const options *o, jx_mesh *m, const jx_gpt_config *cfg, jx_fn *step_fn,
                   jx_optimizer *opt) {
  jx_tree *params = jx_gpt_init(cfg, jx_random_key(0), JX_F32);
  jx_tree *state = params ? jx_optim_init(opt, params) : NULL;
  if (!state) {
    fprintf(stderr, "jx plan: --measure: %s\n", jx_last_error());
    return 1;
  }
  int np = jx_tree_size(params), ns = jx_tree_size(state), nin = np + ns + 2, nout = 1 + np + ns;
  jx_array **in = calloc((size_t)nin, sizeof *in);
  jx_tree_flatten(params, in);
  jx_tree_flatten(state, in + np);
  for (int i = 0; i < np + ns; i++) jx_keep(in[i]);
  for (int t = 0; t < 2; t++) /* tokens and targets */
    in[np + ns + t] = jx_keep(
        jx_astype(jx_floor(jx_random_uniform(jx_random_key(7 + (uint64_t)t), JX_F32,
                                             JX_SHAPE(o->batch, o->context), 0, (double)o->vocab)),
                  JX_I32));
  run_entry e[MAX_STEPS];
  memset(e, 0, sizeof e);
  int n = 0, two_axes = jx_mesh_axis_size(m, "model") > 0 && jx_mesh_ndim(m) > 1;
  struct {
    recipe r;
    const char *name;
  } recipes[] = {{DATA_PARALLEL, "data parallel"},
                 {MEGATRON, "Megatron (model)"},
                 {two_axes ? FSDP_ALL : FSDP, "FSDP"},
                 {FSDP, "2-D (FSDP data, Megatron model)"}};
  for (int k = 0; k < 4; k++) {
    if ((k == 1 || k == 3) && !two_axes) continue;
    double held;
    e[n].fn = recipe_step(recipes[k].r, step_fn, cfg, params, state, m, o->batch, &held);
    snprintf(e[n].name, sizeof e[n].name, "%s", recipes[k].name);
    n++;
  }
  double dp_peak = NAN;
  int rc = 0;
  for (int k = 0; k < n && !rc; k++) {
    jx_sharding_estimate est;
    if (!e[k].fn || jx_sharding_estimate_of(e[k].fn, in, &est) ||
        !first_steps(&e[k], in, nin, nout)) {
      fprintf(stderr, "jx plan: %s: %s\n", e[k].name, jx_last_error());
      rc = 1;
      break;
    }
    e[k].est_s = est.step_s;
    e[k].est_peak = est.peak_bytes;
    if (k == 0) dp_peak = e[k].peak;
  }
  printf("data parallel's measured peak: %.0f bytes per device\n", dp_peak);
  char lim[128];
  snprintf(lim, sizeof lim, "%s", o->limits);
  jx_sharding **in_sh = calloc((size_t)nin, sizeof *in_sh),
              **out_sh = calloc((size_t)nout, sizeof *out_sh);
  int *donate = calloc((size_t)nin, sizeof *donate);
  jx_cli_auto_layouts(nin, in_sh, nout, out_sh, donate);
  out_sh[0] = jx_sharding_create(m, "");
  int first_auto = n;
  for (char *tok = strtok(lim, ","); tok && !rc && n < MAX_STEPS; tok = strtok(NULL, ",")) {
    double pct = strtod(tok, NULL);
    e[n].limit = dp_peak * pct / 100;
    snprintf(e[n].name, sizeof e[n].name, "auto at %g %%", pct);
    double c0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
    e[n].fn = jx_jit(step_fn, &(jx_jit_options){.in_shardings = in_sh,
                                                .out_shardings = out_sh,
                                                .donate = donate,
                                                .mesh = m,
                                                .memory_limit = (int64_t)e[n].limit});
    jx_sharding_estimate est;
    if (!e[n].fn || jx_sharding_estimate_of(e[n].fn, in, &est)) {
      printf("  %-34s limit %.0f: %s\n", e[n].name, e[n].limit, jx_last_error());
      jx_fn_release(e[n].fn);
      e[n].fn = NULL;
      n++;
      continue;
    }
    printf("  %-34s planned in %.2f s of CPU\n", e[n].name, clock_s(CLOCK_PROCESS_CPUTIME_ID) - c0);
    e[n].est_s = est.step_s;
    e[n].est_peak = est.peak_bytes;
    if (!first_steps(&e[n], in, nin, nout)) {
      fprintf(stderr, "jx plan: %s: %s\n", e[n].name, jx_last_error());
      rc = 1;
    }
    n++;
  }
  for (int k = 0; k < n; k++) e[k].t = calloc((size_t)o->measure, sizeof *e[k].t);
  for (int r = 0; r < o->measure && !rc; r++) /* warmed by first_steps */
    for (int k = 0; k < n; k++)
      if (e[k].fn) e[k].t[r] = train_step(&e[k], nin, nout, NULL, NULL);
  double load[3] = {0, 0, 0};
  FILE *la = fopen("/proc/loadavg", "r");
  if (la) {
    if (fscanf(la, "%lf %lf %lf", &load[0], &load[1], &load[2]) != 3) load[0] = NAN;
    fclose(la);
  }
  printf("measured over %d rounds (load average %.2f %.2f %.2f at the end):\n", o->measure, load[0],
         load[1], load[2]);
  for (int k = 0; k < n && !rc; k++) {
    if (!e[k].fn) continue;
    qsort(e[k].t, (size_t)o->measure, sizeof *e[k].t, cmp_double);
    printf("  %-34s %8.2f ms (%.2f-%.2f)  estimated %8.2f ms  peak %.0f bytes per device "
           "(estimated %.0f)  loss %.6f\n",
           e[k].name, 1e3 * e[k].t[o->measure / 2], 1e3 * e[k].t[0], 1e3 * e[k].t[o->measure - 1],
           1e3 * e[k].est_s, e[k].peak, e[k].est_peak, e[k].loss);
  }
  for (int a = first_auto; a < n && !rc; a++) {
    int best = -1;
    for (int k = 0; k < first_auto; k++)
      if (e[k].peak <= e[a].limit &&
          (best < 0 || e[k].t[o->measure / 2] < e[best].t[o->measure / 2]))
        best = k;
    printf("  %-34s limit %.0f: ", e[a].name, e[a].limit);
    if (!e[a].fn)
      printf("no plan");
    else
      printf("%.2f ms", 1e3 * e[a].t[o->measure / 2]);
    if (best < 0)
      printf(", no recipe fits\n");
    else
      printf(", the best recipe that fits: %s %.2f ms%s%.2f\n", e[best].name,
             1e3 * e[best].t[o->measure / 2], e[a].fn ? ", ratio " : "",
             e[a].fn ? e[a].t[o->measure / 2] / e[best].t[o->measure / 2] : 0.0);
  }
  for (int k = 0; k < n; k++) {
    jx_fn_release(e[k].fn);
    free(e[k].t);
    for (int i = 0; e[k].in && i < nin; i++) jx_release(e[k].in[i]);
    free(e[k].in);
  }
  for (int i = 0; i < nin; i++) jx_release(in[i]); /* kept above */
  free(donate);
  free_step_args(in_sh, out_sh, in, state, params);
  return rc;
}

int jx_cmd_plan(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  if (o.devices > 0 && jx_set_cpu_device_count(o.devices)) {
    fprintf(stderr, "jx plan: --devices: %s\n", jx_last_error());
    return 1;
  }
  jx_mesh *m = jx_cli_mesh(o.mesh, jx_device_count());
  if (!m) {
    fprintf(stderr, "jx plan: --mesh: %s\n", jx_last_error());
    return 2;
  }
  if (o.link && !give_figures(&o, m)) return 2;
  jx_gpt_config cfg = {.vocab = o.vocab,
                       .n_layers = o.layers,
                       .d_model = o.width,
                       .n_heads = o.heads,
                       .context = o.context,
                       .mlp_ratio = 4};
  jx_tree *params = jx_gpt_init_shapes(&cfg, JX_F32);
  jx_optimizer *opt = jx_optim_chain_clip(jx_optim_adamw(3e-3, 0.9, 0.95, 1e-8, 0.1), 1.0);
  jx_tree *state = params ? jx_optim_init_shapes(opt, params) : NULL;
  jx_fn *loss = params ? jx_gpt_loss_fn(&cfg, params) : NULL;
  jx_fn *step_fn = loss && state ? jx_train_step(loss, params, state, opt) : NULL;
  if (!step_fn) {
    fprintf(stderr, "jx plan: the model: %s\n", jx_last_error());
    return 1;
  }
  if (o.measure) {
    int rc = measure(&o, m, &cfg, step_fn, opt);
    jx_fn_release(step_fn);
    jx_fn_release(loss);
    jx_tree_release(state);
    jx_tree_release(params);
    jx_optim_release(opt);
    jx_mesh_release(m);
    return rc;
  }
  int np = jx_tree_size(params), ns = jx_tree_size(state), nin = np + ns + 2, nout = 1 + np + ns;
  jx_array **in = calloc((size_t)nin, sizeof *in);
  jx_sharding **in_sh = calloc((size_t)nin, sizeof *in_sh),
              **out_sh = calloc((size_t)nout, sizeof *out_sh);
  int *donate = calloc((size_t)nin, sizeof *donate);
  jx_tree_flatten(params, in);
  jx_tree_flatten(state, in + np);
  in[np + ns] = in[np + ns + 1] = jx_shape_dtype_struct(JX_I32, JX_SHAPE(o.batch, o.context));
  jx_cli_auto_layouts(nin, in_sh, nout, out_sh, donate);
  out_sh[0] = jx_sharding_create(m, "");
  jx_fn *planned = jx_jit(step_fn, &(jx_jit_options){.in_shardings = in_sh,
                                                     .out_shardings = out_sh,
                                                     .donate = donate,
                                                     .mesh = m,
                                                     .memory_limit = (int64_t)o.memory_limit});
  printf("GPT %lld layers, d %lld, %lld heads, context %lld, vocab %lld, batch %lld: %.2fM "
         "parameters\n",
         (long long)o.layers, (long long)o.width, (long long)o.heads, (long long)o.context,
         (long long)o.vocab, (long long)o.batch, (double)jx_tree_numel(params) / 1e6);
  double t0 = clock_s(CLOCK_MONOTONIC), cpu0 = clock_s(CLOCK_PROCESS_CPUTIME_ID);
  jx_sharding_estimate est;
  int rc = 0;
  if (!planned || jx_sharding_estimate_of(planned, in, &est)) {
    fprintf(stderr, "jx plan: %s\n", jx_last_error());
    rc = 1;
  }
  double planning_s = clock_s(CLOCK_MONOTONIC) - t0,
         planning_cpu_s = clock_s(CLOCK_PROCESS_CPUTIME_ID) - cpu0;
  double held = NAN;
  jx_fn *dp =
      rc ? NULL : recipe_step(DATA_PARALLEL, step_fn, &cfg, params, state, m, o.batch, &held);
  if (!rc && jx_sharding_plan_print(planned, in, dp, "data parallel", stdout)) {
    fprintf(stderr, "jx plan: %s\n", jx_last_error());
    rc = 1;
  }
  if (!rc)
    printf("  %-30s parameters and optimizer state %.0f bytes per device\n", "data parallel", held);
  const char *names[] = {"Megatron (model)", "FSDP (data)"};
  for (int r = MEGATRON; r <= FSDP && !rc && jx_mesh_axis_size(m, "model") > 0; r++) {
    jx_fn *h = recipe_step((recipe)r, step_fn, &cfg, params, state, m, o.batch, &held);
    jx_sharding_estimate e;
    if (h && !jx_sharding_estimate_of(h, in, &e)) {
      printf("  %-30s %.3g s per call (compute %.3g s, communication %.3g s in %d collectives",
             names[r - MEGATRON], e.step_s, e.compute_s, e.comm_s, e.collectives);
      if (e.idle_s > 0) printf(", cores idle %.3g s", e.idle_s);
      printf("), peak %.0f bytes per device, parameters and optimizer state %.0f\n", e.peak_bytes,
             held);
    }
    jx_fn_release(h);
  }
  if (!rc)
    printf("planned in %.2f s, %.2f s of CPU (tracing, planning and partitioning)\n", planning_s,
           planning_cpu_s);
  jx_fn_release(dp);
  jx_fn_release(planned);
  jx_fn_release(step_fn);
  jx_fn_release(loss);
  free(donate);
  free_step_args(in_sh, out_sh, in, state, params);
  jx_optim_release(opt);
  jx_mesh_release(m);
  return rc;
}
