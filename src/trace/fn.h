/* jx_fn: a C body or a transformation of another jx_fn, with a cache of
 * programs by input signature. A transformation is a kind: a name for
 * messages and a build function that makes the program for given input
 * avals, usually from the inner function's program. */
#ifndef JX_SRC_TRACE_FN_H
#define JX_SRC_TRACE_FN_H

#include <jx/transform.h>
#include <pthread.h>

#include "../ir/program.h"

typedef struct jx_fn_kind {
  const char *name; /* "jit", "grad", "vmap", ... */
  /* The program of f for inputs of these avals, or NULL with the error recorded. */
  jx_program *(*build)(jx_fn *f, const jx_aval *in);
  void (*free_data)(void *data);
} jx_fn_kind;

typedef struct fn_cache_entry {
  uint64_t axis_env; /* the named axes bound while it was traced */
  int x64;           /* the dtype mode it was traced in (jx_x64_enabled) */
  jx_aval *avals;
  jx_program *prog;
  struct fn_cache_entry *next;
} fn_cache_entry;

struct jx_fn {
  atomic_int refs;
  char *name;
  int nin, nout;
  const jx_fn_kind *kind; /* NULL for a body */
  jx_body body;
  void *ctx;
  void (*free_ctx)(void *ctx); /* jx_fn_create_owning: frees ctx with the function */
  jx_fn *inner;                /* the transformed function (a reference) */
  void *data;                  /* the kind's parameters */
  pthread_mutex_t lock;        /* guards the cache */
  fn_cache_entry *cache;
  atomic_llong traces;
  struct jx_fn *fori_wrapper; /* jx_fori's scan body around this function, made once */
};

/* A new transformed function (nin/nout as the kind decides); takes a
 * reference to inner and ownership of data. */
jx_fn *jx_fn_new_transform(const jx_fn_kind *kind, jx_fn *inner, int nin, int nout, void *data);
/* The (i, carry...) -> (i + 1, carry...) body that jx_fori scans, made once
 * per function so its traces are cached (borrowed; owned by body). */
jx_fn *jx_fn_fori_wrapper(jx_fn *body, jx_body wrapper_body);

/* The program of f for these input avals, cached (a new reference). */
jx_program *jx_fn_program(jx_fn *f, const jx_aval *in);

#endif
