/* The lowering of each primitive (prim_lowering.h). Expressions mirror the
 * reference kernels in src/prims exactly, so a fused kernel gives the bits
 * the reference gives; jx_ functions and JX_ macros are the kernels'
 * prelude's (render_c.c). */
#include "prim_lowering.h"

/* A new primitive: say here what the compiler makes of it (or leave it to
 * run as it is), then count it. */
_Static_assert(JX_PRIM_COUNT == 136, "a new primitive: give it its lowering entry");

#define EXPR(F32, F64)                                                                             \
  { .kind = JX_LOWER_EXPR, .f32 = F32, .f64 = F64 }
#define SAME(E) EXPR(E, E)
/* with the C99 complex expressions of c64 and c128 operands */
#define EXPR_C(F32, F64, C64, C128)                                                                \
  { .kind = JX_LOWER_EXPR, .f32 = F32, .f64 = F64, .c64 = C64, .c128 = C128 }
#define SAME_C(E) EXPR_C(E, E, E, E)
/* complex operands only */
#define ONLY_C(C64, C128) EXPR_C(NULL, NULL, C64, C128)
/* with the integer expression (prim_lowering.h's ints) */
#define WITH_INT(E, I)                                                                             \
  { .kind = JX_LOWER_EXPR, .f32 = E, .f64 = E, .c64 = E, .c128 = E, .ints = I }
#define FLOAT_INT(E, I)                                                                            \
  { .kind = JX_LOWER_EXPR, .f32 = E, .f64 = E, .ints = I }
#define INT_ONLY(I)                                                                                \
  { .kind = JX_LOWER_EXPR, .ints = I }
#define REDUCE(OP)                                                                                 \
  { .kind = JX_LOWER_REDUCE, .reduce = OP }
#define SUBS(WHICH)                                                                                \
  { .subs = WHICH }

const jx_prim_lowering jx_prim_lowerings[JX_PRIM_COUNT] = {
    [JX_PRIM_add] = WITH_INT("(%0 + %1)", "jx_iadd(%0, %1)"),
    [JX_PRIM_sub] = WITH_INT("(%0 - %1)", "jx_isub(%0, %1)"),
    [JX_PRIM_mul] = WITH_INT("(%0 * %1)", "jx_imul(%0, %1)"),
    [JX_PRIM_div] = WITH_INT("(%0 / %1)", "jx_idiv(%0, %1)"),
    [JX_PRIM_neg] = WITH_INT("(-%0)", "jx_ineg(%0)"),
    [JX_PRIM_abs] = EXPR_C("fabsf(%0)", "fabs(%0)", "cabsf(%0)", "cabs(%0)"),
    [JX_PRIM_exp] = EXPR_C("jx_expf(%0)", "exp(%0)", "cexpf(%0)", "cexp(%0)"),
    [JX_PRIM_exp2] = EXPR_C("jx_exp2f(%0)", "exp2(%0)", "jx_cexp2f(%0)", "jx_cexp2(%0)"),
    [JX_PRIM_expm1] = EXPR_C("jx_expm1f(%0)", "expm1(%0)", "jx_cexpm1f(%0)", "jx_cexpm1(%0)"),
    [JX_PRIM_log] = EXPR_C("jx_logf(%0)", "log(%0)", "clogf(%0)", "clog(%0)"),
    [JX_PRIM_log1p] = EXPR_C("jx_log1pf(%0)", "log1p(%0)", "jx_clog1pf(%0)", "jx_clog1p(%0)"),
    [JX_PRIM_sqrt] = EXPR_C("sqrtf(%0)", "sqrt(%0)", "csqrtf(%0)", "csqrt(%0)"),
    [JX_PRIM_rsqrt] = EXPR_C("(1.0f / sqrtf(%0))", "(1.0 / sqrt(%0))", "((jx_c64)1 / csqrtf(%0))",
                             "((jx_c128)1 / csqrt(%0))"),
    [JX_PRIM_tanh] = EXPR_C("jx_tanhf(%0)", "tanh(%0)", "ctanhf(%0)", "ctanh(%0)"),
    [JX_PRIM_logistic] = EXPR("jx_logistic_f(%0)", "jx_logistic_d(%0)"),
    [JX_PRIM_sin] = EXPR_C("jx_sinf(%0)", "sin(%0)", "csinf(%0)", "csin(%0)"),
    [JX_PRIM_erf] = EXPR("jx_erff(%0)", "erf(%0)"),
    [JX_PRIM_cos] = EXPR_C("jx_cosf(%0)", "cos(%0)", "ccosf(%0)", "ccos(%0)"),
    [JX_PRIM_max] = FLOAT_INT("JX_FMAX(%0, %1)", "(%0 > %1 ? %0 : %1)"),
    [JX_PRIM_min] = FLOAT_INT("JX_FMIN(%0, %1)", "(%0 < %1 ? %0 : %1)"),
    [JX_PRIM_pow] = EXPR_C("powf(%0, %1)", "pow(%0, %1)", "cpowf(%0, %1)", "cpow(%0, %1)"),
    [JX_PRIM_eq] = WITH_INT("(%0 == %1)", "(%0 == %1)"),
    [JX_PRIM_ne] = WITH_INT("(%0 != %1)", "(%0 != %1)"),
    [JX_PRIM_lt] = FLOAT_INT("(%0 < %1)", "(%0 < %1)"),
    [JX_PRIM_le] = FLOAT_INT("(%0 <= %1)", "(%0 <= %1)"),
    [JX_PRIM_gt] = FLOAT_INT("(%0 > %1)", "(%0 > %1)"),
    [JX_PRIM_ge] = FLOAT_INT("(%0 >= %1)", "(%0 >= %1)"),
    /* select_n(which, case0, case1) on a bool predicate, typed by its cases */
    [JX_PRIM_select_n] = {.kind = JX_LOWER_EXPR,
                          .f32 = "(%0 ? %2 : %1)",
                          .f64 = "(%0 ? %2 : %1)",
                          .c64 = "(%0 ? %2 : %1)",
                          .c128 = "(%0 ? %2 : %1)",
                          .ints = "(%0 ? %2 : %1)",
                          .typed_by = 1,
                          .on_bool = 1},
    [JX_PRIM_stop_gradient] = {.kind = JX_LOWER_EXPR,
                               .f32 = "%0",
                               .f64 = "%0",
                               .c64 = "%0",
                               .c128 = "%0",
                               .ints = "%0",
                               .on_bool = 1},
    /* integers only (and, or, xor also on bool's 0 and 1; not is ~ on integers
     * only); sign: -1, 0, 1 (0 or 1 unsigned) */
    [JX_PRIM_rem] = INT_ONLY("jx_irem(%0, %1)"),
    [JX_PRIM_and] = {.kind = JX_LOWER_EXPR, .ints = "(%0 & %1)", .on_bool = 1},
    [JX_PRIM_or] = {.kind = JX_LOWER_EXPR, .ints = "(%0 | %1)", .on_bool = 1},
    [JX_PRIM_xor] = {.kind = JX_LOWER_EXPR, .ints = "(%0 ^ %1)", .on_bool = 1},
    [JX_PRIM_not] = INT_ONLY("(~%0)"),
    [JX_PRIM_shift_left] = INT_ONLY("jx_ishl(%0, %1)"),
    [JX_PRIM_shift_right_logical] = INT_ONLY("jx_ishr(%0, %1)"),
    [JX_PRIM_shift_right_arithmetic] = INT_ONLY("jx_isar(%0, %1)"),
    /* complex (unary.c, complex.c): C99's functions, as the reference kernels
     * call them (exp2, expm1 and log1p: complex_special.h's, as unary.c);
     * sign is z / |z| and 0 at 0 */
    [JX_PRIM_sign] = {.kind = JX_LOWER_EXPR,
                      .c64 = "(cabsf(%0) == 0 ? (jx_c64)0 : %0 / cabsf(%0))",
                      .c128 = "(cabs(%0) == 0 ? (jx_c128)0 : %0 / cabs(%0))",
                      .ints = "jx_isign(%0)"},
    [JX_PRIM_tan] = ONLY_C("ctanf(%0)", "ctan(%0)"),
    [JX_PRIM_sinh] = ONLY_C("csinhf(%0)", "csinh(%0)"),
    [JX_PRIM_cosh] = ONLY_C("ccoshf(%0)", "ccosh(%0)"),
    [JX_PRIM_asin] = ONLY_C("casinf(%0)", "casin(%0)"),
    [JX_PRIM_acos] = ONLY_C("cacosf(%0)", "cacos(%0)"),
    [JX_PRIM_atan] = ONLY_C("catanf(%0)", "catan(%0)"),
    [JX_PRIM_asinh] = ONLY_C("casinhf(%0)", "casinh(%0)"),
    [JX_PRIM_acosh] = ONLY_C("cacoshf(%0)", "cacosh(%0)"),
    [JX_PRIM_atanh] = ONLY_C("catanhf(%0)", "catanh(%0)"),
    [JX_PRIM_real] = ONLY_C("crealf(%0)", "creal(%0)"),
    [JX_PRIM_imag] = ONLY_C("cimagf(%0)", "cimag(%0)"),
    [JX_PRIM_conj] = ONLY_C("conjf(%0)", "conj(%0)"),
    [JX_PRIM_complex] = EXPR("jx_cmplxf(%0, %1)", "jx_cmplx(%0, %1)"),
    [JX_PRIM_integer_pow] = {.kind = JX_LOWER_INTEGER_POW},
    [JX_PRIM_convert_element_type] = {.kind = JX_LOWER_CONVERT, .on_bool = 1},

    [JX_PRIM_broadcast_in_dim] = {.kind = JX_LOWER_BROADCAST, .on_bool = 1},
    [JX_PRIM_iota] = {.kind = JX_LOWER_IOTA, .device = 1},
    /* x - x is 0 exactly when x is finite (inf - inf and NaN give NaN) */
    [JX_PRIM_is_finite] = {.kind = JX_LOWER_EXPR,
                           .f32 = "((%0) - (%0) == 0)",
                           .f64 = "((%0) - (%0) == 0)",
                           .device = 1},
    [JX_PRIM_slice] = {.kind = JX_LOWER_VIEW},
    [JX_PRIM_transpose] = {.kind = JX_LOWER_VIEW},
    [JX_PRIM_reshape] = {.kind = JX_LOWER_VIEW},
    [JX_PRIM_squeeze] = {.kind = JX_LOWER_VIEW},
    [JX_PRIM_expand_dims] = {.kind = JX_LOWER_VIEW},
    [JX_PRIM_pad] = {.kind = JX_LOWER_WINDOW},
    [JX_PRIM_concatenate] = {.kind = JX_LOWER_WINDOW},

    [JX_PRIM_reduce_sum] = REDUCE(JX_LOWER_SUM),
    [JX_PRIM_reduce_max] = REDUCE(JX_LOWER_MAX),
    [JX_PRIM_reduce_min] = REDUCE(JX_LOWER_MIN),

    [JX_PRIM_scan] = SUBS(JX_LOWER_SUBS_FIRST),
    [JX_PRIM_remat] = SUBS(JX_LOWER_SUBS_FIRST),
    [JX_PRIM_custom_vjp_call] = {.subs = JX_LOWER_SUBS_FIRST, .exec = JX_LOWER_EXEC_INLINE},
    [JX_PRIM_custom_jvp_call] = {.subs = JX_LOWER_SUBS_FIRST, .exec = JX_LOWER_EXEC_INLINE},
    [JX_PRIM_while] = SUBS(JX_LOWER_SUBS_PAIR),
    [JX_PRIM_cond] = SUBS(JX_LOWER_SUBS_ALL),

    [JX_PRIM_pvary] = {.exec = JX_LOWER_EXEC_CAST},
};
