/* Executables beside programs. A program stays what it is once built; what
 * the compiler and the parallel layer make for it (an executable that runs it
 * in place of the interpreter, the per-device executables that run it on
 * sharded arguments) is kept here, keyed by the program's identity as JAX
 * keys its compiled computations by the jaxpr, and goes when the program's
 * last reference does (jx_program_release drops it).
 *
 * Two tables answer "what runs p": the executable attached to p itself (a
 * jitted function's program, a shard_map body), for everyone who evaluates
 * p; and, first, the nested executables of the executable running on this
 * thread: the compiled forms of its control flow's programs, private to it,
 * so that compiling a jitted scan never changes how an eager scan of the
 * same body program runs. */
#ifndef JX_SRC_IR_EXEC_H
#define JX_SRC_IR_EXEC_H

#include "program.h"

/* An executable of some backend: run runs it on concrete inputs (results in
 * the innermost scope), free frees impl. */
typedef struct jx_exec {
  void *impl;
  jx_status (*run)(void *impl, const jx_program *p, jx_array *const *in, jx_array **out);
  void (*free)(void *impl);
} jx_exec;

/* Attaches x to p for everyone who evaluates p. When p already has an
 * executable (another thread attached one first) x is freed and the first
 * one stays: both run p. */
void jx_program_attach(const jx_program *p, jx_exec x);
/* The executable that runs p on this thread: a nested one of the running
 * executable (jx_exec_nested_enter), else p's own; run is NULL when p is
 * interpreted. The executable lives as long as p. */
jx_exec jx_program_exec(const jx_program *p);
/* p's own executable's impl, or NULL (for tests and the cost model). */
void *jx_program_executable(const jx_program *p);

/* The parallel layer's executable for p on sharded arguments
 * (parallel/sharded_jit.c), or NULL; setting one that exists keeps the
 * first and frees the other, as jx_program_attach does. Returns the one
 * kept. */
void *jx_program_follow(const jx_program *p);
void *jx_program_set_follow(const jx_program *p, void *follow, void (*free_follow)(void *));

/* Nested executables: programs and their executables, owned by the
 * executable that runs them. */
typedef struct jx_exec_nested {
  int n, cap;
  const jx_program **prog;
  jx_exec *exec;
} jx_exec_nested;
/* Adds (p, x) to t (which then frees x); JX_OK or out of memory (x freed). */
jx_status jx_exec_nested_add(jx_exec_nested *t, const jx_program *p, jx_exec x);
void jx_exec_nested_free(jx_exec_nested *t);
/* The executable of p in t (run NULL when none). */
jx_exec jx_exec_nested_find(const jx_exec_nested *t, const jx_program *p);
/* Makes t the calling thread's nested executables while an executable runs;
 * returns the previous table, which jx_exec_nested_leave restores. */
const jx_exec_nested *jx_exec_nested_enter(const jx_exec_nested *t);
void jx_exec_nested_leave(const jx_exec_nested *previous);

/* jx_program_release: forgets what was kept for p and frees it. */
void jx_program_exec_drop(const jx_program *p);

#endif
