/* The automatic sharding planner's solver: one strategy per equation and one
 * layout per program input, the cheapest under a memory limit, found by an
 * integer linear program as Alpa sets it up (OSDI '22), solved by GLPK.
 *
 * Variables: a binary per (choosing equation, strategy) and per (input,
 * candidate layout), each group summing to one. Contractions, gathers and
 * the replicated family choose; elementwise, shape, reduction, slicing and
 * constraint equations follow their largest operand (Alpa's following
 * operators; of equal operands the one whose group has most columns, and
 * an operand of one layout does not lead: the equation chooses then; a
 * scalar's broadcast is free, as a constant is, and so never leads): their
 * layouts are their family plan's under each column of the group they
 * follow, and their compute and relaying costs go on those columns. The
 * objective is the chosen columns' compute and collective time plus, for
 * every edge (a variable read by an equation), the resharding time from the
 * producer's layout to the reader's (jx_reshard_time), linearised with one
 * continuous variable per pair of distinct producer and reader layouts,
 * summing over the reader's to the producer's choice and over the
 * producer's to the reader's; an edge between two groups already joined
 * with the same classes of layouts adds to that edge's variables. Equations
 * and inputs that repeat (ties.h: a model's layers) share one group. Every
 * array's bytes join the objective at a thousandth of a byte's time over
 * the mesh's fastest link: of equally fast plans the one holding least
 * wins. The relaxation is solved by the dual simplex, the program scaled;
 * branch and cut stops within 1 % of the optimum's bound, or when the
 * planning time limit runs out (JX_PLAN_TIME_LIMIT, 10 s of wall time by
 * default, every solve of the search together) with the best plan found
 * (none that fits by then: an error saying so).
 * Memory: the bytes per device held while each equation runs must fit
 * the limit: the inputs, held by the caller throughout; every result from
 * the equation making it to its last reader; the copy the partitioner
 * relays an operand into when its reader takes another layout (one
 * array for the readers of that layout: each reader's copy is counted
 * from the operand's reader before it), a scalar's broadcast likewise in
 * each reader's layout (but for one elementwise reader, whose kernel it
 * fuses into), and the summed copy of a result partial over mesh axes
 * while its equation runs. A row per equation would make the program
 * large, so rows are added lazily: the plan found is checked equation by
 * equation and the equation of its peak, when over the limit, gets its
 * row before solving again, until the plan fits. The rows count unfused
 * equations and approximate the copies' lives, so a plan they put near
 * the limit (over 75 % of it) is partitioned as the sharded jit runs it
 * and costed by jx_fn_cost's liveness; one over the limit is excluded and
 * the search goes on (8 such plans at most: then no plan fits). The
 * plan's peak is that partitioned count (the rows' below 75 %). Constants
 * are replicated values any reader slices locally: they cost nothing. */
#ifndef JX_SRC_PARALLEL_AUTO_PLAN_H
#define JX_SRC_PARALLEL_AUTO_PLAN_H

#include "strategies.h"

typedef struct {
  double time_s;       /* the objective (compute + collectives + resharding) over 1 - the
                          mesh's idle share (comm_model.h) */
  double memory_bytes; /* per device: the peak held, as the partitioned program holds it
                          near the limit, else as the memory rows count it (the search's) */
  double peak_bytes;   /* per device: the peak the partitioned program holds (jx_fn_cost's
                          liveness, what the plan's report prints), -1 when it cannot be made */
  jx_pspec *in_spec;   /* per program input: its layout */
  int *strategy;       /* per equation: the chosen strategy's index in its
                          jx_eqn_strategies, -1 for one that follows */
  jx_pspec *spec;      /* per variable: the layout it is made in (an input's, a
                          result's strategy's; constants replicated) */
  /* how the search ended: the objective's distance from the relaxation's
   * bound, a fraction of it (the optimum is at least this close), and
   * whether the planning time limit (time_limit_s seconds) stopped branch
   * and cut with the best plan found by then */
  double gap;
  int stopped;
  double time_limit_s;
} jx_auto_plan;

/* The cheapest plan of p over m (cm's figures) whose peak memory per device
 * is at most memory_limit bytes; when none fits, an error naming the limit,
 * the smallest peak found (over the plans the limit's search met, the plan
 * whose arrays sum to least, and a search of a few seconds minimising the
 * peak), the equation it is at and the largest arrays held there, each with
 * its source location and layout. Free with jx_auto_plan_free. */
jx_status jx_auto_plan_solve(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                             double memory_limit, jx_auto_plan *out);
/* The same with some inputs' layouts given: fixed[i] (when fixed is not
 * NULL and fixed[i] is not) is input i's only candidate. */
jx_status jx_auto_plan_solve_fixed(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                   const jx_pspec *const *fixed, double memory_limit,
                                   jx_auto_plan *out);
/* The same with some outputs tied to inputs: alias[o] (when alias is not
 * NULL and alias[o] >= 0) is the input whose layout output o is given back
 * in, as a training step gives back an updated parameter or moment for the
 * next step to take (a donated input, jx_jit_options.donate). The next
 * step reads it in the input's layout, so the relaying from the layout the
 * program makes it in to that one is an edge of the program like any
 * other: priced by jx_reshard_time, its copy held at the last equation. */
jx_status jx_auto_plan_solve_aliased(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                     const jx_pspec *const *fixed, const int *alias,
                                     double memory_limit, jx_auto_plan *out);
/* The same with no ties (ties.h): every equation and input chooses alone,
 * the exact optimum of the unreduced program, for measuring what the ties
 * cost (nothing, on the GPT and the MLPs measured) and save. */
jx_status jx_auto_plan_solve_untied(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                    double memory_limit, jx_auto_plan *out);
void jx_auto_plan_free(jx_auto_plan *pl);

#endif
