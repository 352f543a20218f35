/* Partial evaluation: splitting a program whose inputs are partly known into
 * a known program (computable now) and an unknown one (run later on the
 * unknown inputs and the residuals the known one hands over). Reverse-mode
 * AD applies it to JVP programs; control-flow primitives apply it to their
 * nested programs through their rows' partial_eval rules. */
#ifndef JX_SRC_TRANSFORM_PARTIAL_EVAL_H
#define JX_SRC_TRANSFORM_PARTIAL_EVAL_H

#include "../ir/program.h"

typedef struct {
  jx_program *known;   /* known inputs -> (known outputs..., residuals...) */
  jx_program *unknown; /* (residuals..., unknown inputs...) -> unknown outputs */
  int nres;
  uint8_t *unknown_out; /* per output of the original: produced by `unknown` */
} jx_split;

/* Splits p. unknown_in[i] marks unknown inputs; force_unknown_out (may be
 * NULL) marks outputs that must come from the unknown program even if they
 * are known. Release with jx_split_free. */
jx_status jx_partial_eval(const jx_program *p, const uint8_t *unknown_in,
                          const uint8_t *force_unknown_out, jx_split *out);
void jx_split_free(jx_split *s);

/* Which outputs of p are unknown given unknown inputs (no programs built). */
jx_status jx_unknown_outputs(const jx_program *p, const uint8_t *unknown_in, uint8_t *unknown_out);

/* An equation of a partial_eval rule's result. Inputs are encoded: i >= 0 is
 * input i of the original equation; i < 0 is residual -1 - i. */
typedef struct jx_pe_eqn {
  const jx_prim *prim;
  jx_params params;
  int nsub;
  jx_program *sub[JX_EQN_SUBS]; /* references owned by this struct */
  int nin;
  int *in;
} jx_pe_eqn;

/* The rule for equations that are more than a primitive application
 * (control flow): given which inputs are unknown, decide unknown_out and
 * produce the known equation (outputs: the known outputs in order, then
 * *nres residuals of avals *res_avals) and the unknown equation (outputs:
 * the unknown outputs in order). Arrays are malloc'ed; the caller frees. */
/* (jx_partial_eval_fn, declared in prims/prim.h) */
void jx_pe_eqn_free(jx_pe_eqn *e);

#endif
