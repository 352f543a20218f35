/* Reverse mode: jx_vjp, jx_grad and jx_value_and_grad, each a program built
 * from the linearized function: run the forward part, then the transposed
 * linear part on the output cotangents. */
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/trace.h"
#include "ad.h"
#include "transform_util.h"

typedef enum { MODE_VJP, MODE_GRAD, MODE_VALUE_AND_GRAD } grad_mode;

typedef struct {
  grad_mode mode;
  int nargs;
  int has_aux;
  int holomorphic; /* JAX's holomorphic=True: complex output and arguments */
  int argnums[];   /* nargs entries */
} grad_data;

static void free_grad_data(void *d) { free(d); }

/* Traces: x -> (fwd outputs), transpose(residuals, cts) -> input cotangents.
 * cts[o] NULL means: a cotangent of ones for output 0 (grad). */
static jx_program *reverse_program(jx_fn *f, const jx_aval *in, const grad_data *g) {
  jx_fn *inner = f->inner;
  int n = inner->nin;
  jx_program *p = jx_fn_program(inner, in);
  if (!p) return NULL;
  uint8_t *wrt = calloc((size_t)n + 1, 1), *sel = calloc((size_t)p->nout + 1, 1);
  jx_linearized lz = {0};
  jx_program *t = NULL, *result = NULL;
  jx_trace *tr = NULL;
  jx_status st = (wrt && sel) ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "grad: out of memory");
  if (st) goto done;

  if (g->mode == MODE_VJP) {
    for (int i = 0; i < n; i++) wrt[i] = jx_is_inexact(in[i].dtype);
    memset(sel, 1, (size_t)p->nout);
  } else {
    /* JAX's checks: a real scalar output (complex only when holomorphic),
     * float or complex arguments (complex only when holomorphic) */
    jx_aval y = p->avals[p->out[0]];
    int y_ok = g->holomorphic ? jx_is_complex(y.dtype) : jx_is_float(y.dtype);
    if (y.shape.rank != 0 || !y_ok) {
      char s[JX_AVAL_STR_CAP];
      st = jx_error_set(
          JX_ERR_SHAPE, "grad: '%s' must return a %s scalar as its first output, got %s%s",
          inner->name, g->holomorphic ? "complex" : "float", jx_aval_str(y.dtype, y.shape, s),
          !g->holomorphic && jx_is_complex(y.dtype)
              ? " (for a holomorphic function use jx_grad_holomorphic; for other functions "
                "with complex outputs, jx_vjp)"
              : "");
      goto done;
    }
    for (int k = 0; k < g->nargs; k++) {
      int a = g->argnums[k];
      int ok = g->holomorphic ? jx_is_complex(in[a].dtype) : jx_is_inexact(in[a].dtype);
      if (!ok) {
        char s[JX_AVAL_STR_CAP];
        st = jx_error_set(JX_ERR_DTYPE,
                          g->holomorphic
                              ? "grad: argument %d of '%s' is %s; holomorphic gradients need "
                                "complex inputs"
                              : "grad: argument %d of '%s' is %s; gradients need float or "
                                "complex inputs (convert it with jx_astype, or leave it out of "
                                "argnums)",
                          a, inner->name, jx_aval_str(in[a].dtype, in[a].shape, s));
        goto done;
      }
      wrt[a] = 1;
    }
    sel[0] = 1;
  }
  st = jx_linearize(p, wrt, sel, &lz);
  if (st) goto done;
  t = jx_transpose_program(lz.lin, lz.nres);
  if (!t) {
    st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    goto done;
  }

  tr = jx_trace_begin(f->name);
  if (!tr) goto done;
  jx_scope_begin();
  int nfwd = lz.fwd->nout, nct = lz.lin->nout, ntin = t->nout;
  int nin_all = g->mode == MODE_VJP ? n + p->nout : n;
  jx_array **x = calloc((size_t)nin_all + 1, sizeof *x);
  jx_array **fo = calloc((size_t)nfwd + 1, sizeof *fo);
  jx_array **tin = calloc((size_t)(lz.nres + nct) + 1, sizeof *tin);
  jx_array **tout = calloc((size_t)ntin + 1, sizeof *tout);
  jx_array **outs =
      calloc((size_t)(p->nout + n + ntin) + 1, sizeof *outs); /* vjp: outs + every input */
  if (!x || !fo || !tin || !tout || !outs)
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "grad: out of memory");
  for (int i = 0; i < nin_all && !st; i++) x[i] = jx_trace_input(tr, in[i]);
  if (!st) st = jx_program_eval(lz.fwd, x, fo);
  for (int r = 0; r < lz.nres && !st; r++) tin[r] = fo[p->nout + r];
  if (!st) {
    if (g->mode == MODE_VJP)
      for (int o = 0; o < nct; o++) tin[lz.nres + o] = x[n + o];
    else
      tin[lz.nres] = jx_rule_full_like(fo[0], 1.0);
    st = jx_program_eval(t, tin, tout);
  }
  int nout = 0;
  if (!st) {
    if (g->mode == MODE_VJP) {
      for (int o = 0; o < p->nout; o++) outs[nout++] = fo[o];
      /* cotangents of integer inputs are zeros of their dtype (JAX's float0) */
      for (int i = 0, k = 0; i < n; i++)
        outs[nout++] =
            wrt[i] ? tout[k++] : jx_rule_zeros((jx_aval){in[i].dtype, 0, in[i].shape, 0});
    } else {
      if (g->mode == MODE_VALUE_AND_GRAD) {
        outs[nout++] = fo[0];
        if (g->has_aux)
          for (int o = 1; o < p->nout; o++) outs[nout++] = fo[o];
      }
      /* tout follows the order of the inputs; argnums may list them in any order */
      for (int k = 0; k < g->nargs; k++) {
        int pos = 0;
        for (int i = 0; i < g->argnums[k]; i++) pos += wrt[i];
        outs[nout++] = tout[pos];
      }
    }
  }
  if (st)
    jx_trace_abort(tr);
  else
    result = jx_trace_end(tr, nout, outs);
  jx_scope_end();
  free(x);
  free(fo);
  free(tin);
  free(tout);
  free(outs);
done:
  jx_program_release(lz.fwd);
  jx_program_release(lz.lin);
  jx_program_release(t);
  jx_program_release(p);
  free(wrt);
  free(sel);
  return result;
}

static jx_program *vjp_build(jx_fn *f, const jx_aval *in) {
  const grad_data *g = f->data;
  int n = f->inner->nin;
  jx_program *p = jx_fn_program(f->inner, in);
  if (!p) return NULL;
  for (int o = 0; o < p->nout; o++) {
    jx_aval y = p->avals[p->out[o]], c = in[n + o];
    if (!jx_shape_equal(y.shape, c.shape) || (jx_is_inexact(y.dtype) && y.dtype != c.dtype)) {
      char a[JX_AVAL_STR_CAP], b[JX_AVAL_STR_CAP];
      jx_error_set(JX_ERR_SHAPE, "jx_vjp: cotangent %d is %s but output %d of '%s' is %s", o,
                   jx_aval_str(c.dtype, c.shape, a), o, f->inner->name,
                   jx_aval_str(y.dtype, y.shape, b));
      jx_program_release(p);
      return NULL;
    }
  }
  jx_program_release(p);
  return reverse_program(f, in, g);
}

static jx_program *grad_build(jx_fn *f, const jx_aval *in) {
  return reverse_program(f, in, f->data);
}

static const jx_fn_kind vjp_kind = {.name = "vjp", .build = vjp_build, .free_data = free_grad_data};
static const jx_fn_kind grad_kind = {
    .name = "grad", .build = grad_build, .free_data = free_grad_data};
static const jx_fn_kind vag_kind = {
    .name = "value_and_grad", .build = grad_build, .free_data = free_grad_data};

/* nargs entries of args (negative ones count from the end); none means
 * argument 0, as JAX's default argnums. */
static grad_data *make_data(const char *op, jx_fn *f, grad_mode mode, int nargs, const int *args,
                            int has_aux, int holomorphic) {
  if (!f) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the function is NULL", op);
    return NULL;
  }
  if (nargs < 0 || (nargs > 0 && !args)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 nargs < 0 ? "%s: more argnums than a jx_axes holds (JX_MAX_RANK); "
                             "jx_grad_argnums and jx_value_and_grad_argnums take any number"
                           : "%s: argnums is NULL",
                 op);
    return NULL;
  }
  static const int first = 0;
  if (nargs == 0 && mode != MODE_VJP) {
    nargs = 1;
    args = &first;
  }
  grad_data *g = calloc(1, sizeof *g + sizeof *g->argnums * (size_t)(nargs + 1));
  if (!g) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return NULL;
  }
  g->mode = mode;
  g->has_aux = has_aux;
  g->holomorphic = holomorphic;
  if (mode == MODE_VJP) return g;
  if (jx_argnums_normalize(op, f->name, f->nin, nargs, args, g->argnums)) {
    free(g);
    return NULL;
  }
  g->nargs = nargs;
  return g;
}

jx_fn *jx_vjp(jx_fn *f) {
  grad_data *g = make_data("jx_vjp", f, MODE_VJP, 0, NULL, 0, 0);
  return g ? jx_fn_new_transform(&vjp_kind, f, f->nin + f->nout, f->nout + f->nin, g) : NULL;
}

static jx_fn *grad(const char *op, jx_fn *f, int nargs, const int *args, int holomorphic) {
  grad_data *g = make_data(op, f, MODE_GRAD, nargs, args, 0, holomorphic);
  return g ? jx_fn_new_transform(&grad_kind, f, f->nin, g->nargs, g) : NULL;
}

jx_fn *jx_grad(jx_fn *f, jx_axes argnums) { return grad("jx_grad", f, argnums.n, argnums.v, 0); }

jx_fn *jx_grad_argnums(jx_fn *f, int n, const int *argnums) {
  return grad("jx_grad_argnums", f, n, argnums, 0);
}

jx_fn *jx_grad_holomorphic(jx_fn *f, jx_axes argnums) {
  return grad("jx_grad_holomorphic", f, argnums.n, argnums.v, 1);
}

static jx_fn *value_and_grad(const char *op, jx_fn *f, int nargs, const int *args, int has_aux,
                             int holomorphic) {
  grad_data *g = make_data(op, f, MODE_VALUE_AND_GRAD, nargs, args, has_aux, holomorphic);
  if (!g) return NULL;
  if (!has_aux && f->nout > 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: '%s' has %d outputs; pass has_aux = 1 to return the others as "
                 "auxiliary values",
                 op, f->name, f->nout);
    free(g);
    return NULL;
  }
  int nout = 1 + (has_aux ? f->nout - 1 : 0) + g->nargs;
  return jx_fn_new_transform(&vag_kind, f, f->nin, nout, g);
}

jx_fn *jx_value_and_grad(jx_fn *f, jx_axes argnums, int has_aux) {
  return value_and_grad("jx_value_and_grad", f, argnums.n, argnums.v, has_aux, 0);
}

jx_fn *jx_value_and_grad_holomorphic(jx_fn *f, jx_axes argnums, int has_aux) {
  return value_and_grad("jx_value_and_grad_holomorphic", f, argnums.n, argnums.v, has_aux, 1);
}

jx_fn *jx_value_and_grad_argnums(jx_fn *f, int n, const int *argnums, int has_aux) {
  return value_and_grad("jx_value_and_grad_argnums", f, n, argnums, has_aux, 0);
}

jx_fn *jx_value_and_grad_first(jx_fn *f, int n, int has_aux) {
  if (!f || n < 1 || n > f->nin) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_value_and_grad_first: n = %d must be in 1..%d (the inputs of '%s')", n,
                 f ? f->nin : 0, f ? f->name : "(null)");
    return NULL;
  }
  int *args = malloc(sizeof *args * (size_t)n);
  if (!args) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_value_and_grad_first: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) args[i] = i;
  jx_fn *r = value_and_grad("jx_value_and_grad_first", f, n, args, has_aux, 0);
  free(args);
  return r;
}
