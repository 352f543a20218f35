/* The collective primitives, tested directly: a per-device program is traced
 * with the mesh axes bound and run with jx_spmd_run; every device's output is
 * compared with the collective's definition, computed here with plain
 * (single-device) ops over the per-device inputs of its group. Gradients:
 * jx_vjp of the per-device program against the transposes' definitions, and
 * jx_check_grads under jx_vmap_axis. Batching: jx_vmap_axis against the same
 * definitions with batch elements as the group. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "parallel/spmd.h"
#include "ir/axis_env.h"
#include "trace/fn.h"
#include "test_util.h"

typedef enum { PSUM, PMAX, PMIN, PMEAN, ALL_GATHER, PSUM_SCATTER, ALL_TO_ALL, PPERMUTE } op_kind;
static const char *const OP_NAME[] = {"psum",       "pmax",         "pmin",       "pmean",
                                      "all_gather", "psum_scatter", "all_to_all", "ppermute"};

typedef struct {
  op_kind op;
  const char *axis;
  int d0, d1; /* dim/tiled or split/concat */
  int npairs;
  int pairs[8][2];
} cfg;

static jx_array *apply(const cfg *c, jx_array *x) {
  switch (c->op) {
  case PSUM: return jx_psum(x, c->axis);
  case PMAX: return jx_pmax(x, c->axis);
  case PMIN: return jx_pmin(x, c->axis);
  case PMEAN: return jx_pmean(x, c->axis);
  case ALL_GATHER: return jx_all_gather(x, c->axis, c->d0, c->d1);
  case PSUM_SCATTER: return jx_psum_scatter(x, c->axis, c->d0, c->d1);
  case ALL_TO_ALL: return jx_all_to_all(x, c->axis, c->d0, c->d1);
  case PPERMUTE: return jx_ppermute(x, c->axis, c->npairs, (const int(*)[2])c->pairs);
  }
  return NULL;
}

static void body(void *ctx, jx_array *const *in, jx_array **out) { out[0] = apply(ctx, in[0]); }

/* ---- the definitions, on host blocks (f64) ---- */

static jx_array *slice_dim(jx_array *a, int d, int64_t lo, int64_t hi) {
  jx_shape start = jx_shape_of(a), stop = start, step = start;
  for (int k = 0; k < start.rank; k++) {
    start.dims[k] = k == d ? lo : 0;
    stop.dims[k] = k == d ? hi : jx_shape_of(a).dims[k];
    step.dims[k] = 1;
  }
  return jx_slice(a, start, stop, step);
}

/* The output of rank r of a group whose inputs (by rank) are X[0..n). */
static jx_array *definition(const cfg *c, jx_array **X, int n, int r) {
  jx_array *acc = X[0];
  switch (c->op) {
  case PSUM:
  case PMEAN:
  case PSUM_SCATTER:
    for (int k = 1; k < n; k++) acc = jx_add(acc, X[k]);
    if (c->op == PMEAN) return jx_div(acc, jx_scalar(JX_F64, n));
    if (c->op == PSUM) return acc;
    if (c->d1) {
      int64_t len = jx_shape_of(acc).dims[c->d0] / n;
      return slice_dim(acc, c->d0, r * len, (r + 1) * len);
    }
    return jx_squeeze(slice_dim(acc, c->d0, r, r + 1), JX_AXES(c->d0));
  case PMAX:
  case PMIN:
    for (int k = 1; k < n; k++) acc = c->op == PMAX ? jx_maximum(acc, X[k]) : jx_minimum(acc, X[k]);
    return acc;
  case ALL_GATHER: return c->d1 ? jx_concatenate(n, X, c->d0) : jx_stack(n, X, c->d0);
  case ALL_TO_ALL: {
    jx_array *chunks[8];
    for (int k = 0; k < n; k++) {
      int64_t len = jx_shape_of(X[k]).dims[c->d0] / n;
      chunks[k] = slice_dim(X[k], c->d0, r * len, (r + 1) * len);
    }
    return jx_concatenate(n, chunks, c->d1);
  }
  case PPERMUTE:
    for (int q = 0; q < c->npairs; q++)
      if (c->pairs[q][1] == r) return X[c->pairs[q][0]];
    return jx_zeros(JX_F64, jx_shape_of(X[0]));
  }
  return NULL;
}

/* The collective whose application is the transpose of c's. */
static cfg transposed(const cfg *c) {
  cfg t = *c;
  if (c->op == ALL_GATHER) t.op = PSUM_SCATTER;
  if (c->op == PSUM_SCATTER) t.op = ALL_GATHER;
  if (c->op == ALL_TO_ALL) {
    t.d0 = c->d1;
    t.d1 = c->d0;
  }
  for (int q = 0; q < c->npairs; q++) {
    t.pairs[q][0] = c->pairs[q][1];
    t.pairs[q][1] = c->pairs[q][0];
  }
  return t;
}

/* ---- meshes and groups ---- */

typedef struct {
  int ndim;
  int64_t size[2];
  const char *names[2];
  jx_mesh *mesh;
  const char *spec; /* splits dim 0 over every axis: block p at position p */
} mesh_def;

static int ndev(const mesh_def *m) { return (int)(m->size[0] * (m->ndim > 1 ? m->size[1] : 1)); }

/* The members of p's group over the axes named in `axis` (by rank), and p's rank. */
static int group(const mesh_def *m, const char *axis, int p, int *members, int *my_rank) {
  int ax[2], nax = 0;
  char buf[64];
  snprintf(buf, sizeof buf, "%s", axis);
  for (char *t = strtok(buf, ","); t; t = strtok(NULL, ","))
    for (int k = 0; k < m->ndim; k++)
      if (strcmp(m->names[k], t) == 0) ax[nax++] = k;
  int64_t pc[2] = {m->ndim > 1 ? p / m->size[1] : p, m->ndim > 1 ? p % m->size[1] : 0};
  int n = 0;
  for (int q = 0; q < ndev(m); q++) {
    int64_t qc[2] = {m->ndim > 1 ? q / m->size[1] : q, m->ndim > 1 ? q % m->size[1] : 0};
    int same = 1, rank = 0;
    for (int k = 0; k < m->ndim; k++) {
      int listed = 0;
      for (int j = 0; j < nax; j++) listed |= ax[j] == k;
      if (!listed) same &= pc[k] == qc[k];
    }
    if (!same) continue;
    for (int j = 0; j < nax; j++) rank = rank * (int)m->size[ax[j]] + (int)qc[ax[j]];
    members[rank] = q;
    if (q == p) *my_rank = rank;
    n++;
  }
  return n;
}

/* The per-device program of f for local inputs `in`, with m's axes bound. */
static jx_program *per_device(const mesh_def *m, jx_fn *f, int nin, const jx_aval *in) {
  for (int k = 0; k < m->ndim; k++) check_ok(jx_axis_push(m->names[k], m->size[k]));
  jx_program *p = jx_fn_program(f, in);
  for (int k = 0; k < m->ndim; k++) jx_axis_pop();
  (void)nin;
  if (!p) fprintf(stderr, "%s\n", jx_last_error());
  /* the shape rules hold without the axes bound (programs are rechecked anywhere) */
  if (p) check_ok(jx_program_verify(p));
  return p;
}

/* x: global, dim 0 split over the devices; returns the global outputs. */
static jx_status run_spmd(const mesh_def *m, jx_fn *f, int nin, jx_array *const *x, int nout,
                          jx_array **out) {
  jx_aval av[4];
  jx_sharding *sh = jx_sharding_create(m->mesh, m->spec);
  jx_sharding *in_sh[4], *out_sh[4];
  for (int i = 0; i < nin; i++) {
    jx_shape s = jx_shape_of(x[i]);
    s.dims[0] /= ndev(m);
    av[i] = (jx_aval){jx_dtype_of(x[i]), 0, s, 0};
    in_sh[i] = sh;
  }
  for (int o = 0; o < nout; o++) out_sh[o] = sh;
  jx_program *p = per_device(m, f, nin, av);
  jx_status st =
      p ? jx_spmd_run(m->mesh, p, nin, x, in_sh, nout, out_sh, out, "test") : jx_last_status();
  jx_program_release(p);
  jx_sharding_release(sh);
  return st;
}

static double tolerance(jx_dtype dt) {
  return dt == JX_BF16  ? 1e-2
         : dt == JX_F16 ? 1e-3
         : dt == JX_F32 ? 1e-5
         : dt == JX_F64 ? 1e-12
                        : 0;
}

static void assert_close(jx_array *got, jx_array *want, double tol, const char *what) {
  got = jx_astype(got, JX_F64);
  want = jx_astype(want, JX_F64);
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  int same = gs.rank == ws.rank;
  for (int k = 0; same && k < gs.rank; k++) same = gs.dims[k] == ws.dims[k];
  if (!same) fprintf(stderr, "%s: shapes differ (rank %d vs %d)\n", what, gs.rank, ws.rank);
  assert_true(same);
  int64_t n = jx_size(got);
  double *g = malloc(sizeof *g * (size_t)(n + 1)), *w = malloc(sizeof *w * (size_t)(n + 1));
  check_ok(jx_read(got, g, sizeof *g * (size_t)n));
  check_ok(jx_read(want, w, sizeof *w * (size_t)n));
  for (int64_t i = 0; i < n; i++) {
    double err = g[i] - w[i];
    if (err < 0) err = -err;
    double lim = tol * (1 + (w[i] < 0 ? -w[i] : w[i]));
    if (err > lim) {
      fprintf(stderr, "%s: element %lld is %g, want %g\n", what, (long long)i, g[i], w[i]);
      fail();
    }
  }
  free(g);
  free(w);
}

/* A global input of shape g with small integer values (exact in every dtype);
 * distinct: no ties for pmax/pmin. */
static jx_array *input(jx_dtype dt, jx_shape g, int distinct, int seed) {
  int64_t n = 1;
  for (int k = 0; k < g.rank; k++) n *= g.dims[k];
  jx_array *v = jx_arange(JX_F64, 0, (double)n, 1);
  if (!distinct)
    v = jx_sub(jx_rem(jx_add(jx_mul(v, jx_scalar(JX_F64, 7)), jx_scalar(JX_F64, seed)),
                      jx_scalar(JX_F64, 23)),
               jx_scalar(JX_F64, 11));
  else
    v = jx_sub(jx_rem(jx_mul(v, jx_scalar(JX_F64, 37)), jx_scalar(JX_F64, (double)n)),
               jx_scalar(JX_F64, (double)n / 2));
  return jx_astype(jx_reshape(v, g), dt);
}

/* Device p's block of a global array split along dim 0 over nd devices. */
static jx_array *block(jx_array *x, int p, int nd) {
  int64_t len = jx_shape_of(x).dims[0] / nd;
  return slice_dim(x, 0, p * len, (p + 1) * len);
}

static int cases_run;

/* Runs c on mesh m with local input shape s and checks every device. */
static void check_collective(const mesh_def *m, cfg c, jx_dtype dt, jx_shape s) {
  jx_scope_begin();
  int nd = ndev(m);
  jx_shape g = s;
  g.dims[0] *= nd;
  jx_array *x = input(dt, g, c.op == PMAX || c.op == PMIN, 3);
  jx_fn *f = jx_fn_create(OP_NAME[c.op], 1, 1, body, &c);
  jx_array *out;
  jx_status st = run_spmd(m, f, 1, &x, 1, &out);
  char what[160];
  snprintf(what, sizeof what, "%s over '%s' on %d devices, %s", OP_NAME[c.op], c.axis, nd,
           jx_dtype_name(dt));
  if (st) fprintf(stderr, "%s: %s\n", what, jx_last_error());
  assert_int_equal(st, JX_OK);
  for (int p = 0; p < nd; p++) {
    int members[8], r = 0;
    int n = group(m, c.axis, p, members, &r);
    jx_array *X[8];
    for (int k = 0; k < n; k++) X[k] = jx_astype(block(x, members[k], nd), JX_F64);
    jx_array *want = definition(&c, X, n, r);
    if (c.op == PMEAN && !jx_is_float(dt))
      want = jx_astype(want, jx_dtype_of(jx_array_shard(out, p)));
    assert_close(jx_array_shard(out, p), want, c.op == PMEAN ? 1e-6 : tolerance(dt), what);
  }
  cases_run++;
  jx_fn_release(f);
  jx_scope_end();
}

static mesh_def line_mesh(int k) {
  int dev[8] = {0, 1, 2, 3, 4, 5, 6, 7};
  mesh_def m = {1, {k, 1}, {"i", NULL}, NULL, "i"};
  m.mesh = jx_mesh_create_on(JX_SHAPE(k), m.names, dev);
  assert_non_null(m.mesh);
  return m;
}

static mesh_def grid_mesh(void) {
  mesh_def m = {2, {4, 2}, {"data", "model"}, NULL, "(data,model)"};
  m.mesh = jx_mesh_create(JX_SHAPE(4, 2), m.names);
  assert_non_null(m.mesh);
  return m;
}

static const jx_dtype DTYPES[] = {JX_F32, JX_F64, JX_I32, JX_BF16};

static void reductions_on_lines(void **state) {
  (void)state;
  for (int k = 1; k <= 8; k *= 2) {
    mesh_def m = line_mesh(k);
    for (int t = 0; t < 4; t++)
      for (op_kind op = PSUM; op <= PMIN; op++)
        check_collective(&m, (cfg){.op = op, .axis = "i"}, DTYPES[t], JX_SHAPE(2, 3));
    check_collective(&m, (cfg){.op = PMEAN, .axis = "i"}, JX_F32, JX_SHAPE(3));
    check_collective(&m, (cfg){.op = PMEAN, .axis = "i"}, JX_I32, JX_SHAPE(3));
    check_collective(&m, (cfg){.op = PSUM, .axis = "i"}, JX_I8, JX_SHAPE(1, 5));
    check_collective(&m, (cfg){.op = PSUM, .axis = "i"}, JX_F32, JX_SHAPE(0, 2)); /* empty */
    jx_mesh_release(m.mesh);
  }
}

static void gathers_and_scatters_on_lines(void **state) {
  (void)state;
  for (int k = 1; k <= 8; k *= 2) {
    mesh_def m = line_mesh(k);
    for (int t = 0; t < 4; t++)
      for (int tiled = 0; tiled <= 1; tiled++)
        for (int d = 0; d <= 2; d++) {
          if (d < 2 || !tiled)
            check_collective(&m, (cfg){.op = ALL_GATHER, .axis = "i", .d0 = d, .d1 = tiled},
                             DTYPES[t], JX_SHAPE(2, 3));
          /* psum_scatter: dim d of size k (untiled) or 2k (tiled) */
          if (d < 2) {
            jx_shape s = d == 0 ? JX_SHAPE(k * (1 + tiled), 3) : JX_SHAPE(2, k * (1 + tiled));
            check_collective(&m, (cfg){.op = PSUM_SCATTER, .axis = "i", .d0 = d, .d1 = tiled},
                             DTYPES[t], s);
          }
        }
    /* negative dims */
    check_collective(&m, (cfg){.op = ALL_GATHER, .axis = "i", .d0 = -1, .d1 = 1}, JX_F32,
                     JX_SHAPE(2, 3));
    jx_mesh_release(m.mesh);
  }
}

static void all_to_all_and_ppermute_on_lines(void **state) {
  (void)state;
  for (int k = 1; k <= 8; k *= 2) {
    mesh_def m = line_mesh(k);
    for (int t = 0; t < 4; t++) {
      for (int s = 0; s < 3; s++)
        for (int c = 0; c < 3; c++) {
          jx_shape sh = JX_SHAPE(2, 3, 2);
          sh.dims[s] = 2 * k;
          check_collective(&m, (cfg){.op = ALL_TO_ALL, .axis = "i", .d0 = s, .d1 = c}, DTYPES[t],
                           sh);
        }
      cfg shift = {.op = PPERMUTE, .axis = "i", .npairs = k};
      for (int q = 0; q < k; q++) {
        shift.pairs[q][0] = q;
        shift.pairs[q][1] = (q + 1) % k;
      }
      check_collective(&m, shift, DTYPES[t], JX_SHAPE(2, 3));
      cfg partial = {.op = PPERMUTE, .axis = "i", .npairs = k / 2}; /* some receive zeros */
      for (int q = 0; q < k / 2; q++) {
        partial.pairs[q][0] = 2 * q;
        partial.pairs[q][1] = k - 1 - 2 * q;
      }
      check_collective(&m, partial, DTYPES[t], JX_SHAPE(3));
    }
    jx_mesh_release(m.mesh);
  }
}

static void every_collective_on_a_grid(void **state) {
  (void)state;
  mesh_def m = grid_mesh();
  const char *axes[] = {"data", "model", "data,model", "model,data"};
  for (int a = 0; a < 4; a++) {
    int n = a == 0 ? 4 : a == 1 ? 2 : 8;
    for (int t = 0; t < 4; t++) {
      for (op_kind op = PSUM; op <= PMIN; op++)
        check_collective(&m, (cfg){.op = op, .axis = axes[a]}, DTYPES[t], JX_SHAPE(2, 2));
      check_collective(&m, (cfg){.op = ALL_GATHER, .axis = axes[a], .d0 = 1, .d1 = 1}, DTYPES[t],
                       JX_SHAPE(2, 3));
      check_collective(&m, (cfg){.op = ALL_GATHER, .axis = axes[a], .d0 = 0}, DTYPES[t],
                       JX_SHAPE(2, 3));
      check_collective(&m, (cfg){.op = PSUM_SCATTER, .axis = axes[a], .d0 = 1, .d1 = 1}, DTYPES[t],
                       JX_SHAPE(2, 2 * n));
      check_collective(&m, (cfg){.op = PSUM_SCATTER, .axis = axes[a], .d0 = 1}, DTYPES[t],
                       JX_SHAPE(2, n));
      check_collective(&m, (cfg){.op = ALL_TO_ALL, .axis = axes[a], .d0 = 1, .d1 = 0}, DTYPES[t],
                       JX_SHAPE(2, n, 2));
      cfg rev = {.op = PPERMUTE, .axis = axes[a], .npairs = n};
      for (int q = 0; q < n; q++) {
        rev.pairs[q][0] = q;
        rev.pairs[q][1] = n - 1 - q;
      }
      check_collective(&m, rev, DTYPES[t], JX_SHAPE(2, 2));
    }
  }
  jx_mesh_release(m.mesh);
}

/* ---- reverse mode through the per-device program ---- */

static void check_vjp_ties(const mesh_def *m, cfg c, jx_shape s, int ties) {
  jx_scope_begin();
  int nd = ndev(m);
  jx_shape g = s;
  g.dims[0] *= nd;
  jx_array *x = input(JX_F64, g, 1, 0);
  if (ties) x = jx_round(jx_div(x, jx_scalar(JX_F64, 100))); /* many equal values */
  jx_fn *f = jx_fn_create(OP_NAME[c.op], 1, 1, body, &c);
  jx_array *y;
  check_ok(run_spmd(m, f, 1, &x, 1, &y));
  jx_array *ct = input(JX_F64, jx_shape_of(y), 0, 5);
  jx_fn *v = jx_vjp(f);
  jx_array *in[2] = {x, ct}, *out[2];
  check_ok(run_spmd(m, v, 2, in, 2, out));
  cfg t = transposed(&c);
  char what[160];
  snprintf(what, sizeof what, "vjp of %s over '%s' on %d devices", OP_NAME[c.op], c.axis, nd);
  for (int p = 0; p < nd; p++) {
    int members[8], r = 0;
    int n = group(m, c.axis, p, members, &r);
    jx_array *C[8];
    for (int k = 0; k < n; k++) C[k] = block(ct, members[k], nd);
    jx_array *want;
    if (c.op == PMAX || c.op == PMIN) { /* the mean of the cotangents of the chosen elements */
      jx_array *X[8], *count = jx_scalar(JX_F64, 0);
      for (int k = 0; k < n; k++) X[k] = block(x, members[k], nd);
      cfg sum = {.op = PSUM, .axis = c.axis};
      jx_array *mx = definition(&c, X, n, r);
      for (int k = 0; k < n; k++) count = jx_add(count, jx_astype(jx_eq(X[k], mx), JX_F64));
      want =
          jx_where(jx_eq(X[r], mx), jx_div(definition(&sum, C, n, r), count), jx_scalar(JX_F64, 0));
    } else {
      want = definition(&t, C, n, r);
    }
    assert_close(jx_array_shard(out[1], p), want, 1e-12, what);
  }
  cases_run++;
  jx_fn_release(v);
  jx_fn_release(f);
  jx_scope_end();
}

static void check_vjp(const mesh_def *m, cfg c, jx_shape s) { check_vjp_ties(m, c, s, 0); }

static void vjp_is_the_transposed_collective(void **state) {
  (void)state;
  for (int k = 2; k <= 8; k *= 2) {
    mesh_def m = line_mesh(k);
    check_vjp(&m, (cfg){.op = PSUM, .axis = "i"}, JX_SHAPE(2, 3));
    check_vjp(&m, (cfg){.op = PMAX, .axis = "i"}, JX_SHAPE(2, 3));
    check_vjp(&m, (cfg){.op = PMIN, .axis = "i"}, JX_SHAPE(2, 3));
    check_vjp_ties(&m, (cfg){.op = PMAX, .axis = "i"}, JX_SHAPE(2, 3), 1);
    check_vjp_ties(&m, (cfg){.op = PMIN, .axis = "i"}, JX_SHAPE(2, 3), 1);
    for (int tiled = 0; tiled <= 1; tiled++) {
      check_vjp(&m, (cfg){.op = ALL_GATHER, .axis = "i", .d0 = 1, .d1 = tiled}, JX_SHAPE(2, 3));
      check_vjp(&m, (cfg){.op = PSUM_SCATTER, .axis = "i", .d0 = 1, .d1 = tiled},
                JX_SHAPE(2, k * (1 + tiled)));
    }
    check_vjp(&m, (cfg){.op = ALL_TO_ALL, .axis = "i", .d0 = 1, .d1 = 0}, JX_SHAPE(2, 2 * k));
    cfg shift = {.op = PPERMUTE, .axis = "i", .npairs = k - 1};
    for (int q = 0; q < k - 1; q++) {
      shift.pairs[q][0] = q;
      shift.pairs[q][1] = q + 1;
    }
    check_vjp(&m, shift, JX_SHAPE(3));
    jx_mesh_release(m.mesh);
  }
  mesh_def m = grid_mesh();
  check_vjp(&m, (cfg){.op = PSUM, .axis = "model,data"}, JX_SHAPE(2));
  check_vjp(&m, (cfg){.op = ALL_GATHER, .axis = "data", .d0 = 0, .d1 = 1}, JX_SHAPE(2, 2));
  jx_mesh_release(m.mesh);
}

/* ---- batching: jx_vmap_axis over "i" against the definitions ---- */

static void check_vmap(cfg c, jx_dtype dt, int n, jx_shape s, int in_axis) {
  jx_scope_begin();
  jx_shape g = {s.rank + 1, {0}};
  for (int k = 0, j = 0; k < g.rank; k++) g.dims[k] = k == in_axis ? n : s.dims[j++];
  jx_array *x = input(dt, g, 1, 1);
  jx_fn *f = jx_fn_create(OP_NAME[c.op], 1, 1, body, &c);
  jx_fn *v = jx_vmap_axis(f, JX_AXES(in_axis), JX_AXES(0), "i");
  jx_array *y;
  jx_status st = jx_call(v, &x, &y);
  char what[160];
  snprintf(what, sizeof what, "vmap of %s (batch %d, in_axis %d, %s)", OP_NAME[c.op], n, in_axis,
           jx_dtype_name(dt));
  if (st) fprintf(stderr, "%s: %s\n", what, jx_last_error());
  assert_int_equal(st, JX_OK);
  jx_array *X[8];
  for (int k = 0; k < n; k++)
    X[k] = jx_astype(jx_squeeze(slice_dim(x, in_axis, k, k + 1), JX_AXES(in_axis)), JX_F64);
  for (int r = 0; r < n; r++)
    assert_close(jx_squeeze(slice_dim(y, 0, r, r + 1), JX_AXES(0)), definition(&c, X, n, r),
                 tolerance(dt), what);
  cases_run++;
  jx_fn_release(v);
  jx_fn_release(f);
  jx_scope_end();
}

static void vmap_with_an_axis_name(void **state) {
  (void)state;
  for (int n = 1; n <= 4; n++)
    for (int ia = 0; ia <= 1; ia++)
      for (int t = 0; t < 4; t++) {
        jx_dtype dt = DTYPES[t];
        for (op_kind op = PSUM; op <= PMEAN; op++)
          if (op != PMEAN || jx_is_float(dt))
            check_vmap((cfg){.op = op, .axis = "i"}, dt, n, JX_SHAPE(2, 3), ia);
        for (int tiled = 0; tiled <= 1; tiled++) {
          check_vmap((cfg){.op = ALL_GATHER, .axis = "i", .d0 = 1, .d1 = tiled}, dt, n,
                     JX_SHAPE(2, 3), ia);
          check_vmap((cfg){.op = PSUM_SCATTER, .axis = "i", .d0 = 1, .d1 = tiled}, dt, n,
                     JX_SHAPE(2, n * (1 + tiled)), ia);
        }
        check_vmap((cfg){.op = ALL_TO_ALL, .axis = "i", .d0 = 0, .d1 = 1}, dt, n,
                   JX_SHAPE(2 * n, 3), ia);
        check_vmap((cfg){.op = ALL_TO_ALL, .axis = "i", .d0 = 1, .d1 = 1}, dt, n, JX_SHAPE(2, n),
                   ia);
        cfg shift = {.op = PPERMUTE, .axis = "i", .npairs = n - 1};
        for (int q = 0; q + 1 < n; q++) {
          shift.pairs[q][0] = q + 1;
          shift.pairs[q][1] = q;
        }
        check_vmap(shift, dt, n, JX_SHAPE(3), ia);
      }
}

/* Nested: an outer vmap "j" around an inner vmap "i"; psum over "j" inside
 * the inner body (the vmapped axis is not among the collective's there). */
static void outer_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *s = jx_psum(in[0], "j");
  out[0] = jx_add(jx_all_gather(s, "i", 0, 0), jx_scalar(JX_F32, 0));
}

static void nested_vmaps(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("outer", 1, 1, outer_body, NULL);
  jx_fn *vi = jx_vmap_axis(f, JX_AXES(0), JX_AXES(0), "i");
  jx_fn *vj = jx_vmap_axis(vi, JX_AXES(0), JX_AXES(0), "j");
  jx_array *x = input(JX_F32, JX_SHAPE(3, 2, 4), 1, 0); /* j, i, 4 */
  jx_array *y;
  check_ok(jx_call(vj, &x, &y));
  /* y[j, i] = stack over i' of sum over j' of x[j', i'] */
  jx_array *s = jx_sum(x, JX_AXES(0), 0); /* [2, 4] */
  jx_array *want = jx_broadcast_to(s, JX_SHAPE(3, 2, 2, 4));
  assert_close(y, want, 1e-6, "nested vmaps");
  jx_fn_release(vj);
  jx_fn_release(vi);
  jx_fn_release(f);
}

/* ---- gradients of collectives under vmap (pmap semantics) ---- */

static void grad_body(void *ctx, jx_array *const *in, jx_array **out) {
  int which = *(const int *)ctx;
  jx_array *x = in[0];
  switch (which) {
  case 0: out[0] = jx_mul(jx_psum(x, "i"), jx_sin(x)); break;
  case 1: out[0] = jx_mul(jx_pmax(x, "i"), x); break;
  case 2: out[0] = jx_sin(jx_all_gather(x, "i", 0, 1)); break;
  case 3: out[0] = jx_square(jx_psum_scatter(x, "i", 0, 1)); break;
  case 4: out[0] = jx_mul(jx_ppermute(x, "i", 2, (const int[][2]){{0, 1}, {1, 2}}), x); break;
  case 5: out[0] = jx_cos(jx_all_to_all(x, "i", 0, 1)); break;
  default: out[0] = jx_mul(jx_pmean(x, "i"), jx_pmin(x, "i")); break;
  }
}

static void check_grads_under_vmap(void **state) {
  (void)state;
  for (int which = 0; which <= 6; which++) {
    jx_fn *f = jx_fn_create("g", 1, 1, grad_body, &which);
    jx_fn *v = jx_vmap_axis(f, JX_AXES(0), JX_AXES(0), "i");
    jx_array *x = jx_mul(input(JX_F64, JX_SHAPE(3, 6, 2), 1, 0), jx_scalar(JX_F64, 0.1));
    jx_status st = jx_check_grads(v, &x, 2, 0, 0);
    if (st) fprintf(stderr, "case %d: %s\n", which, jx_last_error());
    assert_int_equal(st, JX_OK);
    jx_fn_release(v);
    jx_fn_release(f);
  }
}

/* ---- errors ---- */

static cfg err_cfg;
static void err_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = apply(&err_cfg, in[0]);
}

/* Traces apply(c) with data (4) and model (2) bound; returns the error. */
static void expect_error(cfg c, jx_shape s, const char *msg) {
  err_cfg = c;
  jx_fn *f = jx_fn_create("bad", 1, 1, err_body, NULL);
  check_ok(jx_axis_push("data", 4));
  check_ok(jx_axis_push("model", 2));
  jx_aval a = {JX_F32, 0, s, 0};
  jx_program *p = jx_fn_program(f, &a);
  jx_axis_pop();
  jx_axis_pop();
  assert_null(p);
  assert_error_has(msg);
  jx_fn_release(f);
}

static void errors_name_the_function(void **state) {
  (void)state;
  expect_error((cfg){.op = PSUM, .axis = "modl"}, JX_SHAPE(2),
               "jx_psum: no enclosing shard_map, pmap or vmap binds an axis named 'modl' "
               "(bound: data, model)");
  expect_error((cfg){.op = PMAX, .axis = "data,,model"}, JX_SHAPE(2), "jx_pmax: 'data,,model'");
  expect_error((cfg){.op = ALL_GATHER, .axis = "data", .d0 = 3, .d1 = 1}, JX_SHAPE(2, 2),
               "jx_all_gather");
  expect_error((cfg){.op = ALL_GATHER, .axis = "data", .d0 = 3}, JX_SHAPE(2, 2), "jx_all_gather");
  expect_error((cfg){.op = PSUM_SCATTER, .axis = "data", .d0 = 1, .d1 = 1}, JX_SHAPE(2, 6),
               "jx_psum_scatter: dim 1 of the operand f32[2,6] has size 6, not divisible by the "
               "group size 4");
  expect_error((cfg){.op = PSUM_SCATTER, .axis = "data,model", .d0 = 0}, JX_SHAPE(4),
               "jx_psum_scatter: without tiling, dim 0 of the operand f32[4] must equal the group "
               "size 8, but it is 4");
  expect_error((cfg){.op = ALL_TO_ALL, .axis = "model", .d0 = 0, .d1 = 0}, JX_SHAPE(3),
               "jx_all_to_all: split_dim 0 of the operand f32[3] has size 3, not divisible by "
               "the group size 2");
  expect_error((cfg){.op = ALL_TO_ALL, .axis = "model", .d0 = 0, .d1 = -2}, JX_SHAPE(2),
               "jx_all_to_all");
  expect_error((cfg){.op = PPERMUTE, .axis = "model", .npairs = 1, .pairs = {{0, 2}}}, JX_SHAPE(2),
               "jx_ppermute: pair 0 (0, 2) has a destination out of range for the "
               "group size 2");
  expect_error((cfg){.op = PPERMUTE, .axis = "data", .npairs = 2, .pairs = {{0, 1}, {2, 1}}},
               JX_SHAPE(2), "jx_ppermute: pairs 0 and 1 have the same destination 1");
  expect_error((cfg){.op = PPERMUTE, .axis = "data", .npairs = 2, .pairs = {{3, 1}, {3, 2}}},
               JX_SHAPE(2), "have the same source 3");
  /* outside any transformation */
  jx_array *x = jx_zeros(JX_F32, JX_SHAPE(2));
  assert_true(jx_is_poisoned(jx_psum(x, "i")));
  assert_error_has("jx_psum: no enclosing shard_map, pmap or vmap binds an axis named 'i' (no "
                   "axis is bound)");
  /* mixing the vmapped axis with others, as JAX, only for reductions */
  check_ok(jx_axis_push("data", 4));
  jx_fn *f = jx_fn_create("mix", 1, 1, err_body, NULL);
  err_cfg = (cfg){.op = ALL_GATHER, .axis = "data,i"};
  jx_fn *v = jx_vmap_axis(f, JX_AXES(0), JX_AXES(0), "i");
  jx_aval a = {JX_F32, 0, JX_SHAPE(2, 3), 0};
  assert_null(jx_fn_program(v, &a));
  assert_error_has("jx_all_gather under jx_vmap_axis: naming the vmapped axis 'i' together");
  jx_axis_pop();
  jx_fn_release(v);
  jx_fn_release(f);
}

/* psum over "data" and the vmapped "i" together: batch reduced, then the mesh. */
static void mixed_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum(in[0], "i,data");
}
static void vmap_inside_spmd(void *ctx, jx_array *const *in, jx_array **out) {
  jx_call(ctx, in, out);
}

static void vmapped_and_mesh_axes_together(void **state) {
  (void)state;
  mesh_def m = line_mesh(4);
  m.names[0] = "data";
  m.spec = "data";
  jx_mesh_release(m.mesh);
  int dev[4] = {0, 1, 2, 3};
  m.mesh = jx_mesh_create_on(JX_SHAPE(4), m.names, dev);
  jx_fn *f = jx_fn_create("mixed", 1, 1, mixed_body, NULL);
  jx_fn *v = jx_vmap_axis(f, JX_AXES(0), JX_AXES(0), "i");
  jx_fn *outer = jx_fn_create("outer", 1, 1, vmap_inside_spmd, v);
  jx_array *x = input(JX_F32, JX_SHAPE(12, 2), 1, 0); /* per device [3, 2]: batch 3 */
  jx_array *y;
  check_ok(run_spmd(&m, outer, 1, &x, 1, &y));
  jx_array *total = jx_sum(x, JX_AXES(0), 0);
  for (int p = 0; p < 4; p++)
    assert_close(jx_array_shard(y, p), jx_broadcast_to(total, JX_SHAPE(3, 2)), 1e-5, "mixed axes");
  jx_fn_release(outer);
  jx_fn_release(v);
  jx_fn_release(f);
  jx_mesh_release(m.mesh);
}

/* axis_index inside the per-device program: row-major over "a,b". */
static void index_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(in[0], jx_scalar(JX_I32, 0)),
                  jx_stack(3,
                           (jx_array *[]){jx_axis_index("data"), jx_axis_index("model"),
                                          jx_axis_index("model,data")},
                           0));
}

static void axis_index_on_devices(void **state) {
  (void)state;
  mesh_def m = grid_mesh();
  jx_fn *f = jx_fn_create("index", 1, 1, index_body, NULL);
  jx_array *x = jx_zeros(JX_I32, JX_SHAPE(24));
  jx_array *y;
  check_ok(run_spmd(&m, f, 1, &x, 1, &y));
  for (int p = 0; p < 8; p++) {
    int32_t got[3];
    check_ok(jx_read(jx_array_shard(y, p), got, sizeof got));
    assert_int_equal(got[0], p / 2);
    assert_int_equal(got[1], p % 2);
    assert_int_equal(got[2], (p % 2) * 4 + p / 2);
  }
  jx_fn_release(f);
  jx_mesh_release(m.mesh);
}

/* ---- deadlines ---- */

static void psum_branch(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum(in[0], "t");
}
static void identity_branch(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = in[0];
}
static void only_device_0(void *ctx, jx_array *const *in, jx_array **out) {
  jx_fn **br = ctx;
  jx_array *pred = jx_eq(jx_axis_index("t"), jx_scalar(JX_I32, 0));
  jx_cond(pred, br[0], br[1], 1, in, out);
}

static void a_missing_device_times_out(void **state) {
  (void)state;
  setenv("JX_COLLECTIVE_TIMEOUT", "1", 1);
  int dev[2] = {4, 5};
  mesh_def m = {1, {2, 1}, {"t", NULL}, NULL, "t"};
  m.mesh = jx_mesh_create_on(JX_SHAPE(2), m.names, dev);
  jx_fn *br[2] = {jx_fn_create("psum", 1, 1, psum_branch, NULL),
                  jx_fn_create("id", 1, 1, identity_branch, NULL)};
  jx_fn *f = jx_fn_create("only0", 1, 1, only_device_0, br);
  jx_array *x = jx_ones(JX_F32, JX_SHAPE(2));
  jx_array *y;
  jx_status st = run_spmd(&m, f, 1, &x, 1, &y);
  unsetenv("JX_COLLECTIVE_TIMEOUT");
  assert_int_equal(st, JX_ERR_TIMEOUT);
  fprintf(stderr, "(expected) %s\n", jx_last_error());
  assert_error_has("device 5");
  /* a fresh mesh of the same devices still works */
  mesh_def fresh = line_mesh(8);
  check_collective(&fresh, (cfg){.op = PSUM, .axis = "i"}, JX_F32, JX_SHAPE(2));
  jx_mesh_release(fresh.mesh);
  jx_fn_release(f);
  jx_fn_release(br[0]);
  jx_fn_release(br[1]);
  jx_mesh_release(m.mesh);
}

static void summary(void **state) {
  (void)state;
  fprintf(stderr, "%d collective cases checked\n", cases_run);
  assert_true(cases_run > 300);
}

int main(void) {
  check_ok(jx_set_cpu_device_count(8));
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(reductions_on_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(gathers_and_scatters_on_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(all_to_all_and_ppermute_on_lines, setup, teardown),
      cmocka_unit_test_setup_teardown(every_collective_on_a_grid, setup, teardown),
      cmocka_unit_test_setup_teardown(vjp_is_the_transposed_collective, setup, teardown),
      cmocka_unit_test_setup_teardown(vmap_with_an_axis_name, setup, teardown),
      cmocka_unit_test_setup_teardown(nested_vmaps, setup, teardown),
      cmocka_unit_test_setup_teardown(check_grads_under_vmap, setup, teardown),
      cmocka_unit_test_setup_teardown(errors_name_the_function, setup, teardown),
      cmocka_unit_test_setup_teardown(vmapped_and_mesh_axes_together, setup, teardown),
      cmocka_unit_test_setup_teardown(axis_index_on_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(a_missing_device_times_out, setup, teardown),
      cmocka_unit_test_setup_teardown(summary, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
