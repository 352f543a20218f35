/* A primitive is one table row of rules.
 *
 * Rows are `const jx_prim jx_prim_<name>` objects defined in their family's
 * file (unary.c, binary.c, ...), declared in prims.h and listed by
 * registry.c, or, for the rows of the layers above, registered at start-up
 * (JX_REGISTER_PRIMS). Each transformation's rule is a field here; a row that
 * leaves a rule NULL makes the transformation report "not supported for
 * <prim>" instead of crashing. Rules take a jx_rule_ctx and their data;
 * rules.h builds the common ones. */
#ifndef JX_SRC_PRIMS_PRIM_H
#define JX_SRC_PRIMS_PRIM_H

#include <string.h>

#include "../array/array.h"
#include "../base/hash.h"
#include "prim_id.h"

/* The abstract value of an array: what a shape rule sees. vma: inside a
 * shard_map body, the set of manual mesh axes the value varies over
 * (trace/vma.h; 0: invariant over all, always so outside shard_map). Shape
 * rules leave it alone; the trace sets it by the row's vma kind. */
typedef struct {
  jx_dtype dtype;
  uint8_t weak;
  jx_shape shape;
  int vma;
} jx_aval;

/* An integer list parameter (axes, dims, strides, paddings). */
typedef struct {
  int n;
  int64_t v[JX_MAX_RANK];
} jx_ilist;

/* Parameters of one application of a primitive. One plain struct for all
 * primitives keeps hashing, comparison and printing generic: each row's
 * `params` string names the slots it uses, e.g. "axes=l0 keepdims=i0
 * new_dtype=dtype" (slots i0-i4, f0-f1, l0-l7, dtype).
 * Unused slots must be zero (start from JX_PARAMS_INIT) so that equal
 * parameters compare equal bytewise. */
#define JX_PARAM_INTS   5
#define JX_PARAM_FLOATS 2
#define JX_PARAM_LISTS  8
typedef struct {
  jx_dtype dtype; /* a target dtype, where the primitive has one */
  int64_t i[JX_PARAM_INTS];
  double f[JX_PARAM_FLOATS];
  jx_ilist l[JX_PARAM_LISTS];
} jx_params;
#define JX_PARAMS_INIT                                                                             \
  { 0 }

/* Equal parameters, slot by slot (list entries beyond n do not count). */
static inline int jx_params_equal(const jx_params *a, const jx_params *b) {
  if (a->dtype != b->dtype) return 0;
  for (int i = 0; i < JX_PARAM_INTS; i++)
    if (a->i[i] != b->i[i]) return 0;
  for (int i = 0; i < JX_PARAM_FLOATS; i++)
    if (memcmp(&a->f[i], &b->f[i], sizeof(double)) != 0) return 0;
  for (int l = 0; l < JX_PARAM_LISTS; l++) {
    if (a->l[l].n != b->l[l].n) return 0;
    for (int i = 0; i < a->l[l].n && i < JX_MAX_RANK; i++)
      if (a->l[l].v[i] != b->l[l].v[i]) return 0;
  }
  return 1;
}
/* A hash on which jx_params_equal parameters agree. */
static inline uint64_t jx_params_hash(const jx_params *p) {
  uint64_t h = jx_hash_u64(JX_HASH_SEED, (uint64_t)p->dtype);
  for (int i = 0; i < JX_PARAM_INTS; i++) h = jx_hash_u64(h, (uint64_t)p->i[i]);
  for (int i = 0; i < JX_PARAM_FLOATS; i++) h = jx_hash_bytes(h, &p->f[i], sizeof(double));
  for (int l = 0; l < JX_PARAM_LISTS; l++) {
    h = jx_hash_u64(h, (uint64_t)p->l[l].n);
    for (int i = 0; i < p->l[l].n && i < JX_MAX_RANK; i++)
      h = jx_hash_u64(h, (uint64_t)p->l[l].v[i]);
  }
  return h;
}

/* A concrete operand of a reference kernel: contiguous row-major data. */
typedef struct {
  void *data;
  jx_dtype dtype;
  jx_shape shape;
} jx_tensor;

struct jx_program;
struct jx_prim;

/* What every rule of one application of a primitive is told besides its data:
 * the row being applied, its parameters, the operand and result counts and
 * the nested programs (control flow; nsub = 0 elsewhere). Rules shared by
 * several rows (jx_jvp_zero, the constructors in rules.h) apply ctx->prim. */
typedef struct jx_rule_ctx {
  const struct jx_prim *prim;
  const jx_params *params;
  int nin, nout;
  int nsub;
  struct jx_program *const *subs;
} jx_rule_ctx;

/* Shape and dtype rule: fills out[0..nout) from the inputs and parameters, or
 * records an error (jx_error_set) naming the primitive and the offending
 * shapes/dtypes and returns its status. */
typedef jx_status (*jx_infer_fn)(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out);
/* Reference kernel: plain, obviously correct loops. Outputs are allocated to
 * the shapes the rule gave; the kernel writes every element. */
typedef void (*jx_eval_fn)(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out);

/* Concrete execution of a primitive that is more than a kernel (control flow
 * runs its nested programs ctx->subs): replaces infer + eval when every input
 * is concrete. Results belong to the innermost scope. */
typedef jx_status (*jx_impl_fn)(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out);

/* Transformation rules. They are written with ordinary ops (jx_mul, jx_bind,
 * ...) on arrays that are tracers while a transformation runs, so the ops
 * they apply are recorded into the transformed program. rules.h builds the
 * common shapes (linear, bilinear, elementwise) from smaller pieces.
 *
 * JVP: primal inputs x and tangents t (t[i] NULL: a symbolic zero) give the
 * primal outputs y and their tangents ty (NULL: zero). ty must be linear in t. */
#define JX_JVP_RULE(name)                                                                          \
  jx_status name(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t, jx_array **y,     \
                 jx_array **ty)
typedef JX_JVP_RULE((*jx_jvp_fn));
/* Transpose of a primitive linear in its inputs with linear[i] set: in[i] is
 * the value of each other input and NULL for the linear ones (whose avals are
 * avals[i]); ct[o] is the cotangent of output o (NULL: zero). Writes the
 * cotangent of each linear input to ct_in[i] (NULL: zero). */
#define JX_TRANSPOSE_RULE(name)                                                                    \
  jx_status name(const jx_rule_ctx *ctx, jx_array *const *in, const jx_aval *avals,                \
                 const uint8_t *linear, jx_array *const *ct, jx_array **ct_in)
typedef JX_TRANSPOSE_RULE((*jx_transpose_fn));
/* Batching: bdim[i] is the batched axis of in[i] or JX_NOT_MAPPED; all mapped
 * inputs share axis_size. Writes the outputs and their batched axes. */
#define JX_NOT_MAPPED (-1)
#define JX_BATCH_RULE(name)                                                                        \
  jx_status name(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim, int64_t axis_size,  \
                 jx_array **out, int *out_bdim)
typedef JX_BATCH_RULE((*jx_batch_fn));

/* Output avals of a primitive whose results are its nested programs'
 * (control flow), completing what the shape rule could not see. */
typedef jx_status (*jx_outputs_fn)(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out);

/* Partial evaluation of an equation holding nested programs (control flow),
 * for reverse mode: see transform/partial_eval.h. */
struct jx_eqn;
struct jx_pe_eqn;
typedef jx_status (*jx_partial_eval_fn)(const struct jx_eqn *e, const jx_aval *in_avals,
                                        const uint8_t *unknown_in, uint8_t *unknown_out,
                                        struct jx_pe_eqn *known, struct jx_pe_eqn *unknown,
                                        int *nres, jx_aval **res_avals);

#define JX_VARIADIC   (-1) /* nin: any count >= 1 */
#define JX_NOUT_NIN   (-1) /* nout: as many outputs as inputs (sort) */
#define JX_NOUT_PARAM (-2) /* nout: params.i[3] (control flow) */

typedef struct jx_prim {
  const char *name;   /* as in JAX: "add", "dot_general", "reduce_sum" */
  jx_prim_id id;      /* JX_PRIM_<name>: its entry in each pass's table (prim_id.h) */
  int nin;            /* or JX_VARIADIC */
  int nout;           /* or JX_NOUT_NIN */
  const char *params; /* slot names for printing: "axes=l0 keepdims=i0"; "" if none */
  jx_infer_fn infer;
  jx_eval_fn eval;
  jx_outputs_fn outputs;           /* control flow: output avals from the nested programs */
  jx_impl_fn impl;                 /* NULL: eager execution is infer + eval */
  jx_jvp_fn jvp;                   /* NULL: not differentiable (an error under jvp/grad) */
  jx_transpose_fn transpose;       /* linear primitives only */
  jx_batch_fn batch;               /* NULL: an error under vmap */
  jx_partial_eval_fn partial_eval; /* NULL: the whole equation is unknown if any input is */
  /* Named axes the nested programs run under (shard_map's mesh axes): binds
   * them (jx_axis_push) for code that walks into the subprograms, such as
   * verification, and returns how many it bound (popped by the caller). */
  int (*bind_sub_axes)(const jx_params *p);
  uint8_t elementwise; /* 1: same-shaped operands, output of that shape (generic batching) */
  uint8_t uses_axis;   /* 1: depends on a named axis (axis_index, collectives): its batching
                          rule runs even when no operand is batched */
  uint8_t effect;      /* 1: has a side effect (debug_print): never removed as dead code,
                          merged with an equal equation or folded; runs in program order */
  uint8_t vma;         /* how the outputs' varying manual axes follow the inputs'
                          (jx_vma_kind, trace/vma.h); 0: their union */
} jx_prim;

/* Rows defined above the prims layer, registered at start-up
 * (JX_REGISTER_PRIMS); prims.h looks rows up by name. */
typedef struct jx_prim_family {
  const jx_prim *const *rows; /* NULL-terminated */
  struct jx_prim_family *next;
} jx_prim_family;
/* Adds f's rows to those jx_prim_lookup and jx_prim_foreach see. Called
 * before main (from the constructors JX_REGISTER_PRIMS writes), so it takes
 * no lock. */
void jx_prim_register_family(jx_prim_family *f);
/* Registers the rows given (pointers to jx_prim) at start-up, from the file
 * that defines them: whenever that file is part of the program, its rows can
 * be found by name and are among "every row". `tag` names the family. */
#define JX_REGISTER_PRIMS(tag, ...)                                                                \
  static const jx_prim *const tag##_rows[] = {__VA_ARGS__, NULL};                                  \
  static jx_prim_family tag##_family = {tag##_rows, NULL};                                         \
  __attribute__((constructor)) static void tag##_register(void) {                                  \
    jx_prim_register_family(&tag##_family);                                                        \
  }

/* Number of outputs of p applied to nin inputs with params pp. */
static inline int jx_prim_nout(const jx_prim *p, int nin, const jx_params *pp) {
  if (p->nout == JX_NOUT_PARAM) return (int)pp->i[3];
  return p->nout == JX_NOUT_NIN ? nin : p->nout;
}

/* The check every shape a rule makes passes (jx_shape_check), run on the
 * output avals once p's rules have set them: an output whose non-zero dims
 * multiply past the limit is an error naming p, even when it is empty. */
jx_status jx_prim_check_outputs(const jx_prim *p, int nout, const jx_aval *out);

/* ---- helpers for rules ---- */
/* Normalizes axis (negative counts from the end) into [0, rank); records an
 * error naming op and returns -1 when out of range. */
int jx_normalize_axis(int axis, int rank, const char *op);

#endif
