/* `jx train --stages 2` as a user runs it: the GPT pipelined over two
 * stages with 1F1B gives the losses of the same training on one device
 * (from --metrics), and prints the schedule it runs. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

enum { STEPS = 2 };

static char dir[256];

/* Runs jx train on a tiny model with extra flags; reads the losses from
 * --metrics into loss[step - 1] and the output into log (cap bytes). */
static void train(const char *extra, double *loss, char *log, size_t cap) {
  char cmd[2048], metrics[300], out[300];
  snprintf(metrics, sizeof metrics, "%s/metrics.jsonl", dir);
  snprintf(out, sizeof out, "%s/log.txt", dir);
  snprintf(cmd, sizeof cmd,
           "%s train --layers 2 --width 16 --heads 2 --context 8 --batch 4 --steps %d "
           "--sample 0 --data %s --metrics %s %s > %s 2>&1",
           JX_CLI, STEPS, JX_CORPUS, metrics, extra, out);
  int rc = system(cmd);
  FILE *f = fopen(out, "r");
  size_t n = f ? fread(log, 1, cap - 1, f) : 0;
  log[n] = 0;
  if (f) fclose(f);
  if (rc != 0) fprintf(stderr, "%s\n", log);
  assert_int_equal(rc, 0);
  f = fopen(metrics, "r");
  assert_non_null(f);
  char line[512];
  while (fgets(line, sizeof line, f)) {
    int step;
    double l;
    if (sscanf(line, "{\"step\": %d, \"loss\": %lf", &step, &l) == 2 && step >= 1 && step <= STEPS)
      loss[step - 1] = l;
  }
  fclose(f);
}

static void stages_give_the_same_losses(void **state) {
  (void)state;
  double one[STEPS] = {0}, piped[STEPS] = {0};
  static char log[1 << 16];
  train("--devices 1", one, log, sizeof log);
  train("--devices 2 --stages 2 --microbatches 2 --schedule 1f1b", piped, log, sizeof log);
  assert_non_null(strstr(log, "mesh stage=2,data=1"));
  assert_non_null(strstr(log, "pipeline: 2 stages, 2 microbatches, 1F1B: 6 ticks, the schedule "
                              "idle 33.3% of stage time"));
  for (int s = 0; s < STEPS; s++) {
    if (!(fabs(one[s] - piped[s]) <= 2e-5 * fabs(one[s])))
      fprintf(stderr, "step %d: loss %.7g through the pipeline, %.7g on one device\n", s + 1,
              piped[s], one[s]);
    assert_true(one[s] > 1 && fabs(one[s] - piped[s]) <= 2e-5 * fabs(one[s]));
  }
}

static void stages_must_divide_the_layers(void **state) {
  (void)state;
  char cmd[1024];
  snprintf(cmd, sizeof cmd,
           "%s train --layers 3 --width 16 --heads 2 --context 8 --batch 4 --steps 1 --sample 0 "
           "--data %s --devices 2 --stages 2 > %s/bad.txt 2>&1",
           JX_CLI, JX_CORPUS, dir);
  assert_int_not_equal(system(cmd), 0);
  snprintf(cmd, sizeof cmd, "grep -q '3 layers do not split evenly into 2 stages' %s/bad.txt", dir);
  assert_int_equal(system(cmd), 0);
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/jx-pipeline-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(stages_give_the_same_losses),
      cmocka_unit_test(stages_must_divide_the_layers),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
  return rc;
}
