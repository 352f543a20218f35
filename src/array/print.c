/* jx_format / jx_print: the text of str(numpy_array) with NumPy's default
 * print options (precision 8, floatmode 'maxprec', linewidth 75, threshold
 * 1000, edgeitems 3). The dtype is not appended (str, not repr): callers that
 * want it use jx_aval_str. Differences from NumPy, on purpose:
 *   - bf16 prints like the other floats (shortest digits that round-trip in
 *     bf16); ml_dtypes' own str of bf16 arrays is not NumPy-like.
 *   - a poisoned array prints "<poisoned array>", NULL "<null array>".
 * Complex arrays print as NumPy's ComplexFloatingFormat: the real parts and
 * the imaginary parts each get a float format of their own (the imaginary
 * one with an explicit sign), an element is the two side by side with 'j'.
 * The algorithm follows numpy/_core/arrayprint.py (FloatingFormat,
 * _formatArray, _extendLine): every element gets one width, decided from the
 * elements that are shown, then rows wrap at the line width. */
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "array.h"

enum { LINE_WIDTH = 75, THRESHOLD = 1000, EDGE = 3, PRECISION = 8 };

/* ---- a growable string; on out-of-memory it stops growing and stays valid ---- */
typedef struct {
  char *s;
  size_t len, cap;
  int oom;
} sbuf;

static void sb_putn(sbuf *b, const char *s, size_t n) {
  if (b->oom) return;
  if (b->len + n + 1 > b->cap) {
    size_t cap = b->cap ? b->cap : 128;
    while (cap < b->len + n + 1) cap *= 2;
    char *p = realloc(b->s, cap);
    if (!p) {
      b->oom = 1;
      return;
    }
    b->s = p;
    b->cap = cap;
  }
  memcpy(b->s + b->len, s, n);
  b->len += n;
  b->s[b->len] = '\0';
}
static void sb_puts(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }
static void sb_pad(sbuf *b, int n) {
  for (int i = 0; i < n; i++) sb_putn(b, " ", 1);
}

/* ---- floats ---- */

/* 1 if the decimal text s reads back as exactly v in dtype dt. */
static int round_trips(const char *s, double v, jx_dtype dt) {
  double r = strtod(s, NULL);
  switch (dt) {
  case JX_F32: return strtof(s, NULL) == (float)v;
  case JX_F16: return jx_f64_to_f16(r) == jx_f64_to_f16(v);
  case JX_BF16: return jx_f64_to_bf16(r) == jx_f64_to_bf16(v);
  default: return r == v;
  }
}

/* Number of significant digits of the shortest decimal that round-trips
 * (Dragon4's "unique" mode) for a finite non-zero v, and its decimal exponent
 * (rounding may carry into it: f32 9.9999997e-05 is 1e-04). */
static int shortest_sig(double v, jx_dtype dt, int *exp10) {
  char t[40];
  int p = 1;
  for (; p < 17; p++) {
    snprintf(t, sizeof t, "%.*e", p - 1, v);
    if (round_trips(t, v, dt)) break;
  }
  if (p == 17) snprintf(t, sizeof t, "%.16e", v);
  *exp10 = atoi(strchr(t, 'e') + 1);
  return p;
}

/* Fraction digits of v in positional form: unique, capped at cap (-1: none). */
static int frac_digits(double v, jx_dtype dt, int cap) {
  if (v == 0) return 0;
  int e;
  int fd = shortest_sig(v, dt, &e) - 1 - e;
  if (fd < 0) fd = 0;
  return cap >= 0 && fd > cap ? cap : fd;
}

/* Positional text: int part and fraction (trailing zeros trimmed). */
static void positional(double v, jx_dtype dt, int cap, char *ip, char *fp) {
  char t[400];
  snprintf(t, sizeof t, "%.*f", frac_digits(v, dt, cap), v);
  char *dot = strchr(t, '.');
  if (dot) *dot = '\0';
  strcpy(ip, t);
  fp[0] = '\0';
  if (dot) {
    strcpy(fp, dot + 1);
    size_t n = strlen(fp);
    while (n > 0 && fp[n - 1] == '0') fp[--n] = '\0';
  }
}

/* Scientific text: int part, fraction (trimmed) and exponent (as an int). */
static void scientific(double v, jx_dtype dt, int cap, char *ip, char *fp, int *ex) {
  int e10, fd = v == 0 ? 0 : shortest_sig(v, dt, &e10) - 1;
  if (cap >= 0 && fd > cap) fd = cap;
  char t[64];
  snprintf(t, sizeof t, "%.*e", fd, v);
  char *e = strchr(t, 'e');
  *ex = atoi(e + 1);
  *e = '\0';
  char *dot = strchr(t, '.');
  if (dot) *dot = '\0';
  strcpy(ip, t);
  fp[0] = '\0';
  if (dot) {
    strcpy(fp, dot + 1);
    size_t n = strlen(fp);
    while (n > 0 && fp[n - 1] == '0') fp[--n] = '\0';
  }
}

static int exp_len(int ex) {
  int a = ex < 0 ? -ex : ex, n = 1;
  while (a >= 10) a /= 10, n++;
  return n < 2 ? 2 : n;
}

/* ---- the per-array element format (NumPy's FloatingFormat / IntegerFormat) ---- */
typedef struct {
  jx_dtype dt; /* of the values formatted: a complex array's part dtype */
  int kind;    /* 0 bool, 1 signed, 2 unsigned, 3 float */
  int width;   /* integers and bools */
  int exp_format, pad_left, pad_right, precision, exp_size;
  int cplx, part; /* a complex array: 0 formats the real parts, 1 the imaginary ones
                     (with NumPy's sign='+') */
} elem_fmt;

/* The float value at flat index i that format f formats. */
static double fmt_value(const elem_fmt *f, const void *data, int64_t i) {
  return jx_load_f64(data, f->dt, f->cplx ? 2 * i + f->part : i);
}

typedef struct {
  const jx_array *a;
  const void *data;
  int64_t strides[JX_MAX_RANK];
  int summarize;
  elem_fmt f, fi; /* fi: the imaginary parts' format of a complex array */
  /* statistics gathered over the shown elements */
  int64_t n_finite;
  double max_abs, min_abs; /* over finite non-zero values */
  int any_nonzero, any_neg_inf, any_nonfinite, any_signbit;
  int64_t imin, imax;
  uint64_t umax;
} printer;

/* Calls fn on the flat index of every shown element (edge items when summarizing). */
static void visit(printer *p, int axis, int64_t off, void (*fn)(printer *, int64_t)) {
  jx_shape s = p->a->shape;
  if (axis == s.rank) {
    fn(p, off);
    return;
  }
  int64_t n = s.dims[axis];
  for (int64_t i = 0; i < n; i++) {
    if (p->summarize && n > 2 * EDGE && i == EDGE) i = n - EDGE;
    visit(p, axis + 1, off + i * p->strides[axis], fn);
  }
}

static void gather_stats(printer *p, int64_t i) {
  jx_dtype dt = p->f.dt;
  if (p->f.kind == 1) {
    int64_t v = jx_load_i64(p->data, dt, i);
    if (v < p->imin) p->imin = v;
    if (v > p->imax) p->imax = v;
  } else if (p->f.kind == 2) {
    uint64_t v = jx_load_u64(p->data, dt, i);
    if (v > p->umax) p->umax = v;
  } else if (p->f.kind == 3) {
    double v = fmt_value(&p->f, p->data, i);
    if (!isfinite(v)) {
      p->any_nonfinite = 1;
      if (isinf(v) && v < 0) p->any_neg_inf = 1;
      return;
    }
    p->n_finite++;
    if (signbit(v)) p->any_signbit = 1;
    double av = fabs(v);
    if (av != 0) {
      if (!p->any_nonzero || av > p->max_abs) p->max_abs = av;
      if (!p->any_nonzero || av < p->min_abs) p->min_abs = av;
      p->any_nonzero = 1;
    }
  }
}

static void float_widths(printer *p, int64_t i) {
  double v = fmt_value(&p->f, p->data, i);
  if (!isfinite(v)) return;
  char ip[400], fp[400];
  int pl;
  if (p->f.exp_format) {
    int ex;
    scientific(v, p->f.dt, PRECISION, ip, fp, &ex);
    if (exp_len(ex) > p->f.exp_size) p->f.exp_size = exp_len(ex);
  } else {
    positional(v, p->f.dt, PRECISION, ip, fp);
  }
  pl = (int)strlen(ip) + (p->f.part && !signbit(v)); /* the imaginary part's '+' */
  if (pl > p->f.pad_left) p->f.pad_left = pl;
  if ((int)strlen(fp) > p->f.precision) p->f.precision = (int)strlen(fp);
}

static int int_len(int64_t v) {
  char t[32];
  return snprintf(t, sizeof t, "%lld", (long long)v);
}

/* Fills p->f for the values of `part` (0 for real arrays); statistics start afresh. */
static void setup_format(printer *p, int part) {
  elem_fmt *f = &p->f;
  *f = (elem_fmt){
      .dt = jx_complex_part(p->a->dtype), .cplx = jx_is_complex(p->a->dtype), .part = part};
  p->n_finite = 0;
  p->max_abs = p->min_abs = 0;
  p->any_nonzero = p->any_neg_inf = p->any_nonfinite = p->any_signbit = 0;
  jx_kind k = jx_dtype_kind(f->dt);
  f->kind = k == JX_KIND_BOOL ? 0 : k == JX_KIND_INT ? 1 : k == JX_KIND_UINT ? 2 : 3;
  p->imin = INT64_MAX;
  p->imax = INT64_MIN;
  visit(p, 0, 0, gather_stats);
  if (f->kind == 0) {
    f->width = 5;
  } else if (f->kind == 1) {
    int a = int_len(p->imin), b = int_len(p->imax);
    f->width = a > b ? a : b;
  } else if (f->kind == 2) {
    char t[32];
    f->width = snprintf(t, sizeof t, "%llu", (unsigned long long)p->umax);
  } else {
    f->exp_format = p->any_nonzero &&
                    (p->max_abs >= 1e8 || p->min_abs < 1e-4 || p->max_abs / p->min_abs > 1000.);
    if (p->n_finite > 0) visit(p, 0, 0, float_widths);
    f->pad_right = f->exp_format ? f->exp_size + 2 + f->precision : f->precision;
    if (p->any_nonfinite) { /* room for "nan", "inf", "-inf" ("+nan", "+inf" signed) */
      int offset = f->pad_right + 1;
      int need = 3 + (part ? 1 : p->any_neg_inf) - offset;
      if (need > f->pad_left) f->pad_left = need;
    }
  }
}

/* One element, padded to the common width. */
static void put_elem(sbuf *b, const elem_fmt *f, const void *data, int64_t i) {
  char t[64];
  switch (f->kind) {
  case 0: sb_puts(b, jx_load_i64(data, f->dt, i) ? " True" : "False"); return;
  case 1:
    snprintf(t, sizeof t, "%*lld", f->width, (long long)jx_load_i64(data, f->dt, i));
    sb_puts(b, t);
    return;
  case 2:
    snprintf(t, sizeof t, "%*llu", f->width, (unsigned long long)jx_load_u64(data, f->dt, i));
    sb_puts(b, t);
    return;
  }
  double v = fmt_value(f, data, i);
  const char *plus = f->part && !signbit(v) ? "+" : "";
  if (!isfinite(v)) {
    const char *s = isnan(v)  ? (f->part ? "+nan" : "nan")
                    : v < 0   ? "-inf"
                    : f->part ? "+inf"
                              : "inf";
    sb_pad(b, f->pad_left + f->pad_right + 1 - (int)strlen(s));
    sb_puts(b, s);
    return;
  }
  char ip[400], fp[400];
  if (f->exp_format) {
    /* every element with the same number of digits, taken from the exact value
     * (Dragon4's min_digits), not zero-padded */
    snprintf(t, sizeof t, "%.*e", f->precision, v);
    char *e = strchr(t, 'e');
    int ex = atoi(e + 1);
    *e = '\0';
    char *dot = strchr(t, '.');
    if (dot) *dot = '\0';
    sb_pad(b, f->pad_left - (int)strlen(plus) - (int)strlen(t));
    sb_puts(b, plus);
    sb_puts(b, t);
    sb_puts(b, ".");
    if (dot) sb_puts(b, dot + 1);
    snprintf(t, sizeof t, "e%c%0*d", ex < 0 ? '-' : '+', f->exp_size, ex < 0 ? -ex : ex);
    sb_puts(b, t);
  } else {
    positional(v, f->dt, PRECISION, ip, fp);
    sb_pad(b, f->pad_left - (int)strlen(plus) - (int)strlen(ip));
    sb_puts(b, plus);
    sb_puts(b, ip);
    sb_puts(b, ".");
    sb_puts(b, fp);
    sb_pad(b, f->pad_right - (int)strlen(fp));
  }
}

/* A complex element: the real part, then the imaginary part with 'j' after
 * its last character and its padding after that (NumPy's
 * ComplexFloatingFormat). */
static void put_complex(sbuf *b, const elem_fmt *re, const elem_fmt *im, const void *data,
                        int64_t i) {
  put_elem(b, re, data, i);
  sbuf t = {0};
  put_elem(&t, im, data, i);
  if (t.oom) {
    b->oom = 1;
    return;
  }
  size_t n = t.len;
  while (n > 0 && t.s[n - 1] == ' ') n--;
  sb_putn(b, t.s, n);
  sb_puts(b, "j");
  sb_pad(b, (int)(t.len - n));
  free(t.s);
}

/* ---- layout: NumPy's _formatArray with separator ' ' and prefix "" ---- */

/* Appends word to line, first moving line into s when it would pass width. */
static void extend_line(sbuf *s, sbuf *line, const char *word, size_t width, size_t indent) {
  size_t wl = strlen(word);
  if (line->len + wl > width && line->len > indent) {
    size_t n = line->len;
    while (n > 0 && line->s[n - 1] == ' ') n--;
    sb_putn(s, line->s, n);
    sb_puts(s, "\n");
    line->len = 0;
    sb_pad(line, (int)indent);
  }
  sb_puts(line, word);
}

static char *recurse(printer *p, int axis, int64_t off, int indent, int width);

/* Text of position i along `axis`: an element, or the subarray starting after
 * `indent` columns and fitting in `width`. */
static char *sub_text(printer *p, int axis, int64_t off, int64_t i, int indent, int width) {
  if (axis + 1 == p->a->shape.rank) {
    sbuf e = {0};
    if (p->f.cplx)
      put_complex(&e, &p->f, &p->fi, p->data, off + i * p->strides[axis]);
    else
      put_elem(&e, &p->f, p->data, off + i * p->strides[axis]);
    return e.oom ? NULL : e.s;
  }
  return recurse(p, axis + 1, off + i * p->strides[axis], indent, width);
}

/* "[...]" for the subarray at off spanning axes axis.., which starts after
 * `indent` columns (the hanging indent) and must fit in `width`. */
static char *recurse(printer *p, int axis, int64_t off, int indent, int width) {
  int64_t n = p->a->shape.dims[axis];
  int axes_left = p->a->shape.rank - axis;
  int summary = p->summarize && n > 2 * EDGE;
  int64_t lead = summary ? EDGE : 0, trail_from = summary ? n - EDGE : 0;
  sbuf s = {0}, line = {0};
  if (axes_left == 1) {
    size_t elem_width = (size_t)width - 1; /* max(len(' '.rstrip()), len(']')) */
    sb_pad(&line, indent);
    for (int64_t i = 0; i < n; i++) {
      if (summary && i == lead) {
        extend_line(&s, &line, "...", elem_width, (size_t)indent);
        sb_puts(&line, " ");
        i = trail_from;
      }
      char *w = sub_text(p, axis, off, i, indent + 1, width - 1);
      extend_line(&s, &line, w ? w : "", elem_width, (size_t)indent);
      free(w);
      if (i + 1 < n) sb_puts(&line, " ");
    }
    if (line.s) sb_putn(&s, line.s, line.len);
  } else {
    for (int64_t i = 0; i < n; i++) {
      if (summary && i == lead) {
        sb_pad(&s, indent);
        sb_puts(&s, "...");
        for (int k = 0; k < axes_left - 1; k++) sb_puts(&s, "\n");
        i = trail_from;
      }
      char *w = sub_text(p, axis, off, i, indent + 1, width - 1);
      sb_pad(&s, indent);
      sb_puts(&s, w ? w : "");
      free(w);
      if (i + 1 < n)
        for (int k = 0; k < axes_left - 1; k++) sb_puts(&s, "\n");
    }
  }
  free(line.s);
  /* drop the hanging indent of the first line and add the brackets */
  sbuf out = {0};
  sb_puts(&out, "[");
  if (s.s && s.len >= (size_t)indent) sb_putn(&out, s.s + indent, s.len - (size_t)indent);
  sb_puts(&out, "]");
  int oom = s.oom || out.oom;
  free(s.s);
  if (oom) {
    free(out.s);
    return NULL;
  }
  return out.s;
}

/* One part of a complex scalar as NumPy writes it: shortest digits, no
 * trailing ".0" ("1", "1.5", "1e+20"), a '+' before a non-negative value
 * when `plus`. */
static void complex_part_text(double v, jx_dtype dt, int plus, char *t, size_t cap) {
  char ip[400], fp[400];
  const char *sg = plus && !signbit(v) ? "+" : "";
  if (!isfinite(v)) {
    snprintf(t, cap, "%s%s", isnan(v) ? sg : v < 0 ? "-" : sg, isnan(v) ? "nan" : "inf");
  } else if (fabs(v) < 1e16 && (v == 0 || fabs(v) >= 1e-4)) {
    positional(v, dt, -1, ip, fp);
    snprintf(t, cap, "%s%s%s%s", sg, ip, fp[0] ? "." : "", fp);
  } else {
    int ex;
    scientific(v, dt, -1, ip, fp, &ex);
    snprintf(t, cap, "%s%s%s%se%c%02d", sg, ip, fp[0] ? "." : "", fp, ex < 0 ? '-' : '+',
             ex < 0 ? -ex : ex);
  }
}

/* A 0-d array prints as str() of a NumPy scalar of its dtype. */
static char *scalar_text(const jx_array *a) {
  char t[1700];
  jx_dtype dt = a->dtype;
  const void *d = jx_array_data(a);
  switch (jx_dtype_kind(dt)) {
  case JX_KIND_BOOL: snprintf(t, sizeof t, "%s", jx_load_i64(d, dt, 0) ? "True" : "False"); break;
  case JX_KIND_INT: snprintf(t, sizeof t, "%lld", (long long)jx_load_i64(d, dt, 0)); break;
  case JX_KIND_UINT:
    snprintf(t, sizeof t, "%llu", (unsigned long long)jx_load_u64(d, dt, 0));
    break;
  case JX_KIND_FLOAT: {
    double v = jx_load_f64(d, dt, 0);
    char ip[400], fp[400];
    if (!isfinite(v)) {
      snprintf(t, sizeof t, "%s", isnan(v) ? "nan" : v < 0 ? "-inf" : "inf");
    } else if (fabs(v) < 1e16 && (v == 0 || fabs(v) >= 1e-4)) {
      positional(v, dt, -1, ip, fp); /* trim to one zero: "1.0" */
      snprintf(t, sizeof t, "%s.%s", ip, fp[0] ? fp : "0");
    } else {
      int ex;
      scientific(v, dt, -1, ip, fp, &ex); /* "1e+20", "1.5e-05" */
      snprintf(t, sizeof t, "%s%s%se%c%02d", ip, fp[0] ? "." : "", fp, ex < 0 ? '-' : '+',
               ex < 0 ? -ex : ex);
    }
    break;
  }
  case JX_KIND_COMPLEX: { /* "(1+2j)"; "2j" when the real part is +0 */
    jx_dtype pd = jx_complex_part(dt);
    double re = jx_load_f64(d, pd, 0), im = jx_load_f64(d, pd, 1);
    char rs[840], is[840];
    complex_part_text(re, pd, 0, rs, sizeof rs);
    complex_part_text(im, pd, !(re == 0 && !signbit(re)), is, sizeof is);
    if (re == 0 && !signbit(re))
      snprintf(t, sizeof t, "%sj", is);
    else
      snprintf(t, sizeof t, "(%s%sj)", rs, is);
    break;
  }
  }
  return strdup(t);
}

char *jx_format(const jx_array *a) {
  if (!a) return strdup("<null array>");
  if (a->poisoned || jx_array_ready((jx_array *)a)) return strdup("<poisoned array>");
  if (!a->buf) return strdup("<tracer>");
  if (a->shape.rank == 0) return scalar_text(a);
  if (jx_shape_numel(a->shape) == 0) return strdup("[]");
  printer p = {.a = a, .data = jx_array_data(a)};
  jx_shape_strides(a->shape, p.strides);
  p.summarize = jx_shape_numel(a->shape) > THRESHOLD;
  if (jx_is_complex(a->dtype)) {
    setup_format(&p, 1);
    p.fi = p.f;
  }
  setup_format(&p, 0);
  return recurse(&p, 0, 0, 1, LINE_WIDTH); /* the hanging indent of str() is " " */
}

void jx_print(const jx_array *a, FILE *f) {
  char *s = jx_format(a);
  if (!f) f = stdout;
  fprintf(f, "%s\n", s ? s : "<out of memory>");
  free(s);
}
