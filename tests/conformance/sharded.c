/* Conformance under the sharded jit: every op's case, with its inputs laid
 * out over meshes of 2, 4 and 8 CPU devices (split on their first, then on
 * their last divisible dim, then over a 4x2 mesh), equals the goldens; and
 * the vjp of the op, sharded, equals the unsharded vjp. The partitioner must
 * then insert the right communication for every primitive's layout rule.
 *
 * Compiling a per-device program per layout costs time, so the first
 * CASES_PER_OP cases of each op run (the rest are skipped quietly). */
#include <stdlib.h>
#include <string.h>

#include "conformance.h"

enum { CASES_PER_OP = 3, MAX_OPS = 1024 };

/* How many cases of op have run so far (ops are few; a linear table). */
static int seen(const char *op) {
  static char names[MAX_OPS][64];
  static int counts[MAX_OPS], n;
  for (int i = 0; i < n; i++)
    if (!strcmp(names[i], op)) return counts[i]++;
  if (n == MAX_OPS) return CASES_PER_OP;
  snprintf(names[n], sizeof names[n], "%s", op);
  counts[n++] = 1;
  return 0;
}

typedef enum { FIRST_DIM, LAST_DIM, MESH_2D } layout;

/* The spec for x under a layout over a 1-D mesh "x" of k devices (or the
 * 4x2 mesh "a","b"); "" (replicated) when no dim divides. */
static void spec_for(jx_array *x, layout l, int k, char *spec) {
  jx_shape s = jx_shape_of(x);
  spec[0] = 0;
  if (l == MESH_2D) {
    int a = -1, b = -1;
    for (int d = 0; d < s.rank; d++) {
      if (a < 0 && s.dims[d] % 4 == 0 && s.dims[d] > 0)
        a = d;
      else if (b < 0 && s.dims[d] % 2 == 0 && s.dims[d] > 0)
        b = d;
    }
    if (a < 0 && b < 0) return;
    size_t len = 0;
    for (int d = 0; d < s.rank; d++)
      len += (size_t)snprintf(spec + len, 128 - len, "%s%s", d ? "," : "",
                              d == a   ? "a"
                              : d == b ? "b"
                                       : "None");
    return;
  }
  for (int j = 0; j < s.rank; j++) {
    int d = l == FIRST_DIM ? j : s.rank - 1 - j;
    if (s.dims[d] > 0 && s.dims[d] % k == 0) {
      size_t len = 0;
      for (int e = 0; e <= d; e++)
        len += (size_t)snprintf(spec + len, 128 - len, "%s%s", e ? "," : "", e == d ? "x" : "None");
      return;
    }
  }
}

/* The largest of 8, 4, 2 dividing some dim of some input (0: none). */
static int mesh_size(int nin, jx_array *const *in) {
  for (int k = 8; k >= 2; k /= 2)
    for (int i = 0; i < nin; i++) {
      jx_shape s = jx_shape_of(in[i]);
      for (int d = 0; d < s.rank; d++)
        if (s.dims[d] > 0 && s.dims[d] % k == 0) return k;
    }
  return 0;
}

static conf_result fail(const conf_case *c, const char *what, const char *layout_text) {
  printf("FAIL %s (%s) under sharded jit %s [%s]: %s\n", c->id, c->op, what, layout_text,
         jx_last_error());
  return CONF_FAIL;
}

/* Runs f (nin inputs) under a sharded jit with each input laid out by its
 * spec; compares with want (nout arrays). */
static conf_result run_layout(const conf_case *c, jx_fn *f, jx_mesh *m, int nin,
                              jx_array *const *in, int nout, jx_array *const *want,
                              const char *what, layout l, int k) {
  jx_sharding *sh[2 * CONF_MAX_IO];
  char spec[128], text[512] = "";
  size_t len = 0;
  for (int i = 0; i < nin; i++) {
    spec_for(in[i], l, k, spec);
    sh[i] = jx_sharding_create(m, spec);
    len += (size_t)snprintf(text + len, sizeof text - len, "%s'%s'", i ? " " : "", spec);
  }
  jx_jit_options o = {.in_shardings = sh};
  jx_fn *jf = jx_jit(f, &o);
  jx_array *got[2 * CONF_MAX_IO];
  jx_status st = jf ? jx_call(jf, in, got) : jx_last_status();
  jx_fn_release(jf);
  for (int i = 0; i < nin; i++) jx_sharding_release(sh[i]);
  if (st == JX_ERR_TRACE) return CONF_SKIP; /* the adapter reads its inputs on the host */
  if (st) return fail(c, what, text);
  for (int o = 0; o < nout; o++)
    if (!conf_compare(c, o, got[o], want[o], 10.0)) {
      printf("     (under sharded jit %s [%s])\n", what, text);
      return CONF_FAIL;
    }
  return CONF_PASS;
}

static int is_float(jx_dtype d) {
  return d == JX_F16 || d == JX_BF16 || d == JX_F32 || d == JX_F64;
}

conf_result conf_run_sharded(const conf_case *c, conf_fn fn, int nin, jx_array *const *in, int nout,
                             jx_array *const *want) {
  if (seen(c->op) >= CASES_PER_OP) return CONF_SKIP;
  int k = mesh_size(nin, in);
  if (!k) {
    printf("SKIP %s (%s): no input dim divides over 2 devices\n", c->id, c->op);
    return CONF_SKIP;
  }
  conf_adapter a = {fn, c, nin, nout};
  jx_fn *f = jx_fn_create(c->op, nin, nout, conf_adapter_body, &a);
  static const char *const X[] = {"x"}, *const AB[] = {"a", "b"};
  jx_mesh *m1 = jx_mesh_create_on(JX_SHAPE(k), X, (const int[]){0, 1, 2, 3, 4, 5, 6, 7});
  jx_mesh *m2 = jx_mesh_create(JX_SHAPE(4, 2), AB);
  conf_result r = run_layout(c, f, m1, nin, in, nout, want, "first dims", FIRST_DIM, k);
  if (r == CONF_PASS) r = run_layout(c, f, m1, nin, in, nout, want, "last dims", LAST_DIM, k);
  if (r == CONF_PASS) r = run_layout(c, f, m2, nin, in, nout, want, "4x2", MESH_2D, k);

  /* the vjp, sharded, against the unsharded vjp (cotangents: the goldens) */
  int floats = 1;
  for (int i = 0; i < nin; i++) floats &= is_float(jx_dtype_of(in[i]));
  for (int o = 0; o < nout; o++) floats &= is_float(jx_dtype_of(want[o]));
  if (r == CONF_PASS && floats && !conf_int(c, "nograd", 0)) {
    jx_fn *v = jx_vjp(f), *jv = jx_jit(v, NULL);
    jx_array *args[2 * CONF_MAX_IO], *expect[2 * CONF_MAX_IO];
    for (int i = 0; i < nin; i++) args[i] = in[i];
    for (int o = 0; o < nout; o++) args[nin + o] = want[o];
    if (jx_call(jv, args, expect) == JX_OK)
      r = run_layout(c, v, m1, nin + nout, args, nout + nin, expect, "vjp", FIRST_DIM, k);
    jx_clear_error();
    jx_fn_release(jv);
    jx_fn_release(v);
  }
  jx_mesh_release(m1);
  jx_mesh_release(m2);
  jx_fn_release(f);
  return r;
}
