/* Devices, meshes, partition specs and sharded arrays: the layout of every
 * block is checked against the definition (block (i, j) of an array split
 * r x c holds rows i*h.., columns j*w..), and gathering gives back the
 * original array. */
#define _POSIX_C_SOURCE 200809L /* open_memstream */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "test_util.h"

static const char *const DM[] = {"data", "model"};

static void devices_exist(void **state) {
  (void)state;
  assert_int_equal(jx_device_count(), 8);
  assert_int_equal(jx_local_device_count(), 8);
  jx_device *d = jx_device_get(5);
  assert_non_null(d);
  assert_int_equal(jx_device_id(d), 5);
  assert_string_equal(jx_device_kind(d), "cpu");
  assert_int_equal(jx_device_process_index(d), 0);
  assert_null(jx_device_get(8));
  assert_error_has("device 8 does not exist (8 devices)");
  /* the count is fixed once devices are in use */
  assert_int_equal(jx_set_cpu_device_count(4), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("already in use");
  check_ok(jx_set_cpu_device_count(8));
}

static void meshes_are_interned_and_checked(void **state) {
  (void)state;
  jx_mesh *a = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_mesh *b = jx_mesh_create(JX_SHAPE(4, 2), DM);
  assert_non_null(a);
  assert_ptr_equal(a, b); /* equal meshes are one object */
  assert_int_equal(jx_mesh_ndim(a), 2);
  assert_string_equal(jx_mesh_axis_name(a, 1), "model");
  assert_int_equal(jx_mesh_axis_size(a, "data"), 4);
  assert_int_equal(jx_mesh_axis_size(a, "nope"), -1);
  assert_int_equal(jx_mesh_device_count(a), 8);
  jx_mesh_release(a);
  jx_mesh_release(b);

  assert_null(jx_mesh_create(JX_SHAPE(4, 4), DM));
  assert_error_has("needs more devices than the 8 there are");
  assert_null(jx_mesh_create(JX_SHAPE(2, 2), (const char *[]){"x", "x"}));
  assert_error_has("'x' is used twice");
  assert_null(jx_mesh_create(JX_SHAPE(2), (const char *[]){"None"}));
  assert_error_has("not an identifier");
  assert_null(jx_mesh_create_on(JX_SHAPE(2), (const char *[]){"x"}, (const int[]){3, 3}));
  assert_error_has("device 3 appears twice");

  /* the device at each position, row-major over the axes */
  jx_mesh *c = jx_mesh_create_on(JX_SHAPE(2, 2), DM, (const int[]){5, 1, 7, 2});
  assert_non_null(c);
  const int want[4] = {5, 1, 7, 2};
  for (int p = 0; p < 4; p++) assert_int_equal(jx_mesh_device_at(c, p), want[p]);
  assert_int_equal(jx_mesh_device_at(c, 4), -1);
  assert_error_has("position 4 is outside a mesh of 4 devices");
  jx_mesh_release(c);
}

static void specs_parse_and_normalize(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  struct {
    const char *in, *normal;
  } cases[] = {
      {"data,None", "data,None"},
      {" data , _ ", "data,None"},
      {"(data,model)", "(data,model)"},
      {"(model)", "model"},
      {"", ""},
      {"None,model", "None,model"},
      {"(model, data)", "(model,data)"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
    jx_sharding *s = jx_sharding_create(m, cases[i].in);
    assert_non_null(s);
    assert_string_equal(jx_sharding_spec(s), cases[i].normal);
    assert_ptr_equal(jx_sharding_mesh(s), m);
    jx_sharding_release(s);
  }
  assert_null(jx_sharding_create(m, "data,modl"));
  assert_error_has("names the axis 'modl', which the mesh (data=4, model=2) does not have");
  assert_null(jx_sharding_create(m, "data,data"));
  assert_error_has("uses the mesh axis 'data' twice");
  assert_null(jx_sharding_create(m, "(data,model"));
  assert_error_has("expected ')'");
  assert_null(jx_sharding_create(m, "data,,model"));
  assert_error_has("malformed at offset 5");
  jx_mesh_release(m);
}

/* An f32 array counting 0, 1, 2, ... */
static jx_array *counting(jx_shape s) {
  int64_t n = 1;
  for (int d = 0; d < s.rank; d++) n *= s.dims[d];
  float *v = malloc(sizeof *v * (size_t)(n ? n : 1));
  for (int64_t i = 0; i < n; i++) v[i] = (float)i;
  jx_array *a = jx_array_from(JX_F32, s, v);
  free(v);
  return a;
}

/* Checks shard p of an 8x6 array laid out with rows split in r parts and
 * columns in c parts, block (bi, bj). */
static void check_block(jx_array *shard, int r, int c, int bi, int bj) {
  int h = 8 / r, w = 6 / c;
  jx_shape s = jx_shape_of(shard);
  assert_int_equal(s.rank, 2);
  assert_int_equal(s.dims[0], h);
  assert_int_equal(s.dims[1], w);
  float got[48];
  check_ok(jx_read(shard, got, sizeof(float) * (size_t)(h * w)));
  for (int i = 0; i < h; i++)
    for (int j = 0; j < w; j++)
      assert_true(got[i * w + j] == (float)((bi * h + i) * 6 + bj * w + j));
}

static void device_put_lays_out_blocks(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_array *x = counting(JX_SHAPE(8, 6));
  struct {
    const char *spec;
    int r, c;
    int by_data, by_model; /* 1: the row (r) or column (c) block index follows that axis */
  } cases[] = {
      {"data,model", 4, 2, 1, 1}, {"data", 4, 1, 1, 0},         {"None,model", 1, 2, 0, 1},
      {"", 1, 1, 0, 0},           {"(data,model)", 8, 1, 1, 1},
  };
  for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
    jx_sharding *s = jx_sharding_create(m, cases[k].spec);
    jx_array *y = jx_device_put(x, s);
    assert_false(jx_is_poisoned(y));
    assert_ptr_equal(jx_sharding_of(y), s);
    for (int p = 0; p < 8; p++) {
      int d = p / 2, mo = p % 2; /* row-major mesh coordinates */
      int bi = 0, bj = 0;
      if (k == 4)
        bi = p; /* (data,model): data major */
      else {
        bi = cases[k].by_data ? d : 0;
        bj = cases[k].by_model ? mo : 0;
      }
      check_block(jx_array_shard(y, p), cases[k].r, cases[k].c, bi, bj);
    }
    /* gathering gives the global value back */
    float got[48];
    check_ok(jx_read(y, got, sizeof got));
    for (int i = 0; i < 48; i++) assert_true(got[i] == (float)i);
    /* an eager op on a sharded array sees its global value */
    jx_array *z = jx_add(y, jx_scalar(JX_F32, 1));
    check_ok(jx_read(z, got, sizeof got));
    for (int i = 0; i < 48; i++) assert_true(got[i] == (float)i + 1);
    /* re-laying a sharded array gives the same blocks as laying out the original */
    jx_sharding *t = jx_sharding_create(m, "model,None");
    jx_array *u = jx_device_put(y, t);
    jx_array *v = jx_device_put(x, t);
    for (int p = 0; p < 8; p++) {
      float a[48], b[48];
      check_ok(jx_read(jx_array_shard(u, p), a, sizeof(float) * 24));
      check_ok(jx_read(jx_array_shard(v, p), b, sizeof(float) * 24));
      assert_memory_equal(a, b, sizeof(float) * 24);
    }
    jx_sharding_release(t);
    jx_sharding_release(s);
  }
  /* an unsharded array is one shard on device 0 */
  assert_null(jx_sharding_of(x));
  assert_true(jx_is_poisoned(jx_array_shard(x, 1)));
  assert_error_has("shard 1 does not exist (1 shards)");
  jx_mesh_release(m);
}

static void bad_layouts_are_rejected(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_sharding *s = jx_sharding_create(m, "data,model,None");
  assert_true(jx_is_poisoned(jx_device_put(counting(JX_SHAPE(8)), s)));
  assert_error_has(
      "the spec 'data,model,None' has 3 entries but the array of shape [8] has rank 1");
  jx_sharding *t = jx_sharding_create(m, "None,data");
  assert_true(jx_is_poisoned(jx_device_put(counting(JX_SHAPE(8, 6)), t)));
  assert_error_has("dim 1 of shape [8,6] has size 6, which the mesh axes 'data' (4 devices) do "
                   "not divide");
  jx_shape local;
  assert_int_equal(jx_sharding_shard_shape(t, JX_SHAPE(8, 12), &local), JX_OK);
  assert_int_equal(local.dims[0], 8);
  assert_int_equal(local.dims[1], 3);
  jx_sharding_release(s);
  jx_sharding_release(t);
  jx_mesh_release(m);
}

static void visualize_draws_the_grid(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4, 2), DM);
  jx_sharding *s = jx_sharding_create(m, "model");
  jx_array *y = jx_device_put(counting(JX_SHAPE(8, 6)), s);
  char *text = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&text, &len);
  jx_visualize_sharding(y, f);
  fclose(f);
  /* rows split over model (2 parts), replicated over data: each row block is
   * held by the 4 devices with that model coordinate */
  const char *want = "f32[8,6] sharded as 'model' over the mesh (data=4, model=2)\n"
                     "+-------------+\n"
                     "| CPU 0,2,4,6 |\n"
                     "+-------------+\n"
                     "| CPU 1,3,5,7 |\n"
                     "+-------------+\n";
  if (strcmp(text, want)) fprintf(stderr, "%s", text);
  assert_string_equal(text, want);
  free(text);
  jx_sharding_release(s);
  jx_mesh_release(m);
}

static void constraint_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = jx_mul(jx_with_sharding_constraint(in[0], ctx), jx_scalar(JX_F32, 2));
}

/* Inside a traced function the constraint is an equation that keeps the
 * value; differentiating and vmapping through it work. */
static void constraint_is_identity_under_transforms(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(8), (const char *[]){"data"});
  jx_sharding *s = jx_sharding_create(m, "data");
  jx_fn *f = jx_fn_create("scaled", 1, 1, constraint_body, s);
  jx_array *x = counting(JX_SHAPE(8, 3));
  char *ir = jx_fn_ir(f, &x);
  assert_non_null(strstr(ir, "sharding_constraint"));
  free(ir);
  jx_array *y;
  check_ok(jx_call(f, &x, &y));
  float got[24];
  check_ok(jx_read(y, got, sizeof got));
  for (int i = 0; i < 24; i++) assert_true(got[i] == 2.0f * (float)i);
  jx_fn *vf = jx_vmap(f, JX_AXES(1), JX_AXES(1)); /* the batch dim is not split */
  jx_array *xt = counting(JX_SHAPE(8, 3));
  check_ok(jx_call(vf, &xt, &y));
  check_ok(jx_read(y, got, sizeof got));
  for (int i = 0; i < 24; i++) assert_true(got[i] == 2.0f * (float)i);
  jx_fn *g = jx_vjp(f);
  jx_array *args[2] = {x, jx_ones(JX_F32, JX_SHAPE(8, 3))}, *outs[2];
  check_ok(jx_call(g, args, outs));
  check_ok(jx_read(outs[1], got, sizeof got));
  for (int i = 0; i < 24; i++) assert_true(got[i] == 2.0f);
  jx_fn_release(g);
  jx_fn_release(vf);
  jx_fn_release(f);
  jx_sharding_release(s);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(8);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(devices_exist, setup, teardown),
      cmocka_unit_test_setup_teardown(meshes_are_interned_and_checked, setup, teardown),
      cmocka_unit_test_setup_teardown(specs_parse_and_normalize, setup, teardown),
      cmocka_unit_test_setup_teardown(device_put_lays_out_blocks, setup, teardown),
      cmocka_unit_test_setup_teardown(bad_layouts_are_rejected, setup, teardown),
      cmocka_unit_test_setup_teardown(visualize_draws_the_grid, setup, teardown),
      cmocka_unit_test_setup_teardown(constraint_is_identity_under_transforms, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
