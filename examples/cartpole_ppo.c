/* PPO on CartPole-v1, data-parallel over CPU devices (examples/cartpole.h
 * has the environment and the trainer; docs/tutorial-rl.md walks through it).
 *
 *   ./build/example_cartpole_ppo [--devices N] [--envs N] [--steps T] [--iterations N]
 *                                [--lr X] [--seed S] [--metrics FILE]
 *
 * Stops when the last 100 episodes average 475 or more (CartPole-v1's
 * "solved"), or after --iterations. --metrics writes one JSON object per
 * iteration. Exit status 0 when solved. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cartpole.h"

typedef struct {
  FILE *metrics;
  int devices;
} run;

static int progress(void *ctx, const cartpole_ppo_metrics *m) {
  run *r = ctx;
  if (m->iteration == 1 || m->iteration % 10 == 0 || m->mean_return >= 475)
    printf("iter %4d  steps %8lld  episodes %6lld  return (last 100) %6.1f  loss %8.4f  "
           "entropy %.3f  %6.1f s\n",
           m->iteration, (long long)m->env_steps, (long long)m->total_episodes, m->mean_return,
           m->loss, m->entropy, m->seconds);
  fflush(stdout);
  if (r->metrics) {
    fprintf(r->metrics,
            "{\"iteration\": %d, \"devices\": %d, \"env_steps\": %lld, \"episodes\": %d, "
            "\"total_episodes\": %lld, \"iter_return\": %.4f, \"mean_return\": %.4f, "
            "\"loss\": %.6g, \"pg_loss\": %.6g, \"value_loss\": %.6g, \"entropy\": %.6g, "
            "\"seconds\": %.3f}\n",
            m->iteration, r->devices, (long long)m->env_steps, m->episodes,
            (long long)m->total_episodes, m->iter_return, m->mean_return, m->loss, m->pg_loss,
            m->value_loss, m->entropy, m->seconds);
    fflush(r->metrics);
  }
  return 0;
}

int main(int argc, char **argv) {
  cartpole_ppo_config c = cartpole_ppo_config_default();
  const char *metrics = NULL;
  for (int i = 1; i < argc; i += 2) { /* --option value */
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) goto usage;
    if (!strcmp(a, "--devices"))
      c.devices = atoi(v);
    else if (!strcmp(a, "--envs"))
      c.envs = atoi(v);
    else if (!strcmp(a, "--steps"))
      c.steps = atoi(v);
    else if (!strcmp(a, "--iterations"))
      c.iterations = atoi(v);
    else if (!strcmp(a, "--lr"))
      c.lr = atof(v);
    else if (!strcmp(a, "--seed"))
      c.seed = strtoull(v, NULL, 10);
    else if (!strcmp(a, "--metrics"))
      metrics = v;
    else
      goto usage;
  }
  if (jx_set_cpu_device_count(c.devices)) {
    fprintf(stderr, "cartpole_ppo: --devices: %s\n", jx_last_error());
    return 2;
  }
  run r = {NULL, c.devices};
  if (metrics && !(r.metrics = fopen(metrics, "w"))) {
    perror(metrics);
    return 2;
  }
  printf("PPO on CartPole-v1: %d environments on %d device(s), %d steps per rollout, "
         "%d epochs x %d minibatches\n",
         c.envs, c.devices, c.steps, c.epochs, c.minibatches);
  cartpole_ppo_metrics last;
  jx_status st = cartpole_ppo_train(&c, progress, &r, &last);
  if (r.metrics) fclose(r.metrics);
  if (st) {
    fprintf(stderr, "cartpole_ppo: %s\n", jx_last_error());
    jx_shutdown();
    return 1;
  }
  int solved = last.total_episodes >= 100 && last.mean_return >= c.solved_return;
  printf("%s after %d iterations, %lld environment steps, %.1f s: mean return of the last 100 "
         "episodes %.1f\n",
         solved ? "solved" : "not solved", last.iteration, (long long)last.env_steps, last.seconds,
         last.mean_return);
  jx_shutdown();
  return solved ? 0 : 1;
usage:
  fprintf(stderr,
          "usage: %s [--devices N] [--envs N] [--steps T] [--iterations N] [--lr X] "
          "[--seed S] [--metrics FILE]\n",
          argv[0]);
  return 2;
}
