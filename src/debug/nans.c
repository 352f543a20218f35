/* JX_DEBUG_NANS / JX_DEBUG_INFS: every op's float outputs are checked, as
 * jax_debug_nans does. Eager ops are checked one by one (dispatch.c). A
 * jitted program is checked after each step; when a fused kernel made a bad
 * value its equations run again one by one through the reference kernels to
 * find the first that made it. The error names the primitive, its inputs,
 * the user's file:line, the derivative it belongs to under grad and the
 * jitted function; a per-device program's errors gain "on device D" from
 * the SPMD runtime. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../trace/dispatch.h"
#include "../trace/trace.h"
#include "debug_internal.h"
#include "../base/hooks.h"

void jx_debug_set_checks(int nans, int infs) {
  int f = jx_debug_flags & ~(JX_DEBUG_NANS | JX_DEBUG_INFS);
  jx_debug_flags = f | (nans ? JX_DEBUG_NANS : 0) | (infs ? JX_DEBUG_INFS : 0);
}

/* "NaN", "inf" or NULL: what a's elements hold that the checks forbid. */
static const char *bad_value(const jx_array *a) {
  if (!a || a->poisoned || !a->buf || !jx_is_float(a->dtype)) return NULL;
  int64_t n = jx_shape_numel(a->shape);
  int nans = jx_debug_flags & JX_DEBUG_NANS, infs = jx_debug_flags & JX_DEBUG_INFS;
  const void *d = a->buf->data;
  for (int64_t i = 0; i < n; i++) {
    double x = a->dtype == JX_F32   ? (double)((const float *)d)[i]
               : a->dtype == JX_F64 ? ((const double *)d)[i]
                                    : jx_load_f64(d, a->dtype, i);
    if (nans && isnan(x)) return "NaN";
    if (infs && isinf(x)) return "inf";
  }
  return NULL;
}

static void inputs_str(char *buf, size_t cap, int nin, const jx_aval *in) {
  size_t len = 0;
  buf[0] = '\0';
  for (int i = 0; i < nin && len < cap; i++) {
    char a[JX_AVAL_STR_CAP];
    len += (size_t)snprintf(buf + len, cap - len, "%s%s", i ? ", " : "",
                            jx_aval_str(in[i].dtype, in[i].shape, a));
  }
}

static const char *flag_name(const char *what) {
  return strcmp(what, "NaN") == 0 ? "JX_DEBUG_NANS" : "JX_DEBUG_INFS";
}

jx_status jx_nans_check_eager(const jx_prim *p, int nin, jx_array *const *in, int nout,
                              jx_array *const *out) {
  if (jx_debug_exec_depth) return JX_OK;
  for (int o = 0; o < nout; o++) {
    const char *what = bad_value(out[o]);
    if (!what) continue;
    jx_aval small[8] = {{0}};
    jx_aval *av = nin > 8 ? malloc(sizeof *av * (size_t)nin) : small;
    char ins[512] = "?";
    if (av) {
      for (int i = 0; i < nin; i++) av[i] = (jx_aval){in[i]->dtype, in[i]->weak, in[i]->shape, 0};
      inputs_str(ins, sizeof ins, nin, av);
    }
    if (av != small) free(av);
    /* inside a program the interpreter runs, its equation's location is the default */
    const char *loc = jx_trace_set_default_loc(NULL);
    jx_trace_set_default_loc(loc);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %s produced %s%s%s (inputs %s)",
                        flag_name(what), p->name, what, loc ? " at " : "", loc ? loc : "", ins);
  }
  return JX_OK;
}

/* A program that differentiation made (its name says which transformation). */
static int derived(const jx_program *p) {
  return strstr(p->name, "jvp(") || strstr(p->name, "grad(") || strstr(p->name, "vjp(") ||
         strstr(p->name, "transpose(") || strstr(p->name, "linearize(");
}

static jx_status report_eqn(const jx_program *p, int k, const char *what) {
  const jx_eqn *e = &p->eqns[k];
  jx_aval small[8] = {{0}};
  jx_aval *av = e->nin > 8 ? malloc(sizeof *av * (size_t)e->nin) : small;
  char ins[512] = "?", deriv[128] = "";
  if (av) {
    for (int i = 0; i < e->nin; i++) av[i] = p->avals[e->in[i]];
    inputs_str(ins, sizeof ins, e->nin, av);
  }
  if (av != small) free(av);
  /* derivative equations carry the location of the op they differentiate,
   * which comes first among the equations at that location */
  if (e->loc && derived(p))
    for (int j = 0; j < k; j++)
      if (p->eqns[j].loc && strcmp(p->eqns[j].loc, e->loc) == 0) {
        snprintf(deriv, sizeof deriv, ", in the derivative of %s", p->eqns[j].prim->name);
        break;
      }
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: %s produced %s%s%s%s (inputs %s) in jit of '%s'", flag_name(what),
                      e->prim->name, what, e->loc ? " at " : "", e->loc ? e->loc : "", deriv, ins,
                      p->name);
}

/* ---- re-running a fused kernel's equations one by one ---- */
typedef struct {
  const jx_program *p;
  jx_array **env, **val;
  int *def; /* variable -> defining equation, or -1 */
} rerun;

static jx_status run_one(rerun *r, int k);

static jx_array *value(rerun *r, int v, jx_status *st) {
  if (r->val[v]) return r->val[v];
  if (r->env[v]) return r->env[v];
  if (r->def[v] < 0) {
    *st =
        jx_error_set(JX_ERR_INTERNAL, "JX_DEBUG_NANS: no value for a variable of '%s'", r->p->name);
    return NULL;
  }
  *st = run_one(r, r->def[v]); /* a read-through step (a broadcast) never stored */
  return r->val[v];
}

static jx_status run_one(rerun *r, int k) {
  const jx_eqn *e = &r->p->eqns[k];
  jx_array *ins[16], *outs[16];
  if (e->nin > 16 || e->nout > 16)
    return jx_error_set(JX_ERR_INTERNAL, "JX_DEBUG_NANS: equation %d too wide to re-run", k);
  jx_status st = JX_OK;
  for (int i = 0; i < e->nin && !st; i++) ins[i] = value(r, e->in[i], &st);
  if (!st) st = jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
  for (int o = 0; o < e->nout && !st; o++) r->val[e->out[o]] = outs[o];
  return st;
}

jx_status jx_nans_check_step(const jx_program *p, int first, int count, int kernel,
                             jx_array **env) {
  int bad = -1;
  const char *what = NULL;
  for (int k = first; k < first + count && bad < 0; k++)
    for (int o = 0; o < p->eqns[k].nout && bad < 0; o++)
      if ((what = bad_value(env[p->eqns[k].out[o]]))) bad = k;
  if (bad < 0) return JX_OK;
  if (!kernel) return report_eqn(p, bad, what);
  const char *stored = what;
  rerun r = {p, env, NULL, NULL};
  r.val = calloc((size_t)p->nvars + 1, sizeof *r.val);
  r.def = malloc(sizeof *r.def * (size_t)(p->nvars + 1));
  jx_status st = (r.val && r.def) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "out of memory");
  for (int v = 0; v < p->nvars && !st; v++) r.def[v] = -1;
  for (int k = 0; k < p->neqns && !st; k++)
    for (int o = 0; o < p->eqns[k].nout; o++) r.def[p->eqns[k].out[o]] = k;
  for (int k = first; k < first + count && !st; k++) {
    st = run_one(&r, k);
    for (int o = 0; o < p->eqns[k].nout && !st; o++)
      if ((what = bad_value(r.val[p->eqns[k].out[o]]))) {
        st = report_eqn(p, k, what);
        break;
      }
  }
  /* the kernel's arithmetic may differ from the reference kernels' in the
   * last bit: name its first equation whose stored result is bad */
  if (!st) st = report_eqn(p, bad, stored);
  free(r.val);
  free(r.def);
  return st;
}
