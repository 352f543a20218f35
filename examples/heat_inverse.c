/* Recovering a diffusivity field from observations of heat flow: the inverse
 * problem solved by differentiating through a whole PDE simulation.
 *
 *   ./build/example_heat_inverse [--devices N] [--iters N] [--lr LR] [--metrics FILE]
 *
 * A hidden diffusivity kappa(x, y) (16 Gaussian bumps over a background)
 * drives the heat equation on a 64 x 64 grid from 4 initial temperature
 * fields; the whole field is "measured" every 25 steps, 4 times (100 steps).
 * Starting from a flat kappa, Adam fits the bump amplitudes to the
 * measurements, with gradients of the mismatch taken through all 100 steps
 * (jx_grad of jx_scan, the step under jx_checkpoint). With --devices N the
 * grid is split over an N-device mesh (rows and columns), each device
 * stepping its block and swapping edge rows and columns with its neighbours
 * (jx_shard_map + jx_ppermute); the figures are the same for every N.
 * docs/tutorial-simulation.md walks through it.
 *
 * --metrics FILE writes one JSON line per iteration: step, loss,
 * param_error and kappa_error (relative L2 errors against the truth), time_s.
 * Exits 0 when kappa is recovered within 1% and the amplitudes within 3%
 * (relative L2 errors; 100 iterations reach 0.4% and 1.5%). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "heat.h"

/* what --iters 100 must reach (relative L2 errors against the truth) */
static const double KAPPA_TOLERANCE = 0.01, AMPLITUDE_TOLERANCE = 0.03;

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* ||a - b|| / ||b|| */
static double rel_error(jx_array *a, jx_array *b) {
  return sqrt(jx_item(jx_sum(jx_square(jx_sub(a, b)), JX_AXES(), 0)) /
              jx_item(jx_sum(jx_square(b), JX_AXES(), 0)));
}

static int fail(const char *what) {
  fprintf(stderr, "heat_inverse: %s: %s\n", what, jx_last_error());
  return 1;
}

typedef struct {
  FILE *metrics;
  double t0;
  int iters;
} progress_ctx;

static void report(void *ctx, const heat_progress *p) {
  progress_ctx *c = ctx;
  double t = now_s() - c->t0;
  if (p->iter % 10 == 0 || p->iter == c->iters)
    printf("iter %3d  loss %.3e  kappa error %6.3f%%  amplitude error %6.3f%%  (%.1f s)\n", p->iter,
           p->loss, 100 * p->kappa_error, 100 * p->param_error, t);
  if (c->metrics) {
    fprintf(c->metrics,
            "{\"step\": %d, \"loss\": %.9g, \"param_error\": %.9g, \"kappa_error\": %.9g, "
            "\"time_s\": %.3f}\n",
            p->iter, p->loss, p->param_error, p->kappa_error, t);
    fflush(c->metrics);
  }
}

int main(int argc, char **argv) {
  int devices = 1, iters = 100;
  double lr = 0.1;
  const char *metrics = NULL;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--devices") && i + 1 < argc)
      devices = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--iters") && i + 1 < argc)
      iters = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--lr") && i + 1 < argc)
      lr = atof(argv[++i]);
    else if (!strcmp(argv[i], "--metrics") && i + 1 < argc)
      metrics = argv[++i];
    else {
      fprintf(stderr, "usage: %s [--devices N] [--iters N] [--lr LR] [--metrics FILE]\n", argv[0]);
      return 2;
    }
  }
  if (devices < 1 || iters < 0) {
    fprintf(stderr, "heat_inverse: --devices must be >= 1 and --iters >= 0\n");
    return 2;
  }
  if (jx_set_cpu_device_count(devices)) return fail("--devices");
  heat_config cfg = {
      .n = 64, .batch = 4, .steps = 25, .nobs = 4, .bumps = 4, .r = 0.1, .k0 = 0.5, .width = 0.125};
  heat_sim *sim = heat_sim_create(&cfg, devices);
  if (!sim) return fail("simulator");
  int px, py;
  heat_sim_mesh_shape(sim, &px, &py);
  int nb = cfg.bumps * cfg.bumps;

  /* the hidden truth, the experiments and their measurements */
  jx_array *phi = jx_keep(heat_basis(&cfg, JX_F32));
  jx_array *a_true = jx_keep(jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(nb), 0, 1));
  jx_array *u0 = jx_keep(heat_initial(&cfg, JX_F32, 0));
  jx_array *obs, *a_fit = NULL;
  if (jx_call(heat_rollout_fn(sim), (jx_array *[]){u0, heat_kappa(&cfg, a_true, phi)}, &obs))
    return fail("measurements");
  obs = jx_keep(obs);
  printf("heat inverse problem: %dx%d grid on a %dx%d mesh of %d device(s), %d experiments, "
         "%d steps (r = %.2f), %d observations, %d kappa parameters\n",
         cfg.n, cfg.n, px, py, devices, cfg.batch, cfg.steps * cfg.nobs, cfg.r, cfg.nobs, nb);

  progress_ctx pc = {NULL, now_s(), iters};
  if (metrics && !(pc.metrics = fopen(metrics, "w"))) {
    fprintf(stderr, "heat_inverse: cannot write %s\n", metrics);
    return 1;
  }
  jx_array *a0 = jx_zeros(JX_F32, JX_SHAPE(nb));
  if (heat_fit(sim, phi, u0, obs, a0, a_true, iters, lr, report, &pc, &a_fit)) return fail("fit");
  double seconds = now_s() - pc.t0;
  if (pc.metrics) fclose(pc.metrics);

  float fit[64], truth[64];
  jx_read(a_fit, fit, sizeof(float) * (size_t)nb);
  jx_read(a_true, truth, sizeof(float) * (size_t)nb);
  printf("amplitudes (fitted / true):\n");
  for (int b = 0; b < nb; b++)
    printf("  %6.3f/%.3f%s", fit[b], truth[b], b % cfg.bumps == cfg.bumps - 1 ? "\n" : "");
  jx_array *kf = heat_kappa(&cfg, a_fit, phi), *kt = heat_kappa(&cfg, a_true, phi);
  double err = rel_error(kf, kt), aerr = rel_error(a_fit, a_true);
  double max_err = jx_item(jx_max(jx_abs(jx_sub(kf, kt)), JX_AXES(), 0));
  printf("kappa recovered within %.3f%% (relative L2; max abs error %.4f), amplitudes within "
         "%.3f%%, in %.1f s\n",
         100 * err, max_err, 100 * aerr, seconds);
  int ok = err <= KAPPA_TOLERANCE && aerr <= AMPLITUDE_TOLERANCE && !jx_last_status();
  if (!ok)
    printf("FAILED: above the tolerances (kappa %.1f%%, amplitudes %.1f%%)\n",
           100 * KAPPA_TOLERANCE, 100 * AMPLITUDE_TOLERANCE);

  jx_release(a_fit);
  jx_release(obs);
  jx_release(u0);
  jx_release(a_true);
  jx_release(phi);
  heat_sim_release(sim);
  jx_shutdown();
  return ok ? 0 : 1;
}
