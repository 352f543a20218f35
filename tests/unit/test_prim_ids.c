/* Every primitive row carries its number (prims/prim_id.h): each row the
 * list names (jx_prim_<name>, whichever layer defines it) has the number
 * JX_PRIM_<name> and the name <name>, and every row the registry holds is
 * the listed row of its number. A row that forgets its .id (0, JX_PRIM_NONE)
 * or copies another row's fails here, before a pass's table indexed by the
 * number gives it the other primitive's lowering. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "prims/prims.h"

#define DECLARE(name) extern const jx_prim jx_prim_##name;
JX_PRIM_LIST(DECLARE)
#undef DECLARE

static const jx_prim *const rows[JX_PRIM_COUNT] = {
#define ROW(name) [JX_PRIM_##name] = &jx_prim_##name,
    JX_PRIM_LIST(ROW)
#undef ROW
};

static const char *const names[JX_PRIM_COUNT] = {
#define NAME_OF(name) [JX_PRIM_##name] = #name,
    JX_PRIM_LIST(NAME_OF)
#undef NAME_OF
};

static void every_listed_row_has_its_number(void **state) {
  (void)state;
  assert_null(rows[JX_PRIM_NONE]);
  for (int id = JX_PRIM_NONE + 1; id < JX_PRIM_COUNT; id++) {
    if (strcmp(rows[id]->name, names[id]) != 0)
      fail_msg("jx_prim_%s is named %s", names[id], rows[id]->name);
    if (rows[id]->id != (jx_prim_id)id)
      fail_msg("row %s has number %d, not %d", names[id], (int)rows[id]->id, id);
  }
}

static void registered(const jx_prim *p, void *ctx) {
  int *n = ctx;
  ++*n;
  assert_true(p->id > JX_PRIM_NONE && p->id < JX_PRIM_COUNT);
  if (rows[p->id] != p) fail_msg("row %s has the number of %s", p->name, names[p->id]);
}

static void every_registered_row_is_listed(void **state) {
  (void)state;
  int n = 0;
  jx_prim_foreach(registered, &n);
  assert_true(n > 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(every_listed_row_has_its_number),
      cmocka_unit_test(every_registered_row_is_listed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
