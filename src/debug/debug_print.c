/* jx_debug_print: a primitive with an effect (prim.h `effect`), so that it
 * survives tracing, jit, differentiation and batching and runs where the
 * program runs, in program order, as jax.debug.print's callback does.
 *
 * The row: operands = the values to print (or one placeholder bool when
 * there are none: a variadic row needs an operand); one output, a bool[]
 * token nobody reads (the simplifier keeps the equation for its effect).
 * params: i0 = the format string's number in the table below, i1 = how many
 * operands are values. The rules follow JAX's debug_callback: the JVP prints
 * the primals and has no tangent; batching prints once per batch element
 * (JAX unrolls the same way); there is no transpose (the print depends only
 * on primals, so reverse mode leaves it in the forward pass). */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "../base/error.h"
#include "../parallel/collective.h"
#include "../trace/dispatch.h"
#include "debug_internal.h"

/* ---- the format strings: interned, so parameters stay plain numbers ---- */
static pthread_mutex_t fmt_lock = PTHREAD_MUTEX_INITIALIZER;
static char **fmts;
static int nfmts, cap_fmts;

static int fmt_intern(const char *s) {
  pthread_mutex_lock(&fmt_lock);
  int id = -1;
  for (int i = 0; i < nfmts && id < 0; i++)
    if (strcmp(fmts[i], s) == 0) id = i;
  if (id < 0) {
    if (nfmts == cap_fmts) {
      int cap = cap_fmts ? 2 * cap_fmts : 16;
      char **g = realloc(fmts, sizeof *g * (size_t)cap);
      if (g) {
        fmts = g;
        cap_fmts = cap;
      }
    }
    char *copy = nfmts < cap_fmts ? strdup(s) : NULL;
    if (copy) {
      fmts[nfmts] = copy;
      id = nfmts++;
    }
  }
  pthread_mutex_unlock(&fmt_lock);
  return id;
}

static const char *fmt_get(int64_t id) {
  pthread_mutex_lock(&fmt_lock);
  const char *s = id >= 0 && id < nfmts ? fmts[id] : "";
  pthread_mutex_unlock(&fmt_lock);
  return s; /* entries are never freed or moved (only the table of pointers is) */
}

/* ---- output ---- */
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static FILE *out_stream;

FILE *jx_debug_set_output(FILE *f) {
  pthread_mutex_lock(&out_lock);
  FILE *old = out_stream ? out_stream : stdout;
  out_stream = f;
  pthread_mutex_unlock(&out_lock);
  return old;
}

/* Counts the placeholders of fmt ("{}" or "{N}"); -1 for a malformed one. */
static int placeholders(const char *fmt, int *max_index) {
  int n = 0;
  *max_index = -1;
  for (const char *c = fmt; *c; c++) {
    if ((c[0] == '{' && c[1] == '{') || (c[0] == '}' && c[1] == '}')) {
      c++;
      continue;
    }
    if (*c == '}') return -1;
    if (*c != '{') continue;
    const char *e = strchr(c, '}');
    if (!e) return -1;
    if (e > c + 1) {
      char *end;
      long k = strtol(c + 1, &end, 10);
      if (end != e || k < 0) return -1;
      if (k > *max_index) *max_index = (int)k;
    } else {
      n++;
    }
    c = e;
  }
  return n;
}

static void put(char **s, size_t *len, size_t *cap, const char *t, size_t n) {
  if (!*s) return;
  if (*len + n + 1 > *cap) {
    size_t c = *cap * 2 + n + 64;
    char *g = realloc(*s, c);
    if (!g) {
      free(*s);
      *s = NULL;
      return;
    }
    *s = g;
    *cap = c;
  }
  memcpy(*s + *len, t, n);
  *len += n;
  (*s)[*len] = '\0';
}

/* The text of one print: prefix, fmt with the values, newline. */
static char *render(const char *prefix, const char *fmt, int n, jx_array *const *xs) {
  size_t len = 0, cap = 256;
  char *s = malloc(cap);
  if (!s) return NULL;
  s[0] = '\0';
  put(&s, &len, &cap, prefix, strlen(prefix));
  int next = 0;
  for (const char *c = fmt; *c && s; c++) {
    if ((c[0] == '{' && c[1] == '{') || (c[0] == '}' && c[1] == '}')) {
      put(&s, &len, &cap, c, 1);
      c++;
      continue;
    }
    if (*c != '{') {
      put(&s, &len, &cap, c, 1);
      continue;
    }
    const char *e = strchr(c, '}');
    int k = e > c + 1 ? (int)strtol(c + 1, NULL, 10) : next++;
    char *v = k < n ? jx_format(xs[k]) : NULL;
    if (v) put(&s, &len, &cap, v, strlen(v));
    free(v);
    c = e;
  }
  put(&s, &len, &cap, "\n", 1);
  return s;
}

static jx_status print_impl(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  const jx_params *p = ctx->params;
  int n = (int)p->i[1];
  for (int i = 0; i < n; i++) {
    jx_status st = jx_array_ready(in[i]);
    if (st) return st;
  }
  char prefix[32] = "";
  const jx_spmd_ctx *c = jx_spmd_current();
  if (c && c->mesh) snprintf(prefix, sizeof prefix, "[device %d] ", c->mesh->device[c->position]);
  char *text = render(prefix, fmt_get(p->i[0]), n, in);
  if (!text) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_debug_print: out of memory");
  pthread_mutex_lock(&out_lock);
  FILE *f = out_stream ? out_stream : stdout;
  fputs(text, f);
  fflush(f);
  pthread_mutex_unlock(&out_lock);
  free(text);
  out[0] = jx_array_alloc(JX_BOOL, (jx_shape){0, {0}}, 0);
  if (out[0]->poisoned) return jx_last_status();
  *(uint8_t *)out[0]->buf->data = 0;
  return JX_OK;
}

static jx_status print_infer(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)ctx;
  (void)in;
  out[0] = (jx_aval){JX_BOOL, 0, {0, {0}}, 0};
  return JX_OK;
}

/* JAX's debug_callback JVP: print the primals; the token has no tangent. */
static jx_status print_jvp(const jx_rule_ctx *ctx, jx_array *const *x, jx_array *const *t,
                           jx_array **y, jx_array **ty) {
  (void)t;
  ty[0] = NULL;
  return jx_bind(&jx_prim_debug_print, ctx->nin, x, ctx->params, y);
}

/* Unrolled over the batch, one print per element, as JAX does. */
static jx_status print_batch(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                             int64_t axis_size, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  jx_array **xs = malloc(sizeof *xs * (size_t)(ctx->nin + 1));
  if (!xs) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_debug_print: out of memory");
  jx_status st = JX_OK;
  out[0] = jx_poison();
  for (int64_t b = 0; b < axis_size && !st; b++) {
    for (int i = 0; i < ctx->nin && !st; i++) {
      if (bdim[i] == JX_NOT_MAPPED) {
        xs[i] = in[i];
        continue;
      }
      jx_shape s = in[i]->shape, lo = s, hi = s, one = s;
      for (int d = 0; d < s.rank; d++) {
        lo.dims[d] = 0;
        one.dims[d] = 1;
      }
      lo.dims[bdim[i]] = b;
      hi.dims[bdim[i]] = b + 1;
      int64_t ax[1] = {bdim[i]};
      xs[i] = jx_squeeze(jx_slice(in[i], lo, hi, one), (jx_axes){1, {ax[0]}});
      if (xs[i]->poisoned) st = jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
    }
    if (!st) st = jx_bind(&jx_prim_debug_print, ctx->nin, xs, p, out);
  }
  free(xs);
  if (!st && axis_size == 0) st = jx_bind(&jx_prim_debug_print, 0, NULL, p, out); /* never */
  out_bdim[0] = JX_NOT_MAPPED;
  return st;
}

const jx_prim jx_prim_debug_print = {.name = "debug_print",
                                     .id = JX_PRIM_debug_print,
                                     .nin = JX_VARIADIC,
                                     .nout = 1,
                                     .params = "fmt=i0 nvalues=i1",
                                     .infer = print_infer,
                                     .impl = print_impl,
                                     .jvp = print_jvp,
                                     .batch = print_batch,
                                     .effect = 1};

void(jx_debug_print)(const char *fmt, int n, jx_array *const *xs) {
  if (!fmt) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_debug_print: the format is NULL");
    return;
  }
  if (n < 0 || (n > 0 && !xs)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_debug_print: %d values at %p", n, (void *)xs);
    return;
  }
  int max_index;
  int holes = placeholders(fmt, &max_index);
  if (holes < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_debug_print: malformed format \"%s\"", fmt);
    return;
  }
  if (holes > n || max_index >= n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_debug_print: the format \"%s\" needs %d values, given %d", fmt,
                 holes > max_index + 1 ? holes : max_index + 1, n);
    return;
  }
  if (jx_check_inputs("jx_debug_print", n, xs)) return;
  int id = fmt_intern(fmt);
  if (id < 0) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_debug_print: out of memory");
    return;
  }
  jx_params p = JX_PARAMS_INIT;
  p.i[0] = id;
  p.i[1] = n;
  jx_array *token[1];
  if (n > 0) {
    jx_bind(&jx_prim_debug_print, n, xs, &p, token);
    return;
  }
  /* no values: one placeholder operand, a constant (printed every run all the same) */
  jx_array *dummy = jx_array_alloc(JX_BOOL, (jx_shape){0, {0}}, 0);
  if (dummy->poisoned) return;
  *(uint8_t *)dummy->buf->data = 0;
  jx_bind(&jx_prim_debug_print, 1, &dummy, &p, token);
}
