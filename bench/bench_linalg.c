/* The linear algebra primitives, jitted (bench/compare.py --workload linalg
 * times jax.jit of the same jnp.linalg functions and NumPy on the same
 * shapes):
 *  - cholesky_64x256_f32: jnp.linalg.cholesky of 64 symmetric positive
 *    definite 256 x 256 matrices (the stack split over the pool);
 *  - solve_64x256_f32: jnp.linalg.solve of the same 64 matrices, each with
 *    one right-hand side [64, 256, 1] (LU, a permutation, two trsm);
 *  - eigh_512_f32: jnp.linalg.eigh of one symmetric 512 x 512 matrix;
 *  - svd_512_f32: jnp.linalg.svd (reduced) of one 512 x 512 matrix.
 * Prints JSON lines {"bench", "impl": "jx", "median_ns", "runs"}. */
#include "bench_util.h"
#include "bench_jit_rounds.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>

enum { RUNS = 11, BATCH = 64, N = 256, BIG = 512, WORKLOADS = 4 };

static void cholesky_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_cholesky(in[0]);
}

static void solve_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_linalg_solve(in[0], in[1]);
}

static void eigh_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_linalg_eigh(in[0], &out[0], &out[1]);
}

static void svd_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_linalg_svd(in[0], 0, 1, &out[0], &out[1], &out[2]);
}

/* m m^T + n I for each matrix of m: symmetric positive definite */
static jx_array *spd(jx_array *m) {
  jx_shape s = jx_shape_of(m);
  int r = s.rank;
  jx_axes swap = r == 2 ? JX_AXES(1, 0) : JX_AXES(0, 2, 1);
  int64_t n = s.dims[r - 1];
  return jx_add(jx_matmul(m, jx_transpose(m, swap)),
                jx_mul(jx_eye(JX_F32, n), jx_scalar(JX_F32, (double)n)));
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : RUNS;
  if (runs < 1 || runs > 1000) runs = RUNS;
  jx_scope_begin(); /* the inputs' intermediates end here */
  jx_array *a = jx_keep(spd(jx_random_normal(jx_random_key(0), JX_F32, JX_SHAPE(BATCH, N, N))));
  jx_array *b = jx_keep(jx_random_normal(jx_random_key(1), JX_F32, JX_SHAPE(BATCH, N, 1)));
  jx_array *sym = jx_keep(spd(jx_random_normal(jx_random_key(2), JX_F32, JX_SHAPE(BIG, BIG))));
  jx_array *g = jx_keep(jx_random_normal(jx_random_key(3), JX_F32, JX_SHAPE(BIG, BIG)));
  jx_scope_end();
  bench_jit_workload w[WORKLOADS] = {
      {"cholesky_64x256_f32", jx_fn_create("cholesky", 1, 1, cholesky_body, NULL), 1, 1, {a}},
      {"solve_64x256_f32", jx_fn_create("solve", 2, 1, solve_body, NULL), 2, 1, {a, b}},
      {"eigh_512_f32", jx_fn_create("eigh", 1, 2, eigh_body, NULL), 1, 2, {sym}},
      {"svd_512_f32", jx_fn_create("svd", 1, 3, svd_body, NULL), 1, 3, {g}},
  };
  int bad = bench_jit_rounds("bench_linalg", w, WORKLOADS, runs);
  jx_release(a);
  jx_release(b);
  jx_release(sym);
  jx_release(g);
  jx_shutdown();
  return bad;
}
