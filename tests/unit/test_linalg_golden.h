/* The linear algebra goldens (tests/golden/gen_linalg*.py) and the batched
 * forms of a function's VJP that their stacked cases check. Include after
 * test_util.h; a file whose goldens are in another directory of the test
 * data defines LINALG_GOLDEN_DIR first. */
#ifndef JX_TESTS_UNIT_TEST_LINALG_GOLDEN_H
#define JX_TESTS_UNIT_TEST_LINALG_GOLDEN_H

#include <stdio.h>
#include <stdlib.h>

#ifndef LINALG_GOLDEN_DIR
#define LINALG_GOLDEN_DIR "linalg"
#endif

/* The array `name` of case c in the test data's directory dir. */
static inline jx_array *golden_in(const char *dir, const char *c, const char *name) {
  char path[512];
  snprintf(path, sizeof path, "%s/%s/%s_%s.npy", JX_TEST_DATA, dir, c, name);
  jx_array *a = jx_load_npy(path);
  check_ok(jx_last_status());
  return a;
}

/* The array `name` of case c in LINALG_GOLDEN_DIR. */
static inline jx_array *golden(const char *c, const char *name) {
  return golden_in(LINALG_GOLDEN_DIR, c, name);
}

/* f32 a's data, row-major, in a fresh buffer. */
static inline float *linalg_read_f32(jx_array *a) {
  size_t bytes = sizeof(float) * (size_t)jx_size(a);
  float *x = malloc(bytes);
  assert_non_null(x);
  check_ok(jx_read(a, x, bytes));
  return x;
}

/* want and got (f32) hold the same bits. */
static inline void assert_same_f32_bits(jx_array *want, jx_array *got) {
  float *x = linalg_read_f32(want), *y = linalg_read_f32(got);
  assert_int_equal(jx_size(want), jx_size(got));
  assert_memory_equal(x, y, sizeof(float) * (size_t)jx_size(want));
  free(x);
  free(y);
}

/* f's VJP (in: f's inputs, then its outputs' cotangents; out: f's outputs,
 * then its inputs' cotangents) in the two batched forms the stacked
 * goldens check: `mapped`, vmapped over every input's and output's
 * leading axis and jitted, and `sharded`, jitted with every input split
 * along its leading axis over a 2-device mesh (the linear algebra runs
 * replicated); `sharded` is NULL under CUDA, which has no meshes. */
typedef struct {
  jx_fn *vjp, *vmapped, *mapped, *sharded;
  jx_mesh *mesh;
  jx_sharding *sharding;
} batched_vjps;

static inline batched_vjps batched_vjps_of(jx_fn *f) {
  batched_vjps b = {0};
  b.vjp = jx_vjp(f);
  int nin = jx_fn_nin(b.vjp), nout = jx_fn_nout(b.vjp), zeros[JX_MAX_RANK] = {0};
  assert_true(nin <= JX_MAX_RANK && nout <= JX_MAX_RANK);
  b.vmapped = jx_vmap(b.vjp, jx_axes_make(nin, zeros), jx_axes_make(nout, zeros));
  b.mapped = jx_jit(b.vmapped, NULL);
  if (!test_cpu_only_check("batched_vjps_of", "the sharded VJP: there are no CUDA meshes"))
    return b;
  b.mesh = jx_mesh_create(JX_SHAPE(2), (const char *[]){"x"});
  b.sharding = jx_sharding_create(b.mesh, "x");
  assert_non_null(b.sharding);
  jx_sharding *split[JX_MAX_RANK];
  for (int i = 0; i < nin; i++) split[i] = b.sharding;
  b.sharded = jx_jit(b.vjp, &(jx_jit_options){.in_shardings = split});
  assert_non_null(b.sharded);
  return b;
}

static inline void batched_vjps_release(batched_vjps *b) {
  if (b->sharded) jx_fn_release(b->sharded);
  if (b->sharding) jx_sharding_release(b->sharding);
  if (b->mesh) jx_mesh_release(b->mesh);
  jx_fn_release(b->mapped);
  jx_fn_release(b->vmapped);
  jx_fn_release(b->vjp);
}

#endif
