/* Every primitive row carries its number (prims/prim_id.h): the registered
 * rows and the two that are not registered (axis_index, debug_print) each
 * have the JX_PRIM_<name> of their own name, no two rows share one, and
 * every number of the list belongs to a row. A row that forgets its .id
 * (0, JX_PRIM_NONE) or copies another row's fails here, before a pass's
 * table indexed by the number gives it the other primitive's lowering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "debug/debug_internal.h"
#include "prims/prims.h"

static const char *const names[JX_PRIM_COUNT] = {[JX_PRIM_NONE] = NULL,
#define NAME_OF(name) [JX_PRIM_##name] = #name,
                                                 JX_PRIM_LIST(NAME_OF)
#undef NAME_OF
};

typedef struct {
  const jx_prim *row[JX_PRIM_COUNT];
  int rows;
} seen;

static void check_row(const jx_prim *p, void *ctx) {
  seen *s = ctx;
  s->rows++;
  assert_true(p->id > JX_PRIM_NONE && p->id < JX_PRIM_COUNT);
  if (strcmp(names[p->id], p->name) != 0)
    fail_msg("row %s has the number of %s", p->name, names[p->id]);
  if (s->row[p->id]) fail_msg("rows %s and %s share a number", s->row[p->id]->name, p->name);
  s->row[p->id] = p;
}

static void every_row_has_its_own_number(void **state) {
  (void)state;
  seen s = {{0}, 0};
  jx_prim_foreach(check_row, &s);
  check_row(&jx_prim_axis_index, &s);
  check_row(&jx_prim_debug_print, &s);
  for (int id = JX_PRIM_NONE + 1; id < JX_PRIM_COUNT; id++)
    if (!s.row[id]) fail_msg("no row has the number of %s", names[id]);
  assert_int_equal(s.rows, JX_PRIM_COUNT - 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_row_has_its_own_number),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
