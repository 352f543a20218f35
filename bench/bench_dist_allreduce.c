/* All-reduce over processes through jx (a mesh axis of one device per
 * process, comm_hier.c over whichever engine joined the job: the MPI plugin
 * under mpirun, shared memory and Gloo when the processes meet at a
 * coordinator), f32 sum,
 * 1 KiB .. 64 MiB; and the time a job takes to join. bench/dist_allreduce.py
 * runs it under both engines in alternating rounds and compares them.
 *
 *   JX_NUM_CPU_DEVICES=1 mpirun -np 2 build/bench/bench_dist_allreduce [a2a] [min_bytes
 * [max_bytes]]
 *   JX_NUM_CPU_DEVICES=1 JX_COORDINATOR_ADDRESS=127.0.0.1:5000 JX_NUM_PROCESSES=2 \
 *     JX_PROCESS_ID=i build/bench/bench_dist_allreduce ...   (one per process)
 *
 * Prints on process 0 one line per size: bytes, the median time in us (the
 * slowest process's median), after checking the result (exact sums of
 * integers). With "join" as the only argument: the seconds from the first
 * process's start to the last one's joining (clocks of one host). With
 * "a2a" first: all-to-all (jx_comm_all_to_all) of that many bytes sent by
 * each process, a P-th to each, checked element by element. */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "parallel/comm.h"
#include "parallel/mesh.h"

static double wall_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
  fprintf(stderr, "bench_dist_allreduce: %s: %s\n", what, jx_last_error());
  jx_distributed_shutdown();
  return 1;
}

int main(int argc, char **argv) {
  double start = wall_s();
  if (jx_distributed_initialize(NULL) != JX_OK) return fail("joining");
  double joined = wall_s();
  int me = jx_process_index(), P = jx_process_count();
  if (jx_local_device_count() != 1) {
    if (!me) fprintf(stderr, "run with JX_NUM_CPU_DEVICES=1 (one device per process)\n");
    jx_distributed_shutdown();
    return 1;
  }
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P), (const char *[]){"i"});
  int axis = 0, rank = 0;
  jx_comm *c = jx_mesh_comm(m, &axis, 1, me, &rank);
  if (!c) return fail("the mesh's communicator");
  if (argc == 2 && !strcmp(argv[1], "join")) {
    double span[2] = {-start, joined}; /* max of each: the first start, the last join */
    if (jx_comm_all_reduce(c, rank, span, span, 2, JX_F64, JX_REDUCE_MAX, 0)) return fail("join");
    if (!me) printf("join %d %.4f\n", P, span[1] + span[0]);
  }
  int a2a = argc > 1 && !strcmp(argv[1], "a2a");
  if (a2a) argc--, argv++;
  size_t lo = argc > 1 && strcmp(argv[1], "join") ? (size_t)atol(argv[1]) : 1024,
         hi = argc > 2 ? (size_t)atol(argv[2]) : (size_t)64 << 20;
  for (size_t bytes = lo < 4 ? 4 : lo; argc != 2 || strcmp(argv[1], "join"); bytes *= 4) {
    if (bytes > hi) break;
    size_t n = bytes / 4;
    float *a = malloc(bytes);
    int iters = (int)(((size_t)256 << 20) / bytes);
    if (iters > 1000) iters = 1000;
    if (iters < 5) iters = 5;
    double *t = malloc(sizeof *t * (size_t)iters);
    if (a2a) {
      size_t each = n / (size_t)P; /* elements to each peer */
      float *b = malloc(bytes);
      for (size_t i = 0; i < each * (size_t)P; i++) a[i] = (float)(me * 1000 + (int)(i % 997));
      if (jx_comm_all_to_all(c, rank, a, b, each, JX_F32, 0)) return fail("all_to_all");
      for (size_t i = 0; i < each * (size_t)P; i++)
        if (b[i] != (float)((int)(i / each) * 1000 + (int)((me * each + i % each) % 997))) {
          fprintf(stderr, "process %d: the all-to-all of %zu bytes is wrong at %zu\n", me, bytes,
                  i);
          return fail("checking");
        }
      for (int it = 0; it < iters; it++) {
        if (jx_comm_barrier(c, rank, 0)) return fail("barrier");
        double t0 = bench_now_s();
        if (jx_comm_all_to_all(c, rank, a, b, each, JX_F32, 0)) return fail("all_to_all");
        t[it] = bench_now_s() - t0;
      }
      free(b);
      goto report;
    }
    /* integers (a prime period, and per process): every sum is exact */
    for (size_t i = 0; i < n; i++) a[i] = (float)(i % 251 + (size_t)me);
    if (jx_comm_all_reduce(c, rank, a, a, n, JX_F32, JX_REDUCE_SUM, 0)) return fail("all_reduce");
    for (size_t i = 0; i < n; i++)
      if (a[i] != (float)(P * (int)(i % 251) + P * (P - 1) / 2)) {
        fprintf(stderr, "process %d: the all-reduce of %zu bytes is wrong at %zu\n", me, bytes, i);
        return fail("checking");
      }
    for (int it = 0; it < iters; it++) {
      if (jx_comm_barrier(c, rank, 0)) return fail("barrier");
      double t0 = bench_now_s();
      if (jx_comm_all_reduce(c, rank, a, a, n, JX_F32, JX_REDUCE_SUM, 0)) return fail("all_reduce");
      t[it] = bench_now_s() - t0;
    }
  report:
    qsort(t, (size_t)iters, sizeof *t, bench_cmp_double);
    double med = t[iters / 2]; /* the slowest process decides */
    if (jx_comm_all_reduce(c, rank, &med, &med, 1, JX_F64, JX_REDUCE_MAX, 0)) return fail("max");
    if (!me) printf("%zu %.2f\n", bytes, med * 1e6);
    fflush(stdout);
    free(a), free(t);
  }
  jx_mesh_release(m);
  return jx_distributed_shutdown() ? 1 : 0;
}
