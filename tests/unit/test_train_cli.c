/* The main job, `jx train`, run as a user runs it: the same training on 1
 * device, on 4 devices as data=2 x model=2, and with FSDP gives the same
 * losses; a run stopped at step 4 on 4 devices and resumed on 2 devices
 * continues the uninterrupted trajectory. Losses come from --metrics. A
 * running job's metrics are on disk line by line (a kill -9 keeps them) and
 * its --ckpt directory is its own until it ends, however it ends. And
 * `jx info` lists devices, processes and the MPI plugin. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, gethostname, nanosleep */
#include <math.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

enum { STEPS = 8 };

static char dir[256];

/* Runs jx train with the common small model plus extra flags; reads the
 * losses of steps first..STEPS from the metrics file into loss[step-1]. */
static void train(const char *extra, const char *metrics, double *loss) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd,
           "%s train --layers 1 --width 32 --heads 2 --context 16 --batch 8 --steps %d "
           "--sample 0 --data %s --metrics %s %s > %s/log.txt 2>&1",
           JX_CLI, STEPS, JX_CORPUS, metrics, extra, dir);
  int rc = system(cmd);
  if (rc != 0) {
    char log[300];
    snprintf(log, sizeof log, "cat %s/log.txt >&2", dir);
    if (system(log) != 0) fprintf(stderr, "(no log)\n");
  }
  assert_int_equal(rc, 0);
  FILE *f = fopen(metrics, "r");
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

static void assert_same_losses(const double *a, const double *b, int from, const char *what) {
  for (int s = from; s < STEPS; s++) {
    if (!(fabs(a[s] - b[s]) <= 2e-5 * fabs(a[s])))
      fprintf(stderr, "%s: step %d loss %.7g vs %.7g\n", what, s + 1, b[s], a[s]);
    assert_true(fabs(a[s] - b[s]) <= 2e-5 * fabs(a[s]));
  }
}

static void meshes_give_the_same_losses(void **state) {
  (void)state;
  double one[STEPS] = {0}, grid[STEPS] = {0}, fsdp[STEPS] = {0};
  char m[300];
  snprintf(m, sizeof m, "%s/one.jsonl", dir);
  train("--devices 1", m, one);
  snprintf(m, sizeof m, "%s/grid.jsonl", dir);
  train("--devices 4 --mesh data=2,model=2", m, grid);
  snprintf(m, sizeof m, "%s/fsdp.jsonl", dir);
  train("--devices 4 --fsdp", m, fsdp);
  assert_true(one[STEPS - 1] < one[0] - 0.3); /* it learns */
  assert_same_losses(one, grid, 0, "data=2,model=2");
  assert_same_losses(one, fsdp, 0, "fsdp");
}

static void resume_on_fewer_devices_continues(void **state) {
  (void)state;
  double whole[STEPS] = {0}, resumed[STEPS] = {0};
  char m[300], flags[600];
  snprintf(m, sizeof m, "%s/whole.jsonl", dir);
  train("--devices 4 --mesh data=2,model=2", m, whole);
  snprintf(m, sizeof m, "%s/part.jsonl", dir);
  snprintf(flags, sizeof flags, "--devices 4 --mesh data=2,model=2 --stop-at 4 --ckpt %s/ck", dir);
  train(flags, m, resumed);
  snprintf(flags, sizeof flags, "--devices 2 --mesh data=2 --resume --ckpt %s/ck", dir);
  train(flags, m, resumed); /* steps 5.. appended by the resumed run */
  assert_same_losses(whole, resumed, 0, "stopped at 4 on 4 devices, resumed on 2");
}

/* The complete lines of path (those ending in a newline) and whether the
 * file ends with one (an empty file does). */
static int metrics_lines(const char *path, int *ends_whole) {
  FILE *f = fopen(path, "r");
  int n = 0, c, last = '\n';
  while (f && (c = fgetc(f)) != EOF) {
    n += c == '\n';
    last = c;
  }
  if (f) fclose(f);
  *ends_whole = last == '\n';
  return n;
}

/* A job killed with SIGKILL mid-run: its metrics file holds every step's
 * line up to the kill, each whole and in order; while it ran, a second job
 * on the same --ckpt was refused; once it is dead, the directory is free. */
static void a_running_job_keeps_metrics_and_its_checkpoint_dir(void **state) {
  (void)state;
  char live[300], log[300], cmd[2048];
  snprintf(live, sizeof live, "%s/live.jsonl", dir);
  snprintf(log, sizeof log, "%s/live-log.txt", dir);
  snprintf(cmd, sizeof cmd,
           "exec %s train --layers 1 --width 32 --heads 2 --context 16 --batch 8 --steps 100000 "
           "--sample 0 --data %s --metrics %s --ckpt %s/shared --ckpt-every 1000000 > %s 2>&1",
           JX_CLI, JX_CORPUS, live, dir, log);
  fflush(NULL);
  pid_t job = fork();
  if (job == 0) {
    execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
    _exit(127);
  }
  int whole = 0, lines = 0, status = 0;
  for (int i = 0; i < 1200 && lines < 3; i++) { /* up to 60 s */
    nanosleep(&(struct timespec){0, 50000000}, NULL);
    lines = metrics_lines(live, &whole);
    if (waitpid(job, &status, WNOHANG) != 0) { /* it must still run */
      snprintf(cmd, sizeof cmd, "cat %s >&2", log);
      if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
      fail_msg("jx train ended before it was killed");
    }
  }
  printf("%d metrics lines on disk while the job runs\n", lines);
  assert_true(lines >= 3);

  snprintf(cmd, sizeof cmd,
           "%s train --steps 2 --sample 0 --data %s --ckpt %s/shared > %s/second.txt 2>&1", JX_CLI,
           JX_CORPUS, dir, dir);
  assert_int_not_equal(system(cmd), 0);
  char second[300], text[1024] = "";
  snprintf(second, sizeof second, "%s/second.txt", dir);
  FILE *f = fopen(second, "r");
  assert_non_null(f);
  size_t n = fread(text, 1, sizeof text - 1, f);
  text[n] = 0;
  fclose(f);
  if (!strstr(text, "is in use by another running job")) fprintf(stderr, "%s", text);
  assert_non_null(strstr(text, "is in use by another running job"));

  assert_int_equal(kill(job, SIGKILL), 0);
  assert_int_equal(waitpid(job, &status, 0), job);
  lines = metrics_lines(live, &whole);
  assert_true(whole);
  f = fopen(live, "r");
  char line[512];
  for (int step = 1; fgets(line, sizeof line, f); step++) {
    int got = 0;
    assert_int_equal(sscanf(line, "{\"step\": %d,", &got), 1);
    assert_int_equal(got, step);
  }
  fclose(f);
  printf("%d whole lines after kill -9\n", lines);

  double loss[STEPS] = {0};
  char flags[400], m[300];
  snprintf(flags, sizeof flags, "--ckpt %s/shared", dir);
  snprintf(m, sizeof m, "%s/after.jsonl", dir);
  train(flags, m, loss); /* the dead job's lock is gone */
  assert_true(loss[STEPS - 1] > 0);
}

/* Runs `env jx info`; its output in out (cap bytes). */
static void info(const char *env, char *out, size_t cap) {
  char cmd[1024], path[300];
  snprintf(path, sizeof path, "%s/info.txt", dir);
  snprintf(cmd, sizeof cmd, "env %s %s info > %s 2>&1", env, JX_CLI, path);
  int rc = system(cmd);
  FILE *f = fopen(path, "r");
  assert_non_null(f);
  size_t n = fread(out, 1, cap - 1, f);
  out[n] = 0;
  fclose(f);
  if (rc != 0) fprintf(stderr, "%s", out);
  assert_int_equal(rc, 0);
}

static void assert_has(const char *text, const char *want) {
  if (!strstr(text, want)) fprintf(stderr, "no '%s' in:\n%s", want, text);
  assert_non_null(strstr(text, want));
}

/* jx info on one process: devices, this host, the MPI plugin's state
 * (tests/mpi/run_mpi_train.sh checks it on 2 processes). */
static void info_lists_devices_processes_and_plugin(void **state) {
  (void)state;
  char out[4096], host[256] = "", want[512];
  gethostname(host, sizeof host - 1);
  info("JX_NUM_CPU_DEVICES=3", out, sizeof out);
  assert_has(out, "devices: 3 (cpu) in all, 3 per process");
  assert_has(out, "processes: 1");
  snprintf(want, sizeof want, "process 0 on %s: devices 0..2", host);
  assert_has(out, want);
  assert_has(out, "multi-process (MPI): ");
  info("JX_MPI_PLUGIN=/nonexistent/libjx_mpi.so", out, sizeof out);
  assert_has(out, "multi-process (MPI): no plugin: JX_MPI_PLUGIN=/nonexistent/libjx_mpi.so "
                  "cannot be opened");
}

int main(void) {
  snprintf(dir, sizeof dir, "%s/jx-train-XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
  if (!mkdtemp(dir)) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(meshes_give_the_same_losses),
      cmocka_unit_test(resume_on_fewer_devices_continues),
      cmocka_unit_test(info_lists_devices_processes_and_plugin),
      cmocka_unit_test(a_running_job_keeps_metrics_and_its_checkpoint_dir),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  char cmd[300];
  snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
  if (rc == 0 && system(cmd) != 0) rc = 1;
  return rc;
}
