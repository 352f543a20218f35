/* gather and scatter_add one window at a time (src/prims/gather.c): an
 * embedding lookup (jx_take of rows) and its gradient (a scatter_add of
 * rows, with repeated ids) at a size where the window path matters, against
 * loops written out here; f32 and f64, clip and fill modes. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

enum { ROWS = 300, WIDTH = 64, IDS = 1000 };

static void lookup_and_gradient(jx_dtype dt) {
  size_t es = dt == JX_F64 ? 8 : 4;
  double *table = malloc(sizeof *table * ROWS * WIDTH);
  int32_t *ids = malloc(sizeof *ids * IDS);
  assert_non_null(table);
  assert_non_null(ids);
  for (int i = 0; i < ROWS * WIDTH; i++) table[i] = sin(0.1 * i) * 3;
  for (int i = 0; i < IDS; i++) ids[i] = (int32_t)((i * 7919) % ROWS); /* repeats */
  jx_scope_begin();
  jx_array *t = jx_astype(jx_array_from(JX_F64, JX_SHAPE(ROWS, WIDTH), table), dt);
  jx_array *x = jx_array_from(JX_I32, JX_SHAPE(IDS), ids);
  /* forward: rows of the table */
  jx_array *got = jx_take(t, x, 0);
  char *g = malloc((size_t)IDS * WIDTH * es), *want = malloc((size_t)IDS * WIDTH * es);
  char *tb = malloc((size_t)ROWS * WIDTH * es);
  assert_int_equal(jx_read(got, g, (size_t)IDS * WIDTH * es), JX_OK);
  assert_int_equal(jx_read(t, tb, (size_t)ROWS * WIDTH * es), JX_OK);
  for (int i = 0; i < IDS; i++)
    memcpy(want + (size_t)i * WIDTH * es, tb + (size_t)ids[i] * WIDTH * es, WIDTH * es);
  assert_memory_equal(g, want, (size_t)IDS * WIDTH * es);
  /* backward: the cotangent of each looked-up row added into its table row,
   * in order (the rounding of repeated f32 adds follows that order) */
  jx_array *ct =
      jx_astype(jx_cos(jx_reshape(jx_arange(JX_F64, 0, IDS * WIDTH, 1), JX_SHAPE(IDS, WIDTH))), dt);
  jx_scatter_dims dims = {.update_window_dims = JX_AXES(1),
                          .inserted_window_dims = JX_AXES(0),
                          .scatter_dims_to_operand_dims = JX_AXES(0),
                          .index_vector_dim = 1};
  jx_array *grad = jx_scatter(jx_zeros(dt, JX_SHAPE(ROWS, WIDTH)), jx_expand_dims(x, 1), ct, &dims,
                              JX_SCATTER_ADD, JX_SCATTER_DROP);
  char *c = malloc((size_t)IDS * WIDTH * es), *acc = calloc((size_t)ROWS * WIDTH, es);
  assert_int_equal(jx_read(ct, c, (size_t)IDS * WIDTH * es), JX_OK);
  for (int i = 0; i < IDS; i++)
    for (int k = 0; k < WIDTH; k++) {
      size_t o = (size_t)ids[i] * WIDTH + (size_t)k, u = (size_t)i * WIDTH + (size_t)k;
      if (dt == JX_F64)
        ((double *)(void *)acc)[o] += ((double *)(void *)c)[u];
      else
        ((float *)(void *)acc)[o] += ((float *)(void *)c)[u];
    }
  char *gg = malloc((size_t)ROWS * WIDTH * es);
  assert_int_equal(jx_read(grad, gg, (size_t)ROWS * WIDTH * es), JX_OK);
  assert_memory_equal(gg, acc, (size_t)ROWS * WIDTH * es);
  free(g);
  free(want);
  free(tb);
  free(c);
  free(acc);
  free(gg);
  jx_scope_end();
  free(table);
  free(ids);
}

static void embedding_lookup_and_gradient(void **state) {
  (void)state;
  lookup_and_gradient(JX_F32);
  lookup_and_gradient(JX_F64);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(embedding_lookup_and_gradient),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
