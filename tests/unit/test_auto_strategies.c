/* The automatic sharding planner's per-equation strategies on a 4x2 mesh
 * ("data", "model"), priced by a model with hand-set figures (10 us, 1 GB/s,
 * 1 GFLOP/s): a dot_general offers data parallel, Megatron's column and row
 * layouts, 2-D and contracting splits, with flops shares and all_reduce
 * times computed by hand; resharding prices jx_reshard's collectives; every
 * equation of an MLP layer has its replicated strategy (whose flops are the
 * cost model's) and the data-parallel one at a quarter of them; with a
 * bandwidth, compute is the roofline of local flops and bytes. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>
#include <jx/jx.h>
#include <jx/parallel.h>

#include "compile/cost.h"
#include "compile/simplify.h"
#include "parallel/auto/strategies.h"
#include "trace/fn.h"

enum { DATA = 1u << 0, MODEL = 1u << 1 };
static const double ALPHA = 1e-5, BETA = 1e-9, RATE = 1e9;

static jx_mesh *mesh;
static jx_comm_model model;

static int setup(void **state) {
  (void)state;
  const char *names[] = {"data", "model"};
  mesh = jx_mesh_create((jx_shape){2, {4, 2}}, names);
  jx_comm_model_uniform(&model, mesh, ALPHA, 1 / BETA, RATE);
  return mesh ? 0 : -1;
}

static int teardown(void **state) {
  (void)state;
  jx_mesh_release(mesh);
  return 0;
}

static void f_dot(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_matmul(in[0], in[1]);
}

static void f_mlp_layer(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_tanh(jx_add(jx_matmul(in[0], in[1]), in[2]));
}

static jx_aval f32(jx_shape s) { return (jx_aval){.dtype = JX_F32, .shape = s}; }

/* The program the sharded jit partitions: f's, simplified (calls inlined). */
static jx_program *program_of(jx_fn *f, const jx_aval *in) {
  jx_program *traced = jx_fn_program(f, in);
  assert_non_null(traced);
  jx_program *p = jx_simplify(traced);
  jx_program_release(traced);
  assert_non_null(p);
  return p;
}

/* The strategy reading operands as specs[0..nin) and giving specs[nin] with
 * these partial axes, or NULL. */
static const jx_strategy *find(const jx_eqn_strategies *s, const char *const *specs,
                               uint32_t partial) {
  char buf[JX_SPEC_CAP];
  for (int k = 0; k < s->n; k++) {
    int match = s->s[k].partial_axes == partial;
    for (int i = 0; i < s->e->nin && match; i++)
      match = strcmp(jx_pspec_str(mesh, &s->s[k].req[i], buf), specs[i]) == 0;
    if (match) match = strcmp(jx_pspec_str(mesh, &s->s[k].prod[0], buf), specs[s->e->nin]) == 0;
    if (match) return &s->s[k];
  }
  return NULL;
}

static void expect(const jx_eqn_strategies *s, const char *l, const char *r, const char *o,
                   uint32_t partial, double flops, double comm_s) {
  const char *specs[] = {l, r, o};
  const jx_strategy *t = find(s, specs, partial);
  if (!t) fail_msg("no strategy %s x %s -> %s (partial %u)", l, r, o, partial);
  assert_float_equal(t->flops, flops, 1e-9);
  assert_float_equal(t->compute_s, flops / RATE, 1e-15);
  assert_float_equal(t->comm_s, comm_s, 1e-15);
}

static void dot_offers_the_known_layouts(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("dot", 2, 1, f_dot, NULL);
  jx_aval in[] = {f32(JX_SHAPE(16, 32)), f32(JX_SHAPE(32, 64))};
  jx_program *p = program_of(f, in);
  assert_int_equal(p->neqns, 1);
  jx_eqn_strategies s;
  assert_int_equal(jx_eqn_strategies_make(&model, mesh, p, &p->eqns[0], &s), JX_OK);
  const double flops = 2.0 * 16 * 32 * 64, out_bytes = 16 * 64 * 4;
  /* the first strategy is the replicated one */
  char buf[JX_SPEC_CAP];
  assert_string_equal(jx_pspec_str(mesh, &s.s[0].req[0], buf), "None,None");
  assert_string_equal(jx_pspec_str(mesh, &s.s[0].prod[0], buf), "None,None");
  expect(&s, "None,None", "None,None", "None,None", 0, flops, 0);
  expect(&s, "data,None", "None,None", "data,None", 0, flops / 4, 0);   /* data parallel */
  expect(&s, "None,None", "None,model", "None,model", 0, flops / 2, 0); /* column */
  expect(&s, "data,None", "None,model", "data,model", 0, flops / 8, 0); /* 2-D */
  /* row-parallel: partial over model (n = 2), an all_reduce of the whole
   * result: 2*1*alpha + 2*(1/2)*bytes*beta */
  expect(&s, "None,model", "model,None", "None,None", MODEL, flops / 2,
         2 * ALPHA + out_bytes * BETA);
  /* contracting over data (n = 4): 2*3*alpha + 2*(3/4)*bytes*beta */
  expect(&s, "None,data", "data,None", "None,None", DATA, flops / 4,
         6 * ALPHA + 1.5 * out_bytes * BETA);
  /* contracting over both (n = 8) */
  expect(&s, "None,(data,model)", "(data,model),None", "None,None", DATA | MODEL, flops / 8,
         14 * ALPHA + 1.75 * out_bytes * BETA);
  /* data parallel with the lhs's rows over both axes */
  expect(&s, "(data,model),None", "None,None", "(data,model),None", 0, flops / 8, 0);
  /* distinct, every layout fitting its array */
  for (int a = 0; a < s.n; a++) {
    for (int k = 0; k < 2; k++) assert_true(jx_pspec_fits(mesh, &s.s[a].req[k], in[k].shape));
    for (int b = a + 1; b < s.n; b++) {
      int same = s.s[a].partial_axes == s.s[b].partial_axes &&
                 jx_pspec_equal(&s.s[a].prod[0], &s.s[b].prod[0]);
      for (int k = 0; k < 2; k++) same &= jx_pspec_equal(&s.s[a].req[k], &s.s[b].req[k]);
      assert_false(same);
    }
  }
  jx_eqn_strategies_free(&s);
  jx_program_release(p);
  jx_fn_release(f);
}

static void f_transpose_dot(void *c, jx_array *const *in, jx_array **out) {
  (void)c;
  out[0] = jx_matmul(jx_transpose(in[0], JX_AXES()), in[1]);
}

/* With a bandwidth, a strategy's compute is the estimate's roofline of its
 * local flops and bytes: a transpose (no flops) costs its bytes read and
 * written in the layouts it runs in, a product the larger of its flops at
 * the rate and its operands' and result's bytes at the bandwidth. */
static void strategies_priced_by_the_roofline(void **state) {
  (void)state;
  const double bw = 1e9 / 64; /* slow enough that the small product is memory-bound */
  jx_comm_model roof = model;
  roof.mem_bytes_per_s = bw;
  jx_fn *f = jx_fn_create("transpose_dot", 2, 1, f_transpose_dot, NULL);
  jx_aval in[] = {f32(JX_SHAPE(32, 16)), f32(JX_SHAPE(32, 64))};
  jx_program *p = program_of(f, in);
  assert_int_equal(p->neqns, 2);
  jx_eqn_strategies s;
  assert_int_equal(jx_eqn_strategies_make(&roof, mesh, p, &p->eqns[0], &s), JX_OK);
  const char *whole[] = {"None,None", "None,None"}, *split[] = {"None,data", "data,None"};
  const jx_strategy *t = find(&s, whole, 0), *u = find(&s, split, 0);
  assert_non_null(t);
  assert_non_null(u);
  assert_float_equal(t->flops, 0, 0);
  assert_float_equal(t->compute_s, 2 * 32 * 16 * 4 / bw, 1e-15);
  assert_float_equal(u->compute_s, 2 * 32 * 16 * 4 / 4 / bw, 1e-15);
  jx_eqn_strategies_free(&s);
  assert_int_equal(jx_eqn_strategies_make(&roof, mesh, p, &p->eqns[1], &s), JX_OK);
  const char *dp[] = {"data,None", "None,None", "data,None"};
  t = find(&s, dp, 0);
  assert_non_null(t);
  const double flops = 2.0 * 16 * 32 * 64 / 4, bytes = (16 * 32 / 4 + 32 * 64 + 16 * 64 / 4) * 4;
  assert_float_equal(t->flops, flops, 1e-9);
  assert_true(bytes / bw > flops / RATE);
  assert_float_equal(t->compute_s, bytes / bw, 1e-15);
  jx_eqn_strategies_free(&s);
  jx_program_release(p);
  jx_fn_release(f);
}

static jx_pspec spec2(int d0, int d1) { /* -1: none; else the axis (mesh order) */
  jx_pspec a = jx_pspec_replicated(2);
  if (d0 >= 0) a.ax[0][a.n[0]++] = (int8_t)d0;
  if (d1 >= 0) a.ax[1][a.n[1]++] = (int8_t)d1;
  return a;
}

static void resharding_prices_the_collectives(void **state) {
  (void)state;
  jx_aval a = f32(JX_SHAPE(16, 64)); /* 4096 bytes */
  jx_pspec rep = spec2(-1, -1), rows = spec2(0, -1), cols = spec2(-1, 0), grid = spec2(0, 1);
  /* gathering the rows over data: 3 alpha + 3/4 * 4096 beta */
  assert_float_equal(jx_reshard_time(&model, mesh, a, &rows, &rep), 3 * ALPHA + 3072 * BETA, 1e-15);
  /* moving the split from rows to columns: one all_to_all of the 1024-byte block */
  assert_float_equal(jx_reshard_time(&model, mesh, a, &rows, &cols), 3 * ALPHA + 768 * BETA, 1e-15);
  /* giving up model on the columns: an all_gather into a 1024-byte block */
  assert_float_equal(jx_reshard_time(&model, mesh, a, &grid, &rows), ALPHA + 512 * BETA, 1e-15);
  /* new splits are local slices; the same layout costs nothing */
  assert_float_equal(jx_reshard_time(&model, mesh, a, &rep, &grid), 0, 0);
  assert_float_equal(jx_reshard_time(&model, mesh, a, &grid, &grid), 0, 0);
}

static void layout_candidates_respect_divisibility(void **state) {
  (void)state;
  /* 3 choices per axis (none, dim 0, dim 1), all dividing 16 x 64 */
  assert_int_equal(jx_layout_candidates(mesh, JX_SHAPE(16, 64), NULL, 0), 9);
  /* 6 rows: data (4) cannot split dim 0, alone or with model */
  jx_pspec c[16];
  int n = jx_layout_candidates(mesh, JX_SHAPE(6, 64), c, 16);
  assert_int_equal(n, 6);
  for (int k = 0; k < n; k++) assert_true(jx_pspec_fits(mesh, &c[k], JX_SHAPE(6, 64)));
  assert_false(jx_pspec_sharded(&c[0]));
  assert_int_equal(jx_layout_candidates(mesh, (jx_shape){0, {0}}, c, 16), 1);
}

static void mlp_layer_strategies(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("mlp_layer", 3, 1, f_mlp_layer, NULL);
  jx_aval in[] = {f32(JX_SHAPE(16, 32)), f32(JX_SHAPE(32, 64)), f32(JX_SHAPE(64))};
  jx_program *p = program_of(f, in);
  jx_cost whole = {0};
  jx_program_cost(p, &whole);
  double replicated_flops = 0;
  int dp_eqns = 0;
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_eqn_strategies s;
    assert_int_equal(jx_eqn_strategies_make(&model, mesh, p, e, &s), JX_OK);
    assert_true(s.n >= 1);
    for (int i = 0; i < e->nin; i++) assert_false(jx_pspec_sharded(&s.s[0].req[i]));
    assert_float_equal(s.s[0].flops, jx_eqn_flops(p, e), 1e-9);
    replicated_flops += s.s[0].flops;
    /* every [16, 64] result can come out data-parallel at a quarter of the work */
    if (p->avals[e->out[0]].shape.rank == 2 && p->avals[e->out[0]].shape.dims[1] == 64) {
      jx_pspec rows = spec2(0, -1);
      int found = 0;
      for (int t = 0; t < s.n && !found; t++)
        found = jx_pspec_equal(&s.s[t].prod[0], &rows) && s.s[t].partial_axes == 0 &&
                fabs(s.s[t].flops - jx_eqn_flops(p, e) / 4) < 1e-9 && s.s[t].comm_s == 0;
      if (!found) fail_msg("equation %d (%s) has no data-parallel strategy", k, e->prim->name);
      dp_eqns++;
    }
    jx_eqn_strategies_free(&s);
  }
  assert_true(dp_eqns >= 3); /* the dot, the add, the tanh */
  assert_float_equal(replicated_flops, whole.flops, 1e-6);
  jx_program_release(p);
  jx_fn_release(f);
}

static void errors_name_the_mismatch(void **state) {
  (void)state;
  jx_fn *f = jx_fn_create("dot", 2, 1, f_dot, NULL);
  jx_aval in[] = {f32(JX_SHAPE(16, 32)), f32(JX_SHAPE(32, 64))};
  jx_program *p = program_of(f, in);
  const char *names[] = {"x"};
  jx_mesh *line = jx_mesh_create((jx_shape){1, {4}}, names);
  jx_comm_model other;
  jx_comm_model_uniform(&other, line, ALPHA, 1 / BETA, RATE);
  jx_eqn_strategies s;
  assert_int_equal(jx_eqn_strategies_make(&other, mesh, p, &p->eqns[0], &s),
                   JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "the model has 1 mesh axes, the mesh 2"));
  assert_int_equal(s.n, 0);
  jx_clear_error();
  jx_mesh_release(line);
  jx_program_release(p);
  jx_fn_release(f);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(dot_offers_the_known_layouts),
      cmocka_unit_test(strategies_priced_by_the_roofline),
      cmocka_unit_test(resharding_prices_the_collectives),
      cmocka_unit_test(layout_candidates_respect_divisibility),
      cmocka_unit_test(mlp_layer_strategies),
      cmocka_unit_test(errors_name_the_mismatch),
  };
  return cmocka_run_group_tests(tests, setup, teardown);
}
