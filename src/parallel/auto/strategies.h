/* The automatic sharding planner's choices: for each equation of a program,
 * the ways it can run over a mesh (a strategy: the layout each operand is
 * read in, the layout each result comes out in, and the mesh axes the local
 * results are partial over), each priced by the alpha-beta model
 * (comm_model.h) and the estimate's roofline of its flops and bytes
 * (machine_model.h).
 *
 * The strategies are the equation's family plan (propagate.h) asked with
 * every candidate layout of each operand, of each pair of operands and of
 * each result as known, so the planner chooses among exactly the layouts
 * the sharded jit's partitioner carries out. What a strategy costs before
 * it runs (its operands relaid from their producers' layouts) is an edge
 * cost, jx_reshard_time, which models jx_reshard's collectives. */
#ifndef JX_SRC_PARALLEL_AUTO_STRATEGIES_H
#define JX_SRC_PARALLEL_AUTO_STRATEGIES_H

#include "../propagate.h"
#include "comm_model.h"

typedef struct {
  jx_pspec *req;         /* per operand: the layout the local op reads */
  jx_pspec *prod;        /* per result: the layout the local op gives */
  uint32_t partial_axes; /* bit a: the local results are partial over mesh axis a */
  double flops;          /* one device's share of the equation's flops */
  double compute_s;      /* its flops and bytes by the estimate's roofline */
  double comm_s;         /* the collective after the local op (an all_reduce of each
                            partial result over partial_axes) */
} jx_strategy;

typedef struct {
  const jx_eqn *e;
  int n;
  jx_strategy *s; /* n strategies, distinct; s[0] runs everything replicated */
} jx_eqn_strategies;

/* The layouts an array of shape g can have over m: every mesh axis of more
 * than one device splits one dim (whose size it divides) or none; a dim
 * split by several axes takes them in mesh order. Writes up to cap into
 * out and returns how many there are (the replicated layout first). */
int jx_layout_candidates(const jx_mesh *m, jx_shape g, jx_pspec *out, int cap);

/* The strategies of equation e of p over m, priced by cm (its mesh is m's).
 * Free with jx_eqn_strategies_free. */
jx_status jx_eqn_strategies_make(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                 const jx_eqn *e, jx_eqn_strategies *out);
void jx_eqn_strategies_free(jx_eqn_strategies *s);

/* Seconds e takes on one device reading its operands as req and giving its
 * results as prod, partial over the mesh axes in partial: its share of the
 * flops (*flops: the smallest share of any operand or result a device
 * holds, times the equation's) and its operands' and results' local bytes
 * by the estimate's roofline (jx_roofline_time: flops at the model's rate
 * when it has no bandwidth), and the all_reduce of each partial result. */
double jx_eqn_local_time(const jx_comm_model *cm, jx_mesh *m, const jx_program *p, const jx_eqn *e,
                         const jx_pspec *req, const jx_pspec *prod, uint32_t partial,
                         double *flops);

/* Seconds to lay an array of aval a out as `to` from `from`, by the
 * collectives jx_reshard uses: an all_to_all for a split moving from one
 * dim to another, an all_gather for each split given up; new splits are
 * local slices and cost nothing. */
double jx_reshard_time(const jx_comm_model *cm, const jx_mesh *m, jx_aval a, const jx_pspec *from,
                       const jx_pspec *to);

#endif
