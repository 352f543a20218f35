/* Functions, their signature caches, calling and inspecting them. */
#include "fn.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../ir/axis_env.h"
#include "dispatch.h"
#include "eval.h"
#include "trace.h"

static jx_fn *fn_alloc(const char *name, int nin, int nout) {
  jx_fn *f = calloc(1, sizeof *f);
  if (!f) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory creating a function");
    return NULL;
  }
  atomic_init(&f->refs, 1);
  f->name = strdup(name ? name : "fn");
  f->nin = nin;
  f->nout = nout;
  pthread_mutex_init(&f->lock, NULL);
  return f;
}

jx_fn *jx_fn_create(const char *name, int nin, int nout, jx_body body, void *ctx) {
  if (!body) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_fn_create: '%s' has no body", name ? name : "fn");
    return NULL;
  }
  if (nin < 0 || nout < 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_fn_create: '%s' needs nin >= 0 and nout >= 1, got %d and %d",
                 name ? name : "fn", nin, nout);
    return NULL;
  }
  jx_fn *f = fn_alloc(name, nin, nout);
  if (!f) return NULL;
  f->body = body;
  f->ctx = ctx;
  return f;
}

jx_fn *jx_fn_create_owning(const char *name, int nin, int nout, jx_body body, void *ctx,
                           void (*free_ctx)(void *ctx)) {
  jx_fn *f = jx_fn_create(name, nin, nout, body, ctx);
  if (f)
    f->free_ctx = free_ctx;
  else if (free_ctx)
    free_ctx(ctx);
  return f;
}

jx_fn *jx_fn_new_transform(const jx_fn_kind *kind, jx_fn *inner, int nin, int nout, void *data) {
  char name[256];
  snprintf(name, sizeof name, "%s(%s)", kind->name, inner->name);
  jx_fn *f = fn_alloc(name, nin, nout);
  if (!f) {
    if (kind->free_data) kind->free_data(data);
    return NULL;
  }
  f->kind = kind;
  f->inner = inner;
  atomic_fetch_add(&inner->refs, 1);
  f->data = data;
  return f;
}

void jx_fn_release(jx_fn *f) {
  if (!f || atomic_fetch_sub_explicit(&f->refs, 1, memory_order_acq_rel) != 1) return;
  for (fn_cache_entry *e = f->cache, *next; e; e = next) {
    next = e->next;
    jx_program_release(e->prog);
    free(e->avals);
    free(e);
  }
  if (f->kind && f->kind->free_data) f->kind->free_data(f->data);
  if (f->free_ctx) f->free_ctx(f->ctx);
  if (f->fori_wrapper) {
    f->fori_wrapper->ctx = NULL;
    jx_fn_release(f->fori_wrapper);
  }
  jx_fn_release(f->inner);
  pthread_mutex_destroy(&f->lock);
  free(f->name);
  free(f);
}

int jx_fn_nin(const jx_fn *f) { return f ? f->nin : 0; }
int jx_fn_nout(const jx_fn *f) { return f ? f->nout : 0; }
const char *jx_fn_name(const jx_fn *f) { return f ? f->name : ""; }
int64_t jx_fn_trace_count(const jx_fn *f) { return f ? (int64_t)f->traces : 0; }

static int aval_same(jx_aval a, jx_aval b) {
  return a.dtype == b.dtype && a.weak == b.weak && jx_shape_equal(a.shape, b.shape) &&
         a.vma == b.vma;
}

/* JX_LOG_COMPILES=1: say what is traced and why the cache missed. Not
 * inlined: its buffers stay off the stack of nested traces. */
__attribute__((noinline)) static void log_trace(jx_fn *f, const jx_aval *in) {
  if (!jx_env_flag("JX_LOG_COMPILES")) return;
  char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
  fprintf(stderr, "jx: tracing '%s' for (", f->name);
  for (int i = 0; i < f->nin; i++)
    fprintf(stderr, "%s%s%s", i ? ", " : "", jx_aval_str(in[i].dtype, in[i].shape, a),
            in[i].weak ? "{weak}" : "");
  fprintf(stderr, ")");
  if (f->cache && f->cache->x64 != jx_x64_enabled()) {
    fprintf(stderr, ": the dtype mode changed to %s", jx_x64_enabled() ? "x64" : "x32");
  } else if (f->cache) {
    const jx_aval *prev = f->cache->avals;
    for (int i = 0; i < f->nin; i++)
      if (!aval_same(prev[i], in[i])) {
        fprintf(stderr, ": input %d changed from %s%s", i,
                jx_aval_str(prev[i].dtype, prev[i].shape, a),
                prev[i].weak != in[i].weak ? (prev[i].weak ? "{weak}" : "{strong}") : "");
        fprintf(stderr, " to %s", jx_aval_str(in[i].dtype, in[i].shape, b));
        break;
      }
  } else {
    fprintf(stderr, ": first call");
  }
  fprintf(stderr, "\n");
}

/* Runs the body on tracers and returns its program. */
static jx_program *trace_body(jx_fn *f, const jx_aval *in) {
  jx_trace *t = jx_trace_begin(f->name);
  if (!t) return NULL;
  jx_array **ins = calloc((size_t)f->nin + 1, sizeof *ins);
  jx_array **outs = calloc((size_t)f->nout, sizeof *outs);
  if (!ins || !outs) {
    free(ins);
    free(outs);
    jx_trace_abort(t);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "'%s': out of memory", f->name);
    return NULL;
  }
  jx_scope_begin();
  for (int i = 0; i < f->nin; i++) ins[i] = jx_trace_input(t, in[i]);
  uint64_t serial = jx_error_serial();
  f->body(f->ctx, ins, outs);
  jx_program *p = NULL;
  if (jx_error_serial() != serial) {
    jx_trace_abort(t);
    if (!jx_error_pending())
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "'%s': the body failed", f->name);
  } else {
    p = jx_trace_end(t, f->nout, outs);
  }
  jx_scope_end();
  free(ins);
  free(outs);
  return p;
}

/* ---- functions being traced on this thread ----
 * A body that calls the function being traced recurses in C: with the same
 * input signature it would never end (the inner call misses the cache just
 * as the outer one did), so that is an error; with inputs that change shape
 * it may end, but every level costs C stack, so the nesting is bounded. */
typedef struct open_trace {
  const jx_fn *f;
  const jx_aval *in;
  uint64_t axis_env;
  struct open_trace *outer;
} open_trace;

static _Thread_local open_trace *open_traces; /* innermost first */
static _Thread_local int open_depth;

/* Deep enough for any program written by hand or by a library on jx, and
 * inside a 1 MiB thread stack: a level (jx_call, the trace, the body) takes
 * about 0.7 KiB in an optimized build and under 3 KiB under
 * AddressSanitizer (test_recursion runs the deepest chain on such a stack). */
enum { TRACE_DEPTH_LIMIT = 256 };

/* "'f' -> 'g' -> 'f'": the open traces from o outwards to the nearest one
 * of f, written outermost first, then f again (the call that re-enters). */
static void recursion_chain(const open_trace *o, const jx_fn *f, char *dst, size_t cap) {
  const open_trace *path[8];
  int n = 0, more = 0;
  for (const open_trace *t = o; t; t = t->outer) {
    if (n < 8)
      path[n++] = t;
    else
      more = 1;
    if (t->f == f) break;
  }
  size_t len = more ? (size_t)snprintf(dst, cap, "'%s' -> ... -> ", f->name) : 0;
  for (int i = n; i-- > 0 && len < cap;)
    len += (size_t)snprintf(dst + len, cap - len, "'%s' -> ", path[i]->f->name);
  if (len < cap) snprintf(dst + len, cap - len, "'%s'", f->name);
}

/* JX_OK, or the error for tracing f on `in` inside the open traces. Not
 * inlined: its buffer stays off the stack of nested traces. */
__attribute__((noinline)) static jx_status check_reentry(const jx_fn *f, const jx_aval *in,
                                                         uint64_t env) {
  for (const open_trace *o = open_traces; o; o = o->outer) {
    int same = o->f == f && o->axis_env == env;
    for (int i = 0; i < f->nin && same; i++) same = aval_same(o->in[i], in[i]);
    if (!same) continue;
    char chain[512];
    recursion_chain(open_traces, f, chain, sizeof chain);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "'%s' calls itself while it is being traced, with the same input "
                        "shapes (%s), so the trace would never end: a traced function cannot "
                        "recurse on values (use jx_while, jx_fori or jx_scan)",
                        f->name, chain);
  }
  if (open_depth >= TRACE_DEPTH_LIMIT)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "'%s' is called %d functions deep while being traced (called from "
                        "'%s'; the limit is %d): a recursion that does not end, or nesting "
                        "that a loop (jx_while, jx_fori, jx_scan) should replace",
                        f->name, open_depth, open_traces->f->name, TRACE_DEPTH_LIMIT);
  return JX_OK;
}

jx_program *jx_fn_program(jx_fn *f, const jx_aval *in) {
  uint64_t env = jx_axis_env_hash();
  /* the mode decides result dtypes while tracing: a program traced in one
   * mode is never reused in the other */
  int x64 = jx_x64_enabled();
  pthread_mutex_lock(&f->lock);
  for (fn_cache_entry *e = f->cache; e; e = e->next) {
    int hit = e->axis_env == env && e->x64 == x64;
    for (int i = 0; i < f->nin && hit; i++) hit = aval_same(e->avals[i], in[i]);
    if (hit) {
      jx_program *p = jx_program_retain(e->prog);
      pthread_mutex_unlock(&f->lock);
      return p;
    }
  }
  log_trace(f, in);
  pthread_mutex_unlock(&f->lock);

  if (check_reentry(f, in, env)) return NULL;
  open_trace self = {f, in, env, open_traces};
  open_traces = &self;
  open_depth++;
  jx_program *p;
  if (f->kind) {
    jx_error_context_push(f->kind->name, f->inner->name);
    p = f->kind->build(f, in);
    jx_error_context_pop();
  } else {
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    p = trace_body(f, in);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double s = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
    if (p && jx_env_flag("JX_LOG_COMPILES"))
      fprintf(stderr, "jx: traced '%s' in %.2f ms: %d equations\n", f->name, s * 1e3, p->neqns);
  }
  open_traces = self.outer;
  open_depth--;
  if (!p) return NULL;
  /* every traced or transformed program is checked once, when it is made: a
   * broken rule fails here, naming the equation, not later as wrong numbers */
  if (jx_program_verify(p)) {
    jx_program_release(p);
    return NULL;
  }
  atomic_fetch_add(&f->traces, 1);

  fn_cache_entry *e = calloc(1, sizeof *e);
  jx_aval *avals = malloc(sizeof *avals * (size_t)(f->nin + 1));
  if (!e || !avals) {
    free(e);
    free(avals);
    return p; /* uncached but correct */
  }
  memcpy(avals, in, sizeof *avals * (size_t)f->nin);
  e->avals = avals;
  e->axis_env = env;
  e->x64 = x64;
  e->prog = jx_program_retain(p);
  pthread_mutex_lock(&f->lock);
  e->next = f->cache;
  f->cache = e;
  pthread_mutex_unlock(&f->lock);
  return p;
}

/* Checks f, in and out, and gives the inputs' avals. */
static jx_status prepare(const char *op, jx_fn *f, jx_array *const *in, jx_array **out,
                         jx_aval *avals) {
  if (!f) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the function is NULL", op);
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL for '%s'", op, f->name);
  for (int o = 0; o < f->nout; o++) out[o] = jx_poison();
  if (f->nin > 0 && !in)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: in is NULL for '%s'", op, f->name);
  for (int i = 0; i < f->nin; i++) {
    if (!in[i])
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: input %d of '%s' is NULL", op, i, f->name);
    if (in[i]->poisoned) return jx_error_fail_call(JX_ERR_POISONED);
    if (in[i]->released) return jx_released_error(in[i], op, i);
    if (jx_array_valueless(in[i])) return jx_valueless_error(in[i], op);
    avals[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, jx_array_vma(in[i])};
  }
  return JX_OK;
}

jx_status jx_call(jx_fn *f, jx_array *const *in, jx_array **out) {
  jx_aval small[4]; /* small: a body's nested call is a level of C stack */
  jx_aval *avals = f && f->nin > 4 ? malloc(sizeof *avals * (size_t)f->nin) : small;
  if (!avals) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_call: out of memory");
  jx_array **copy = NULL; /* jx_call(f, &w, &w) */
  if (f) in = jx_inputs_apart("jx_call", in, f->nin, out, f->nout, &copy);
  jx_status st = prepare("jx_call", f, in, out, avals);
  jx_program *p = st ? NULL : jx_fn_program(f, avals);
  if (avals != small) free(avals);
  if (!st && !p) st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (!st) {
    const void *outer = jx_donation_swap(p); /* this call may donate (jx_jit_options.donate) */
    st = jx_program_eval(p, in, out);
    jx_donation_swap(outer);
  }
  jx_program_release(p);
  free(copy);
  return st;
}

char *jx_fn_ir(jx_fn *f, jx_array *const *example_in) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_fn_ir: the function is NULL");
    return NULL;
  }
  jx_aval *avals = malloc(sizeof *avals * (size_t)(f->nin + 1));
  jx_array **out = malloc(sizeof *out * (size_t)f->nout);
  char *text = NULL;
  if (avals && out && !prepare("jx_fn_ir", f, example_in, out, avals)) {
    jx_program *p = jx_fn_program(f, avals);
    if (p) text = jx_program_print(p);
    jx_program_release(p);
  }
  free(avals);
  free(out);
  return text;
}

jx_fn *jx_fn_fori_wrapper(jx_fn *body, jx_body wrapper_body) {
  pthread_mutex_lock(&body->lock);
  if (!body->fori_wrapper) {
    char name[300];
    snprintf(name, sizeof name, "fori(%s)", body->name);
    /* the wrapper borrows body: body owns the wrapper, not the other way */
    body->fori_wrapper = jx_fn_create(name, body->nin, body->nout + 1, wrapper_body, body);
  }
  jx_fn *w = body->fori_wrapper;
  pthread_mutex_unlock(&body->lock);
  return w;
}

jx_status jx_eval_shape(jx_fn *f, jx_array *const *example_in, jx_array **out) {
  if (!f || !out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_eval_shape: f or out is NULL");
  for (int o = 0; o < f->nout; o++) out[o] = jx_poison();
  jx_aval *av = malloc(sizeof *av * (size_t)(f->nin + 1));
  if (!av) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_eval_shape: out of memory");
  for (int i = 0; i < f->nin; i++) {
    if (!example_in || !example_in[i] || example_in[i]->poisoned) {
      free(av);
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_eval_shape: input %d of '%s' is missing", i,
                          f->name);
    }
    av[i] = (jx_aval){example_in[i]->dtype, example_in[i]->weak, example_in[i]->shape, 0};
  }
  jx_program *p = jx_fn_program(f, av);
  free(av);
  if (!p) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  for (int o = 0; o < f->nout; o++) {
    jx_aval a = p->avals[p->out[o]];
    out[o] = jx_array_abstract(a.dtype, a.shape, a.weak);
  }
  jx_program_release(p);
  return JX_OK;
}
