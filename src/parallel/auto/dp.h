/* The planner's alternative to the integer linear program: an exact dynamic
 * program over a chain of layers, each choosing among a few whole-layer
 * layouts (the hand recipes' layouts of its parameters, say), the layout of
 * the layer before as its state.
 *
 * Each choice of every layer (an assignment) is priced as the sharded jit
 * runs it: the inputs laid out by it, every other variable by propagation,
 * the per-device program partitioned and estimated (report.h: compute by
 * machine_model.h's roofline, collectives by the alpha-beta model, peak by
 * jx_fn_cost's liveness). Evaluating every assignment takes K^L estimates
 * (K choices, L layers); the program instead prices L(K-1) + 1 assignments
 * that change one layer from the base (every layer at choice 0) and
 * (L-1)(K-1)^2 that change two neighbours, and models
 *   time(a) = time(base) + sum_l u_l(a_l) + sum_l w_l(a_l, a_l+1)
 *   peak(a) = peak(base) + sum_l m_l(a_l)
 * (u and m: one layer's change, w: what two neighbours' change adds to
 * theirs). It then finds the assignment of least modelled time whose
 * modelled peak fits the limit, exactly, by dynamic programming over the
 * layers with the previous layer's choice and the memory used so far (in
 * 1024 steps of the room, rounded up: a plan it finds fits the model) as
 * the state, and prices that assignment whole.
 *
 * What it may miss, its bound: (1) any layout outside the choices (the ILP
 * chooses every equation's strategy and every activation's layout; this
 * chooses per layer among K); (2) interactions between layers that are not
 * neighbours (a time the model does not decompose: the result's modelled
 * and priced time differ by that residual, which the plan reports) and a
 * peak that is not the sum of the layers' changes (the result is priced
 * whole and, when over the limit, solved again with the room cut by the
 * excess times the try's number, at most 4 more times). With two layers the time model is exact
 * (every interaction is a neighbour's): the result is then the best assignment within the memory
 * model's room. */
#ifndef JX_SRC_PARALLEL_AUTO_DP_H
#define JX_SRC_PARALLEL_AUTO_DP_H

#include "comm_model.h"
#include "../propagate.h"

enum { JX_DP_MAX_CHOICES = 8 };

typedef struct {
  int nlayers;
  const int *layer;              /* per program input: its layer (chain order), -1: fixed */
  const int *nchoices;           /* per layer: its choices, 1..JX_DP_MAX_CHOICES */
  const jx_pspec *const *layout; /* per input: its layout under each choice of its layer
                                    (a fixed input: its one layout) */
  const int *out_like;           /* per program output: the input whose layout it is made
                                    in (a training step's updated parameters), -1: free */
} jx_dp_problem;

typedef struct {
  int choice[64];      /* per layer */
  double time_s;       /* the assignment's, priced whole */
  double peak_bytes;   /* per device, priced whole */
  double model_time_s; /* the decomposed model's time of it */
  int evaluations;     /* assignments priced */
} jx_dp_plan;

/* The cheapest assignment of dp over m (cm's figures) under memory_limit
 * bytes per device, as the header says; an error when no assignment fits
 * the model's room, naming the smallest modelled peak. p: the program the
 * sharded jit plans (custom calls lowered). At most 64 layers. */
jx_status jx_auto_dp_solve(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                           const jx_dp_problem *dp, double memory_limit, jx_dp_plan *out);

/* The estimate of p run with these layouts: inputs by in_spec (p->nin),
 * outputs by out_spec (p->nout; NULL: propagation's), the other variables
 * by spec when given (p->nvars: a plan's), else by propagation; *time_s the
 * compute and collectives, *peak_bytes the per-device peak. */
jx_status jx_auto_layouts_estimate(const jx_comm_model *cm, jx_mesh *m, const jx_program *p,
                                   const jx_pspec *in_spec, const jx_pspec *out_spec,
                                   const jx_pspec *spec, double *time_s, double *peak_bytes);

#endif
