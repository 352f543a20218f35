/* Compiled control flow. A control-flow equation's impl evaluates its nested
 * programs with jx_program_eval, which runs the running executable's nested
 * executable for a program when there is one (ir/exec.h); so compiling a
 * program compiles its equations' nested programs too (jx_compile_nested,
 * called by jx_compile), and a jitted scan's iterations run as fused kernels
 * rather than one eager op at a time.
 *
 * scan and while loops inside an executable run here rather than through
 * their impls (scan.c, while.c), which are written for eager use: they slice
 * each x with two eager ops, keep every y until a final stack, and (while)
 * keep every iteration's carries until the loop ends. Here the xs are row
 * copies into buffers reused while the body keeps no reference to them, the
 * ys are copied into their preallocated stacked results, and a carry is
 * released as soon as the next one exists: its buffer returns to the
 * allocator's per-thread cache (array.c) and becomes the next iteration's
 * carry, so a steady loop allocates no fresh memory. The values are the
 * impls' exactly. */
#include "control_compile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/error.h"
#include "../trace/eval.h"
#include "../transform/build.h"
#include "attention_call.h"
#include "executable.h"
#include "kernel_batch.h"
#include "prim_lowering.h"
#include "toolchain.h"

/* Which of e's nested programs its impl runs on concrete inputs
 * (prim_lowering.h): a bit per sub (0: none). */
static unsigned run_subs(const jx_eqn *e) {
  switch (jx_prim_lowering_of(e->prim)->subs) {
  case JX_LOWER_SUBS_FIRST: return e->nsub >= 1 ? 1u : 0u;
  case JX_LOWER_SUBS_PAIR: return e->nsub == 2 ? 3u : 0u;
  case JX_LOWER_SUBS_ALL: return e->nsub >= 1 ? (1u << e->nsub) - 1 : 0u;
  default: return 0;
  }
}

/* Adds the kernels of p (unless it is compiled already) and of the nested
 * programs its compile builds to t; *programs counts the programs that
 * have kernels. */
static jx_status add_kernels(jx_kernel_tu *t, const jx_program *p, int *programs) {
  if (jx_program_executable(p)) return JX_OK;
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  if (ng < 0) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  int n = jx_kernel_tu_add(t, p, groups, ng, NULL, NULL);
  free(groups);
  if (n < 0) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  if (n > 0) ++*programs;
  jx_status st = JX_OK;
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    unsigned which = jx_cpu_attention_call(p, e) ? 0u : run_subs(e);
    for (int s = 0; s < e->nsub && !st; s++)
      if (which >> s & 1u) st = add_kernels(t, e->sub[s], programs);
  }
  return st;
}

/* One compiler run for p and all its nested programs: their kernels in one
 * translation unit, preloaded, so that each program's build finds its
 * kernels there instead of compiling a unit of its own. */
static jx_status compile_batch(const jx_program *p) {
  jx_kernel_tu t;
  jx_status st = jx_kernel_tu_init(&t);
  int programs = 0;
  if (!st) st = add_kernels(&t, p, &programs);
  if (!st && programs >= 2) st = jx_kernel_preload(t.text);
  jx_kernel_tu_free(&t);
  return st;
}

/* > 0 while this thread compiles nested programs: only the outermost call
 * batches, the programs below it are in its batch */
static _Thread_local int nesting;

jx_status jx_compile_nested(const jx_program *p, const char *dump_prefix, jx_exec_nested *out) {
  jx_status st = JX_OK;
  int has_nested = 0;
  for (int k = 0; k < p->neqns && !has_nested; k++) has_nested = run_subs(&p->eqns[k]) != 0;
  if (!has_nested) return JX_OK;
  if (nesting == 0 && (st = compile_batch(p))) return st;
  nesting++;
  for (int k = 0; k < p->neqns && !st; k++) {
    const jx_eqn *e = &p->eqns[k];
    /* an attention call the executable runs as its kernel never runs its program */
    unsigned which = jx_cpu_attention_call(p, e) ? 0u : run_subs(e);
    for (int s = 0; s < e->nsub && !st; s++) {
      const jx_program *sub = e->sub[s];
      /* a program with an executable of its own (a jitted function's) runs that one */
      if (!(which >> s & 1u) || jx_program_executable(sub) || jx_exec_nested_find(out, sub).run)
        continue;
      char prefix[400];
      snprintf(prefix, sizeof prefix, "%.300s.%d%s%d", dump_prefix ? dump_prefix : p->name, k,
               e->prim->name, s);
      jx_exec x;
      st = jx_compile(sub, prefix, &x, NULL);
      if (!st) st = jx_exec_nested_add(out, sub, x);
    }
  }
  nesting--;
  return st;
}

/* 1 when p runs compiled here: a nested program of the running executable,
 * or one with an executable of its own. */
static int compiled(const jx_program *p) { return jx_program_exec(p).run != NULL; }

int jx_control_runs(const jx_eqn *e) {
  switch (e->prim->id) {
  case JX_PRIM_scan: return e->nsub == 1 && compiled(e->sub[0]);
  case JX_PRIM_while: return e->nsub == 2 && compiled(e->sub[0]) && compiled(e->sub[1]);
  default: return 0;
  }
}

static size_t nbytes(const jx_array *a) {
  return (size_t)jx_shape_numel(a->shape) * jx_dtype_size(a->dtype);
}

/* 1 when nothing but the scope that made a holds a or its buffer. */
static int sole(const jx_array *a) {
  return atomic_load(&a->refs) == 1 && a->buf && atomic_load(&a->buf->refs) == 1;
}

static jx_status run_scan(const jx_eqn *e, jx_array *const *in, jx_array **out) {
  const jx_params *p = &e->params;
  const jx_program *body = e->sub[0];
  int nc = (int)p->i[0], nin = e->nin, nout = e->nout, nx = nin - nc, ny = nout - nc;
  int64_t len = p->i[1];
  int reverse = p->i[2] != 0;
  jx_array **c = calloc((size_t)nc + 1, sizeof *c), **args = calloc((size_t)nin + 1, sizeof *args);
  jx_array **res = calloc((size_t)nout + 1, sizeof *res);
  jx_status st =
      (c && args && res) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "scan: out of memory");
  for (int i = 0; i < nc && !st; i++) c[i] = jx_keep(in[i]);
  for (int i = 0; i < nx && !st; i++) st = jx_array_ready(in[nc + i]);
  /* the stacked ys, filled as the iterations make them (in the caller's scope) */
  for (int j = 0; j < ny && !st; j++) {
    jx_aval a = jx_aval_stacked(body->avals[body->out[nc + j]], len);
    out[nc + j] = len ? jx_array_alloc(a.dtype, a.shape, a.weak) : jx_zeros(a.dtype, a.shape);
    if (out[nc + j]->poisoned) st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  }
  /* this iteration's x[t]: a buffer of the caller's scope, reused while the
   * body keeps no reference to it */
  for (int i = 0; i < nx && !st; i++) {
    jx_aval a = body->avals[body->in[nc + i]];
    args[nc + i] = jx_array_alloc(a.dtype, a.shape, a.weak);
    if (args[nc + i]->poisoned) st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  }
  for (int64_t k = 0; k < len && !st; k++) {
    int64_t t = reverse ? len - 1 - k : k;
    for (int i = 0; i < nx && !st; i++) {
      jx_array *x = args[nc + i];
      if (!sole(x)) {
        x = jx_array_alloc(x->dtype, x->shape, x->weak);
        if (x->poisoned) st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
        args[nc + i] = x;
      }
      size_t row = nbytes(x);
      if (!st && row)
        memcpy(x->buf->data, (const char *)in[nc + i]->buf->data + (size_t)t * row, row);
    }
    if (st) break;
    jx_scope_begin(); /* the iteration's temporaries die here */
    for (int i = 0; i < nc; i++) args[i] = c[i];
    st = jx_program_eval(body, args, res);
    for (int i = 0; i < nc && !st; i++) { /* the old carry goes back to the cache now */
      jx_array *next = jx_keep(res[i]);
      jx_release(c[i]);
      c[i] = next;
    }
    for (int j = 0; j < ny && !st; j++) {
      jx_array *y = res[nc + j];
      st = jx_array_ready(y);
      size_t row = nbytes(y);
      if (!st && row) memcpy((char *)out[nc + j]->buf->data + (size_t)t * row, y->buf->data, row);
    }
    jx_scope_end();
  }
  for (int i = 0; i < nc && !st; i++) {
    out[i] = jx_scope_own(c[i]);
    c[i] = NULL;
  }
  for (int i = 0; c && i < nc; i++)
    if (c[i]) jx_release(c[i]);
  free(c);
  free(args);
  free(res);
  return st;
}

static jx_status run_while(const jx_eqn *e, jx_array *const *in, jx_array **out) {
  int n = e->nin;
  jx_array **c = calloc((size_t)n + 1, sizeof *c), **next = calloc((size_t)n + 1, sizeof *next);
  jx_status st = (c && next) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "while: out of memory");
  for (int i = 0; i < n && !st; i++) c[i] = jx_keep(in[i]);
  while (!st) {
    jx_array *pred = NULL;
    jx_scope_begin();
    st = jx_program_eval(e->sub[0], c, &pred);
    int go = !st && jx_item(pred) != 0;
    if (!st && go) st = jx_program_eval(e->sub[1], c, next);
    for (int i = 0; i < n && !st && go; i++) {
      jx_array *k = jx_keep(next[i]);
      jx_release(c[i]);
      c[i] = k;
    }
    jx_scope_end();
    if (!go) break;
  }
  for (int i = 0; i < n && !st; i++) {
    out[i] = jx_scope_own(c[i]);
    c[i] = NULL;
  }
  for (int i = 0; c && i < n; i++)
    if (c[i]) jx_release(c[i]);
  free(c);
  free(next);
  return st;
}

jx_status jx_control_run(const jx_eqn *e, jx_array *const *in, jx_array **out) {
  for (int o = 0; o < e->nout; o++) out[o] = jx_poison();
  jx_status st = e->prim->id == JX_PRIM_scan ? run_scan(e, in, out) : run_while(e, in, out);
  if (st)
    for (int o = 0; o < e->nout; o++) out[o] = jx_poison();
  return st;
}
