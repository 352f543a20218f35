#include "trace.h"

#include <jx/parallel.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../prims/prims.h"
#include "follow_data.h"
#include "vma.h"

struct jx_trace {
  uint64_t id;
  jx_program *prog;
  jx_trace *parent;           /* the enclosing trace on this thread */
  const jx_array **const_src; /* concrete arrays already captured, and their variables */
  int *const_var;
  int nconst_src, cap_const_src;
};

static _Thread_local jx_trace *innermost;
static _Thread_local const char *default_loc;
static atomic_uint_fast64_t next_id = 1;

/* Equations recorded during a located call of the user's get its file:line:
 * the inner calls tag theirs first, so only the untagged tail is this call's. */
static void tag_locations(const char *where) {
  if (!innermost) return;
  jx_program *p = innermost->prog;
  for (int i = p->neqns - 1; i >= 0 && !p->eqns[i].loc; i--) p->eqns[i].loc = where;
}

jx_trace *jx_trace_begin(const char *name) {
  jx_trace *t = calloc(1, sizeof *t);
  if (!t) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory starting a trace");
    return NULL;
  }
  t->prog = jx_program_new(name);
  if (!t->prog) {
    free(t);
    return NULL;
  }
  t->id = atomic_fetch_add(&next_id, 1);
  t->parent = innermost;
  innermost = t;
  jx_set_location_hook(tag_locations);
  return t;
}

jx_array *jx_trace_input(jx_trace *t, jx_aval aval) {
  int v = jx_program_add_input(t->prog, aval);
  if (v < 0) return jx_poison();
  jx_array *x = jx_tracer_alloc(t->id, v, aval.dtype, aval.shape, aval.weak);
  if (!x->poisoned) x->st.tracer.vma = aval.vma;
  return x;
}

static void pop(jx_trace *t) {
  JX_ASSERT(innermost == t);
  innermost = t->parent;
  free(t->const_src);
  free(t->const_var);
  free(t);
}

void jx_trace_abort(jx_trace *t) {
  if (!t) return;
  jx_program_release(t->prog);
  pop(t);
}

const char *jx_trace_current_name(void) { return innermost ? innermost->prog->name : NULL; }

const char *jx_trace_set_default_loc(const char *loc) {
  const char *old = default_loc;
  default_loc = loc;
  return old;
}

static jx_trace *find(uint64_t id) {
  for (jx_trace *t = innermost; t; t = t->parent)
    if (t->id == id) return t;
  return NULL;
}

/* The variable of t standing for a: its own tracer, or a captured constant. */
static int var_of(jx_trace *t, jx_array *a, const char *op, int argi) {
  if (jx_is_tracer(a)) {
    if (a->st.tracer.id == t->id) return a->st.tracer.var;
    jx_trace *owner = find(a->st.tracer.id);
    if (!owner)
      jx_error_set(JX_ERR_TRACE,
                   "%s: argument %d is a tracer that escaped its trace: a traced function "
                   "kept it (in a global or its ctx) after tracing ended; return values "
                   "as outputs instead",
                   op, argi);
    else
      jx_error_set(JX_ERR_TRACE,
                   "%s: argument %d is a tracer of the enclosing function '%s' used inside "
                   "'%s'; pass it to '%s' as an input instead of through its ctx",
                   op, argi, owner->prog->name, t->prog->name, t->prog->name);
    return -1;
  }
  for (int i = 0; i < t->nconst_src; i++)
    if (t->const_src[i] == a) return t->const_var[i];
  if (jx_array_shards(a) && jx_env_flag("JX_LOG_COMPILES")) /* a constant is one whole value */
    fprintf(stderr,
            "jx: '%s' captures a sharded array (%s) as a constant (argument %d of %s): its "
            "shards are gathered onto one device; pass it as an input to keep it sharded\n",
            t->prog->name, jx_follow_data->spec(a), argi, op);
  int v = jx_program_add_const(t->prog, a);
  if (v < 0) return -1;
  int cap = t->cap_const_src;
  if (t->nconst_src == cap) {
    cap = cap ? 2 * cap : 8;
    const jx_array **s = realloc(t->const_src, sizeof *s * (size_t)cap);
    if (s) t->const_src = s;
    int *vv = realloc(t->const_var, sizeof *vv * (size_t)cap);
    if (vv) t->const_var = vv;
    if (!s || !vv) {
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory capturing a constant");
      return -1;
    }
    t->cap_const_src = cap;
  }
  t->const_src[t->nconst_src] = a;
  t->const_var[t->nconst_src++] = v;
  return v;
}

/* The innermost live trace among the inputs' traces; with only concrete
 * inputs, the innermost trace: everything a traced body computes is staged
 * into its program, as JAX does, so constants stay small and folded later. */
static jx_trace *trace_of(int nin, jx_array *const *in, const char *op) {
  for (jx_trace *t = innermost; t; t = t->parent)
    for (int i = 0; i < nin; i++)
      if (jx_is_tracer(in[i]) && in[i]->st.tracer.id == t->id) return t;
  for (int i = 0; i < nin; i++)
    if (jx_is_tracer(in[i])) {
      jx_error_set(JX_ERR_TRACE,
                   "%s: argument %d is a tracer that escaped its trace: a traced function "
                   "kept it (in a global or its ctx) after tracing ended; return values "
                   "as outputs instead",
                   op, i);
      return NULL;
    }
  return innermost;
}

int jx_trace_active(void) { return innermost != NULL; }

enum { SMALL = 16 };

jx_status jx_trace_record(const jx_prim *p, const jx_params *params, int nin,
                          jx_array *const *given, int nout, jx_array **out, int nsub,
                          jx_program *const *subs) {
  jx_trace *t = trace_of(nin, given, p->name);
  if (!t) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_aval in_s[SMALL], out_s[SMALL];
  int vin_s[SMALL], vout_s[SMALL];
  jx_array *cast_s[SMALL];
  int big = nin > SMALL || nout > SMALL;
  jx_aval *ain = big ? malloc(sizeof *ain * (size_t)nin) : in_s;
  jx_aval *aout = big ? calloc((size_t)nout + 1, sizeof *aout) : out_s;
  int *vin = big ? malloc(sizeof *vin * (size_t)nin) : vin_s;
  int *vout = big ? malloc(sizeof *vout * (size_t)nout) : vout_s;
  jx_array **in = big ? malloc(sizeof *in * (size_t)nin) : cast_s;
  jx_status st = JX_OK;
  if (!ain || !aout || !vin || !vout || !in) {
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", p->name);
    goto done;
  }
  if (!big) memset(out_s, 0, sizeof out_s);
  /* operands varying over fewer manual axes than the row needs are cast first */
  st = jx_vma_cast_operands(p, params, nin, given, nsub, in);
  if (st) goto done;
  for (int i = 0; i < nin; i++) {
    ain[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, jx_array_vma(in[i])};
    vin[i] = var_of(t, in[i], p->name, i);
    if (vin[i] < 0) {
      st = jx_last_status() ? jx_last_status() : JX_ERR_TRACE;
      goto done;
    }
  }
  const jx_rule_ctx ctx = {p, params, nin, nout, nsub, subs};
  st = jx_prim_check_complex(p, nin, ain, "operand");
  if (!st) st = p->infer(&ctx, ain, aout);
  if (!st && p->outputs) st = p->outputs(&ctx, ain, aout);
  if (!st) st = jx_prim_check_outputs(p, nout, aout);
  if (!st) st = jx_prim_check_complex(p, nout, aout, "result");
  if (st) goto done;
  jx_vma_outputs(p, params, nin, ain, nsub, nout, aout);
  st = jx_program_add_eqn(t->prog, p, params, nin, vin, nout, aout, vout, nsub, subs, default_loc);
  if (st) goto done;
  for (int o = 0; o < nout; o++)
    if (!(out[o] = jx_tracer_alloc(t->id, vout[o], aout[o].dtype, aout[o].shape, aout[o].weak))
             ->poisoned)
      out[o]->st.tracer.vma = aout[o].vma;
done:
  if (big) {
    free(ain);
    free(aout);
    free(vin);
    free(vout);
    free(in);
  }
  return st;
}

jx_program *jx_trace_end(jx_trace *t, int nout, jx_array *const *outs) {
  jx_program *p = t->prog;
  int *vars = malloc(sizeof *vars * (size_t)(nout ? nout : 1));
  jx_status st = vars ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory ending a trace");
  for (int o = 0; o < nout && !st; o++) {
    if (!outs[o]) {
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT, "'%s': output %d was not set by the body", p->name,
                        o);
      break;
    }
    if (outs[o]->poisoned) {
      st = jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
      break;
    }
    vars[o] = var_of(t, outs[o], p->name, o);
    if (vars[o] < 0) st = jx_last_status() ? jx_last_status() : JX_ERR_TRACE;
  }
  if (!st) st = jx_program_set_outputs(p, nout, vars);
  free(vars);
  if (st) {
    jx_trace_abort(t);
    return NULL;
  }
  jx_program_retain(p);
  jx_trace_abort(t); /* drops the trace's own reference */
  return p;
}
