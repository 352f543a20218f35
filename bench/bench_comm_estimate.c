/* The collectives' price against their cost, per kind and size: on a 1-D
 * mesh "data" of CPU devices, per-device programs (jx_shard_map) chain
 * CHAIN collectives of one kind on a block of B bytes per device, each
 * result the next one's operand, so that every intermediate is freed as a
 * step's are:
 *
 *   psum                  x = psum(x)
 *   all_to_all            x = all_to_all(x, split 0, concat 0)
 *   all_gather + slice    x = all_gather(x, dim 0)[my rows' count]
 *   psum_scatter + tile   x = tile(psum_scatter(x, dim 0), n)
 *
 * (the slice and the tile give the block its shape back; the estimate
 * prices them as the step's copies). A program that returns its block is
 * the baseline: the cost of a call. A collective's cost is the chain's time
 * less the baseline's, over CHAIN; its price the same difference of the
 * estimates (jx_sharding_estimate_of: compute and communication at the
 * mesh's figures, as the automatic planner prices a step).
 *
 *   bench_comm_estimate [DEVICES] [ROUNDS]
 *
 * A program's time is the least of ROUNDS calls after two: its wall time
 * where every device has a core, else its CPU time (every thread) over the
 * cores, the time the cores take through the devices' work (as the
 * figures are measured when devices time-share the cores). */
#include "bench_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <jx/jx.h>

enum { CHAIN = 8, COLS = 256, KINDS = 5 };

typedef struct {
  int kind; /* 0: the baseline, else a row of kind_names */
  int ndev;
} chain_ctx;

static const char *kind_names[KINDS] = {"baseline", "psum", "all_to_all", "all_gather + slice",
                                        "psum_scatter + tile"};

static void chain_body(void *c, jx_array *const *in, jx_array **out) {
  const chain_ctx *k = c;
  jx_array *x = in[0];
  int64_t rows = jx_shape_of(x).dims[0];
  if (k->kind == 0) {
    out[0] = x;
    return;
  }
  for (int s = 0; s < CHAIN; s++) {
    switch (k->kind) {
    case 1: x = jx_psum(x, "data"); break;
    case 2: x = jx_all_to_all(x, "data", 0, 0); break;
    case 3:
      x = jx_slice(jx_all_gather(x, "data", 0, 1), JX_SHAPE(0, 0), JX_SHAPE(rows, COLS),
                   JX_SHAPE(1, 1));
      break;
    case 4: x = jx_tile(jx_psum_scatter(x, "data", 0, 1), JX_SHAPE(k->ndev, 1)); break;
    }
  }
  out[0] = x;
}

/* The least time of rounds calls of j after two (see the header). */
static double program_time(jx_fn *j, jx_array **in, int rounds, int time_shared, long cores) {
  double best = 1e30;
  for (int r = 0; r < rounds + 2; r++) {
    jx_scope_begin();
    double t0 = bench_now_ns(), c0 = bench_cpu_ns();
    jx_array *out = NULL;
    if (jx_call(j, in, &out) || jx_block_until_ready(out)) {
      fprintf(stderr, "bench_comm_estimate: %s\n", jx_last_error());
      exit(1);
    }
    double t = time_shared ? (bench_cpu_ns() - c0) / (double)cores : bench_now_ns() - t0;
    jx_scope_end();
    if (r >= 2 && t < best) best = t;
  }
  return best * 1e-9;
}

int main(int argc, char **argv) {
  int ndev = argc > 1 ? atoi(argv[1]) : 8, rounds = argc > 2 ? atoi(argv[2]) : 9;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (ndev < 2 || rounds < 1 || cores < 1) {
    fprintf(stderr, "usage: bench_comm_estimate [DEVICES >= 2] [ROUNDS >= 1]\n");
    return 2;
  }
  jx_set_cpu_device_count(ndev);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(ndev), (const char *[]){"data"});
  jx_sharding *split = jx_sharding_create(m, "data");
  int time_shared = ndev > cores;
  printf("collectives over %d CPU devices on %ld cores (%s), %d in a chain; per collective, "
         "us\n",
         ndev, cores, time_shared ? "CPU time over the cores" : "wall time", CHAIN);
  printf("%-20s %10s %10s %10s %8s\n", "kind", "per device", "measured", "priced", "ratio");
  const int64_t sizes[] = {16 << 10, 128 << 10, 1 << 20};
  for (size_t z = 0; z < sizeof sizes / sizeof *sizes; z++) {
    int64_t rows = sizes[z] / (COLS * 4);
    rows = (rows + ndev - 1) / ndev * ndev; /* psum_scatter splits the rows over the devices */
    jx_scope_begin();
    jx_array *x = jx_device_put(jx_ones(JX_F32, JX_SHAPE(rows * ndev, COLS)), split);
    jx_array *in[1] = {x};
    double base = 0, base_price = 0;
    for (int kind = 0; kind < KINDS; kind++) {
      chain_ctx ctx = {kind, ndev};
      jx_fn *body = jx_fn_create(kind_names[kind], 1, 1, chain_body, &ctx);
      jx_fn *mapped = jx_shard_map(body, m, (const char *[]){"data"}, (const char *[]){"data"});
      jx_fn *j = jx_jit(mapped, &(jx_jit_options){.in_shardings = &split});
      jx_sharding_estimate e;
      if (!j || jx_sharding_estimate_of(j, in, &e)) {
        fprintf(stderr, "bench_comm_estimate: %s\n", jx_last_error());
        return 1;
      }
      double t = program_time(j, in, rounds, time_shared, cores), price = e.compute_s + e.comm_s;
      if (kind == 0) {
        base = t, base_price = price;
      } else {
        double cost = (t - base) / CHAIN, priced = (price - base_price) / CHAIN;
        printf("%-20s %7lld KB %10.1f %10.1f %8.2f\n", kind_names[kind],
               (long long)(rows * COLS * 4 >> 10), cost * 1e6, priced * 1e6,
               priced > 0 ? cost / priced : 0);
      }
      jx_fn_release(j);
      jx_fn_release(mapped);
      jx_fn_release(body);
    }
    jx_scope_end();
  }
  jx_sharding_release(split);
  jx_mesh_release(m);
  jx_shutdown();
  return 0;
}
