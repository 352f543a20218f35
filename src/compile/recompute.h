/* Recomputing cheap values instead of keeping them (XLA's rematerialization
 * of elementwise fusions). A reverse-mode program computes values in its
 * forward part that its backward part reads again much later: kept, they
 * make the step's peak memory. When such a value is an elementwise function
 * of values that stay alive until that later read anyway (a GELU's
 * intermediates are functions of its input, which the backward pass keeps),
 * the chain that makes it is cloned just before the later read, where it
 * fuses into the backward kernel, and the forward value dies after its early
 * reads. The clones compute what the originals did, so results keep their
 * bits. JX_RECOMPUTE=0 turns it off. */
#ifndef JX_SRC_COMPILE_RECOMPUTE_H
#define JX_SRC_COMPILE_RECOMPUTE_H

#include "../ir/program.h"

/* p with recomputation chains cloned in (a new reference; p itself when
 * nothing pays), or NULL with an error recorded. */
jx_program *jx_recompute(jx_program *p);

#endif
