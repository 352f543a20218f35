/* The automatic sharding planner's two solvers on the reference GPT's AdamW
 * training step: the integer linear program (plan.h, what the sharded jit
 * uses) and the layer-chain dynamic program (dp.h), each planning the step
 * on a mesh of CPU devices under a memory limit, both plans priced alike
 * (dp.h's jx_auto_layouts_estimate: the per-device program's estimate) and
 * each solver's planning time taken (wall and CPU). The program is traced
 * from shapes (nothing is allocated) and the figures are the mesh's
 * measured ones.
 *
 *   bench_auto_dp DEVICES MESH L,D,T,B [--heads H] [--vocab V] [--limits 100,50,30]
 *
 * The DP's layers: the embedding (wte, wpe), each block, the final norm;
 * each chooses among its parameters' layouts in data parallel (replicated),
 * Megatron over "model" and Megatron with FSDP over "data"
 * (jx_gpt_param_specs), distinct ones only, its optimizer moments laid out
 * like their parameters and its updated parameters and moments made in
 * them. Both solvers get the tokens and targets split over "data". The
 * limits are percentages of the data parallel layouts' estimated peak. */
#include "bench_util.h"
#include "bench_mesh.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "compile/lower.h"
#include "compile/simplify.h"
#include "parallel/auto/dp.h"
#include "parallel/auto/plan.h"
#include "parallel/auto/report.h"
#include "trace/fn.h"

enum { MAX_IN = 2048, CHOICES = 3 };

static double now_cpu_s(void) { return bench_cpu_ns() * 1e-9; }

int main(int argc, char **argv) {
  if (argc < 4) {
    fprintf(stderr, "usage: bench_auto_dp DEVICES MESH L,D,T,B [--heads H] [--vocab V] "
                    "[--limits 100,50,30]\n");
    return 2;
  }
  int devices = atoi(argv[1]);
  long layers, width, context, batch, heads = 4, vocab = 256;
  if (sscanf(argv[3], "%ld,%ld,%ld,%ld", &layers, &width, &context, &batch) != 4) {
    fprintf(stderr, "bench_auto_dp: L,D,T,B, not '%s'\n", argv[3]);
    return 2;
  }
  const char *limits = "100,50,30";
  for (int a = 4; a + 1 < argc; a += 2) {
    if (!strcmp(argv[a], "--heads")) heads = atol(argv[a + 1]);
    if (!strcmp(argv[a], "--vocab")) vocab = atol(argv[a + 1]);
    if (!strcmp(argv[a], "--limits")) limits = argv[a + 1];
  }
  jx_set_cpu_device_count(devices);
  jx_mesh *m = bench_mesh_parse(argv[2]);
  if (!m) return 2;
  jx_gpt_config cfg = {.vocab = vocab,
                       .n_layers = (int)layers,
                       .d_model = width,
                       .n_heads = (int)heads,
                       .context = context,
                       .mlp_ratio = 4};
  jx_tree *params = jx_gpt_init_shapes(&cfg, JX_F32);
  jx_optimizer *opt = jx_optim_chain_clip(jx_optim_adamw(3e-3, 0.9, 0.95, 1e-8, 0.1), 1.0);
  jx_tree *state = jx_optim_init_shapes(opt, params);
  jx_fn *step = jx_train_step(jx_gpt_loss_fn(&cfg, params), params, state, opt);
  int np = jx_tree_size(params), ns = jx_tree_size(state), nin = np + ns + 2;
  if (nin > MAX_IN || layers + 2 > 64) {
    fprintf(stderr, "bench_auto_dp: %d inputs and %ld layers; at most %d and 62\n", nin, layers,
            MAX_IN);
    return 2;
  }
  jx_array *in[MAX_IN];
  jx_tree_flatten(params, in);
  jx_tree_flatten(state, in + np);
  in[np + ns] = in[np + ns + 1] = jx_shape_dtype_struct(JX_I32, JX_SHAPE(batch, context));
  jx_aval av[MAX_IN];
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *traced = jx_fn_program(step, av), *simple = traced ? jx_simplify(traced) : NULL;
  jx_program *p = simple ? jx_lower_custom_calls(simple) : NULL; /* as the jit plans it */
  if (!p) {
    fprintf(stderr, "bench_auto_dp: %s\n", jx_last_error());
    return 1;
  }
  jx_comm_model cm;
  jx_plan_figures(&cm, m);

  /* the DP's layers and choices; the parameter of each input (moments: theirs) */
  static char specs[2][MAX_IN][64];
  jx_gpt_param_specs(&cfg, params, m, 0, specs[0]);
  jx_gpt_param_specs(&cfg, params, m, 1, specs[1]);
  int param_of[MAX_IN], layer[MAX_IN], nchoices[66], out_like[MAX_IN];
  static jx_pspec layouts[MAX_IN][CHOICES];
  const jx_pspec *layout_of[MAX_IN];
  int nlayers = (int)layers + 2;
  for (int i = 0; i < nin; i++) {
    param_of[i] = i < np ? i : -1;
    const char *name =
        i < np + ns ? jx_tree_name(i < np ? params : state, i < np ? i : i - np) : "";
    const char *slash = i >= np ? strchr(name, '/') : NULL;
    for (int k = 0; slash && k < np; k++)
      if (!strcmp(slash + 1, jx_tree_name(params, k))) param_of[i] = k;
  }
  jx_sharding *batch_sh = jx_sharding_create(m, "data");
  for (int i = 0; i < nin; i++) {
    int rank = jx_ndim(in[i]), k = param_of[i];
    layout_of[i] = layouts[i];
    if (k < 0) { /* the step count, the tokens: fixed */
      layer[i] = -1;
      layouts[i][0] = i >= np + ns ? jx_pspec_of(batch_sh, rank) : jx_pspec_replicated(rank);
      continue;
    }
    const char *pname = jx_tree_name(params, k);
    int blk;
    layer[i] = sscanf(pname, "blocks.%d.", &blk) == 1                     ? 1 + blk
               : (!strncmp(pname, "wte", 3) || !strncmp(pname, "wpe", 3)) ? 0
                                                                          : nlayers - 1;
    const char *text[CHOICES] = {"", specs[0][k], specs[1][k]};
    for (int c = 0; c < CHOICES; c++) {
      jx_sharding *s = jx_sharding_create(m, text[c]);
      layouts[i][c] = jx_pspec_of(s, rank);
      jx_sharding_release(s);
    }
  }
  /* a layer's choices: the distinct ones over its inputs (a later choice the
   * same as an earlier for every input is dropped) */
  for (int l = 0; l < nlayers; l++) {
    int keep[CHOICES], nk = 0;
    for (int c = 0; c < CHOICES; c++) {
      int same_as_kept = 0;
      for (int j = 0; j < nk && !same_as_kept; j++) {
        int all = 1;
        for (int i = 0; i < nin && all; i++)
          if (layer[i] == l) all = jx_pspec_equal(&layouts[i][c], &layouts[i][keep[j]]);
        same_as_kept = all;
      }
      if (!same_as_kept) keep[nk++] = c;
    }
    for (int i = 0; i < nin; i++)
      if (layer[i] == l) {
        jx_pspec tmp[CHOICES];
        for (int j = 0; j < nk; j++) tmp[j] = layouts[i][keep[j]];
        for (int j = 0; j < nk; j++) layouts[i][j] = tmp[j];
      }
    nchoices[l] = nk;
  }
  out_like[0] = -1; /* the loss */
  for (int o = 1; o < 1 + np + ns; o++) out_like[o] = o - 1;
  jx_dp_problem dp = {nlayers, layer, nchoices, layout_of, out_like};

  /* data parallel's estimated peak: every layer at choice 0 */
  jx_pspec in_spec[MAX_IN], out_spec[MAX_IN];
  for (int i = 0; i < nin; i++) in_spec[i] = layouts[i][0];
  out_spec[0] = jx_pspec_replicated(0);
  for (int o = 1; o < 1 + np + ns; o++) out_spec[o] = in_spec[o - 1];
  double dp_time, dp_peak;
  if (jx_auto_layouts_estimate(&cm, m, p, in_spec, out_spec, NULL, &dp_time, &dp_peak)) {
    fprintf(stderr, "bench_auto_dp: data parallel: %s\n", jx_last_error());
    return 1;
  }
  printf("GPT %ld layers, d %ld, %ld heads, context %ld, vocab %ld, batch %ld on %s: %d equations; "
         "data parallel %.1f ms, peak %.0f bytes; choices per layer:",
         layers, width, heads, context, vocab, batch, argv[2], p->neqns, 1e3 * dp_time, dp_peak);
  for (int l = 0; l < nlayers; l++) printf(" %d", nchoices[l]);
  printf("\n");
  const jx_pspec *fixed[MAX_IN] = {0};
  fixed[np + ns] = &layouts[np + ns][0];
  fixed[np + ns + 1] = &layouts[np + ns + 1][0];
  char lim[64];
  snprintf(lim, sizeof lim, "%s", limits);
  for (char *tok = strtok(lim, ","); tok; tok = strtok(NULL, ",")) {
    double limit = atof(tok) / 100 * dp_peak;
    double w0 = bench_now_s(), c0 = now_cpu_s();
    jx_auto_plan ilp;
    jx_status st = jx_auto_plan_solve_fixed(&cm, m, p, fixed, limit, &ilp);
    double ilp_wall = bench_now_s() - w0, ilp_cpu = now_cpu_s() - c0, ilp_t = 0, ilp_m = 0;
    for (int o = 0; !st && o < p->nout; o++) out_spec[o] = ilp.spec[p->out[o]];
    if (!st)
      st = jx_auto_layouts_estimate(&cm, m, p, ilp.in_spec, out_spec, ilp.spec, &ilp_t, &ilp_m);
    printf("  limit %s %% (%.0f bytes)\n", tok, limit);
    if (st)
      printf("    ILP: %s\n", jx_last_error());
    else
      printf(
          "    ILP: %8.2f ms, peak %11.0f bytes (its own model: %.2f ms, %.0f bytes); planned in "
          "%.2f s (%.2f s of CPU)\n",
          1e3 * ilp_t, ilp_m, 1e3 * ilp.time_s, ilp.memory_bytes, ilp_wall, ilp_cpu);
    if (!st) jx_auto_plan_free(&ilp);
    jx_clear_error();
    w0 = bench_now_s(), c0 = now_cpu_s();
    jx_dp_plan d;
    st = jx_auto_dp_solve(&cm, m, p, &dp, limit, &d);
    double dp_wall = bench_now_s() - w0, dp_cpu = now_cpu_s() - c0;
    if (st) {
      printf("    DP:  %s\n", jx_last_error());
      jx_clear_error();
      continue;
    }
    printf("    DP:  %8.2f ms, peak %11.0f bytes (modelled %.2f ms); planned in %.2f s (%.2f s of "
           "CPU), %d assignments priced; choices",
           1e3 * d.time_s, d.peak_bytes, 1e3 * d.model_time_s, dp_wall, dp_cpu, d.evaluations);
    for (int l = 0; l < nlayers; l++) printf(" %d", d.choice[l]);
    printf("\n");
  }
  return 0;
}
