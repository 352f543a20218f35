/* Building programs by tracing C callbacks, and the questions control-flow
 * rules ask of nested programs (which outputs get tangents, which get
 * batched). */
#ifndef JX_SRC_TRANSFORM_BUILD_H
#define JX_SRC_TRANSFORM_BUILD_H

#include "../ir/program.h"

/* fn fills out[0..nout) from in[0..nin) (tracers) with ordinary ops. */
typedef jx_status (*jx_build_fn)(void *ctx, jx_array *const *in, jx_array **out);
/* The program of fn for inputs of these avals, or NULL with the error recorded. */
jx_program *jx_program_build(const char *name, int nin, const jx_aval *in, int nout, jx_build_fn fn,
                             void *ctx);

/* Outputs of p that get a non-zero tangent when the inputs with nz_in do. */
jx_status jx_jvp_nonzero_outputs(const jx_program *p, const uint8_t *nz_in, uint8_t *nz_out);
/* Outputs of p that are batched when the inputs with b_in are. */
jx_status jx_batched_outputs(const jx_program *p, const uint8_t *b_in, uint8_t *b_out);

/* A question about a program's outputs given flags on its inputs (the three
 * above: which get tangents, which are unknown, which are batched). */
typedef jx_status (*jx_flags_fn)(const jx_program *p, const uint8_t *in, uint8_t *out);
/* Loop carries: grows flags[0..ncarry) (the body's first inputs, fed back by
 * its first outputs) until no carry output is flagged while its input is not,
 * the least fixpoint. allowed (or NULL) marks the carries that may be flagged;
 * out receives the body's output flags for the final inputs. */
jx_status jx_carry_fixpoint(const jx_program *body, int ncarry, jx_flags_fn flags_of,
                            const uint8_t *allowed, uint8_t *flags, uint8_t *out);

/* p batched: inputs with b_in[i] get a leading axis of size n; outputs with
 * b_out[o] are batched along axis 0 (broadcast when p leaves them unbatched),
 * the others must come out unbatched. */
jx_program *jx_batch_program(const jx_program *p, const uint8_t *b_in, int64_t n,
                             const uint8_t *b_out);

/* avals[i] with a leading axis of size n. */
jx_aval jx_aval_stacked(jx_aval a, int64_t n);
/* a without its leading axis. */
jx_aval jx_aval_unstacked(jx_aval a);

#endif
