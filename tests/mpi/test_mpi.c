/* jx over several processes: run by tests/mpi/run_mpi_test.sh under
 * `mpirun -np P` with JX_NUM_CPU_DEVICES=L, and by run_gloo_test.sh as P
 * plain processes meeting at a coordinator (Gloo). Every process checks:
 *   - the global device numbering;
 *   - every collective on meshes that span processes (one axis of all P*L
 *     devices, and a P x L mesh with groups across and within processes,
 *     several groups per process at once) against values computed here from
 *     the definitions (integer-valued data, so sums are exact in any order);
 *   - shard_map with psum over processes;
 *   - a sharded jit of a matmul split along its contracting dim (partial
 *     products joined by a psum) and its gradient, against plain jit;
 *   - psum_scatter and all_to_all over "b,a" of a P x L mesh, whose rank order
 *     interleaves the processes;
 *   - jx_array_from_process_local and jx_process_allgather, round trip;
 *   - re-laying an array whose rows live on different processes (jx_device_put
 *     to columns, replicated, a 2-D layout on another mesh; a sharded jit
 *     whose in_shardings differ from the argument's layout);
 *   - computation follows data: a plain jx_jit and eager ops on an array
 *     whose rows live on different processes run where the rows are, their
 *     results sharded (a column sum: a psum across processes);
 *   - the targeted exchange of re-laying: the values of every pair of layouts
 *     of relayout_pairs, and the bytes this process sent, equal to the bytes
 *     of the elements other processes need from it, counted element by
 *     element from the layouts (and, for rows -> columns, (P-1)/P of its
 *     block);
 *   - jx_sync_global_devices;
 *   - data x tensor parallel MLP training (the recipe of
 *     tests/unit/test_parallel_training.c) on a P x L mesh: the losses and
 *     parameters of plain jx_jit on one device.
 * With argument "die": process 1 ends (_exit) before a collective; the
 * others must fail within JX_COLLECTIVE_TIMEOUT naming process 1, and exit
 * non-zero (checked by the script). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <jx/jx.h>

#include "mpi_check.h"
#include "parallel/collective.h"
#include "parallel/relayout.h"
#include "parallel/sharding.h"

/* max |a - want| over the elements (a read as f64) */
static double max_diff(jx_array *a, const double *want, int64_t n) {
  if (jx_is_poisoned(a) || jx_size(a) != n) return INFINITY;
  double *got = malloc(sizeof *got * (size_t)(n ? n : 1));
  jx_status st = jx_read(jx_astype(a, JX_F64), got, sizeof *got * (size_t)n);
  double d = st ? INFINITY : 0;
  for (int64_t i = 0; i < n && !st; i++) d = fmax(d, fabs(got[i] - want[i]));
  free(got);
  return d;
}

static void devices(void) {
  CHECK(jx_process_count() == P);
  CHECK(jx_device_count() == P * L);
  CHECK(jx_local_device_count() == L);
  for (int i = 0; i < P * L; i++) {
    CHECK(jx_device_id(jx_device_get(i)) == i);
    CHECK(jx_device_process_index(jx_device_get(i)) == i / L);
  }
}

/* ---- collectives in shard_map over one axis of all devices ---- */

enum { C = 4 }; /* columns of each device's block */

typedef struct {
  const char *axis;
} coll_ctx;

/* in: x (this device's [1, N*C] rows... see below); out: psum, pmax, pmin, all_gather,
 * psum_scatter, all_to_all, ppermute (shift by one), psum of the bf16 and i32 casts */
static void coll_body(void *vctx, jx_array *const *in, jx_array **out) {
  const char *ax = ((coll_ctx *)vctx)->axis;
  jx_array *x = in[0];
  int n = (int)jx_axis_size(ax);
  out[0] = jx_psum(x, ax);
  out[1] = jx_pmax(x, ax);
  out[2] = jx_pmin(x, ax);
  out[3] = jx_all_gather(x, ax, 0, 1);
  out[4] = jx_psum_scatter(x, ax, 1, 1);
  out[5] = jx_all_to_all(x, ax, 1, 0);
  int(*pairs)[2] = malloc(sizeof *pairs * (size_t)n);
  for (int i = 0; i < n; i++) {
    pairs[i][0] = i;
    pairs[i][1] = (i + 1) % n;
  }
  out[6] = jx_ppermute(x, ax, n, (const int(*)[2])pairs);
  free(pairs);
  out[7] = jx_astype(jx_psum(jx_astype(x, JX_BF16), ax), JX_F32);
  out[8] = jx_astype(jx_psum(jx_astype(x, JX_I32), ax), JX_F32);
}

static void collectives_one_axis(void) {
  int N = P * L, W = N * C; /* each device's block: [1, W] */
  jx_scope_begin();
  double *xv = malloc(sizeof *xv * (size_t)(N * W));
  for (int r = 0; r < N; r++)
    for (int j = 0; j < W; j++) xv[r * W + j] = (double)((r * 7 + j * 3) % 11) - 5;
  float *xf = malloc(sizeof *xf * (size_t)(N * W));
  for (int i = 0; i < N * W; i++) xf[i] = (float)xv[i];
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(N, W), xf);
  const char *ax[1] = {"i"};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), ax);
  CHECK(m != NULL);
  coll_ctx cc = {"i"};
  jx_fn *f = jx_fn_create("collectives", 1, 9, coll_body, &cc);
  const char *outs[9] = {"", "", "", "", "i", "i", "i", "", ""};
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"i"}, outs);
  jx_array *o[9];
  CHECK(jx_call(s, &x, o) == JX_OK);
  /* expected, from the definitions */
  double *sum = calloc((size_t)W, sizeof *sum), *mx = malloc(sizeof *mx * (size_t)W),
         *mn = malloc(sizeof *mn * (size_t)W);
  for (int j = 0; j < W; j++) {
    mx[j] = -INFINITY;
    mn[j] = INFINITY;
    for (int r = 0; r < N; r++) {
      sum[j] += xv[r * W + j];
      mx[j] = fmax(mx[j], xv[r * W + j]);
      mn[j] = fmin(mn[j], xv[r * W + j]);
    }
  }
  CHECK(max_diff(o[0], sum, W) == 0);
  CHECK(max_diff(o[1], mx, W) == 0);
  CHECK(max_diff(o[2], mn, W) == 0);
  CHECK(max_diff(o[3], xv, N * W) == 0); /* all_gather of the rows: x itself */
  CHECK(max_diff(o[7], sum, W) == 0);
  CHECK(max_diff(o[8], sum, W) == 0);
  /* psum_scatter along dim 1: device r gets columns [r*C, (r+1)*C) of the sum; as a
   * global array sharded "i" over rows: [N, C] with row r = that block */
  jx_array *rs = jx_process_allgather(o[4]);
  CHECK(max_diff(rs, sum, W) == 0); /* [N, C] row-major = the sum, in order */
  /* all_to_all split 1 concat 0: device r's out is [N, C]: row q = x[q, r*C:(r+1)*C];
   * globally [N*N, C] */
  double *a2a = calloc((size_t)(N * N * C), sizeof *a2a);
  for (int r = 0; r < N; r++)
    for (int q = 0; q < N; q++)
      for (int k = 0; k < C; k++) a2a[(r * N + q) * C + k] = xv[q * W + r * C + k];
  CHECK(max_diff(jx_process_allgather(o[5]), a2a, N * N * C) == 0);
  /* ppermute shift: device r gets row r-1 */
  double *perm = calloc((size_t)(N * W), sizeof *perm);
  for (int r = 0; r < N; r++)
    for (int j = 0; j < W; j++) perm[r * W + j] = xv[((r + N - 1) % N) * W + j];
  CHECK(max_diff(jx_process_allgather(o[6]), perm, N * W) == 0);
  /* a sharded result is not readable here as a whole: the error says what to do */
  if (P > 1) {
    jx_clear_error();
    double v[1];
    CHECK(jx_read(o[6], v, sizeof v) != JX_OK);
    CHECK(strstr(jx_last_error(), "jx_process_allgather") != NULL);
    jx_clear_error();
  }
  free(sum), free(mx), free(mn), free(a2a), free(perm), free(xv), free(xf);
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
  jx_scope_end();
}

/* A P x L mesh ("a" across processes, "b" within): psum over a (L groups per
 * process at once), over b (local only), over "a,b" and "b,a". */
static void psum_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum(in[0], "a");
  out[1] = jx_psum(in[0], "b");
  out[2] = jx_psum(in[0], "a,b");
  out[3] = jx_all_gather(in[0], "b,a", 0, 1);
}

static void collectives_two_axes(void) {
  jx_scope_begin();
  int N = P * L;
  float *xf = malloc(sizeof *xf * (size_t)N * C);
  for (int i = 0; i < N * C; i++) xf[i] = (float)(i % 13);
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(P, L, C), xf);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"a", "b"});
  jx_fn *f = jx_fn_create("psums", 1, 4, psum_body, NULL);
  jx_fn *s =
      jx_shard_map(f, m, (const char *[]){"a,b"}, (const char *[]){"None,b", "a", "", "None,None"});
  jx_array *o[4];
  CHECK(jx_call(s, &x, o) == JX_OK);
  double *sa = calloc((size_t)L * C, sizeof *sa), *sb = calloc((size_t)P * C, sizeof *sb),
         *sab = calloc(C, sizeof *sab), *g = malloc(sizeof *g * (size_t)N * C);
  for (int p = 0; p < P; p++)
    for (int l = 0; l < L; l++)
      for (int k = 0; k < C; k++) {
        double v = xf[(p * L + l) * C + k];
        sa[l * C + k] += v;
        sb[p * C + k] += v;
        sab[k] += v;
        g[(l * P + p) * C + k] = v; /* "b,a": b major */
      }
  CHECK(max_diff(o[0], sa, L * C) == 0);
  CHECK(max_diff(jx_process_allgather(o[1]), sb, P * C) == 0);
  CHECK(max_diff(o[2], sab, C) == 0);
  CHECK(max_diff(o[3], g, N * C) == 0);
  free(sa), free(sb), free(sab), free(g), free(xf);
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
  jx_scope_end();
}

/* psums over processes of odd lengths across the MPI engine's algorithms
 * (the 16-64 KiB exchanges once reduced into a buffer the partner was still
 * reading, which gave wrong sums on a busy machine): integer values, so
 * every order of summation gives the exact sum; repeated to meet the race. */
static void psum_a_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum(in[0], "a");
}

static void large_psums(void) {
  static const int lengths[] = {4099, 16411, 262147}; /* ~16 KiB, 64 KiB, 1 MiB of f32 */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"a", "b"});
  jx_fn *f = jx_fn_create("psum_a", 1, 1, psum_a_body, NULL);
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"a,b"}, (const char *[]){"b"});
  for (int t = 0; t < 3; t++) {
    int n = lengths[t], N = P * L;
    jx_scope_begin();
    float *xf = malloc(sizeof *xf * (size_t)N * n);
    double *want = calloc((size_t)L * n, sizeof *want);
    for (int d = 0; d < N; d++)
      for (int i = 0; i < n; i++) {
        xf[(size_t)d * n + i] = (float)((i * 7 + d * 3) % 97);
        want[(size_t)(d % L) * n + i] += xf[(size_t)d * n + i];
      }
    jx_array *x = jx_array_from(JX_F32, JX_SHAPE(P, L * n), xf), *o = NULL;
    for (int r = 0; r < 20; r++) {
      jx_scope_begin();
      CHECK(jx_call(s, &x, &o) == JX_OK);
      CHECK(max_diff(o, want, (int64_t)L * n) == 0);
      jx_scope_end();
    }
    free(xf);
    free(want);
    jx_scope_end();
  }
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* ---- groups whose rank order interleaves the processes ("b,a" on a P x L mesh:
 * rank b*P + a), so each process's ranks are not contiguous ---- */

enum { K = 2 }; /* elements of each rank's block */

static void uneven_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum_scatter(in[0], "b,a", 2, 1);
  out[1] = jx_all_to_all(in[0], "b,a", 2, 2);
  out[2] = jx_astype(jx_psum_scatter(jx_astype(in[0], JX_BF16), "b,a", 2, 1), JX_F32);
}

static void collectives_uneven_order(void) {
  jx_scope_begin();
  int N = P * L, W = N * K;
  float *xf = malloc(sizeof *xf * (size_t)N * W);
  for (int i = 0; i < N * W; i++) xf[i] = (float)((i * 5) % 9) - 4;
  jx_array *x = jx_array_from(JX_F32, JX_SHAPE(P, L, W), xf);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"a", "b"});
  jx_fn *f = jx_fn_create("uneven", 1, 3, uneven_body, NULL);
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"a,b"}, (const char *[]){"a,b", "a,b", "a,b"});
  jx_array *o[3];
  CHECK(jx_call(s, &x, o) == JX_OK);
  /* device (a, b) has rank r = b*P + a; its block is xf[(a*L + b)*W ...] */
  double *sum = calloc((size_t)W, sizeof *sum), *rs = malloc(sizeof *rs * (size_t)N * K),
         *a2a = malloc(sizeof *a2a * (size_t)N * W);
  for (int d = 0; d < N; d++)
    for (int j = 0; j < W; j++) sum[j] += xf[d * W + j];
  for (int a = 0; a < P; a++)
    for (int b = 0; b < L; b++) {
      int r = b * P + a, d = a * L + b;
      for (int k = 0; k < K; k++) rs[d * K + k] = sum[r * K + k];
      for (int q = 0; q < N; q++) { /* chunk q of the result: chunk r of rank q's block */
        int dq = (q % P) * L + q / P;
        for (int k = 0; k < K; k++) a2a[d * W + q * K + k] = xf[dq * W + r * K + k];
      }
    }
  CHECK(max_diff(jx_process_allgather(o[0]), rs, N * K) == 0);
  CHECK(max_diff(jx_process_allgather(o[1]), a2a, N * W) == 0);
  CHECK(max_diff(jx_process_allgather(o[2]), rs, N * K) == 0);
  free(sum), free(rs), free(a2a), free(xf);
  jx_fn_release(s);
  jx_fn_release(f);
  jx_mesh_release(m);
  jx_scope_end();
}

/* ---- re-laying arrays whose blocks live on several processes ---- */

/* every shard of a held here equals its block of want (row-major [R, Cw]); target t:
 * 0 columns over the N devices, 1 replicated, 2 "b,a" on the P x L mesh (rows over b,
 * columns over a) */
static int local_shards_match(jx_array *a, int t, const double *want, int R, int Cw) {
  int ok = 1, N = P * L, held = 0;
  for (int i = 0; i < N && ok; i++) {
    jx_clear_error();
    jx_array *b = jx_array_shard(a, i);
    if (jx_is_poisoned(b)) continue; /* another process's device */
    held++;
    int64_t r0 = t == 2 ? (i % L) * (R / L) : 0;
    int64_t c0 = t == 0 ? i * (Cw / N) : t == 2 ? (i / L) * (Cw / P) : 0;
    int64_t nr = t == 2 ? R / L : R, nc = t == 0 ? Cw / N : t == 2 ? Cw / P : Cw;
    ok = jx_shape_of(b).rank == 2 && jx_shape_of(b).dims[0] == nr && jx_shape_of(b).dims[1] == nc;
    double *got = malloc(sizeof *got * (size_t)(nr * nc));
    ok = ok && jx_read(jx_astype(b, JX_F64), got, sizeof *got * (size_t)(nr * nc)) == JX_OK;
    for (int64_t r = 0; r < nr && ok; r++)
      for (int64_t c = 0; c < nc && ok; c++) ok = got[r * nc + c] == want[(r0 + r) * Cw + c0 + c];
    free(got);
  }
  jx_clear_error();
  return ok && held == L;
}

static void affine_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_F32, 2)), jx_scalar(JX_F32, 1));
}

static void relayout(void) {
  jx_scope_begin();
  int N = P * L, R = 2 * N, Cw = 2 * N;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), (const char *[]){"i"});
  jx_mesh *m2 = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"a", "b"});
  jx_sharding *rows = jx_sharding_create(m, "i"), *cols = jx_sharding_create(m, "None,i"),
              *rep = jx_sharding_create(m, ""), *grid = jx_sharding_create(m2, "b,a");
  double *want = malloc(sizeof *want * (size_t)R * Cw);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < Cw; c++) want[r * Cw + c] = r * 100 + c;
  /* data-sharded: this process builds only its own rows, so others' are not here */
  float *mine = malloc(sizeof *mine * (size_t)2 * L * Cw);
  for (int r = 0; r < 2 * L; r++)
    for (int c = 0; c < Cw; c++) mine[r * Cw + c] = (float)want[(me * 2 * L + r) * Cw + c];
  jx_sharding *targets[3] = {cols, rep, grid};
  for (int t = 0; t < 3; t++) {
    jx_array *x = jx_array_from_process_local(rows, JX_SHAPE(R, Cw),
                                              jx_array_from(JX_F32, JX_SHAPE(2 * L, Cw), mine));
    jx_array *y = jx_device_put(x, targets[t]);
    CHECK(!jx_is_poisoned(y));
    CHECK(jx_sharding_of(y) == targets[t]);
    CHECK(local_shards_match(y, t, want, R, Cw));
    CHECK(max_diff(jx_process_allgather(y), want, R * Cw) == 0);
    if (t == 1) CHECK(max_diff(y, want, R * Cw) == 0); /* replicated: readable here */
  }
  /* a sharded jit whose in_shardings differ from the argument's layout */
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  jx_fn *jf = jx_jit(f, &(jx_jit_options){.in_shardings = (jx_sharding *[]){cols},
                                          .out_shardings = (jx_sharding *[]){rep}});
  jx_array *x = jx_array_from_process_local(rows, JX_SHAPE(R, Cw),
                                            jx_array_from(JX_F32, JX_SHAPE(2 * L, Cw), mine)),
           *y;
  int64_t sent0 = jx_relayout_bytes_sent();
  CHECK(jx_call(jf, &x, &y) == JX_OK);
  /* rows -> columns: this process's rows but its own columns go to the others */
  CHECK(jx_relayout_bytes_sent() - sent0 == (int64_t)(P - 1) * (R / P) * (Cw / P) * 4);
  for (int i = 0; i < R * Cw; i++) want[i] = 2 * want[i] + 1;
  CHECK(max_diff(y, want, R * Cw) == 0);
  jx_fn_release(jf), jx_fn_release(f);
  free(want), free(mine);
  jx_sharding_release(rows), jx_sharding_release(cols), jx_sharding_release(rep);
  jx_sharding_release(grid);
  jx_mesh_release(m), jx_mesh_release(m2);
  jx_scope_end();
}

/* ---- computation follows data across processes ---- */
static void follow_data(void) {
  jx_scope_begin();
  int N = P * L, R = 2 * N, Cw = 4;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), (const char *[]){"i"});
  jx_sharding *rows = jx_sharding_create(m, "i");
  double *want = malloc(sizeof *want * (size_t)R * Cw),
         *affine = malloc(sizeof *affine * (size_t)R * Cw);
  double colsum[4] = {0};
  float *mine = malloc(sizeof *mine * (size_t)2 * L * Cw);
  for (int r = 0; r < R; r++)
    for (int c = 0; c < Cw; c++) {
      want[r * Cw + c] = r * 100 + c;
      affine[r * Cw + c] = 2 * want[r * Cw + c] + 1;
      colsum[c] += want[r * Cw + c];
    }
  for (int r = 0; r < 2 * L; r++)
    for (int c = 0; c < Cw; c++) mine[r * Cw + c] = (float)want[(me * 2 * L + r) * Cw + c];
  /* this process builds only its own rows: no process holds the whole array */
  jx_array *x = jx_array_from_process_local(rows, JX_SHAPE(R, Cw),
                                            jx_array_from(JX_F32, JX_SHAPE(2 * L, Cw), mine));
  jx_fn *f = jx_fn_create("affine", 1, 1, affine_body, NULL);
  jx_fn *jf = jx_jit(f, NULL); /* no shardings: it follows x's */
  jx_array *y;
  CHECK(jx_call(jf, &x, &y) == JX_OK);
  CHECK(jx_sharding_of(y) == rows);
  CHECK(max_diff(jx_process_allgather(y), affine, R * Cw) == 0);
  jx_array *z = jx_sub(y, x); /* eager: x + 1, where the rows are */
  CHECK(jx_sharding_of(z) == rows);
  for (int i = 0; i < R * Cw; i++) affine[i] = want[i] + 1;
  CHECK(max_diff(jx_process_allgather(z), affine, R * Cw) == 0);
  jx_array *s = jx_sum(x, JX_AXES(0), 0); /* the split rows summed: replicated */
  CHECK(jx_sharding_of(s) && !strcmp(jx_sharding_spec(jx_sharding_of(s)), ""));
  CHECK(max_diff(s, colsum, Cw) == 0);
  jx_fn_release(jf), jx_fn_release(f);
  free(want), free(affine), free(mine);
  jx_sharding_release(rows);
  jx_mesh_release(m);
  jx_scope_end();
}

/* ---- the targeted exchange of re-laying: values and traffic ---- */

/* The processes holding each element of a [R, Cw] array under s, as bits. */
static void holders(const jx_sharding *s, int R, int Cw, uint64_t *mask) {
  const jx_mesh *m = jx_sharding_mesh(s);
  memset(mask, 0, sizeof *mask * (size_t)R * (size_t)Cw);
  for (int p = 0; p < jx_mesh_device_count(m); p++) {
    int q = jx_device_process_index(jx_device_get(jx_mesh_device_at(m, p)));
    int64_t st[JX_MAX_RANK];
    jx_shape b;
    jx_sharding_block(s, JX_SHAPE(R, Cw), p, st, &b);
    for (int64_t i = 0; i < b.dims[0]; i++)
      for (int64_t j = 0; j < b.dims[1]; j++) mask[(st[0] + i) * Cw + st[1] + j] |= 1ULL << q;
  }
}

/* The bytes this process must send re-laying from s to t: per element, one
 * copy to each process that needs it under t and holds none under s, sent by
 * the lowest process holding it. */
static int64_t expected_sent(const jx_sharding *s, const jx_sharding *t, int R, int Cw,
                             int64_t es) {
  uint64_t *hold = malloc(sizeof *hold * (size_t)R * Cw),
           *need = malloc(sizeof *need * (size_t)R * Cw);
  holders(s, R, Cw, hold);
  holders(t, R, Cw, need);
  int64_t bytes = 0;
  for (int e = 0; e < R * Cw; e++) {
    uint64_t lack = need[e] & ~hold[e];
    int lowest = hold[e] ? __builtin_ctzll(hold[e]) : -1;
    if (lowest == me) bytes += es * __builtin_popcountll(lack);
  }
  free(hold), free(need);
  return bytes;
}

/* every shard of y held here equals its block of want under t ([R, Cw]), and
 * there is one for each of t's devices of this process */
static int shards_match(jx_array *y, const jx_sharding *t, const double *want, int R, int Cw) {
  const jx_mesh *m = jx_sharding_mesh(t);
  int ok = jx_sharding_of(y) == t, held = 0, mine = 0;
  for (int p = 0; p < jx_mesh_device_count(m) && ok; p++) {
    mine += jx_device_process_index(jx_device_get(jx_mesh_device_at(m, p))) == me;
    jx_clear_error();
    jx_array *b = jx_array_shard(y, p);
    if (jx_is_poisoned(b)) continue; /* another process's device */
    held++;
    int64_t st[JX_MAX_RANK];
    jx_shape bs;
    jx_sharding_block(t, JX_SHAPE(R, Cw), p, st, &bs);
    int64_t n = bs.dims[0] * bs.dims[1];
    ok = jx_shape_of(b).rank == 2 && jx_shape_of(b).dims[0] == bs.dims[0] &&
         jx_shape_of(b).dims[1] == bs.dims[1];
    double *got = malloc(sizeof *got * (size_t)(n ? n : 1));
    ok = ok && jx_read(jx_astype(b, JX_F64), got, sizeof *got * (size_t)n) == JX_OK;
    for (int64_t i = 0; i < bs.dims[0] && ok; i++)
      for (int64_t j = 0; j < bs.dims[1] && ok; j++)
        ok = got[i * bs.dims[1] + j] == want[(st[0] + i) * Cw + st[1] + j];
    free(got);
  }
  jx_clear_error();
  return ok && held == mine;
}

static void relayout_pairs(void) {
  jx_scope_begin();
  int N = P * L, R = 2 * N, Cw = 2 * N;
  int *first = malloc(sizeof *first * (size_t)L);
  for (int i = 0; i < L; i++) first[i] = i; /* process 0's devices */
  jx_mesh *m1 = jx_mesh_create(JX_SHAPE(N), (const char *[]){"i"});
  jx_mesh *m2 = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"data", "model"});
  jx_mesh *m0 = jx_mesh_create_on(JX_SHAPE(L), (const char *[]){"j"}, first);
  /* x and y span processes (y has size 1 with 2 processes: then every process holds all) */
  jx_mesh *m3 = jx_mesh_create(JX_SHAPE(2, P / 2, L), (const char *[]){"x", "y", "model"});
  CHECK(m1 && m2 && m0 && m3);
  struct {
    jx_mesh *ms;
    const char *from;
    jx_mesh *mt;
    const char *to;
    jx_dtype dt;
    int64_t formula; /* bytes this process sends, from the layouts by hand; -1: none given */
  } pairs[] = {
      /* rows -> columns: of its rows, all columns but its own go to the P-1 others */
      {m1, "i", m1, "None,i", JX_I32, (int64_t)(P - 1) * (R / P) * (Cw / P) * 4},
      /* replicated over model -> rows over model: every process needs every row */
      {m2, "data", m2, "model", JX_F32, (int64_t)(P - 1) * (R / P) * Cw * 4},
      /* both dims split, the axes swapped: blocks move between processes */
      {m2, "data,model", m2, "model,data", JX_F32, -1},
      /* another mesh, the same rows on the same processes: nothing moves */
      {m1, "i", m2, "(data,model)", JX_F32, 0},
      /* onto process 0's devices only: the others hold no device of the new mesh but send */
      {m1, "i", m0, "j", JX_F32, me == 0 ? 0 : (int64_t)(R / P) * Cw * 4},
      /* from process 0's devices only: the others hold nothing and receive */
      {m0, "j", m2, "None,model", JX_F32, me == 0 ? (int64_t)(P - 1) * R * Cw * 4 : 0},
      /* rows replicated over x (on two processes each): the lower of the two sends */
      {m3, "y", m3, "None,(x,y,model)", JX_F32, -1},
  };
  double *want = malloc(sizeof *want * (size_t)R * Cw);
  float *wf = malloc(sizeof *wf * (size_t)R * Cw);
  for (int i = 0; i < R * Cw; i++) wf[i] = (float)(want[i] = (i * 37) % 1001 - 500);
  for (size_t k = 0; k < sizeof pairs / sizeof pairs[0]; k++) {
    jx_sharding *s = jx_sharding_create(pairs[k].ms, pairs[k].from),
                *t = jx_sharding_create(pairs[k].mt, pairs[k].to);
    /* laid out by s from the host value: no exchange, each process cuts its own blocks */
    jx_array *x =
        jx_device_put(jx_astype(jx_array_from(JX_F32, JX_SHAPE(R, Cw), wf), pairs[k].dt), s);
    int64_t sent0 = jx_relayout_bytes_sent();
    jx_array *y = jx_device_put(x, t);
    int64_t sent = jx_relayout_bytes_sent() - sent0;
    CHECK(!jx_is_poisoned(y));
    CHECK(shards_match(y, t, want, R, Cw));
    CHECK(max_diff(jx_process_allgather(y), want, R * Cw) == 0);
    int64_t es = (int64_t)jx_dtype_size(pairs[k].dt);
    if (sent != expected_sent(s, t, R, Cw, es) ||
        (pairs[k].formula >= 0 && sent != pairs[k].formula))
      fprintf(stderr, "process %d: '%s' -> '%s': sent %lld bytes, expected %lld (by hand %lld)\n",
              me, pairs[k].from, pairs[k].to, (long long)sent,
              (long long)expected_sent(s, t, R, Cw, es), (long long)pairs[k].formula);
    CHECK(sent == expected_sent(s, t, R, Cw, es));
    CHECK(pairs[k].formula < 0 || sent == pairs[k].formula);
    jx_sharding_release(s), jx_sharding_release(t);
  }
  free(want), free(wf), free(first);
  jx_mesh_release(m1), jx_mesh_release(m2), jx_mesh_release(m0), jx_mesh_release(m3);
  jx_scope_end();
}

/* ---- sharded jit of a matmul split along its contracting dim, and its gradient ---- */

static void mm_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *y = jx_matmul(in[0], in[1]);
  out[0] = jx_sum(jx_mul(y, y), JX_AXES(), 0);
}
static void mm_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

static void sharded_matmul(void) {
  jx_scope_begin();
  int N = P * L, K = 4 * N;
  jx_array *key = jx_random_key(7);
  jx_array *x = jx_random_normal(jx_random_fold_in(key, 1), JX_F32, JX_SHAPE(6, K));
  jx_array *w = jx_random_normal(jx_random_fold_in(key, 2), JX_F32, JX_SHAPE(K, 5));
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), (const char *[]){"i"});
  jx_sharding *sx = jx_sharding_create(m, "None,i"), *sw = jx_sharding_create(m, "i"),
              *rep = jx_sharding_create(m, "");
  jx_fn *mm = jx_fn_create("mm", 2, 1, mm_body, NULL);
  jx_fn *plain = jx_jit(mm, NULL);
  jx_fn *sh = jx_jit(mm, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sx, sw},
                                           .out_shardings = (jx_sharding *[]){rep}});
  jx_array *in[2] = {x, w}, *want, *got;
  CHECK(jx_call(plain, in, &want) == JX_OK);
  jx_array *sin[2] = {jx_device_put(x, sx), jx_device_put(w, sw)};
  CHECK(jx_call(sh, sin, &got) == JX_OK);
  CHECK(jx_item(jx_max(jx_abs(jx_sub(got, want)), JX_AXES(), 0)) <= 1e-4);

  jx_fn *loss = jx_fn_create("mm_loss", 2, 1, mm_loss, NULL);
  jx_fn *g = jx_grad(loss, JX_AXES(0, 1));
  jx_fn *gplain = jx_jit(g, NULL);
  jx_fn *gsh = jx_jit(g, &(jx_jit_options){.in_shardings = (jx_sharding *[]){sx, sw},
                                           .out_shardings = (jx_sharding *[]){sx, sw}});
  jx_array *gw[2], *gg[2];
  CHECK(jx_call(gplain, in, gw) == JX_OK);
  CHECK(jx_call(gsh, sin, gg) == JX_OK);
  for (int i = 0; i < 2; i++) {
    jx_array *all = jx_process_allgather(gg[i]);
    double d = jx_item(jx_max(jx_abs(jx_sub(all, gw[i])), JX_AXES(), 0));
    double scale = jx_item(jx_max(jx_abs(gw[i]), JX_AXES(), 0));
    CHECK(d <= 1e-5 * fmax(1, scale));
  }
  jx_fn_release(gsh), jx_fn_release(gplain), jx_fn_release(g), jx_fn_release(loss);
  jx_fn_release(sh), jx_fn_release(plain), jx_fn_release(mm);
  jx_sharding_release(sx), jx_sharding_release(sw), jx_sharding_release(rep);
  jx_mesh_release(m);
  jx_scope_end();
}

/* ---- process-local data ---- */

static void process_local(void) {
  jx_scope_begin();
  int N = P * L;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(N), (const char *[]){"i"});
  jx_sharding *s = jx_sharding_create(m, "i");
  /* this process's rows: L*2 of the global [2N, 3] */
  float local[6 * 64];
  for (int r = 0; r < 2 * L; r++)
    for (int k = 0; k < 3; k++) local[r * 3 + k] = (float)((me * 2 * L + r) * 10 + k);
  jx_array *a = jx_array_from_process_local(s, JX_SHAPE(2 * N, 3),
                                            jx_array_from(JX_F32, JX_SHAPE(2 * L, 3), local));
  CHECK(!jx_is_poisoned(a));
  double *want = malloc(sizeof *want * (size_t)(2 * N * 3));
  for (int r = 0; r < 2 * N; r++)
    for (int k = 0; k < 3; k++) want[r * 3 + k] = r * 10 + k;
  CHECK(max_diff(jx_process_allgather(a), want, 2 * N * 3) == 0);
  /* a wrong local shape is an error naming the block */
  jx_clear_error();
  jx_array *bad =
      jx_array_from_process_local(s, JX_SHAPE(2 * N, 3), jx_zeros(JX_F32, JX_SHAPE(1, 3)));
  CHECK(jx_is_poisoned(bad));
  CHECK(strstr(jx_last_error(), "jx_array_from_process_local") != NULL);
  jx_clear_error();
  free(want);
  jx_sharding_release(s);
  jx_mesh_release(m);
  jx_scope_end();
}

/* ---- data x tensor parallel training (tests/unit/test_parallel_training.c) ---- */

enum { BATCH = 32, DIN = 16, DHID = 32, DOUT = 8, STEPS = 10, NPARAM = 4 };

static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[4], in[0]), in[1]));
  jx_array *pred = jx_add(jx_matmul(h, in[2]), in[3]);
  jx_array *err = jx_sub(pred, in[5]);
  out[0] = jx_mean(jx_mul(err, err), JX_AXES(), 0);
}
typedef struct {
  jx_fn *value_and_grad;
} step_ctx;
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  step_ctx *c = ctx;
  jx_array *vg[1 + NPARAM];
  if (jx_call(c->value_and_grad, in, vg)) return;
  out[0] = vg[0];
  for (int i = 0; i < NPARAM; i++)
    out[1 + i] = jx_sub(in[i], jx_mul(vg[1 + i], jx_scalar(JX_F32, 0.1)));
}
static jx_array *random_array(jx_shape s, uint32_t seed, double scale) {
  return jx_mul(jx_random_normal(jx_random_key(seed), JX_F32, s), jx_scalar(JX_F32, scale));
}
static void train(jx_fn *fn, jx_sharding *const *sh, float *losses, jx_array **final) {
  jx_array *state[NPARAM + 2] = {
      random_array(JX_SHAPE(DIN, DHID), 1, 0.3),  jx_zeros(JX_F32, JX_SHAPE(DHID)),
      random_array(JX_SHAPE(DHID, DOUT), 2, 0.3), jx_zeros(JX_F32, JX_SHAPE(DOUT)),
      random_array(JX_SHAPE(BATCH, DIN), 3, 1.0), random_array(JX_SHAPE(BATCH, DOUT), 4, 1.0),
  };
  if (sh)
    for (int i = 0; i < NPARAM + 2; i++) state[i] = jx_device_put(state[i], sh[i]);
  for (int s = 0; s < STEPS; s++) {
    jx_array *out[1 + NPARAM];
    CHECK(jx_call(fn, state, out) == JX_OK);
    losses[s] = (float)jx_item(out[0]);
    for (int i = 0; i < NPARAM; i++) state[i] = out[1 + i];
  }
  for (int i = 0; i < NPARAM; i++) final[i] = state[i];
}

static void training(void) {
  jx_scope_begin();
  jx_fn *loss = jx_fn_create("mlp_loss", NPARAM + 2, 1, loss_body, NULL);
  step_ctx c = {jx_value_and_grad(loss, JX_AXES(0, 1, 2, 3), 0)};
  jx_fn *step = jx_fn_create("sgd_step", NPARAM + 2, 1 + NPARAM, step_body, &c);
  float want[STEPS], got[STEPS];
  jx_array *want_p[NPARAM], *got_p[NPARAM];
  jx_fn *plain = jx_jit(step, NULL);
  train(plain, NULL, want, want_p);
  /* data across processes, model within each: the recipe's 4x2 data x model */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"data", "model"});
  const char *spec[NPARAM + 2] = {"None,model", "model", "model", "", "data", "data"};
  jx_sharding *sh[NPARAM + 2], *out_sh[1 + NPARAM];
  for (int i = 0; i < NPARAM + 2; i++) sh[i] = jx_sharding_create(m, spec[i]);
  out_sh[0] = jx_sharding_create(m, "");
  for (int i = 0; i < NPARAM; i++) out_sh[1 + i] = jx_sharding_retain(sh[i]);
  jx_fn *sharded = jx_jit(step, &(jx_jit_options){.in_shardings = sh, .out_shardings = out_sh});
  train(sharded, sh, got, got_p);
  for (int s = 0; s < STEPS; s++) {
    if (!(fabsf(got[s] - want[s]) <= 1e-5f * fmaxf(1.0f, fabsf(want[s]))))
      fprintf(stderr, "process %d: step %d loss %.8g, one device %.8g\n", me, s, got[s], want[s]);
    CHECK(fabsf(got[s] - want[s]) <= 1e-5f * fmaxf(1.0f, fabsf(want[s])));
  }
  CHECK(want[STEPS - 1] < 0.9f * want[0]);
  for (int i = 0; i < NPARAM; i++) /* replicated over data: readable on every process */
    CHECK(jx_item(jx_max(jx_abs(jx_sub(got_p[i], want_p[i])), JX_AXES(), 0)) <= 1e-5);
  for (int i = 0; i < NPARAM + 2; i++) jx_sharding_release(sh[i]);
  for (int i = 0; i < 1 + NPARAM; i++) jx_sharding_release(out_sh[i]);
  jx_mesh_release(m);
  jx_fn_release(sharded), jx_fn_release(plain), jx_fn_release(step);
  jx_fn_release(c.value_and_grad), jx_fn_release(loss);
  jx_scope_end();
}

/* ---- a process that dies ---- */

static int die_test(void) {
  jx_mesh *m = jx_mesh_create(JX_SHAPE(P * L), (const char *[]){"i"});
  coll_ctx cc = {"i"};
  jx_fn *f = jx_fn_create("collectives", 1, 9, coll_body, &cc);
  const char *outs[9] = {"", "", "", "", "i", "i", "i", "", ""};
  jx_fn *s = jx_shard_map(f, m, (const char *[]){"i"}, outs);
  jx_array *x = jx_ones(JX_F32, JX_SHAPE(P * L, P * L * C)), *o[9];
  CHECK(jx_call(s, &x, o) == JX_OK); /* every process is alive: this works */
  CHECK(jx_sync_global_devices("before") == JX_OK);
  if (me == 1) {
    fprintf(stderr, "process 1: exiting before the next collective\n");
    fflush(stderr);
    _exit(0);
  }
  jx_status st = jx_call(s, &x, o);
  fprintf(stderr, "process %d: the collective failed: status %d: %s\n", me, (int)st,
          jx_last_error());
  jx_distributed_shutdown(); /* MPI_Abort after a failed collective */
  return 3;
}

int main(int argc, char **argv) {
  if (mpi_check_begin()) return 2;
  if (argc > 1 && strcmp(argv[1], "die") == 0) return die_test();
  devices();
  collectives_one_axis();
  collectives_two_axes();
  large_psums();
  collectives_uneven_order();
  sharded_matmul();
  relayout();
  follow_data();
  relayout_pairs();
  process_local();
  CHECK(jx_sync_global_devices("before training") == JX_OK);
  long ahead = jx_collective_async_started();
  training();
  /* the compiled per-device steps started their collectives over MPI ahead */
  CHECK(jx_collective_async_started() > ahead);
  return mpi_check_end();
}
