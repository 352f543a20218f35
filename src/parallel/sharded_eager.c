/* Eager ops on sharded arrays, as JAX runs them: an eager op is its
 * primitive jitted, so it runs on the devices its operands live on and its
 * results come back sharded. The op becomes a one-equation program, cached
 * per primitive, parameters, operand avals and nested programs, and runs as
 * a jit without shardings does on sharded arguments (sharded_jit.h): its
 * per-device programs are made once per tuple of operand shardings. They are
 * not compiled: each device applies the op to its blocks eagerly. */
#include "sharded_eager.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../trace/dispatch.h"
#include "../transform/build.h"
#include "collective.h"
#include "constraint.h"
#include "shard_map.h"
#include "sharded_jit.h"
#include "sharding.h"

int jx_eager_follows_data(const jx_prim *p, int nin, jx_array *const *in, int nsub,
                          jx_program *const *subs) {
  int sharded = -1;
  for (int i = 0; i < nin && sharded < 0; i++)
    if (in[i]->shards) sharded = i;
  if (sharded < 0 || jx_spmd_current()) return 0;
  if (p->uses_axis || p == &jx_prim_shard_map || p == &jx_prim_sharding_constraint) return 0;
  /* debug_print shows the global value; the partitioner does not place a
   * nested shard_map's manual region */
  int whole = p->effect;
  for (int s = 0; s < nsub && !whole; s++) whole = jx_program_holds_shard_map(subs[s]);
  if (whole && jx_env_flag("JX_LOG_COMPILES"))
    fprintf(stderr, "jx: '%s' gathers argument %d (sharded %s) onto one device\n", p->name, sharded,
            jx_sharding_spec(jx_sharding_of(in[sharded])));
  return !whole;
}

typedef struct op_entry {
  uint64_t hash;
  const jx_prim *prim;
  jx_params params;
  int nin, nsub;
  jx_aval *avals;    /* nin */
  jx_program **subs; /* nsub, one reference each */
  jx_program *prog;  /* the one-equation program */
  struct op_entry *next;
} op_entry;

enum { BUCKETS = 256 };
static pthread_mutex_t ops_lock = PTHREAD_MUTEX_INITIALIZER;
static op_entry *ops[BUCKETS];

static int aval_same(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && a.weak == b.weak && jx_shape_equal(a.shape, b.shape);
}

static int op_matches(const op_entry *e, uint64_t h, const jx_prim *p, int nin, const jx_aval *av,
                      const jx_params *params, int nsub, jx_program *const *subs) {
  if (e->hash != h || e->prim != p || e->nin != nin || e->nsub != nsub) return 0;
  if (!jx_params_equal(&e->params, params)) return 0;
  for (int i = 0; i < nin; i++)
    if (!aval_same(e->avals[i], av[i])) return 0;
  for (int s = 0; s < nsub; s++)
    if (e->subs[s] != subs[s]) return 0;
  return 1;
}

typedef struct {
  const jx_prim *prim;
  const jx_params *params;
  int nin, nsub;
  jx_program *const *subs;
} op_ctx;

static jx_status apply_op(void *ctx, jx_array *const *in, jx_array **out) {
  const op_ctx *c = ctx;
  return jx_bind_sub(c->prim, c->nin, in, c->params, c->nsub, c->subs, out);
}

/* The one-equation program of p on operands of avals av (a new reference),
 * made on a miss; ops_lock held. */
static jx_program *op_program(const jx_prim *p, int nin, const jx_aval *av, const jx_params *params,
                              int nsub, jx_program *const *subs, int nout) {
  uint64_t h = jx_hash_u64(jx_params_hash(params), (uint64_t)(uintptr_t)p);
  for (int i = 0; i < nin; i++) {
    h = jx_hash_u64(h, (uint64_t)av[i].dtype * 2 + av[i].weak);
    h = jx_hash_bytes(h, av[i].shape.dims, sizeof(int64_t) * (size_t)av[i].shape.rank);
  }
  op_entry **bucket = &ops[h % BUCKETS];
  for (op_entry *e = *bucket; e; e = e->next)
    if (op_matches(e, h, p, nin, av, params, nsub, subs)) return jx_program_retain(e->prog);
  op_ctx c = {p, params, nin, nsub, subs};
  jx_program *prog = jx_program_build(p->name, nin, av, nout, apply_op, &c);
  if (!prog) return NULL;
  op_entry *e = calloc(1, sizeof *e);
  jx_aval *avals = malloc(sizeof *avals * (size_t)(nin + 1));
  jx_program **held = calloc((size_t)nsub + 1, sizeof *held);
  if (!e || !avals || !held) { /* uncached but correct */
    free(e);
    free(avals);
    free(held);
    return prog;
  }
  for (int i = 0; i < nin; i++) avals[i] = av[i];
  for (int s = 0; s < nsub; s++) held[s] = jx_program_retain(subs[s]);
  *e = (op_entry){h, p, *params, nin, nsub, avals, held, jx_program_retain(prog), *bucket};
  *bucket = e;
  return prog;
}

jx_status jx_sharded_bind(const jx_prim *p, int nin, jx_array *const *in, const jx_params *params,
                          int nsub, jx_program *const *subs, int nout, jx_array **out) {
  for (int o = 0; o < nout; o++) out[o] = jx_poison();
  jx_aval *av = malloc(sizeof *av * (size_t)(nin + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", p->name);
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, 0};
  pthread_mutex_lock(&ops_lock);
  jx_program *prog = op_program(p, nin, av, params, nsub, subs, nout);
  pthread_mutex_unlock(&ops_lock);
  free(av);
  if (!prog) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_status st = jx_follow_data_run(prog, in, out);
  jx_program_release(prog);
  return st;
}
