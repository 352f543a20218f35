/* The profiler over processes: run by tests/mpi/run_mpi_test.sh under
 * `mpirun -np 2` with 2 CPU devices per process. A shard_map with a psum
 * over a mesh of all 4 devices runs 3 times under the profiler; each process
 * names its own trace path, and process 0 checks the one file it wrote:
 *   - valid JSON, a process track per process (pid 0 and 1, named
 *     "process P (host)"), device tracks 0..3 under their owners;
 *   - 3 psum events on every device with this device's bytes, and the
 *     clocks aligned: the k-th psum of every device overlaps every other
 *     device's k-th (no device can leave an all-reduce before all entered;
 *     that holds for collectives run where the program has them, so this
 *     test turns off starting them ahead, JX_ASYNC_COLLECTIVES=0: a
 *     collective started ahead is traced as the device's wait for it, which
 *     may begin after the exchange has already finished elsewhere);
 *   - a "function" event (the per-device body) on every device;
 *   - process 1 wrote no file of its own; the summary covers all 4 devices;
 *   - the results are the sums computed here.
 * Also: a start that fails on one process (process 0's path cannot be
 * written) fails on every process, naming process 0. With argument "die",
 * process 1 ends while profiling: process 0's stop fails within the
 * collective deadline naming process 1, its own events still written. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>
#include <jx/jx.h>

#include "mpi_check.h"

#include "debug/debug_internal.h"

enum { W = 64, STEPS = 3 };

static void body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum(jx_mul(in[0], in[0]), "i"); /* in: this device's row [1, W] */
}

static char *slurp(const char *path) {
  FILE *f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *s = malloc((size_t)n + 1);
  size_t got = fread(s, 1, (size_t)n, f);
  s[got] = '\0';
  fclose(f);
  return s;
}

static void trace_path(char *out, size_t cap, int process) {
  const char *dir = getenv("TMPDIR");
  snprintf(out, cap, "%s/jx_mpi_profile.p%d.json", dir && *dir ? dir : "/tmp", process);
}

/* Process 0: the merged trace. */
static void check_trace(const char *path) {
  int N = P * L;
  char *text = slurp(path);
  CHECK(text != NULL);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  CHECK(root != NULL);
  cJSON *evs = cJSON_GetObjectItem(root, "traceEvents");
  CHECK(cJSON_IsArray(evs));
  int procs[2] = {0}, dev_tracks[4] = {0}, psums[4] = {0}, functions[4] = {0}, misplaced = 0;
  double t0[4][STEPS], t1[4][STEPS];
  cJSON *e;
  cJSON_ArrayForEach(e, evs) {
    const char *ph = cJSON_GetStringValue(cJSON_GetObjectItem(e, "ph"));
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    const char *cat = cJSON_GetStringValue(cJSON_GetObjectItem(e, "cat"));
    cJSON *pidj = cJSON_GetObjectItem(e, "pid"), *tidj = cJSON_GetObjectItem(e, "tid");
    cJSON *args = cJSON_GetObjectItem(e, "args");
    if (!ph || !name || !pidj) {
      CHECK(!"an event without ph, name or pid");
      continue;
    }
    int pid = pidj->valueint, tid = tidj ? tidj->valueint : -1;
    if (!strcmp(ph, "M") && !strcmp(name, "process_name") && pid >= 0 && pid < 2) {
      char want[32];
      snprintf(want, sizeof want, "process %d (", pid);
      const char *label = cJSON_GetStringValue(cJSON_GetObjectItem(args, "name"));
      CHECK(label && !strncmp(label, want, strlen(want)));
      procs[pid]++;
    }
    if (!strcmp(ph, "M") && !strcmp(name, "thread_name") && tid >= 0 && tid < N) {
      char want[32];
      snprintf(want, sizeof want, "device %d", tid);
      CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(args, "name")), want));
      dev_tracks[tid]++;
    }
    if (tid >= 0 && tid < N && pid != tid / L) misplaced++;
    if (!cat || tid < 0 || tid >= N) continue;
    if (!strcmp(cat, "collective") && !strcmp(name, "psum")) {
      CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "bytes")) == W * 4);
      if (psums[tid] < STEPS) {
        t0[tid][psums[tid]] = cJSON_GetNumberValue(cJSON_GetObjectItem(e, "ts"));
        t1[tid][psums[tid]] =
            t0[tid][psums[tid]] + cJSON_GetNumberValue(cJSON_GetObjectItem(e, "dur"));
      }
      psums[tid]++;
    }
    if (!strcmp(cat, "function")) {
      CHECK(cJSON_GetNumberValue(cJSON_GetObjectItem(args, "estimated_peak_bytes")) > 0);
      functions[tid]++;
    }
  }
  CHECK(procs[0] == 1 && procs[1] == 1);
  CHECK(misplaced == 0);
  for (int d = 0; d < N; d++) {
    CHECK(dev_tracks[d] == 1);
    CHECK(psums[d] == STEPS);
    CHECK(functions[d] == STEPS);
  }
  /* events are in process order, each process's in its own order: sort each device's psums */
  for (int d = 0; d < N; d++)
    for (int a = 0; a < STEPS; a++)
      for (int b = a + 1; b < STEPS; b++)
        if (t0[d][b] < t0[d][a]) {
          double x = t0[d][a], y = t1[d][a];
          t0[d][a] = t0[d][b];
          t1[d][a] = t1[d][b];
          t0[d][b] = x;
          t1[d][b] = y;
        }
  for (int k = 0; k < STEPS && failures == 0; k++)
    for (int a = 0; a < N; a++)
      for (int b = 0; b < N; b++) /* 0.002 us: the file's rounding */
        if (t1[a][k] + 0.002 < t0[b][k]) {
          fprintf(stderr, "psum %d: device %d left at %.3f us before device %d entered at %.3f\n",
                  k, a, t1[a][k], b, t0[b][k]);
          failures++;
        }
  cJSON_Delete(root);
  free(text);
}

static void profile_shard_map(void) {
  int N = P * L;
  char mine[512], p0[512], p1[512];
  trace_path(mine, sizeof mine, me);
  trace_path(p0, sizeof p0, 0);
  trace_path(p1, sizeof p1, 1);
  if (me == 0) {
    unlink(p0);
    unlink(p1);
  }
  CHECK(jx_sync_global_devices("profiler: clean") == JX_OK);
  jx_scope_begin();
  float xv[4 * W];
  double sum[W] = {0};
  for (int r = 0; r < N; r++)
    for (int j = 0; j < W; j++) {
      xv[r * W + j] = (float)((r * 5 + j * 3) % 7) - 3;
      sum[j] += (double)xv[r * W + j] * xv[r * W + j];
    }
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(N, W), xv);
  const char *ax[1] = {"i"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), ax);
  jx_fn *f = jx_fn_create("squares", 1, 1, body, NULL);
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"i"}, (const char *[]){""});
  CHECK(jx_profiler_start(mine) == JX_OK);
  for (int k = 0; k < STEPS; k++) {
    jx_array *o[1];
    CHECK(jx_call(s, &x, o) == JX_OK);
    float got[W];
    CHECK(jx_read(o[0], got, sizeof got) == JX_OK);
    for (int j = 0; j < W; j++) CHECK(got[j] == (float)sum[j]);
  }
  CHECK(jx_profiler_stop() == JX_OK);
  CHECK(jx_sync_global_devices("profiler: stopped") == JX_OK); /* process 1 is done writing */
  if (me == 0) {
    check_trace(p0);
    CHECK(access(p1, F_OK) != 0); /* process 1 wrote no file of its own */
    for (int d = 0; d < N; d++) { /* the summary covers every process's devices */
      jx_profile_split sp;
      CHECK(jx_profiler_last_split(d, &sp) == 0 && sp.comm > 0 && sp.compute > 0);
    }
    unlink(p0);
  }
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
  jx_scope_end();
}

/* A start that one process cannot make fails on all of them. */
static void start_fails_everywhere(void) {
  char mine[512];
  trace_path(mine, sizeof mine, me);
  jx_status st = jx_profiler_start(me == 0 ? "/nonexistent-dir/trace.json" : mine);
  CHECK(st == (me == 0 ? JX_ERR_IO : JX_ERR_INVALID_ARGUMENT));
  if (me != 0)
    CHECK(strstr(jx_last_error(), "process 0: cannot write '/nonexistent-dir/trace.json'"));
  jx_clear_error();
  CHECK(jx_profiler_stop() == JX_ERR_INVALID_ARGUMENT); /* none runs */
  jx_clear_error();
}

/* "die": process 1 ends while profiling; process 0's stop must fail within
 * the deadline naming process 1 (run_mpi_test.sh checks the message and the
 * exit status), and still write its own events. */
static int die_test(void) {
  char path[512];
  trace_path(path, sizeof path, me);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P * L), (const char *[]){"i"});
  jx_fn *f = jx_fn_create("squares", 1, 1, body, NULL);
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"i"}, (const char *[]){""});
  jx_array *x = jx_ones(JX_F32, JX_SHAPE(P * L, W)), *o[1];
  CHECK(jx_profiler_start(path) == JX_OK);
  CHECK(jx_call(s, &x, o) == JX_OK);
  if (me == 1) {
    fprintf(stderr, "process 1: exiting before jx_profiler_stop\n");
    fflush(stderr);
    _exit(0);
  }
  jx_status st = jx_profiler_stop();
  char *text = slurp(path);
  cJSON *root = text ? cJSON_Parse(text) : NULL;
  int own = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(root, "traceEvents")) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(e, "name"));
    own += name && !strcmp(name, "psum") && cJSON_GetObjectItem(e, "pid")->valueint == 0;
  }
  cJSON_Delete(root);
  free(text);
  unlink(path);
  if (own != L) /* the script looks for the line below: it is printed only when the trace holds */
    fprintf(stderr, "process 0: the trace holds %d of its %d psums\n", own, L);
  else
    fprintf(stderr, "process %d: the collective failed: status %d: %s\n", me, (int)st,
            jx_last_error());
  jx_distributed_shutdown(); /* MPI_Abort after a failed collective */
  return 3;
}

int main(int argc, char **argv) {
  setenv("JX_ASYNC_COLLECTIVES", "0", 1); /* before the first collective reads it */
  if (mpi_check_begin()) return 2;
  CHECK(P == 2 && L == 2);
  if (!failures && argc > 1 && strcmp(argv[1], "die") == 0) return die_test();
  if (!failures) {
    start_fails_everywhere();
    profile_shard_map();
  }
  return mpi_check_end();
}
