/* pad's kernel (src/prims/slicing.c) against its definition, element by
 * element: out[j] is the operand element i with j_d = lo_d + i_d * (interior_d
 * + 1) in every dim, else the padding value. Random pads over 1, 2, 4 and 8
 * byte dtypes, half of them of the kind that takes the contiguous-block path
 * (no interior padding, padding or cropping only where the inner dims are
 * whole, the identity), the others anything; plus a large identity pad that
 * the strided copy engine splits over the pool. */
/* cmocka needs these first, in this order */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <jx/jx.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "array/array.h"
#include "prims/prims.h"
#include "test_util.h"

static uint64_t rng = 0x6a09e667f3bcc908ull;
static uint64_t next(void) { return test_rng_next(&rng); }
static int pick(int n) { return (int)(next() % (uint64_t)n); }

static int contiguous_cases;

/* Pads a random operand of shape s; 0 when the rule rejects the pad. */
static int check(jx_dtype dt, jx_shape s, const jx_params *p) {
  jx_aval in[2] = {{dt, 0, s, 0}, {dt, 0, {0, {0}}, 0}}, oa;
  if (jx_prim_pad.infer(&(jx_rule_ctx){&jx_prim_pad, p, 2, 1, 0, NULL}, in, &oa) != JX_OK) {
    jx_clear_error();
    return 0;
  }
  size_t es = jx_dtype_size(dt);
  int64_t n = jx_shape_numel(s), no = jx_shape_numel(oa.shape);
  unsigned char *x = malloc(es * (size_t)n + 1), *got = malloc(es * (size_t)no + 1),
                *want = malloc(es * (size_t)no + 1), pv[8];
  assert_true(x && got && want);
  for (size_t i = 0; i < es * (size_t)n; i++) x[i] = (unsigned char)next();
  for (size_t i = 0; i < es; i++) pv[i] = (unsigned char)(0x80 | i); /* differs from garbage */
  memset(got, 0xA5, es * (size_t)no);
  /* the definition: every out element is the padding value or one operand element */
  for (int64_t j = 0; j < no; j++) memcpy(want + (size_t)j * es, pv, es);
  int64_t idx[JX_MAX_RANK] = {0}, ostr[JX_MAX_RANK];
  jx_shape_strides(oa.shape, ostr);
  for (int64_t i = 0; i < n; i++) {
    int64_t off = 0, inside = 1;
    for (int d = 0; d < s.rank; d++) {
      int64_t pos = p->l[0].v[d] + idx[d] * (p->l[2].v[d] + 1);
      inside = inside && pos >= 0 && pos < oa.shape.dims[d];
      off += pos * ostr[d];
    }
    if (inside) memcpy(want + (size_t)off * es, x + (size_t)i * es, es);
    for (int d = s.rank - 1; d >= 0; d--) {
      if (++idx[d] < s.dims[d]) break;
      idx[d] = 0;
    }
  }
  jx_tensor ti[2] = {{x, dt, s}, {pv, dt, {0, {0}}}}, to = {got, dt, oa.shape};
  jx_prim_pad.eval(&(jx_rule_ctx){&jx_prim_pad, p, 2, 1, 0, NULL}, ti, &to);
  assert_memory_equal(got, want, es * (size_t)no);
  free(x);
  free(got);
  free(want);
  return 1;
}

static const jx_dtype dtypes[4] = {JX_U8, JX_F16, JX_F32, JX_F64};

static void random_pads(void **state) {
  (void)state;
  for (int i = 0; i < 600; i++) {
    int r = 1 + pick(4), block = i % 2;
    jx_shape s = {r, {0}};
    jx_params p = {0};
    p.l[0].n = p.l[1].n = p.l[2].n = r;
    int outer = pick(r); /* block pads: only dims up to `outer` padded, the first by lo/hi */
    for (int d = 0; d < r; d++) {
      s.dims[d] = pick(6) + (pick(8) != 0);
      p.l[0].v[d] = pick(5) - 2;
      p.l[1].v[d] = pick(5) - 2;
      p.l[2].v[d] = pick(3) == 0 ? pick(3) : 0;
      if (block) {
        p.l[2].v[d] = 0;
        if (d > outer) p.l[0].v[d] = p.l[1].v[d] = 0;
        if (d < outer) s.dims[d] = 1;
      }
    }
    if (check(dtypes[i % 4], s, &p) && block) contiguous_cases++;
  }
  assert_true(contiguous_cases > 100);
}

static void large_identity(void **state) {
  (void)state;
  jx_params p = {0};
  p.l[0].n = p.l[1].n = p.l[2].n = 4;
  assert_true(check(JX_F32, (jx_shape){4, {64, 28, 28, 16}}, &p));
  p.l[0].v[0] = 1, p.l[1].v[0] = -2; /* one leading image more, two fewer */
  assert_true(check(JX_F32, (jx_shape){4, {64, 28, 28, 16}}, &p));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(random_pads),
      cmocka_unit_test(large_identity),
  };
  int rc = cmocka_run_group_tests(tests, NULL, NULL);
  printf("%d pads of one contiguous block\n", contiguous_cases);
  jx_shutdown();
  return rc;
}
