/* Sharding propagation for the sharded jit: every variable of a global
 * program gets a layout over one mesh (a partition spec), from the inputs'
 * shardings and the sharding_constraint equations, forward through each
 * equation and then backward for what is still unknown.
 *
 * What an equation does with layouts is its family's plan (partition_*.c,
 * one small table per family): given the layouts of its operands (known or
 * not) and the layouts wanted for its results (known or not), the plan says
 * which layout each operand must have for the op to run on local blocks, the
 * layout of each result the local op then gives, and which mesh axes the
 * local results are partial over (a local reduction whose total needs a
 * psum/pmax/pmin). The same plan serves propagation (forward: results from
 * operands; backward: operands from results) and the partitioner (everything
 * known: which resharding to insert before and which collective after). */
#ifndef JX_SRC_PARALLEL_PROPAGATE_H
#define JX_SRC_PARALLEL_PROPAGATE_H

#include "../ir/program.h"
#include "sharding.h"

/* A layout of an array of rank `rank` over a mesh: per dim, the mesh axes
 * splitting it, major first (as struct jx_sharding, without interning). */
typedef struct {
  int rank;
  int8_t n[JX_MAX_RANK];
  int8_t ax[JX_MAX_RANK][JX_MAX_RANK];
} jx_pspec;

jx_pspec jx_pspec_replicated(int rank);
jx_pspec jx_pspec_of(const jx_sharding *s, int rank); /* NULL: replicated */
int jx_pspec_equal(const jx_pspec *a, const jx_pspec *b);
int jx_pspec_sharded(const jx_pspec *a); /* some dim is split */
int64_t jx_pspec_parts(const jx_mesh *m, const jx_pspec *a, int d);
/* The block shape of an array of global shape g laid out by a. */
jx_shape jx_pspec_local(const jx_mesh *m, const jx_pspec *a, jx_shape g);
/* 1 when every split dim of g is divisible by its parts. */
int jx_pspec_fits(const jx_mesh *m, const jx_pspec *a, jx_shape g);
/* The interned sharding (a new reference), or NULL with an error. */
jx_sharding *jx_pspec_sharding(jx_mesh *m, const jx_pspec *a);
/* "data,None" text into buf (cap JX_SPEC_CAP). */
const char *jx_pspec_str(const jx_mesh *m, const jx_pspec *a, char *buf);

/* Post-communication a plan asks for: the local results are partial. */
typedef enum { JX_PARTIAL_NONE, JX_PARTIAL_SUM, JX_PARTIAL_MAX, JX_PARTIAL_MIN } jx_partial_op;

typedef struct {
  jx_mesh *mesh;
  const jx_program *p;
  const jx_eqn *e;
  /* inputs: the layout of each operand and of each wanted result; known[i]
   * 0 means unknown (no preference) */
  const jx_pspec *in;
  const uint8_t *in_known;
  const jx_pspec *out;
  const uint8_t *out_known;
  /* the plan's answer */
  jx_pspec *req;  /* per operand: the layout the local op reads */
  jx_pspec *prod; /* per result: the layout the local op gives */
  jx_partial_op partial;
  int npartial;
  int partial_axes[JX_MAX_RANK]; /* mesh axes the local results are partial over */
} jx_plan;

/* A family of primitives with one layout rule (propagate.c's table says
 * which primitives). */
typedef struct {
  const char *name;
  jx_status (*plan)(jx_plan *pl);
  /* The op's parameters for local blocks (shape-carrying parameters);
   * NULL: unchanged. in/out: the local avals of operands and results. */
  void (*local_params)(const jx_plan *pl, const jx_aval *in, const jx_aval *out, jx_params *q);
  int identity; /* the local op is the identity (a constraint: only the resharding is left) */
  /* The local op, when it is not the primitive bound with local_params
   * (shard_map: its body inlined): in are the operands laid out as req. */
  jx_status (*local_apply)(const jx_plan *pl, jx_array *const *in, jx_array **out);
} jx_pfamily;

extern const jx_pfamily jx_pfamily_elementwise, jx_pfamily_shape, jx_pfamily_reduce, jx_pfamily_dot,
    jx_pfamily_slicing, jx_pfamily_gather, jx_pfamily_constraint, jx_pfamily_manual,
    jx_pfamily_replicated;

/* The family whose rule applies to e (the replicated fallback at least). */
const jx_pfamily *jx_pfamily_of(const jx_eqn *e);

/* Helpers for plans. */
/* Copies dim sd of a into dim dd of b unless one of its axes is in *used;
 * marks the copied axes used. Returns 1 when copied (or a's dim is empty). */
int jx_pspec_take(jx_pspec *b, int dd, const jx_pspec *a, int sd, uint32_t *used);
/* Every operand replicated, every result replicated. */
jx_status jx_plan_replicate_all(jx_plan *pl);

/* The layout of every variable of p (spec[v], p->nvars entries): inputs
 * laid out by in[i] (NULL: no preference), results wanted as out[o] (NULL:
 * free). Unknown at the end: replicated. */
jx_status jx_propagate(jx_mesh *m, const jx_program *p, jx_sharding *const *in,
                       jx_sharding *const *out, jx_pspec *spec);

#endif
