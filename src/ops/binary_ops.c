/* NumPy-level binary elementwise ops: promote, broadcast, then one primitive. */
#include "../prims/elementwise.h"
#include "ops_util.h"

#define SIMPLE(FN, PRIM)                                                                           \
  jx_array *FN(jx_array *a, jx_array *b) { return jx_ops_binary(#FN, &PRIM, a, b); }

/* bool + bool is logical or, and bool * bool logical and, as in NumPy */
static jx_array *bool_aware(const char *op, const jx_prim *arith, const jx_prim *logic, jx_array *a,
                            jx_array *b) {
  if (jx_ops_promote_broadcast(op, &a, &b)) return jx_poison();
  return jx_bind1(a->dtype == JX_BOOL ? logic : arith, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_add(jx_array *a, jx_array *b) {
  return bool_aware("jx_add", &jx_prim_add, &jx_prim_or, a, b);
}
jx_array *jx_mul(jx_array *a, jx_array *b) {
  return bool_aware("jx_mul", &jx_prim_mul, &jx_prim_and, a, b);
}
SIMPLE(jx_sub, jx_prim_sub)
SIMPLE(jx_rem, jx_prim_rem)
SIMPLE(jx_pow, jx_prim_pow)
SIMPLE(jx_maximum, jx_prim_max)
SIMPLE(jx_minimum, jx_prim_min)
SIMPLE(jx_eq, jx_prim_eq)
SIMPLE(jx_ne, jx_prim_ne)
SIMPLE(jx_lt, jx_prim_lt)
SIMPLE(jx_le, jx_prim_le)
SIMPLE(jx_gt, jx_prim_gt)
SIMPLE(jx_ge, jx_prim_ge)

/* Bitwise ops check their operands' dtypes first so that the error names the
 * public function rather than the primitive. */
static jx_array *bitwise(const char *op, const jx_prim *p, jx_accept acc, jx_array *a,
                         jx_array *b) {
  jx_array *in[2] = {a, b};
  if (jx_check_inputs(op, 2, in)) return jx_poison();
  for (int i = 0; i < 2; i++)
    if (jx_accept_check(op, acc, i, in[i]->dtype, in[i]->shape)) return jx_poison();
  return jx_ops_binary(op, p, a, b);
}
#define BITWISE(FN, PRIM, ACC)                                                                     \
  jx_array *FN(jx_array *a, jx_array *b) { return bitwise(#FN, &PRIM, ACC, a, b); }
BITWISE(jx_bitwise_and, jx_prim_and, JX_ACCEPT_INT_OR_BOOL)
BITWISE(jx_bitwise_or, jx_prim_or, JX_ACCEPT_INT_OR_BOOL)
BITWISE(jx_bitwise_xor, jx_prim_xor, JX_ACCEPT_INT_OR_BOOL)
BITWISE(jx_shift_left, jx_prim_shift_left, JX_ACCEPT_INT)
BITWISE(jx_shift_right_arithmetic, jx_prim_shift_right_arithmetic, JX_ACCEPT_INT)
BITWISE(jx_shift_right_logical, jx_prim_shift_right_logical, JX_ACCEPT_INT)

/* Floating-only ops compute integers in the inexact dtype they promote to. */
static jx_array *inexact(const char *op, const jx_prim *p, jx_array *a, jx_array *b) {
  if (jx_ops_promote_broadcast(op, &a, &b)) return jx_poison();
  jx_dtype dt = jx_to_inexact(a->dtype);
  int weak = a->weak; /* two weak integers give a weak float, as jnp.true_divide(2, 3) */
  a = jx_ops_convert(a, dt, weak);
  b = jx_ops_convert(b, dt, weak);
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}

jx_array *jx_div(jx_array *a, jx_array *b) { return inexact("jx_div", &jx_prim_div, a, b); }
jx_array *jx_atan2(jx_array *a, jx_array *b) { return inexact("jx_atan2", &jx_prim_atan2, a, b); }
jx_array *jx_nextafter(jx_array *a, jx_array *b) {
  return inexact("jx_nextafter", &jx_prim_nextafter, a, b);
}

/* Floor division as jnp.floor_divide: for floats JAX's float divmod (the
 * quotient of a - fmod(a, b), corrected where the remainder's sign differs
 * from b's, rounded); for signed integers the truncated quotient minus one
 * where the signs differ and the division is inexact. */
static jx_array *bind2(const jx_prim *p, jx_array *a, jx_array *b) {
  return jx_bind1(p, 2, (jx_array *[]){a, b}, NULL);
}
static jx_array *bind1(const jx_prim *p, jx_array *a) { return jx_bind1(p, 1, &a, NULL); }
static jx_array *like(jx_array *a, double v) {
  return jx_ops_broadcast(jx_ops_convert(jx_scalar(a->dtype, v), a->dtype, a->weak), a->shape);
}

jx_array *jx_floor_divide(jx_array *a, jx_array *b) {
  const char *op = "jx_floor_divide";
  if (jx_ops_promote_broadcast(op, &a, &b)) return jx_poison();
  if (a->dtype == JX_BOOL) {
    jx_error_set(JX_ERR_DTYPE, "%s: bool operands are not supported", op);
    return jx_poison();
  }
  if (jx_is_unsigned_int(a->dtype)) return bind2(&jx_prim_div, a, b);
  jx_array *zero = like(a, 0), *one = like(a, 1);
  if (jx_is_float(a->dtype)) {
    jx_array *mod = bind2(&jx_prim_rem, a, b);
    jx_array *corrected =
        jx_bind1(&jx_prim_select_n, 3, /* a where b == 0, as JAX */
                 (jx_array *[]){bind2(&jx_prim_eq, b, zero), bind2(&jx_prim_sub, a, mod), a}, NULL);
    jx_array *div = bind2(&jx_prim_div, corrected, b);
    jx_array *fix = bind2(&jx_prim_and, bind2(&jx_prim_ne, mod, zero),
                          bind2(&jx_prim_ne, bind1(&jx_prim_sign, b), bind1(&jx_prim_sign, mod)));
    jx_array *q = jx_bind1(&jx_prim_select_n, 3,
                           (jx_array *[]){fix, div, bind2(&jx_prim_sub, div, one)}, NULL);
    jx_params away = JX_PARAMS_INIT; /* i0 = 0: half away from zero, as lax.round */
    return jx_bind1(&jx_prim_round, 1, &q, &away);
  }
  jx_array *q = bind2(&jx_prim_div, a, b);
  jx_array *fix =
      bind2(&jx_prim_and, bind2(&jx_prim_ne, bind1(&jx_prim_sign, a), bind1(&jx_prim_sign, b)),
            bind2(&jx_prim_ne, bind2(&jx_prim_rem, a, b), zero));
  return jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){fix, q, bind2(&jx_prim_sub, q, one)}, NULL);
}

/* Logical ops test operands against zero and give bool. */
static jx_array *as_bool(jx_array *a) {
  if (!a || a->poisoned || a->dtype == JX_BOOL) return a;
  jx_array *zero = jx_ops_broadcast(jx_ops_convert(jx_scalar(a->dtype, 0), a->dtype, 0), a->shape);
  return jx_bind1(&jx_prim_ne, 2, (jx_array *[]){jx_ops_convert(a, a->dtype, 0), zero}, NULL);
}

static jx_array *logical(const char *op, const jx_prim *p, jx_array *a, jx_array *b) {
  if (jx_check_inputs(op, 2, (jx_array *[]){a, b})) return jx_poison();
  return jx_ops_binary(op, p, as_bool(a), as_bool(b));
}

jx_array *jx_logical_and(jx_array *a, jx_array *b) {
  return logical("jx_logical_and", &jx_prim_and, a, b);
}
jx_array *jx_logical_or(jx_array *a, jx_array *b) {
  return logical("jx_logical_or", &jx_prim_or, a, b);
}
jx_array *jx_logical_xor(jx_array *a, jx_array *b) {
  return logical("jx_logical_xor", &jx_prim_xor, a, b);
}
jx_array *jx_logical_not(jx_array *a) {
  if (jx_check_inputs("jx_logical_not", 1, &a)) return jx_poison();
  return jx_bind1(&jx_prim_not, 1, (jx_array *[]){as_bool(a)}, NULL);
}
