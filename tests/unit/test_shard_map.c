/* jx_shard_map: per-device bodies on meshes of 1, 2, 4, 8 devices and 4x2,
 * checked against the unsharded computation (the oracle): elementwise
 * bodies, a matmul whose contracting dim is split (psum), collectives,
 * replicated inputs and outputs, under jit (compiled once), gradients
 * (jx_check_grads against finite differences), vmap, and the errors. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "parallel/collective.h"
#include "test_util.h"
#include "test_close.h"

static const char *const DM[] = {"data", "model"};
static const char *const I[] = {"i"};

/* x rolled by k rows: row r goes to row r + k (mod rows) */
static jx_array *roll_rows(jx_array *x, int64_t k) {
  jx_shape s = jx_shape_of(x);
  int64_t n = s.dims[0];
  if (k % n == 0) return x;
  jx_shape a0 = {s.rank, {0}}, a1 = s, b0 = {s.rank, {0}}, b1 = s;
  a0.dims[0] = n - k; /* the tail comes first */
  b1.dims[0] = n - k;
  jx_array *parts[2] = {jx_slice(x, a0, a1, JX_SHAPE()), jx_slice(x, b0, b1, JX_SHAPE())};
  return jx_concatenate(2, parts, 0);
}

static jx_mesh *mesh1(int n) { return jx_mesh_create(JX_SHAPE(n), I); }

static jx_array *call1(jx_fn *f, int n, jx_array *const *in) {
  jx_array *out[4] = {0};
  check_ok(jx_call(f, in, out));
  (void)n;
  return out[0];
}

/* ---- bodies ---- */
/* sin(x) * y + 1 */
static void elementwise_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_add(jx_mul(jx_sin(in[0]), in[1]), jx_scalar(JX_F64, 1));
}

/* the partial product of the local blocks, summed over the contracting axis */
static void matmul_psum_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_psum(jx_matmul(in[0], in[1]), (const char *)ctx);
}

static void unsharded_matmul(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_matmul(in[0], in[1]);
}

/* ---- elementwise on meshes of every size ---- */
static void elementwise_on_1_2_4_8_devices(void **state) {
  (void)state;
  jx_array *x = val(JX_SHAPE(8, 3), 0.1), *y = val(JX_SHAPE(8, 3), 0.7);
  jx_array *in[2] = {x, y};
  jx_fn *f = jx_fn_create("elementwise", 2, 1, elementwise_body, NULL);
  jx_array *want = call1(f, 2, in);
  for (int n = 1; n <= 8; n *= 2) {
    jx_mesh *m = mesh1(n);
    jx_fn *s = jx_shard_map(f, m, (const char *[]){"i", "i"}, (const char *[]){"i"});
    assert_non_null(s);
    jx_array *got = call1(s, 2, in);
    assert_close(got, want, 0);
    assert_non_null(jx_sharding_of(got));
    assert_string_equal(jx_sharding_spec(jx_sharding_of(got)), "i");
    /* splitting the other dim, and not at all */
    jx_fn *s2 =
        jx_shard_map(f, m, (const char *[]){"None,i", "None,i"}, (const char *[]){"None,i"});
    jx_array *x2 = val(JX_SHAPE(3, 8), 0.2), *y2 = val(JX_SHAPE(3, 8), 0.3);
    jx_array *got2 = call1(s2, 2, (jx_array *[]){x2, y2});
    assert_close(got2, call1(f, 2, (jx_array *[]){x2, y2}), 0);
    jx_fn_release(s2);
    jx_fn_release(s);
    jx_mesh_release(m);
  }
  jx_fn_release(f);
}

static void elementwise_on_a_4x2_mesh(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_fn *f = jx_fn_create("elementwise", 2, 1, elementwise_body, NULL);
  jx_array *x = val(JX_SHAPE(8, 8), 0.1), *y = val(JX_SHAPE(8, 8), 0.5);
  jx_array *want = call1(f, 2, (jx_array *[]){x, y});
  const char *specs[] = {"data,model", "model,data", "(data,model)", "None,(model,data)"};
  for (int k = 0; k < 4; k++) {
    jx_fn *s = jx_shard_map(f, m, (const char *[]){specs[k], specs[k]}, (const char *[]){specs[k]});
    assert_non_null(s);
    assert_close(call1(s, 2, (jx_array *[]){x, y}), want, 0);
    jx_fn_release(s);
  }
  jx_fn_release(f);
  jx_mesh_release(m);
}

/* ---- matmul: contracting dim split, psum ---- */
static void matmul_with_psum_equals_unsharded(void **state) {
  (void)state;
  jx_array *a = val(JX_SHAPE(4, 16), 0.3), *b = val(JX_SHAPE(16, 5), 0.9);
  jx_fn *ref = jx_fn_create("matmul", 2, 1, unsharded_matmul, NULL);
  jx_array *want = call1(ref, 2, (jx_array *[]){a, b});
  for (int n = 1; n <= 8; n *= 2) {
    jx_mesh *m = mesh1(n);
    jx_fn *body = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "i");
    jx_fn *s = jx_shard_map(body, m, (const char *[]){"None,i", "i"}, (const char *[]){""});
    jx_array *got = call1(s, 2, (jx_array *[]){a, b});
    assert_close(got, want, 1e-12);
    jx_fn_release(s);
    jx_fn_release(body);
    jx_mesh_release(m);
  }
  /* 2-D: rows over data, the contraction over model */
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_fn *body = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "model");
  jx_fn *s =
      jx_shard_map(body, m, (const char *[]){"data,model", "model"}, (const char *[]){"data"});
  assert_close(call1(s, 2, (jx_array *[]){a, b}), want, 1e-12);
  jx_fn_release(s);
  jx_fn_release(body);
  jx_mesh_release(m);
  jx_fn_release(ref);
}

/* ---- collectives inside ---- */
static void gather_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_all_gather(in[0], "i", 0, 1);
}
static void scatter_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_psum_scatter(in[0], "i", 0, 1);
}
static void shift_body(void *ctx, jx_array *const *in, jx_array **out) {
  int n = *(int *)ctx;
  int pairs[8][2];
  for (int k = 0; k < n; k++) {
    pairs[k][0] = k;
    pairs[k][1] = (k + 1) % n;
  }
  out[0] = jx_ppermute(in[0], "i", n, (const int(*)[2])pairs);
}
static void a2a_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_all_to_all(in[0], "i", 1, 0);
}

static void collectives_inside(void **state) {
  (void)state;
  for (int n = 1; n <= 8; n *= 2) {
    jx_mesh *m = mesh1(n);
    jx_array *x = val(JX_SHAPE(8, 8), 0.4);
    /* all_gather of the blocks: the whole array on every device */
    jx_fn *g = jx_fn_create("gather", 1, 1, gather_body, NULL);
    jx_fn *sg = jx_shard_map(g, m, (const char *[]){"i"}, (const char *[]){""});
    assert_close(call1(sg, 1, &x), x, 0);
    /* psum_scatter of a replicated value: n times its blocks */
    jx_fn *sc = jx_fn_create("scatter", 1, 1, scatter_body, NULL);
    jx_fn *ss = jx_shard_map(sc, m, (const char *[]){""}, (const char *[]){"i"});
    assert_close(call1(ss, 1, &x), jx_mul(x, jx_scalar(JX_F64, n)), 1e-14);
    /* ppermute by one: block k goes to device k+1, i.e. a roll by one block */
    jx_fn *p = jx_fn_create("shift", 1, 1, shift_body, &n);
    jx_fn *sp = jx_shard_map(p, m, (const char *[]){"i"}, (const char *[]){"i"});
    assert_close(call1(sp, 1, &x), roll_rows(x, 8 / n), 0);
    /* all_to_all from rows to columns: the same global array, laid out anew */
    jx_fn *a = jx_fn_create("a2a", 1, 1, a2a_body, NULL);
    jx_fn *sa = jx_shard_map(a, m, (const char *[]){"i"}, (const char *[]){"None,i"});
    jx_array *r = call1(sa, 1, &x);
    assert_close(r, x, 0);
    assert_string_equal(jx_sharding_spec(jx_sharding_of(r)), "None,i");
    jx_fn_release(sa);
    jx_fn_release(a);
    jx_fn_release(sp);
    jx_fn_release(p);
    jx_fn_release(ss);
    jx_fn_release(sc);
    jx_fn_release(sg);
    jx_fn_release(g);
    jx_mesh_release(m);
  }
}

/* ---- replicated inputs and outputs ---- */
/* x block * w (w replicated); also the total of x over the devices (replicated) */
static void scale_and_total_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(in[0], in[1]);
  out[1] = jx_psum(jx_sum(in[0], JX_AXES(), 0), "i");
}

static void replicated_inputs_and_outputs(void **state) {
  (void)state;
  jx_mesh *m = mesh1(4);
  jx_fn *b = jx_fn_create("scale_total", 2, 2, scale_and_total_body, NULL);
  jx_fn *s = jx_shard_map(b, m, (const char *[]){"i", ""}, (const char *[]){"i", ""});
  jx_array *x = val(JX_SHAPE(8, 3), 0.1), *w = val(JX_SHAPE(3), 0.6), *out[2];
  check_ok(jx_call(s, (jx_array *[]){x, w}, out));
  assert_close(out[0], jx_mul(x, w), 0);
  assert_close(out[1], jx_sum(x, JX_AXES(), 0), 1e-13);
  jx_fn_release(s);
  jx_fn_release(b);
  jx_mesh_release(m);
}

/* ---- jit: the body is compiled once and gives the same results ---- */
static void outer_calls_shard_map(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y[1];
  jx_call((jx_fn *)ctx, (jx_array *[]){jx_cos(in[0]), in[1]}, y);
  out[0] = jx_mul(y[0], jx_scalar(JX_F64, 2));
}

static void under_jit(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_fn *body = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "model");
  jx_fn *s =
      jx_shard_map(body, m, (const char *[]){"data,model", "model"}, (const char *[]){"data"});
  jx_fn *outer = jx_fn_create("outer", 2, 1, outer_calls_shard_map, s);
  jx_fn *j = jx_jit(outer, NULL);
  jx_array *a = val(JX_SHAPE(8, 6), 0.3), *b = val(JX_SHAPE(6, 2), 0.9);
  jx_array *want = call1(outer, 2, (jx_array *[]){a, b});
  assert_close(want, jx_mul(jx_matmul(jx_cos(a), b), jx_scalar(JX_F64, 2)), 1e-12);
  for (int k = 0; k < 3; k++) assert_close(call1(j, 2, (jx_array *[]){a, b}), want, 1e-12);
  assert_int_equal(jx_fn_trace_count(j), 1);
  assert_int_equal(jx_fn_trace_count(body), 1); /* traced once, shared by eager and jit */
  /* the jitted shard_map itself */
  jx_fn *js = jx_jit(s, NULL);
  assert_close(call1(js, 2, (jx_array *[]){a, b}), jx_matmul(a, b), 1e-12);
  assert_close(call1(js, 2, (jx_array *[]){a, b}), jx_matmul(a, b), 1e-12);
  assert_int_equal(jx_fn_trace_count(js), 1);
  jx_fn_release(js);
  jx_fn_release(j);
  jx_fn_release(outer);
  jx_fn_release(s);
  jx_fn_release(body);
  jx_mesh_release(m);
}

/* ---- collectives run ahead: started where the program has them, finished
 * where their results are first read, with independent work between ---- */
static void ahead_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *partial = jx_matmul(in[0], in[1]);                /* [rows, 5], summed over "i" */
  jx_array *total = jx_psum(partial, "i");                    /* in flight ... */
  jx_array *peak = jx_pmax(jx_max(in[0], JX_AXES(), 0), "i"); /* a second one in flight */
  jx_array *local = jx_sum(jx_exp(in[0]), JX_AXES(1), 1);     /* ... while this computes */
  out[0] = jx_add(jx_mul(total, peak), local);                /* first reads */
  out[1] = jx_psum(jx_sum(local, JX_AXES(), 0), "i");         /* an output straight from one */
}

static void ahead_reference(void *ctx, jx_array *const *in, jx_array **out) {
  int n = *(const int *)ctx; /* the devices of the contraction */
  jx_array *total = jx_matmul(in[0], in[1]);
  jx_array *peak = jx_max(in[0], JX_AXES(), 0);
  /* each device's exp row sums of its columns; the blocks of columns */
  jx_shape s = jx_shape_of(in[0]);
  int64_t w = s.dims[1] / n;
  jx_array *local = NULL, *grand = jx_scalar(JX_F64, 0);
  for (int d = 0; d < n; d++) {
    jx_array *blk =
        jx_slice(in[0], JX_SHAPE(0, d * w), JX_SHAPE(s.dims[0], (d + 1) * w), JX_SHAPE());
    jx_array *e = jx_sum(jx_exp(blk), JX_AXES(1), 1);
    grand = jx_add(grand, jx_sum(e, JX_AXES(), 0));
    local = local ? jx_concatenate(2, (jx_array *[]){local, e}, 1) : e;
  }
  /* out[0] per device: total * peak + its own local column, laid side by side */
  jx_array *cols[8];
  for (int d = 0; d < n; d++)
    cols[d] = jx_add(jx_mul(total, peak),
                     jx_slice(local, JX_SHAPE(0, d), JX_SHAPE(s.dims[0], d + 1), JX_SHAPE()));
  out[0] = jx_concatenate(n, cols, 1);
  out[1] = grand;
}

static void collectives_run_ahead(void **state) {
  (void)state;
  for (int n = 2; n <= 4; n *= 2) {
    jx_mesh *m = mesh1(n);
    jx_fn *body = jx_fn_create("ahead", 2, 2, ahead_body, NULL);
    jx_fn *s =
        jx_shard_map(body, m, (const char *[]){"None,i", "i"}, (const char *[]){"None,i", ""});
    jx_fn *js = jx_jit(s, NULL), *ref = jx_fn_create("ahead_ref", 2, 2, ahead_reference, &n);
    jx_array *a = val(JX_SHAPE(3, 8), 0.3), *b = val(JX_SHAPE(8, 5), 0.9);
    jx_array *got[2], *want[2];
    long before = jx_collective_async_started();
    check_ok(jx_call(js, (jx_array *[]){a, b}, got));
    /* three collectives on each of n devices went ahead (the CPU executable
     * starts them early; on CUDA the engine orders them by streams), where
     * each device has a core (JX_ASYNC_COLLECTIVES unset: devices that
     * time-share the cores run them where they are reached) */
    if (TEST_CPU_ONLY("collectives started ahead by the CPU executable"))
      assert_int_equal(jx_collective_async_started() - before,
                       n <= sysconf(_SC_NPROCESSORS_ONLN) ? 3 * n : 0);
    check_ok(jx_call(ref, (jx_array *[]){a, b}, want));
    assert_close(got[0], want[0], 1e-12);
    assert_close(got[1], want[1], 1e-12);
    jx_fn_release(ref);
    jx_fn_release(js);
    jx_fn_release(s);
    jx_fn_release(body);
    jx_mesh_release(m);
  }
}

/* ---- gradients ---- */
static void sin_times_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sin(jx_mul(in[0], in[1]));
}

/* a replicated output computed from a replicated input only: the division
 * rule keeps its cotangent from being counted once per device */
static void replicated_only_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_mul(jx_exp(in[1]), jx_scalar(JX_F64, 3));
  out[1] = jx_mul(in[0], jx_sum(in[1], JX_AXES(), 0));
}

static void gradients(void **state) {
  (void)state;
  jx_mesh *m4 = mesh1(4);
  jx_mesh *m42 = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_array *x = val(JX_SHAPE(8, 4), 0.2), *w = val(JX_SHAPE(4), 0.8);
  /* elementwise, both sharded */
  jx_fn *e = jx_fn_create("elementwise", 2, 1, elementwise_body, NULL);
  jx_fn *se = jx_shard_map(e, m42, (const char *[]){"data,model", "data,model"},
                           (const char *[]){"data,model"});
  jx_array *y8 = val(JX_SHAPE(8, 4), 0.5);
  check_ok(jx_check_grads(se, (jx_array *[]){x, y8}, 2, 0, 0));
  /* a replicated input: its cotangent is psum'ed over the devices */
  jx_fn *st = jx_fn_create("sin_times", 2, 1, sin_times_body, NULL);
  jx_fn *ss = jx_shard_map(st, m4, (const char *[]){"i", ""}, (const char *[]){"i"});
  check_ok(jx_check_grads(ss, (jx_array *[]){x, w}, 2, 0, 0));
  jx_fn *ss2 = jx_shard_map(st, m42, (const char *[]){"data,model", "model"},
                            (const char *[]){"data,model"});
  check_ok(jx_check_grads(ss2, (jx_array *[]){x, w}, 1, 0, 0));
  /* psum inside, replicated output */
  jx_fn *mb = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "i");
  jx_fn *sm = jx_shard_map(mb, m4, (const char *[]){"None,i", "i"}, (const char *[]){""});
  jx_array *a = val(JX_SHAPE(3, 8), 0.3), *b = val(JX_SHAPE(8, 2), 0.9);
  check_ok(jx_check_grads(sm, (jx_array *[]){a, b}, 2, 0, 0));
  jx_fn *mb2 = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "model");
  jx_fn *sm2 =
      jx_shard_map(mb2, m42, (const char *[]){"data,model", "model"}, (const char *[]){"data"});
  check_ok(jx_check_grads(sm2, (jx_array *[]){val(JX_SHAPE(8, 6), 0.1), val(JX_SHAPE(6, 3), 0.2)},
                          1, 0, 0));
  /* replicated in, replicated out */
  jx_fn *ro = jx_fn_create("replicated_only", 2, 2, replicated_only_body, NULL);
  jx_fn *sro = jx_shard_map(ro, m42, (const char *[]){"data", ""}, (const char *[]){"", "data"});
  check_ok(jx_check_grads(sro, (jx_array *[]){x, w}, 2, 0, 0));
  jx_fn_release(sro);
  jx_fn_release(ro);
  jx_fn_release(sm2);
  jx_fn_release(mb2);
  jx_fn_release(sm);
  jx_fn_release(mb);
  jx_fn_release(ss2);
  jx_fn_release(ss);
  jx_fn_release(st);
  jx_fn_release(se);
  jx_fn_release(e);
  jx_mesh_release(m42);
  jx_mesh_release(m4);
}

/* the sum of the shard_map's output, as a scalar loss */
static void loss_of_smap(void *ctx, jx_array *const *in, jx_array **out) {
  jx_array *y[1];
  jx_call((jx_fn *)ctx, in, y);
  out[0] = jx_sum(jx_mul(y[0], y[0]), JX_AXES(), 0);
}

static void grad_equals_unsharded_grad(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_fn *mb = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "model");
  jx_fn *sm =
      jx_shard_map(mb, m, (const char *[]){"data,model", "model"}, (const char *[]){"data"});
  jx_fn *ref = jx_fn_create("matmul", 2, 1, unsharded_matmul, NULL);
  jx_fn *ls = jx_fn_create("loss_sharded", 2, 1, loss_of_smap, sm);
  jx_fn *lr = jx_fn_create("loss_ref", 2, 1, loss_of_smap, ref);
  jx_fn *gs = jx_grad(ls, JX_AXES(0, 1)), *gr = jx_grad(lr, JX_AXES(0, 1));
  jx_array *a = val(JX_SHAPE(8, 6), 0.1), *b = val(JX_SHAPE(6, 3), 0.2), *os[2], *orf[2];
  check_ok(jx_call(gs, (jx_array *[]){a, b}, os));
  check_ok(jx_call(gr, (jx_array *[]){a, b}, orf));
  assert_close(os[0], orf[0], 1e-12);
  assert_close(os[1], orf[1], 1e-12);
  /* and under jit */
  jx_fn *jg = jx_jit(gs, NULL);
  check_ok(jx_call(jg, (jx_array *[]){a, b}, os));
  assert_close(os[0], orf[0], 1e-12);
  assert_close(os[1], orf[1], 1e-12);
  jx_fn_release(jg);
  jx_fn_release(gs);
  jx_fn_release(gr);
  jx_fn_release(ls);
  jx_fn_release(lr);
  jx_fn_release(ref);
  jx_fn_release(sm);
  jx_fn_release(mb);
  jx_mesh_release(m);
}

/* ---- vmap of a shard_map ---- */
static void vmap_of_shard_map(void **state) {
  (void)state;
  jx_mesh *m = mesh1(4);
  jx_fn *mb = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "i");
  jx_fn *sm = jx_shard_map(mb, m, (const char *[]){"None,i", "i"}, (const char *[]){""});
  jx_fn *e = jx_fn_create("elementwise", 2, 1, elementwise_body, NULL);
  jx_fn *se = jx_shard_map(e, m, (const char *[]){"i", "i"}, (const char *[]){"i"});
  jx_array *A = val(JX_SHAPE(3, 8, 5), 0.3), *B = val(JX_SHAPE(8, 2), 0.9);
  /* batched a (axis 0), unbatched b */
  jx_fn *v = jx_vmap(sm, (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  jx_array *At = jx_transpose(A, JX_AXES(0, 2, 1)); /* [3, 5, 8] */
  jx_array *got = call1(v, 2, (jx_array *[]){At, B});
  jx_array *want = jx_matmul(At, B);
  assert_close(got, want, 1e-12);
  /* batched along axis 1 on both, output along 1 */
  jx_fn *v2 = jx_vmap(se, JX_AXES(1), JX_AXES(1));
  jx_array *X = val(JX_SHAPE(8, 3, 2), 0.1), *Y = val(JX_SHAPE(8, 3, 2), 0.2);
  assert_close(call1(v2, 2, (jx_array *[]){X, Y}), call1(e, 2, (jx_array *[]){X, Y}), 0);
  /* vmap of the gradient of a shard_map with psum */
  jx_fn *ref = jx_fn_create("matmul", 2, 1, unsharded_matmul, NULL);
  jx_fn *ls = jx_fn_create("ls", 2, 1, loss_of_smap, sm), *gs = jx_grad(ls, JX_AXES(0));
  jx_fn *lr = jx_fn_create("lr", 2, 1, loss_of_smap, ref), *gr = jx_grad(lr, JX_AXES(0));
  jx_fn *vgs = jx_vmap(gs, (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  jx_fn *vgr = jx_vmap(gr, (jx_axes){2, {0, JX_NONE}}, JX_AXES(0));
  assert_close(call1(vgs, 2, (jx_array *[]){At, B}), call1(vgr, 2, (jx_array *[]){At, B}), 1e-12);
  jx_fn_release(vgs);
  jx_fn_release(vgr);
  jx_fn_release(gs);
  jx_fn_release(gr);
  jx_fn_release(ls);
  jx_fn_release(lr);
  jx_fn_release(ref);
  jx_fn_release(v2);
  jx_fn_release(v);
  jx_fn_release(se);
  jx_fn_release(e);
  jx_fn_release(sm);
  jx_fn_release(mb);
  jx_mesh_release(m);
}

/* ---- errors ---- */
static void errors(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_fn *e = jx_fn_create("elementwise", 2, 1, elementwise_body, NULL);
  assert_null(jx_shard_map(e, m, (const char *[]){"data", "nope"}, (const char *[]){"data"}));
  assert_error_has("jx_shard_map: input 1 ('nope'): the spec 'nope' names the axis 'nope'");
  assert_null(jx_shard_map(e, m, (const char *[]){"data", "data"}, (const char *[]){"(data"}));
  assert_error_has("jx_shard_map: output 0 ('(data'): the spec '(data' is malformed");
  assert_null(jx_shard_map(e, m, (const char *[]){"data", "data,data"}, (const char *[]){"data"}));
  assert_error_has("jx_shard_map: input 1 ('data,data')");
  assert_null(jx_shard_map(e, NULL, (const char *[]){"data", "data"}, (const char *[]){"data"}));
  assert_error_has("jx_shard_map: the mesh is NULL");

  jx_fn *s = jx_shard_map(e, m, (const char *[]){"data", "None,model"}, (const char *[]){"data"});
  jx_array *out[1];
  /* indivisible */
  assert_int_not_equal(
      jx_call(s, (jx_array *[]){val(JX_SHAPE(6, 2), 0), val(JX_SHAPE(6, 2), 0)}, out), JX_OK);
  assert_error_has("jx_shard_map: input 0: dim 0 of shape [6,2] has size 6, which the mesh axes "
                   "'data' (4 devices) do not divide");
  /* spec longer than the rank */
  assert_int_not_equal(jx_call(s, (jx_array *[]){val(JX_SHAPE(8, 2), 0), val(JX_SHAPE(8), 0)}, out),
                       JX_OK);
  assert_error_has("jx_shard_map: input 1: the spec 'None,model' has 2 entries but the array of "
                   "shape [8] has rank 1");
  jx_fn_release(s);
  /* an output spec longer than the body's output rank */
  jx_fn *s2 = jx_shard_map(e, m, (const char *[]){"data", "data"}, (const char *[]){"data,model"});
  assert_int_not_equal(jx_call(s2, (jx_array *[]){val(JX_SHAPE(8), 0), val(JX_SHAPE(8), 0)}, out),
                       JX_OK);
  assert_error_has("jx_shard_map: output 0: the spec 'data,model' has 2 entries");
  jx_fn_release(s2);
  /* a collective over an axis the mesh lacks */
  jx_fn *mb = jx_fn_create("matmul_psum", 2, 1, matmul_psum_body, "k");
  jx_fn *s3 = jx_shard_map(mb, m, (const char *[]){"None,data", "data"}, (const char *[]){""});
  assert_int_not_equal(
      jx_call(s3, (jx_array *[]){val(JX_SHAPE(2, 8), 0), val(JX_SHAPE(8, 2), 0)}, out), JX_OK);
  assert_error_has("'k'");
  jx_fn_release(s3);
  jx_fn_release(mb);
  jx_fn_release(e);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(elementwise_on_1_2_4_8_devices, setup, teardown),
      cmocka_unit_test_setup_teardown(elementwise_on_a_4x2_mesh, setup, teardown),
      cmocka_unit_test_setup_teardown(matmul_with_psum_equals_unsharded, setup, teardown),
      cmocka_unit_test_setup_teardown(collectives_inside, setup, teardown),
      cmocka_unit_test_setup_teardown(replicated_inputs_and_outputs, setup, teardown),
      cmocka_unit_test_setup_teardown(under_jit, setup, teardown),
      cmocka_unit_test_setup_teardown(gradients, setup, teardown),
      cmocka_unit_test_setup_teardown(grad_equals_unsharded_grad, setup, teardown),
      cmocka_unit_test_setup_teardown(vmap_of_shard_map, setup, teardown),
      cmocka_unit_test_setup_teardown(collectives_run_ahead, setup, teardown),
      cmocka_unit_test_setup_teardown(errors, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
