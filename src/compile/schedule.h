/* Scheduling before fusion. Fusion joins runs of consecutive equations of
 * one shape, and a computation on scalars between two of them (an optimizer
 * step's bias corrections, made once and read by every parameter's update)
 * cuts a run in two: one kernel becomes several that each read and write
 * the arrays again. Every scalar equation moves to just after the last
 * definer of its inputs, so the runs close up. */
#ifndef JX_SRC_COMPILE_SCHEDULE_H
#define JX_SRC_COMPILE_SCHEDULE_H

#include "../ir/program.h"

/* p with its scalar equations hoisted (a new reference; p itself when none
 * moves), or NULL with an error recorded. */
jx_program *jx_hoist_scalars(jx_program *p);

#endif
