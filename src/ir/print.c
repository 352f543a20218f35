/* The program printer: jaxpr-like text, e.g.
 *   { lambda ; a:f32[4,8] b:f32[8,2]. let
 *       c:f32[4,2] = dot_general[lhs_contract=(1,) rhs_contract=(0,)] a b
 *       d:f32[4,2] = sin c
 *     in (d,) }
 * Scalar constants print inline as literals (2.0:f32[]); other constants are
 * bound before the ';'. Parameter names come from each row's `params` spec. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "program.h"
#include "../base/strbuf.h"

/* The text so far, and the display number of each variable of the program
 * being printed. */
typedef struct {
  jx_strbuf text;
  int *names;
} printer;

static void put(printer *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(printer *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  jx_strbuf_vappendf(&b->text, fmt, ap);
  va_end(ap);
}

/* a, b, ..., z, ba, bb, ...: JAX's variable names */
static void var_name(int v, char *out) {
  char tmp[16];
  int n = 0;
  do {
    tmp[n++] = (char)('a' + v % 26);
    v /= 26;
  } while (v > 0);
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  out[n] = '\0';
}

static void put_aval(printer *b, jx_aval a) {
  char s[JX_AVAL_STR_CAP];
  put(b, "%s%s", jx_aval_str(a.dtype, a.shape, s), a.weak ? "{weak}" : "");
}

static int is_literal(const jx_program *p, int v) {
  jx_array *c;
  return jx_program_is_const(p, v, &c) && c->shape.rank == 0 && c->buf;
}

static void put_binder(printer *b, const jx_program *p, int v) {
  char n[16];
  var_name(b->names ? b->names[v] : v, n);
  put(b, "%s:", n);
  put_aval(b, p->avals[v]);
}

/* A use of v: its name, or the literal value of a scalar constant. */
static void put_use(printer *b, const jx_program *p, int v) {
  jx_array *c;
  if (is_literal(p, v) && jx_program_is_const(p, v, &c)) {
    double x = jx_load_f64(c->buf->data, c->dtype, 0);
    if (jx_is_complex(c->dtype)) { /* (1+2j), as JAX prints a complex literal */
      double y = jx_load_f64(c->buf->data, jx_complex_part(c->dtype), 1);
      put(b, "(%.9g%+.9gj)", x, y);
    } else if (jx_is_float(c->dtype)) {
      char num[32];
      snprintf(num, sizeof num, "%.9g", x);
      put(b, "%s%s", num, strpbrk(num, ".eni") ? "" : ".0"); /* 1.0, not 1, as JAX */
    } else
      put(b, "%lld", (long long)jx_load_i64(c->buf->data, c->dtype, 0));
    put(b, ":%s[]", jx_dtype_name(c->dtype));
    return;
  }
  char n[16];
  var_name(b->names ? b->names[v] : v, n);
  put(b, "%s", n);
}

static void put_params(printer *b, const jx_eqn *e) {
  const char *spec = e->prim->params ? e->prim->params : "";
  int first = 1;
  while (*spec) {
    while (*spec == ' ') spec++;
    const char *eq = strchr(spec, '=');
    if (!eq) break;
    const char *end = eq + 1;
    while (*end && *end != ' ') end++;
    char slot[8] = {0};
    size_t sl = (size_t)(end - eq - 1);
    memcpy(slot, eq + 1, sl < 7 ? sl : 7);
    put(b, "%s%.*s=", first ? "[" : " ", (int)(eq - spec), spec);
    first = 0;
    int k = atoi(slot + 1);
    if (slot[0] == 'i' && k < JX_PARAM_INTS)
      put(b, "%lld", (long long)e->params.i[k]);
    else if (slot[0] == 'f' && k < JX_PARAM_FLOATS)
      put(b, "%.9g", e->params.f[k]);
    else if (slot[0] == 'l' && k < JX_PARAM_LISTS) {
      const jx_ilist *l = &e->params.l[k];
      put(b, "(");
      for (int i = 0; i < l->n; i++) put(b, i ? ", %lld" : "%lld", (long long)l->v[i]);
      put(b, l->n == 1 ? ",)" : ")");
    } else if (strcmp(slot, "dtype") == 0 || strcmp(slot, "dt") == 0)
      put(b, "%s", jx_dtype_name(e->params.dtype));
    else
      put(b, "?");
    spec = end;
  }
  if (!first) put(b, "]");
}

static void print_program(printer *b, const jx_program *p, int indent);

static void print_eqn(printer *b, const jx_program *p, const jx_eqn *e, int indent) {
  put(b, "%*s", indent + 4, "");
  for (int o = 0; o < e->nout; o++) {
    if (o) put(b, " ");
    put_binder(b, p, e->out[o]);
  }
  put(b, " = %s", e->prim->name);
  put_params(b, e);
  for (int i = 0; i < e->nin; i++) {
    put(b, " ");
    put_use(b, p, e->in[i]);
  }
  put(b, "\n");
  for (int s = 0; s < e->nsub; s++) {
    put(b, "%*s  sub%d=", indent + 4, "", s);
    print_program(b, e->sub[s], indent + 8);
    put(b, "\n");
  }
}

/* Numbers the variables a, b, c, ... in the order they are bound in the
 * text, skipping literals, as JAX does. */
static int *number_vars(const jx_program *p) {
  int *names = malloc(sizeof *names * (size_t)(p->nvars + 1));
  if (!names) return NULL;
  int next = 0;
  for (int v = 0; v < p->nvars; v++) names[v] = v;
  for (int c = 0; c < p->nconst; c++)
    if (!is_literal(p, p->constvar[c])) names[p->constvar[c]] = next++;
  for (int i = 0; i < p->nin; i++) names[p->in[i]] = next++;
  for (int k = 0; k < p->neqns; k++)
    for (int o = 0; o < p->eqns[k].nout; o++) names[p->eqns[k].out[o]] = next++;
  return names;
}

static void print_program(printer *b, const jx_program *p, int indent) {
  int *outer_names = b->names;
  b->names = number_vars(p);
  put(b, "{ lambda ");
  for (int c = 0; c < p->nconst; c++)
    if (!is_literal(p, p->constvar[c])) {
      put_binder(b, p, p->constvar[c]);
      put(b, " ");
    }
  put(b, ";");
  for (int i = 0; i < p->nin; i++) {
    put(b, " ");
    put_binder(b, p, p->in[i]);
  }
  put(b, ". let\n");
  for (int i = 0; i < p->neqns; i++) print_eqn(b, p, &p->eqns[i], indent);
  put(b, "%*sin (", indent + 2, "");
  for (int o = 0; o < p->nout; o++) {
    if (o) put(b, ", ");
    put_use(b, p, p->out[o]);
  }
  put(b, "%s) }", p->nout == 1 ? "," : "");
  free(b->names);
  b->names = outer_names;
}

char *jx_program_print(const jx_program *p) {
  printer b = {0};
  print_program(&b, p, 0);
  put(&b, "\n");
  return jx_strbuf_take(&b.text, "program printer");
}
