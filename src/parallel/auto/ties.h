/* The planner's ties: equations and inputs that repeat in a program (the
 * layers of a model, their gradients and their optimizer updates) and so
 * choose their layouts together, as one group of columns in the plan's
 * integer program, which then grows with one layer instead of all.
 *
 * Two equations tie when they run the same primitive with the same
 * parameters on operands and results of the same types, and so do their
 * neighbourhoods up to JX_AUTO_TIE_RADIUS equations away (a
 * Weisfeiler-Lehman refinement of those signatures over the program's
 * edges, both ways: who makes each operand, who reads each result). Two
 * inputs tie when they have the same type and candidate layouts and their
 * readers' neighbourhoods match. The first and last layers, whose
 * neighbourhoods reach the embedding or the loss, stay on their own.
 *
 * A tie is a restriction: the plan is the cheapest of those in which tied
 * equations choose alike, never cheaper than the untied optimum, and equal
 * to it when the untied optimum lays every repeated layer out alike. */
#ifndef JX_SRC_PARALLEL_AUTO_TIES_H
#define JX_SRC_PARALLEL_AUTO_TIES_H

#include "../propagate.h"

#define JX_AUTO_TIE_RADIUS 4

/* eqn_rep[e] (p->neqns entries): the first equation tied with e (e itself
 * when none comes before it); in_rep[i] (p->nin entries): the same for
 * input i, by input index. fixed[i] (fixed or fixed[i] NULL: none) is input
 * i's only candidate layout: inputs tie only with the same. */
jx_status jx_auto_ties(const jx_program *p, const jx_pspec *const *fixed, int *eqn_rep,
                       int *in_rep);

#endif
