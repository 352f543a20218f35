/* How the compiler lowers each primitive: one entry per primitive, indexed
 * by its number (prims/prim_id.h), read by the lowering of custom calls
 * (lower.c), the fusion pass (fusion.c), the kernel renderer of every
 * dialect (render_c.c) and the compiled control flow (control_compile.c). A primitive without an
 * entry runs as it is: its reference kernel or its impl, one equation at a time. */
#ifndef JX_SRC_COMPILE_PRIM_LOWERING_H
#define JX_SRC_COMPILE_PRIM_LOWERING_H

#include <stdint.h>

#include "../prims/prim.h"

/* What a fused kernel makes of an equation of the primitive. */
typedef enum {
  JX_LOWER_RUN,         /* nothing: it runs as it is */
  JX_LOWER_EXPR,        /* elementwise: its C expression (f32, f64, c64, c128) */
  JX_LOWER_CONVERT,     /* convert_element_type: a cast */
  JX_LOWER_INTEGER_POW, /* the products binary powering forms, written out */
  JX_LOWER_VIEW,        /* a view kernels read through (strides and an offset) */
  JX_LOWER_BROADCAST,   /* broadcast_in_dim: a view, and renderable as its operand's element */
  JX_LOWER_WINDOW,      /* pad, concatenate: a select over windowed loads */
  JX_LOWER_REDUCE,      /* a reduction a kernel may end with (.reduce) */
  JX_LOWER_IOTA,        /* iota: the element's index along a dim (dialects that render integers) */
} jx_lower_kind;

/* The reductions a kernel ends with; the values are jx_fusion_row_reduce's. */
typedef enum { JX_LOWER_SUM = 1, JX_LOWER_MAX = 2, JX_LOWER_MIN = 3 } jx_lower_reduce;

/* Control flow: which nested programs its impl runs on concrete inputs,
 * and so which ones compiling the equation compiles (the wrappers' other
 * programs, custom rules, only matter under a transformation, which
 * happened before compilation). */
typedef enum {
  JX_LOWER_SUBS_NONE,
  JX_LOWER_SUBS_FIRST, /* the program it wraps (scan's body, remat's, a custom call's) */
  JX_LOWER_SUBS_PAIR,  /* both of exactly two (while: the condition and the body) */
  JX_LOWER_SUBS_ALL,   /* every one (cond's branches) */
} jx_lower_subs;

/* What the executable runs for an equation of the primitive (lower.h). */
typedef enum {
  JX_LOWER_EXEC_AS_IS,
  JX_LOWER_EXEC_INLINE, /* a custom call: its function's equations, inlined */
  JX_LOWER_EXEC_CAST,   /* a cast that only types its value (pvary): its operand */
} jx_lower_exec;

typedef struct {
  uint8_t kind; /* jx_lower_kind */
  /* JX_LOWER_EXPR: the C expression of operands %0, %1, %2 per dtype of the
   * operand typed_by (f32 also for bf16); c64/c128 are C99 complex
   * expressions (float/double _Complex). NULL: not rendered for that dtype. */
  const char *f32, *f64, *c64, *c128;
  /* integer operands (and the integer cases of select_n): a C++ expression
   * over the device dialect's integer helpers (render_cuda.c), with the
   * reference kernels' semantics (binary.c: wrapping, x / 0 = -1, ...);
   * only dialects that render integers use it (jx_fuse_device) */
  const char *ints;
  uint8_t typed_by; /* the operand whose dtype picks the expression (select_n: a case) */
  uint8_t on_bool;  /* takes bool operands; for the others bool is not a float op */
  uint8_t device;   /* rendered only where integers are (jx_fuse_device): the C kernels
                     * leave it to its reference kernel */
  uint8_t reduce;   /* JX_LOWER_REDUCE: jx_lower_reduce */
  uint8_t subs;     /* jx_lower_subs */
  uint8_t exec;     /* jx_lower_exec */
} jx_prim_lowering;

extern const jx_prim_lowering jx_prim_lowerings[JX_PRIM_COUNT];

static inline const jx_prim_lowering *jx_prim_lowering_of(const jx_prim *p) {
  return &jx_prim_lowerings[p->id];
}

/* x's expression for operands of dtype t (x->typed_by's), or NULL. */
static inline const char *jx_lower_expr(const jx_prim_lowering *x, jx_dtype t) {
  switch (t) {
  case JX_F32:
  case JX_BF16: return x->f32;
  case JX_BOOL: return x->f32 ? x->f32 : x->ints; /* and, or, xor: the integer ones */
  case JX_F64: return x->f64;
  case JX_C64: return x->c64;
  case JX_C128: return x->c128;
  case JX_I8:
  case JX_I16:
  case JX_I32:
  case JX_I64:
  case JX_U8:
  case JX_U16:
  case JX_U32:
  case JX_U64: return x->ints;
  default: return NULL;
  }
}

/* A member of a fused kernel can compute it (its expression, cast or
 * powers, or a broadcast's element), dtypes aside. */
static inline int jx_lower_computes(const jx_prim *p) {
  jx_lower_kind k = (jx_lower_kind)jx_prim_lowering_of(p)->kind;
  return k == JX_LOWER_EXPR || k == JX_LOWER_CONVERT || k == JX_LOWER_INTEGER_POW ||
         k == JX_LOWER_BROADCAST || k == JX_LOWER_IOTA;
}

/* A view kernels read through, dtypes aside. */
static inline int jx_lower_is_view(const jx_prim *p) {
  jx_lower_kind k = (jx_lower_kind)jx_prim_lowering_of(p)->kind;
  return k == JX_LOWER_VIEW || k == JX_LOWER_BROADCAST;
}

#endif
