/* The primitive registry: the prims layer's own families and the rows the
 * layers above register at start-up (control flow in transform/, sharding and
 * collectives in parallel/, linear algebra in linalg/) are all found by name
 * and visited once by jx_prim_foreach. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <string.h>
#include <cmocka.h>

#include "linalg/linalg_prims.h"
#include "parallel/collective.h"
#include "parallel/constraint.h"
#include "parallel/shard_map.h"
#include "prims/prims.h"

/* One row of each family, from each layer (naming them links their files). */
static const jx_prim *const expected[] = {
    &jx_prim_add,
    &jx_prim_neg,
    &jx_prim_dot_general,
    &jx_prim_random_bits,
    &jx_prim_cond,
    &jx_prim_while,
    &jx_prim_scan,
    &jx_prim_remat,
    &jx_prim_custom_lin,
    &jx_prim_psum,
    &jx_prim_ppermute,
    &jx_prim_pvary,
    &jx_prim_shard_map,
    &jx_prim_sharding_constraint,
    &jx_prim_cholesky,
    &jx_prim_qr,
    &jx_prim_triangular_solve,
};
#define NEXPECTED ((int)(sizeof expected / sizeof *expected))

static void lookup_finds_every_layer(void **state) {
  (void)state;
  for (int i = 0; i < NEXPECTED; i++)
    assert_ptr_equal(jx_prim_lookup(expected[i]->name), expected[i]);
  assert_null(jx_prim_lookup("no_such_primitive"));
}

typedef struct {
  int rows, seen[NEXPECTED];
  const char *names[512];
} visit;

static void count(const jx_prim *p, void *ctx) {
  visit *v = ctx;
  for (int i = 0; i < NEXPECTED; i++) v->seen[i] += p == expected[i];
  for (int i = 0; i < v->rows && i < 512; i++) assert_string_not_equal(v->names[i], p->name);
  if (v->rows < 512) v->names[v->rows] = p->name;
  v->rows++;
}

static void foreach_visits_each_row_once(void **state) {
  (void)state;
  visit v = {0};
  jx_prim_foreach(count, &v);
  for (int i = 0; i < NEXPECTED; i++) assert_int_equal(v.seen[i], 1);
  assert_true(v.rows < 512);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lookup_finds_every_layer),
      cmocka_unit_test(foreach_visits_each_row_once),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return rc;
}
