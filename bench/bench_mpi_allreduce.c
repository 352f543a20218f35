/* All-reduce over processes: jx's hierarchical engine (a mesh axis of one
 * device per process, through the MPI plugin's thread) against a plain
 * MPI_Allreduce on the same buffers, f32 sum, 1 KiB .. 64 MiB.
 *
 *   JX_NUM_CPU_DEVICES=1 mpirun -np 2 build/bench/bench_mpi_allreduce [min_bytes [max_bytes]]
 *
 * (as root: --allow-run-as-root). Prints one line per size: the median time
 * of each and jx's speed relative to MPI (>= 1: jx is as fast); first it checks
 * that jx's result equals MPI's bit for bit (exact sums). The program
 * initializes MPI itself (MPI_THREAD_MULTIPLE), so its own MPI calls and
 * jx's MPI thread may coexist. */
#define _POSIX_C_SOURCE 200809L
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jx/jx.h>

#include "parallel/comm.h"
#include "parallel/mesh.h"

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  if (provided < MPI_THREAD_MULTIPLE) {
    fprintf(stderr, "bench_mpi_allreduce: this MPI has no MPI_THREAD_MULTIPLE\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  if (jx_distributed_initialize(NULL) != JX_OK) {
    fprintf(stderr, "%s\n", jx_last_error());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  int me = jx_process_index(), P = jx_process_count(), L = jx_local_device_count();
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P * L), (const char *[]){"i"});
  int axis = 0, rank = 0;
  if (L != 1) {
    if (!me) fprintf(stderr, "run with JX_NUM_CPU_DEVICES=1 (one device per process)\n");
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  jx_comm *c = jx_mesh_comm(m, &axis, 1, me, &rank);
  if (!me)
    printf("%10s %12s %12s %8s   (%d processes, f32 sum, median)\n", "bytes", "jx us", "MPI us",
           "jx/MPI", P);
  /* optional: the smallest and largest sizes in bytes (default 1 KiB .. 64 MiB) */
  size_t lo = argc > 1 ? (size_t)atol(argv[1]) : 1024,
         hi = argc > 2 ? (size_t)atol(argv[2]) : (size_t)64 << 20;
  for (size_t bytes = lo < 4 ? 4 : lo; bytes <= hi; bytes *= 4) {
    size_t n = bytes / 4;
    float *a = malloc(bytes), *b = malloc(bytes);
    /* integers (a prime period, and per process): every sum is exact, so jx's result
     * must equal MPI's bit for bit, wherever each block was reduced */
    for (size_t i = 0; i < n; i++) a[i] = b[i] = (float)(i % 251 + (size_t)me);
    int iters = (int)(((size_t)512 << 20) / bytes);
    if (iters > 2000) iters = 2000;
    if (iters < 5) iters = 5;
    double *tj = malloc(sizeof *tj * (size_t)iters), *tm = malloc(sizeof *tm * (size_t)iters);
    for (int w = 0; w < 2; w++) { /* warm up both paths */
      jx_comm_all_reduce(c, rank, a, a, n, JX_F32, JX_REDUCE_SUM, 0);
      MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      if (w == 0 && memcmp(a, b, n * sizeof *a) != 0) {
        fprintf(stderr, "process %d: jx's all-reduce of %zu bytes differs from MPI's\n", me, bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
    }
    for (int it = 0; it < iters; it++) { /* alternate, so both see the same machine */
      MPI_Barrier(MPI_COMM_WORLD);
      double t0 = now();
      if (jx_comm_all_reduce(c, rank, a, a, n, JX_F32, JX_REDUCE_SUM, 0)) {
        fprintf(stderr, "%s\n", jx_last_error());
        MPI_Abort(MPI_COMM_WORLD, 1);
      }
      tj[it] = now() - t0;
      MPI_Barrier(MPI_COMM_WORLD);
      t0 = now();
      MPI_Allreduce(MPI_IN_PLACE, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      tm[it] = now() - t0;
    }
    qsort(tj, (size_t)iters, sizeof *tj, cmp);
    qsort(tm, (size_t)iters, sizeof *tm, cmp);
    double j = tj[iters / 2], mp = tm[iters / 2];
    /* the slowest process decides */
    MPI_Allreduce(MPI_IN_PLACE, &j, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    MPI_Allreduce(MPI_IN_PLACE, &mp, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    if (!me) printf("%10zu %12.1f %12.1f %8.2f\n", bytes, j * 1e6, mp * 1e6, mp / j);
    fflush(stdout);
    free(a), free(b), free(tj), free(tm);
  }
  jx_mesh_release(m);
  jx_distributed_shutdown(); /* stops jx's MPI thread; MPI is the program's to finalize */
  MPI_Finalize();
  return 0;
}
