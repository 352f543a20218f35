/* The IR: a typed SSA program of primitive applications, in the spirit of a
 * jaxpr. Variables are numbered; each has an abstract value (dtype, shape,
 * weak flag) and is defined once: as an input, a captured constant, or an
 * output of one equation. Control-flow primitives hold nested programs in
 * their equation's `sub` slots.
 *
 * Programs are reference counted and immutable once built; building is not
 * thread-safe, reading is. What is compiled for a program is kept beside it
 * (exec.h), not in it. */
#ifndef JX_SRC_IR_PROGRAM_H
#define JX_SRC_IR_PROGRAM_H

#include <stdatomic.h>

#include "../prims/prim.h"

typedef struct jx_program jx_program;

#define JX_EQN_SUBS 16 /* the most branches of a jx_switch */

typedef struct jx_eqn {
  const jx_prim *prim;
  jx_params params;
  int nin, nout;
  int *in, *out;                /* variable numbers */
  jx_program *sub[JX_EQN_SUBS]; /* nested programs, one reference each */
  int nsub;
  const char *loc; /* the user's "file.c:12", a static string, or NULL */
} jx_eqn;

struct jx_program {
  atomic_int refs;
  char *name;
  int nvars, cap_vars;
  jx_aval *avals; /* avals[v]: the abstract value of variable v */
  int nin, cap_in;
  int *in; /* input variables, in order */
  int nconst, cap_const;
  int *constvar;       /* variables bound to captured concrete arrays */
  jx_array **constval; /* one reference each */
  int neqns, cap_eqns;
  jx_eqn *eqns;
  int nout;
  int *out; /* output variables (any kind, repeats allowed) */
};

jx_program *jx_program_new(const char *name);
/* A new reference (the count is not part of the value: retaining a const
 * program is fine). */
jx_program *jx_program_retain(const jx_program *p);
void jx_program_release(jx_program *p);

/* Building. Each returns the new variable number, or -1 (error recorded) when
 * memory runs out. */
int jx_program_add_var(jx_program *p, jx_aval aval);
int jx_program_add_input(jx_program *p, jx_aval aval);
int jx_program_add_const(jx_program *p, jx_array *value); /* takes a reference */
/* Appends an equation whose outputs are new variables with the given avals;
 * writes their numbers to out_vars. Takes a reference to each subs[i]. */
jx_status jx_program_add_eqn(jx_program *p, const jx_prim *prim, const jx_params *params, int nin,
                             const int *in_vars, int nout, const jx_aval *out_avals, int *out_vars,
                             int nsub, jx_program *const *subs, const char *loc);
jx_status jx_program_set_outputs(jx_program *p, int n, const int *vars);
/* Appends a copy of e (an equation of p) to q, its inputs read as
 * in_map[v] (q's variables; in_map may be map itself), and records its new
 * outputs in map[e->out[o]]. */
jx_status jx_program_copy_eqn(jx_program *q, const jx_program *p, const jx_eqn *e,
                              const int *in_map, int *map);

/* The variable defined as the idx-th constant, and its value. */
static inline int jx_program_is_const(const jx_program *p, int v, jx_array **value) {
  for (int i = 0; i < p->nconst; i++)
    if (p->constvar[i] == v) {
      if (value) *value = p->constval[i];
      return 1;
    }
  return 0;
}

/* 1 when v is the output of one of p's equations (not an input or constant). */
static inline int jx_program_defines(const jx_program *p, int v) {
  for (int i = 0; i < p->nin; i++)
    if (p->in[i] == v) return 0;
  return !jx_program_is_const(p, v, NULL);
}

/* 1 when the equation has a side effect (a debug print), itself or in a
 * nested program: such an equation is never dead code. */
int jx_eqn_has_effect(const jx_eqn *e);

/* Readable text, as a jaxpr: { lambda c:f32[] ; a:f32[3]. let b:f32[3] = sin a in (b,) }.
 * The caller frees the string. */
char *jx_program_print(const jx_program *p);
/* Checks SSA form and re-runs every equation's shape rule; records an error
 * naming the equation and returns its status when something is off. */
jx_status jx_program_verify(const jx_program *p);
/* Structural hash: equal for programs that print the same and capture equal
 * constants. */
uint64_t jx_program_hash(const jx_program *p);

#endif
