/* The kernel renderer: what every dialect shares (see render.h), and the C
 * dialect. Each member is its primitive's lowering (prim_lowering.h), whose
 * expressions mirror the reference kernels in src/prims exactly, so a fused
 * kernel gives the bits the reference gives. */
#include "render_c.h"

#include <stdlib.h>
#include <string.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../base/strbuf.h"
#include "../prims/complex_special.h"
#include "prim_lowering.h"
#include "render.h"

/* src/prims/fastmath.h's text, as bytes (CMake writes the .inc at configure
 * time): every kernel starts with the f32 functions the reference kernels
 * use, so eager and jit give the same bits without two copies to keep in
 * step. */
static const char fastmath_src[] = {
#include "jx_fastmath_src.inc"
    0};

/* The helpers every dialect's kernels use, after the dialect's header
 * (which defines JX_FN, the qualifier of a helper function). */
static const char shared_prelude[] =
    "#define JX_FMAX(a, b) (((a) != (a) || (a) > (b) || ((a) == (b) && signbit(b))) ? (a) : (b))\n"
    "#define JX_FMIN(a, b) (((a) != (a) || (a) < (b) || ((a) == (b) && signbit(a))) ? (a) : (b))\n"
    "JX_FN double jx_logistic_d(double x) {\n"
    "  return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x));\n}\n"
    "#define JX_IPOW(T)                                                  \\\n"
    "  JX_FN T jx_ipow_##T(T x, int64_t e) {                            \\\n"
    "    int recip = e < 0;                                              \\\n"
    "    uint64_t m = recip ? (uint64_t)0 - (uint64_t)e : (uint64_t)e;   \\\n"
    "    T acc = 1;                                                      \\\n"
    "    int first = 1;                                                  \\\n"
    "    while (m) {                                                     \\\n"
    "      if (m & 1) {                                                  \\\n"
    "        acc = first ? x : acc * x;                                  \\\n"
    "        first = 0;                                                  \\\n"
    "      }                                                             \\\n"
    "      m >>= 1;                                                      \\\n"
    "      if (m) x = x * x;                                             \\\n"
    "    }                                                               \\\n"
    "    return recip ? (T)1 / acc : acc;                                \\\n"
    "  }\n"
    "JX_IPOW(float)\n"
    "JX_IPOW(double)\n"
    /* NumPy's pairwise tree over n columns (src/prims/reduce.c), walked
     * without recursion: jx_pw_leaf_T gives the next leaf [s, s + n) of at
     * most 128 columns, jx_pw_done_T takes its sum and adds finished
     * subtrees as the recursion would; pw.result is the total. */
    "JX_FN int64_t jx_pw_half(int64_t n) {\n  int64_t h = n / 2;\n  return h - h % 8;\n}\n"
    "#define JX_PW(T)                                                                    \\\n"
    "  typedef struct {                                                                 \\\n"
    "    int64_t s[64], n[64];                                                          \\\n"
    "    int ph[64], top;                                                               \\\n"
    "    T left[64], result;                                                            \\\n"
    "  } jx_pw_##T;                                                                     \\\n"
    "  JX_FN void jx_pw_init_##T(jx_pw_##T *p, int64_t n) {                             \\\n"
    "    p->top = 0;                                                                    \\\n"
    "    p->s[0] = 0;                                                                   \\\n"
    "    p->n[0] = n;                                                                   \\\n"
    "    p->ph[0] = 0;                                                                  \\\n"
    "    p->result = 0;                                                                 \\\n"
    "  }                                                                                \\\n"
    "  JX_FN int jx_pw_leaf_##T(jx_pw_##T *p, int64_t *s, int64_t *n) {                 \\\n"
    "    while (p->top >= 0) {                                                          \\\n"
    "      int t = p->top;                                                              \\\n"
    "      if (p->n[t] <= 128) {                                                        \\\n"
    "        *s = p->s[t];                                                              \\\n"
    "        *n = p->n[t];                                                              \\\n"
    "        return 1;                                                                  \\\n"
    "      }                                                                            \\\n"
    "      p->ph[t] = 1;                                                                \\\n"
    "      p->s[t + 1] = p->s[t];                                                       \\\n"
    "      p->n[t + 1] = jx_pw_half(p->n[t]);                                           \\\n"
    "      p->ph[t + 1] = 0;                                                            \\\n"
    "      p->top = t + 1;                                                              \\\n"
    "    }                                                                              \\\n"
    "    return 0;                                                                      \\\n"
    "  }                                                                                \\\n"
    "  JX_FN void jx_pw_done_##T(jx_pw_##T *p, T v) {                                   \\\n"
    "    p->top--;                                                                      \\\n"
    "    while (p->top >= 0) {                                                          \\\n"
    "      int t = p->top;                                                              \\\n"
    "      if (p->ph[t] == 1) {                                                         \\\n"
    "        int64_t h = jx_pw_half(p->n[t]);                                           \\\n"
    "        p->left[t] = v;                                                            \\\n"
    "        p->ph[t] = 2;                                                              \\\n"
    "        p->s[t + 1] = p->s[t] + h;                                                 \\\n"
    "        p->n[t + 1] = p->n[t] - h;                                                 \\\n"
    "        p->ph[t + 1] = 0;                                                          \\\n"
    "        p->top = t + 1;                                                            \\\n"
    "        return;                                                                    \\\n"
    "      }                                                                            \\\n"
    "      v = p->left[t] + v;                                                          \\\n"
    "      p->top--;                                                                    \\\n"
    "    }                                                                              \\\n"
    "    p->result = v;                                                                 \\\n"
    "  }\n"
    "JX_PW(float)\n"
    "JX_PW(double)\n"
    /* The same tree over the rows of a column reduction, as indices only: a
     * kernel keeps a stack of per-column partial sums, pushes each leaf's,
     * and after it adds the top two jx_pwi_done times (left + right, as the
     * recursion adds a node's halves). */
    "typedef struct {\n  int64_t s[64], n[64];\n  int ph[64], top;\n} jx_pwi;\n"
    "JX_FN void jx_pwi_init(jx_pwi *p, int64_t n) {\n"
    "  p->top = 0;\n  p->s[0] = 0;\n  p->n[0] = n;\n  p->ph[0] = 0;\n}\n"
    "JX_FN int jx_pwi_leaf(jx_pwi *p, int64_t *s, int64_t *n) {\n"
    "  while (p->top >= 0) {\n"
    "    int t = p->top;\n"
    "    if (p->n[t] <= 128) {\n      *s = p->s[t];\n      *n = p->n[t];\n      return 1;\n    }\n"
    "    p->ph[t] = 1;\n    p->s[t + 1] = p->s[t];\n    p->n[t + 1] = jx_pw_half(p->n[t]);\n"
    "    p->ph[t + 1] = 0;\n    p->top = t + 1;\n"
    "  }\n  return 0;\n}\n"
    "JX_FN int jx_pwi_done(jx_pwi *p) {\n"
    "  int adds = 0;\n"
    "  p->top--;\n"
    "  while (p->top >= 0) {\n"
    "    int t = p->top;\n"
    "    if (p->ph[t] == 1) {\n"
    "      int64_t h = jx_pw_half(p->n[t]);\n"
    "      p->ph[t] = 2;\n      p->s[t + 1] = p->s[t] + h;\n      p->n[t + 1] = p->n[t] - h;\n"
    "      p->ph[t + 1] = 0;\n      p->top = t + 1;\n      return adds;\n"
    "    }\n"
    "    adds++;\n    p->top--;\n"
    "  }\n  return adds;\n}\n";

/* The C dialect: a plain function over rows [row_begin, row_end) and the
 * columns [col_begin, col_end) of each, so the executable can split work
 * across the thread pool by rows or, for few long rows, by columns; the
 * inner loop vectorizes. */
const jx_dialect jx_dialect_c = {
    .name = "C",
    .header = "#include <complex.h>\n"
              "#include <math.h>\n"
              "#include <stdint.h>\n"
              "#define JX_FN static inline\n",
    /* C99's complex types: the reference kernels' own arithmetic and
     * <complex.h> functions, so a fused complex kernel gives their bits */
    .complex_prelude = "typedef float _Complex jx_c64;\n"
                       "typedef double _Complex jx_c128;\n"
                       /* re + i im exactly (glibc's CMPLXF is C11 under gcc only) */
                       "JX_FN jx_c64 jx_cmplxf(float re, float im) {\n"
                       "  union { float p[2]; jx_c64 z; } u = {{re, im}};\n  return u.z;\n}\n"
                       "JX_FN jx_c128 jx_cmplx(double re, double im) {\n"
                       "  union { double p[2]; jx_c128 z; } u = {{re, im}};\n  return u.z;\n}\n"
                       "JX_IPOW(jx_c64)\n"
                       "JX_IPOW(jx_c128)\n"
                       "JX_PW(jx_c64)\n"
                       "JX_PW(jx_c128)\n" JX_COMPLEX_SPECIAL_TEXT(jx_c64, float, f)
                           JX_COMPLEX_SPECIAL_TEXT(jx_c128, double, ),
    .complex_kernel_open = "#pragma GCC push_options\n"
                           "#pragma GCC optimize(\"no-tree-slp-vectorize\")\n",
    .complex_kernel_close = "#pragma GCC pop_options\n",
    .signature = "void %s(char **buf, const int64_t *dims, const int64_t *strides, int64_t "
                 "row_begin,\n        int64_t row_end, int64_t col_begin, int64_t col_end) {\n",
    .buf = "buf",
    .dims = "dims",
    .strides = "strides",
    .row_loop = "for (int64_t row = row_begin; row < row_end; row++) {",
    /* the buffers never overlap (every store is a fresh array): say so, or gcc
     * gives up on loops with more than 10 load/store pairs to check at run time */
    .col_loop = "\n#if defined(__clang__)\n#pragma clang loop vectorize(assume_safety)\n"
                "#elif defined(__GNUC__)\n#pragma GCC ivdep\n#endif\n"
                "    for (int64_t j = col_begin; j < col_end; j++) {",
    .restrict_kw = "restrict",
    /* 1024 columns: 4-8 KiB of each row at a time, whole pages that the
     * prefetchers follow down the rows (256-column pieces of long rows ran
     * at a fraction of the memory bandwidth: each row's piece started cold
     * and the prefetchers fetched the rest of its page for nothing); the
     * stack of partial sums (JX_FUSION_COL_DEPTH levels) takes 160-320 KiB,
     * of which a call touches one level per level of its tree */
    .col_block = 1024,
    .col_block_loop = "for (int64_t c0 = col_begin; c0 < col_end; c0 += 1024) {\n"
                      "      const int64_t cw = col_end - c0 < 1024 ? col_end - c0 : 1024;",
    .vector_hint = "\n#if defined(__clang__)\n#pragma clang loop vectorize(assume_safety)\n"
                   "#elif defined(__GNUC__)\n#pragma GCC ivdep\n#endif\n",
    .red_range = 1,
};

/* The type a kernel computes a value of dtype d in (bf16 in float; complex
 * in the dialect's jx_c64 / jx_c128; integers, which only the CUDA dialect
 * renders, in their own) ... */
static const char *ctype(jx_dtype d) {
  switch (d) {
  case JX_F32:
  case JX_BF16: return "float";
  case JX_F64: return "double";
  case JX_C64: return "jx_c64";
  case JX_C128: return "jx_c128";
  case JX_I8: return "int8_t";
  case JX_I16: return "int16_t";
  case JX_I32: return "int32_t";
  case JX_I64: return "int64_t";
  case JX_U16: return "uint16_t";
  case JX_U32: return "uint32_t";
  case JX_U64: return "uint64_t";
  default: return "uint8_t";
  }
}
/* ... and the type it is stored as. */
static const char *stype(jx_dtype d) { return d == JX_BF16 ? "uint16_t" : ctype(d); }
/* The conversion a computed value (ctype) takes to be stored (stype): a
 * bf16 result, a float until then, rounds once here. */
static const char *bf16_store(jx_dtype d) { return d == JX_BF16 ? "jx_f32_bf16" : ""; }

/* Dimension d of the group's shape as the kernel reads it: a number where
 * the dialect writes dims in (literal_dims_from), else its dims argument. */
typedef struct {
  char s[40];
} dim_text;
static dim_text dim_of(const jx_dialect *dl, const jx_fusion_group *g, int d) {
  dim_text t;
  if (dl->literal_dims_from > 0 && jx_shape_numel(g->shape) >= dl->literal_dims_from &&
      d < g->shape.rank)
    snprintf(t.s, sizeof t.s, "(int64_t)%lld", (long long)g->shape.dims[d]);
  else
    snprintf(t.s, sizeof t.s, "%s[%d]", dl->dims, d);
  return t;
}

/* Writes the expression template with %k replaced by operand names. */
static void put_expr(jx_strbuf *b, const char *tmpl, char names[][24]) {
  for (const char *c = tmpl; *c; c++) {
    if (*c == '%' && c[1] >= '0' && c[1] <= '9') {
      jx_strbuf_appendf(b, "%s", names[c[1] - '0']);
      c++;
    } else {
      jx_strbuf_append(b, c, 1);
    }
  }
}

/* bf16 in kernels: loaded into floats, every result rounded as the
 * reference kernels round it (jx_f32_to_bf16: to nearest even, NaN to the
 * canonical quiet NaN with its sign), so that a fused bf16 kernel gives the
 * bits of the equations run one at a time. After fastmath's jx_fm_bits. */
static const char bf16_prelude[] =
    "JX_FN uint16_t jx_f32_bf16(float x) {\n"
    "  uint32_t u = jx_fm_bits(x);\n"
    "  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)(((u >> 16) & 0x8000u) | 0x7fc0u);\n"
    "  return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);\n}\n"
    "JX_FN float jx_bf16_f32(uint16_t h) { return jx_fm_float((uint32_t)h << 16); }\n"
    "JX_FN float jx_round_bf16(float x) { return jx_bf16_f32(jx_f32_bf16(x)); }\n";

char *jx_render_prelude(const jx_dialect *d) {
  jx_strbuf b = JX_STRBUF_INIT;
  jx_strbuf_appendf(&b, "%s%s\n%s\n%s%s", d->header, shared_prelude, fastmath_src, bf16_prelude,
                    d->complex_prelude ? d->complex_prelude : "");
  return jx_strbuf_take(&b, "render");
}

/* "(a * b)", malloc'ed; NULL when out of memory (a and b may be NULL too). */
static char *product_text(const char *a, const char *b) {
  if (!a || !b) return NULL;
  size_t n = strlen(a) + strlen(b) + 6;
  char *t = malloc(n);
  if (t) snprintf(t, n, "(%s * %s)", a, b);
  return t;
}

/* x^e as the products jx_ipow_T forms (binary powering, the same order of
 * rounding), written out so that the loop around it vectorizes; a large
 * exponent calls jx_ipow_T instead of growing the expression. */
static void put_ipow(jx_strbuf *b, const char *t, const char *x, int64_t e) {
  uint64_t m = e < 0 ? (uint64_t)0 - (uint64_t)e : (uint64_t)e;
  char *acc = NULL, *sq = m && m <= 16 ? strdup(x) : NULL;
  for (; sq && m; m >>= 1) {
    if (m & 1) {
      char *next = acc ? product_text(acc, sq) : strdup(sq);
      free(acc);
      acc = next;
      if (!acc) break;
    }
    if (m > 1) {
      char *next = product_text(sq, sq);
      free(sq);
      sq = next;
    }
  }
  if (e == 0)
    jx_strbuf_appendf(b, "(%s)1", t);
  else if (!acc || m) /* too large an exponent (or out of memory) */
    jx_strbuf_appendf(b, "jx_ipow_%s(%s, %lld)", t, x, (long long)e);
  else if (e < 0)
    jx_strbuf_appendf(b, "((%s)1 / %s)", t, acc);
  else
    jx_strbuf_appendf(b, "%s", acc);
  free(acc);
  free(sq);
}

/* Load k's window along dim d, or NULL. */
static const jx_fusion_window *window_on(const jx_fusion_load *l, int d) {
  for (int w = 0; w < l->nwin; w++)
    if (l->win[w].dim == d) return &l->win[w];
  return NULL;
}

/* For index expression idx along window w of load k: t (the position in
 * the window), the clamped operand index c (always in [0, count)) and
 * whether the index is inside (`ok`, ANDed into okvar or declared). */
static void put_window(jx_strbuf *b, const char *ind, int k, const char *idx,
                       const jx_fusion_window *w, const char *okdecl) {
  long long lo = (long long)w->lo, st = (long long)w->step, n = (long long)w->count;
  jx_strbuf_appendf(b, "%sconst int64_t t%d_ = %s - (%lld);\n", ind, k, idx, lo);
  jx_strbuf_appendf(b, "%sconst int64_t q%d_ = t%d_ < 0 ? 0 : t%d_ / %lld;\n", ind, k, k, k, st);
  jx_strbuf_appendf(b, "%sconst int64_t c%d_ = q%d_ < %lld ? q%d_ : %lld;\n", ind, k, k, n, k,
                    n - 1);
  jx_strbuf_appendf(b, "%s%s t%d_ >= 0 && q%d_ < %lld", ind, okdecl, k, k, n);
  if (st != 1) jx_strbuf_appendf(b, " && t%d_ %% %lld == 0", k, st);
  jx_strbuf_appendf(b, ";\n");
}

/* Whether load k is inside its operand at column j (a C expression). */
static void put_inside(jx_strbuf *b, const jx_fusion_group *g, int k) {
  const jx_fusion_load *l = &g->loads[k];
  const int last = g->shape.rank - 1;
  int outer = 0, inner = window_on(l, last) != NULL;
  for (int w = 0; w < l->nwin; w++) outer |= l->win[w].dim != last;
  if (outer && inner)
    jx_strbuf_appendf(b, "(ok%d_ && okc%d_)", k, k);
  else if (outer || inner)
    jx_strbuf_appendf(b, outer ? "ok%d_" : "okc%d_", k);
  else
    jx_strbuf_appendf(b, "1");
}

/* The name a kernel gives member variable v of g: its equation's place in
 * the group, not its number in the program, so identical groups (a layer's
 * kernels in every layer) render the same text and share one kernel
 * (kernel_batch.h keys kernels by their text). */
static int member(const jx_program *p, const jx_fusion_group *g, int v) {
  for (int m = g->first + g->count - 1; m >= g->first; m--)
    if (p->eqns[m].out[0] == v) return m - g->first;
  return -1;
}

/* A pad or concatenate: a select over its operands' windowed loads. */
static int put_window_member(jx_strbuf *b, const jx_program *p, const jx_fusion_group *g,
                             const jx_eqn *e) {
  const int pad = e->prim->id == JX_PRIM_pad, ndata = pad ? 1 : e->nin;
  int ks[JX_FUSION_MAX_LOADS];
  for (int i = 0; i < e->nin && i < JX_FUSION_MAX_LOADS; i++) {
    ks[i] = i < ndata ? jx_fusion_window_load(p, g, e, i) : jx_fusion_operand_load(p, g, e->in[i]);
    if (ks[i] < 0) {
      jx_error_set(JX_ERR_INTERNAL, "render: operand v%d of %s is not among the loads", e->in[i],
                   e->prim->name);
      return -1;
    }
  }
  jx_strbuf_appendf(b, "      const %s v%d = ", ctype(p->avals[e->out[0]].dtype),
                    member(p, g, e->out[0]));
  /* concatenate: the last operand is what no earlier one covers */
  const int last = pad ? 1 : e->nin - 1;
  for (int i = 0; i < last; i++) {
    put_inside(b, g, ks[i]);
    jx_strbuf_appendf(b, " ? l%d : ", ks[i]);
  }
  jx_strbuf_appendf(b, "l%d;\n", ks[last]);
  return 0;
}

/* iota's element at (row, j) of a kernel of this shape (never a reduction's):
 * its index along dim, j for the last, else from the row's flat index. */
static void put_iota(jx_strbuf *b, const char *type, jx_shape s, int dim) {
  if (dim == s.rank - 1) {
    jx_strbuf_appendf(b, "(%s)j", type);
    return;
  }
  int64_t below = 1;
  for (int d = dim + 1; d < s.rank - 1; d++) below *= s.dims[d];
  jx_strbuf_appendf(b, "(%s)(row / %lld %% %lld)", type, (long long)below, (long long)s.dims[dim]);
}

/* The members' values at column j: one `const T vN = ...;` per equation. */
static int put_members(jx_strbuf *b, const jx_program *p, const jx_fusion_group *g) {
  uint8_t *in_group = calloc((size_t)p->nvars + 1, 1);
  if (!in_group) return -1;
  for (int m = g->first; m < g->first + g->count - (g->reduces ? 1 : 0); m++) {
    const jx_eqn *e = &p->eqns[m];
    jx_aval out = p->avals[e->out[0]];
    char names[4][24];
    if (jx_fusion_is_view(e, p)) { /* read through: the load is the view's element */
      int k = jx_fusion_operand_load(p, g, e->out[0]);
      if (k < 0) {
        free(in_group);
        jx_error_set(JX_ERR_INTERNAL, "render: view v%d (%s) is not among the loads", e->out[0],
                     e->prim->name);
        return -1;
      }
      jx_strbuf_appendf(b, "      const %s v%d = l%d;\n", ctype(out.dtype), m - g->first, k);
      in_group[e->out[0]] = 1;
      continue;
    }
    if (jx_fusion_is_window_op(e, p)) {
      if (put_window_member(b, p, g, e)) {
        free(in_group);
        return -1;
      }
      in_group[e->out[0]] = 1;
      continue;
    }
    for (int i = 0; i < e->nin && i < 4; i++) {
      int v = e->in[i];
      int k = in_group[v] ? 0 : jx_fusion_operand_load(p, g, v);
      if (k < 0) {
        free(in_group);
        jx_error_set(JX_ERR_INTERNAL, "render: operand v%d of %s is not among the loads", v,
                     e->prim->name);
        return -1;
      }
      snprintf(names[i], sizeof names[i], in_group[v] ? "v%d" : "l%d",
               in_group[v] ? member(p, g, v) : k);
    }
    int rounds = out.dtype == JX_BF16; /* computed in float, rounded as the reference */
    jx_strbuf_appendf(b, "      const %s v%d = %s", ctype(out.dtype), m - g->first,
                      rounds ? "jx_round_bf16(" : "");
    const jx_prim_lowering *x = jx_prim_lowering_of(e->prim);
    if (x->kind == JX_LOWER_CONVERT) {
      jx_dtype from = p->avals[e->in[0]].dtype;
      if (out.dtype == JX_BOOL)
        jx_strbuf_appendf(b, "(uint8_t)(%s != 0)", names[0]);
      else if (jx_is_int(out.dtype) && (from == JX_F32 || from == JX_BF16 || from == JX_F64))
        /* truncates, saturates, NaN -> 0 (the dialect's integer helpers) */
        jx_strbuf_appendf(b, "jx_f2i<%s>(%s)", ctype(out.dtype), names[0]);
      else
        jx_strbuf_appendf(b, "(%s)%s", ctype(out.dtype), names[0]);
    } else if (x->kind == JX_LOWER_INTEGER_POW) {
      put_ipow(b, ctype(out.dtype), names[0], e->params.i[0]);
    } else if (x->kind == JX_LOWER_IOTA) {
      put_iota(b, ctype(out.dtype), g->shape, (int)e->params.i[0]);
    } else {
      const jx_dtype t = p->avals[e->in[x->typed_by]].dtype;
      const char *expr = x->kind == JX_LOWER_EXPR ? jx_lower_expr(x, t) : NULL;
      if (!expr) {
        free(in_group);
        jx_error_set(JX_ERR_INTERNAL, "render: no expression for primitive %s on %s", e->prim->name,
                     jx_dtype_name(t));
        return -1;
      }
      put_expr(b, expr, names);
    }
    jx_strbuf_appendf(b, "%s;\n", rounds ? ")" : "");
    in_group[e->out[0]] = 1;
  }
  free(in_group);
  return 0;
}

/* One column j of the group: the loads that move along the row, the
 * members' values and the stores of the full-shape results. */
static int put_body(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                    const jx_fusion_group *g) {
  const int last = g->shape.rank > 0 ? g->shape.rank - 1 : 0;
  for (int k = 0; k < g->nloads; k++) {
    int64_t st = g->loads[k].strides[last];
    const char *t = ctype(p->avals[g->loads[k].var].dtype);
    const jx_fusion_window *w = g->shape.rank ? window_on(&g->loads[k], last) : NULL;
    if (w) {
      char okdecl[32];
      snprintf(okdecl, sizeof okdecl, "const int okc%d_ =", k);
      put_window(b, "      ", k, "j", w, okdecl);
    }
    if (g->shape.rank == 0 || st == 0) continue; /* read once per row, before the loop */
    int half = p->avals[g->loads[k].var].dtype == JX_BF16;
    if (w) /* a clamped index: never a load out of bounds */
      jx_strbuf_appendf(b, "      const %s l%d = %sx%d[c%d_ * %s[%d]]%s;\n", t, k,
                        half ? "jx_bf16_f32(" : "", k, k, dl->strides, k * JX_MAX_RANK + last,
                        half ? ")" : "");
    else if (st == 1)
      jx_strbuf_appendf(b, "      const %s l%d = %sx%d[j]%s;\n", t, k, half ? "jx_bf16_f32(" : "",
                        k, half ? ")" : "");
    else
      jx_strbuf_appendf(b, "      const %s l%d = %sx%d[j * %s[%d]]%s;\n", t, k,
                        half ? "jx_bf16_f32(" : "", k, dl->strides, k * JX_MAX_RANK + last,
                        half ? ")" : "");
  }
  if (put_members(b, p, g)) return -1;
  int red = g->reduces ? p->eqns[g->first + g->count - 1].out[0] : -1;
  for (int s = 0; s < g->nstores; s++)
    if (g->stores[s] != red)
      jx_strbuf_appendf(b,
                        p->avals[g->stores[s]].dtype == JX_BF16
                            ? "      y%d[j] = jx_f32_bf16(v%d);\n"
                            : "      y%d[j] = v%d;\n",
                        s, member(p, g, g->stores[s]));
  return 0;
}

/* The name of the value reduction r (the group's last member) reduces: a
 * member's "v<m>", or a load's "l<k>" when r is alone in its group (a lone
 * reduction the CUDA executor runs as a kernel). */
static int reduced_value(const jx_program *p, const jx_fusion_group *g, const jx_eqn *r, char *name,
                         size_t cap) {
  int m = member(p, g, r->in[0]);
  if (m >= 0) {
    snprintf(name, cap, "v%d", m);
    return 0;
  }
  int k = jx_fusion_operand_load(p, g, r->in[0]);
  if (k < 0) {
    jx_error_set(JX_ERR_INTERNAL, "render: the operand v%d of %s is neither a member nor a load",
                 r->in[0], r->prim->name);
    return -1;
  }
  snprintf(name, cap, "l%d", k);
  return 0;
}

/* One leaf of NumPy's pairwise tree (src/prims/reduce.c): the sum of the
 * columns [s_, s_ + n_), n_ <= 128, into `leaf` (declared by the caller):
 * under 8 columns in order, else eight partial sums combined as NumPy
 * combines them, then the columns past the last multiple of 8. */
static int put_leaf_sum(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                        const jx_fusion_group *g, const char *t, const char *u) {
  jx_strbuf_appendf(b, "      if (n_ < 8) {\n        leaf = 0;\n");
  jx_strbuf_appendf(
      b, "        for (int64_t q_ = 0; q_ < n_; q_++) {\n      const int64_t j = s_ + q_;\n");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      leaf += %s;\n        }\n      } else {\n        %s r_[8];\n", u, t);
  jx_strbuf_appendf(b,
                    "        for (int k_ = 0; k_ < 8; k_++) {\n      const int64_t j = s_ + k_;\n");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      r_[k_] = %s;\n        }\n        int64_t q_ = 8;\n", u);
  jx_strbuf_appendf(b, "        for (; q_ < n_ - n_ %% 8; q_ += 8)\n");
  jx_strbuf_appendf(
      b, "          for (int k_ = 0; k_ < 8; k_++) {\n      const int64_t j = s_ + q_ + k_;\n");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      r_[k_] += %s;\n          }\n", u);
  jx_strbuf_appendf(
      b, "        leaf = ((r_[0] + r_[1]) + (r_[2] + r_[3])) + ((r_[4] + r_[5]) + (r_[6] + "
         "r_[7]));\n");
  jx_strbuf_appendf(b, "        for (; q_ < n_; q_++) {\n      const int64_t j = s_ + q_;\n");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      leaf += %s;\n        }\n      }\n", u);
  return 0;
}

/* A max (op 2) or min (op 3) over the columns [from, to) in steps of
 * `step` into acc_ (which starts at -inf / +inf) and nan_: the first NaN
 * wins, and among equal values the first stays (so -0 and +0 keep their
 * order's sign). With at_ (a variable name, or NULL) it also records the
 * column acc_ was taken from (the largest int64 while none was), which lets
 * interleaved scans be combined into the sequential scan's bits. */
static int put_extremum(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                        const jx_fusion_group *g, const char *t, int op, const char *u,
                        const char *from, const char *to, const char *step, const char *at_) {
  jx_strbuf_appendf(b, "    %s acc_ = %sINFINITY;\n    int nan_ = 0;\n", t, op == 2 ? "-" : "");
  if (at_) jx_strbuf_appendf(b, "    int64_t %s = 0x7fffffffffffffffLL; /* none yet */\n", at_);
  jx_strbuf_appendf(b, "    for (int64_t j = %s; j < %s; j += %s) {\n", from, to, step);
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b,
                    "      if (!nan_) {\n        if (%s != %s) {\n          acc_ = %s;\n"
                    "          nan_ = 1;%s%s%s\n        } else if (%s %s acc_) {\n"
                    "          acc_ = %s;%s%s%s\n        }\n      }\n    }\n",
                    u, u, u, at_ ? "\n          " : "", at_ ? at_ : "", at_ ? " = j;" : "", u,
                    op == 2 ? ">" : "<", u, at_ ? "\n          " : "", at_ ? at_ : "",
                    at_ ? " = j;" : "");
  return 0;
}

/* The threads of a block share the row's columns [rb_, re_) (dialects with
 * row_block; the whole row, or a piece of it; at most 256 threads). Sums:
 * thread 0 walks the tree's leaves by index (jx_pwi) a chunk of 256 at a
 * time; eight threads share each leaf, thread k of the eight summing the
 * leaf's columns k, k + 8, ... as the one-thread leaf's partial sum r_[k]
 * does (neighbouring threads read neighbouring columns), the first of them
 * combining the eight and adding the columns past the last multiple of 8;
 * thread 0 adds the leaves on its stack as the recursion would. So the
 * bits are the one-thread walk's. Max/min: thread i scans the columns i,
 * i + threads, ..., keeping where its value came from, and thread 0 takes
 * the first NaN, else the extremum found first: the sequential scan's
 * value. */
static int put_block_reduction(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                               const jx_fusion_group *g, const char *t, int op, const char *u) {
  const char *sh = dl->shared_kw, *tid = dl->thread_id, *nt = dl->threads, *bar = dl->barrier;
  if (op == 1) {
    /* the sums' shared arrays as raw storage: a shared array may not have
     * a constructor, and the CUDA dialect's complex types do */
    jx_strbuf_appendf(b,
                      "    %s int64_t ls_[256], ln_[256];\n    %s int la_[256], nl_;\n"
                      "    %s double sums_[(576 * sizeof(%s) + 7) / 8];\n"
                      "    %s *const lv_ = (%s *)sums_, *const stk_ = lv_ + 256, *const lr_ = "
                      "stk_ + 64;\n"
                      "    %s jx_pwi pw_;\n    int sp_ = 0;\n",
                      sh, sh, sh, t, t, t, sh);
    jx_strbuf_appendf(b, "    if (%s == 0) jx_pwi_init(&pw_, re_ - rb_);\n    for (;;) {\n", tid);
    jx_strbuf_appendf(b,
                      "      if (%s == 0) {\n        int c_ = 0;\n        int64_t s_, n_;\n"
                      "        while (c_ < 256 && jx_pwi_leaf(&pw_, &s_, &n_)) {\n"
                      "          ls_[c_] = s_;\n          ln_[c_] = n_;\n"
                      "          la_[c_++] = jx_pwi_done(&pw_);\n        }\n        nl_ = c_;\n"
                      "      }\n      %s\n      const int nl = nl_;\n      if (nl == 0) break;\n",
                      tid, bar);
    /* every thread goes round the same number of times: the barriers are
     * met by all. Blocks of threads not a multiple of 8 (no launch of the
     * executor's; a test's) take a leaf a thread, as one thread would. */
    jx_strbuf_appendf(b, "      if (%s %% 8 != 0) {\n", nt);
    jx_strbuf_appendf(b,
                      "      for (int c_ = %s; c_ < nl; c_ += %s) {\n"
                      "      const int64_t s_ = rb_ + ls_[c_], n_ = ln_[c_];\n      %s leaf;\n",
                      tid, nt, t);
    if (put_leaf_sum(b, dl, p, g, t, u)) return -1;
    jx_strbuf_appendf(b, "      lv_[c_] = leaf;\n      }\n      } else\n");
    jx_strbuf_appendf(b,
                      "      for (int b_ = 0; b_ < nl; b_ += (int)%s / 8) {\n"
                      "      const int c_ = b_ + (int)%s / 8, k8_ = (int)%s %% 8;\n"
                      "      const int64_t s_ = c_ < nl ? rb_ + ls_[c_] : 0, n_ = c_ < nl ? "
                      "ln_[c_] : 0;\n"
                      "      if (n_ >= 8) {\n        %s lane_;\n        {\n"
                      "      const int64_t j = s_ + k8_;\n",
                      nt, tid, tid, t);
    if (put_body(b, dl, p, g)) return -1;
    jx_strbuf_appendf(b,
                      "      lane_ = %s;\n        }\n"
                      "        for (int64_t q_ = 8; q_ < n_ - n_ %% 8; q_ += 8) {\n"
                      "      const int64_t j = s_ + q_ + k8_;\n",
                      u);
    if (put_body(b, dl, p, g)) return -1;
    jx_strbuf_appendf(b,
                      "      lane_ += %s;\n        }\n        lr_[%s] = lane_;\n      }\n      %s\n"
                      "      if (k8_ == 0 && c_ < nl) {\n        %s leaf;\n"
                      "        if (n_ < 8) {\n          leaf = 0;\n"
                      "          for (int64_t q_ = 0; q_ < n_; q_++) {\n"
                      "      const int64_t j = s_ + q_;\n",
                      u, tid, bar, t);
    if (put_body(b, dl, p, g)) return -1;
    jx_strbuf_appendf(b,
                      "      leaf += %s;\n          }\n        } else {\n"
                      "          const %s *const r_ = lr_ + %s;\n"
                      "          leaf = ((r_[0] + r_[1]) + (r_[2] + r_[3])) + ((r_[4] + r_[5]) + "
                      "(r_[6] + r_[7]));\n"
                      "          for (int64_t q_ = n_ - n_ %% 8; q_ < n_; q_++) {\n"
                      "      const int64_t j = s_ + q_;\n",
                      u, t, tid);
    if (put_body(b, dl, p, g)) return -1;
    jx_strbuf_appendf(b,
                      "      leaf += %s;\n          }\n        }\n        lv_[c_] = leaf;\n"
                      "      }\n      %s\n      }\n      %s\n",
                      u, bar, bar);
    /* a node's value is left + right: the stack's top two, in that order */
    jx_strbuf_appendf(b,
                      "      if (%s == 0)\n        for (int c_ = 0; c_ < nl; c_++) {\n"
                      "          stk_[sp_++] = lv_[c_];\n"
                      "          for (int a_ = la_[c_]; a_ > 0; a_--) {\n            sp_--;\n"
                      "            stk_[sp_ - 1] = stk_[sp_ - 1] + stk_[sp_];\n          }\n"
                      "        }\n      %s\n    }\n    const %s acc = stk_[0];\n",
                      tid, bar, t);
    return 0;
  }
  jx_strbuf_appendf(b, "    %s %s pv_[256];\n    %s int pn_[256];\n    %s int64_t pi_[256];\n", sh,
                    t, sh, sh);
  char from[64];
  snprintf(from, sizeof from, "rb_ + (int64_t)%s", tid);
  if (put_extremum(b, dl, p, g, t, op, u, from, "re_", nt, "at_")) return -1;
  const char *cmp = op == 2 ? ">" : "<";
  jx_strbuf_appendf(b,
                    "    pv_[%s] = acc_;\n    pn_[%s] = nan_;\n    pi_[%s] = at_;\n    %s\n"
                    "    %s acc = pv_[0];\n    if (%s == 0) {\n"
                    "      int n0_ = pn_[0];\n      int64_t i0_ = pi_[0];\n"
                    "      for (int k_ = 1; k_ < (int)%s; k_++)\n"
                    "        if (pn_[k_] ? !n0_ || pi_[k_] < i0_\n"
                    "                    : !n0_ && (pv_[k_] %s acc || (pv_[k_] == acc && pi_[k_] < "
                    "i0_))) {\n"
                    "          acc = pv_[k_];\n          n0_ = pn_[k_];\n          i0_ = pi_[k_];\n"
                    "        }\n    }\n",
                    tid, tid, tid, bar, t, tid, nt, cmp);
  return 0;
}

/* The row's reduction: NumPy's pairwise tree for sums (the eager kernel's,
 * src/prims/reduce.c, walked by jx_pw_*), a sequential scan for max/min
 * where the first NaN wins; or the same shared by a block's threads
 * (put_block_reduction). Every column also stores the full-shape results,
 * if any. */
static int put_reduction(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                         const jx_fusion_group *g) {
  const jx_eqn *r = &p->eqns[g->first + g->count - 1];
  const char *t = ctype(p->avals[r->out[0]].dtype);
  /* the group's rule was the fusion's; the device's admits the most */
  int op = jx_fusion_row_reduce_on(r, p, 1);
  if (!op) op = jx_fusion_full_reduce_on(r, p, 1); /* a lone one, over its flat elements */
  const char *round = bf16_store(p->avals[r->out[0]].dtype);
  char u[24];
  if (reduced_value(p, g, r, u, sizeof u)) return -1;
  if (dl->row_block) {
    jx_strbuf_appendf(b, "    %s\n    ", dl->row_block);
    jx_strbuf_appendf(b, dl->piece_range ? dl->piece_range : "const int64_t rb_ = 0, re_ = %s;",
                      "inner");
    jx_strbuf_appendf(b, "\n");
    if (put_block_reduction(b, dl, p, g, t, op, u)) return -1;
    for (int s = 0; s < g->nstores; s++) {
      if (g->stores[s] != r->out[0]) continue;
      if (*round && dl->pieces_flag) /* split: f32 partial results, rounded once combined */
        jx_strbuf_appendf(b,
                          "    if (%s == 0) {\n      if (%s)\n"
                          "        ((float *)%s[%d] + row)[%s] = acc;\n"
                          "      else\n        y%d[0] = %s(acc);\n    }\n",
                          dl->thread_id, dl->pieces_flag, dl->buf, g->nloads + s, dl->piece_part, s,
                          round);
      else
        jx_strbuf_appendf(b, "    if (%s == 0) y%d[%s] = %s(acc);\n", dl->thread_id, s,
                          dl->piece_part ? dl->piece_part : "0", round);
    }
    /* the next row's thread 0 must not refill the shared arrays before
     * every thread has read them */
    jx_strbuf_appendf(b, "    %s\n    }\n", dl->barrier);
    return 0;
  }
  if (op == 1) {
    jx_strbuf_appendf(b, "    jx_pw_%s pw;\n    jx_pw_init_%s(&pw, inner);\n    int64_t s_, n_;\n",
                      t, t);
    jx_strbuf_appendf(b, "    while (jx_pw_leaf_%s(&pw, &s_, &n_)) {\n      %s leaf;\n", t, t);
    if (put_leaf_sum(b, dl, p, g, t, u)) return -1;
    jx_strbuf_appendf(b, "      jx_pw_done_%s(&pw, leaf);\n    }\n    const %s acc = pw.result;\n",
                      t, t);
  } else {
    if (put_extremum(b, dl, p, g, t, op, u, "0", "inner", "1", NULL)) return -1;
    jx_strbuf_appendf(b, "    const %s acc = acc_;\n", t);
  }
  for (int s = 0; s < g->nstores; s++)
    if (g->stores[s] == r->out[0]) jx_strbuf_appendf(b, "    y%d[0] = %s(acc);\n", s, round);
  return 0;
}

/* A column reduction's reduced row `ri` (an expression) of the current
 * block: each load's pointer at that row (the kept dims' offsets kb* were
 * added per kernel row), the loads that do not move along the columns, and
 * the full-shape stores' row pointers, named with suffix sfx ("" for the
 * names put_body reads; put_col_rows aliases suffixed ones). */
static void put_col_row_setup(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                              const jx_fusion_group *g, const char *ri, const char *sfx) {
  const int last = g->shape.rank - 1;
  jx_strbuf_appendf(b, "      const int64_t ri_%s = %s;\n", sfx, ri);
  if (g->lead > 1) jx_strbuf_appendf(b, "      int64_t rr_%s = ri_%s, ir_%s;\n", sfx, sfx, sfx);
  for (int k = 0; k < g->nloads; k++)
    jx_strbuf_appendf(b, "      int64_t o%d_%s = kb%d_;\n", k, sfx, k);
  for (int d = g->lead - 1; d >= 0; d--) {
    char idx[32];
    snprintf(idx, sizeof idx, "%s_%s", g->lead > 1 ? "ir" : "ri", sfx);
    if (g->lead > 1 && d > 0)
      jx_strbuf_appendf(b, "      ir_%s = rr_%s %% %s;\n      rr_%s /= %s;\n", sfx, sfx,
                        dim_of(dl, g, d).s, sfx, dim_of(dl, g, d).s);
    else if (g->lead > 1)
      jx_strbuf_appendf(b, "      ir_%s = rr_%s;\n", sfx, sfx);
    for (int k = 0; k < g->nloads; k++)
      if (g->loads[k].strides[d])
        jx_strbuf_appendf(b, "      o%d_%s += %s * %s[%d];\n", k, sfx, idx, dl->strides,
                          k * JX_MAX_RANK + d);
  }
  const int red = p->eqns[g->first + g->count - 1].out[0];
  for (int k = 0; k < g->nloads; k++) {
    jx_dtype dt = p->avals[g->loads[k].var].dtype;
    const char *t = stype(dt);
    jx_strbuf_appendf(b, "      const %s *%s x%d%s = (const %s *)%s[%d] + o%d_%s;\n", t,
                      dl->restrict_kw, k, sfx, t, dl->buf, k, k, sfx);
    if (g->loads[k].strides[last] == 0)
      jx_strbuf_appendf(b,
                        dt == JX_BF16 ? "      const %s l%d%s = jx_bf16_f32(x%d%s[0]);\n"
                                      : "      const %s l%d%s = x%d%s[0];\n",
                        ctype(dt), k, sfx, k, sfx);
  }
  for (int s = 0; s < g->nstores; s++) {
    if (g->stores[s] == red) continue;
    const char *t = stype(p->avals[g->stores[s]].dtype);
    jx_strbuf_appendf(b, "      %s *%s y%d%s = (%s *)%s[%d] + ri_%s * kept_ + row * inner;\n", t,
                      dl->restrict_kw, s, sfx, t, dl->buf, g->nloads + s, sfx);
  }
}

/* The loop over the block's columns, which the caller closes. */
static void put_col_loop(jx_strbuf *b, const jx_dialect *dl) {
  jx_strbuf_appendf(
      b, "%s      for (int64_t jj_ = 0; jj_ < cw; jj_++) {\n      const int64_t j = c0 + jj_;\n",
      dl->vector_hint ? dl->vector_hint : "");
}

/* Row `ri` of the current block (put_col_row_setup) and the loop over the
 * block's columns, which the caller closes (twice). */
static void put_col_row(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                        const jx_fusion_group *g, const char *ri) {
  jx_strbuf_appendf(b, "      {\n");
  put_col_row_setup(b, dl, p, g, ri, "");
  put_col_loop(b, dl);
}

/* Rows a sum's pass adds to a partial row (put_col_rows): 4 for a group of
 * few members, whose column sum is bound by memory; 1 (put_col_row) for a
 * longer chain, bound by its arithmetic, where each row more would be one
 * more copy of the chain's code to compile, and in a tiled dialect, whose
 * threads hold one column's partial sums each. */
enum { COL_PASS_ROWS = 4, COL_PASS_MAX_MEMBERS = 8 };

static int col_pass_rows(const jx_dialect *dl, const jx_fusion_group *g) {
  return !dl->col_tile_loop && g->count <= COL_PASS_MAX_MEMBERS ? COL_PASS_ROWS : 1;
}

/* Partial row k_ of a leaf's eight takes rows rb_ + s_ + q_ + k_ + 8 i,
 * i < COL_PASS_ROWS, in one pass over the block's columns: the value of
 * each row (put_body, under the names of put_col_row_setup's suffixed
 * pointers) added to the partial sum in the order one row a pass adds them,
 * so the bits are the same, and the block's partial rows (32 KiB at 1024
 * columns of f32, as much as L1) are read and written once per four rows
 * instead of once per row: one row a pass moved two bytes through the cache
 * for each byte of the operands. */
static int put_col_rows(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                        const jx_fusion_group *g, const char *t, const char *u) {
  const int red = p->eqns[g->first + g->count - 1].out[0];
  jx_strbuf_appendf(b, "      {\n");
  for (int i = 0; i < COL_PASS_ROWS; i++) {
    char ri[48], sfx[8];
    snprintf(ri, sizeof ri, "rb_ + s_ + q_ + k_ + %d", 8 * i);
    snprintf(sfx, sizeof sfx, "%d", i);
    put_col_row_setup(b, dl, p, g, ri, sfx);
  }
  put_col_loop(b, dl);
  jx_strbuf_appendf(b, "      %s a_ = r_[k_][jj_];\n", t);
  for (int i = 0; i < COL_PASS_ROWS; i++) {
    jx_strbuf_appendf(b, "      {\n");
    for (int k = 0; k < g->nloads; k++) {
      jx_dtype dt = p->avals[g->loads[k].var].dtype;
      jx_strbuf_appendf(b, "      const %s *%s x%d = x%d%d;\n", stype(dt), dl->restrict_kw, k, k,
                        i);
      if (g->loads[k].strides[g->shape.rank - 1] == 0)
        jx_strbuf_appendf(b, "      const %s l%d = l%d%d;\n", ctype(dt), k, k, i);
    }
    for (int s = 0; s < g->nstores; s++)
      if (g->stores[s] != red)
        jx_strbuf_appendf(b, "      %s *%s y%d = y%d%d;\n", stype(p->avals[g->stores[s]].dtype),
                          dl->restrict_kw, s, s, i);
    if (put_body(b, dl, p, g)) return -1;
    jx_strbuf_appendf(b, "      a_ += %s;\n      }\n", u);
  }
  jx_strbuf_appendf(b, "      r_[k_][jj_] = a_;\n      }\n      }\n");
  return 0;
}

/* A column-reduction sum's leaf: the rows [rb_ + s_, rb_ + s_ + n_) of the
 * block's columns summed into leaf_[jj_] as the eager kernel sums a leaf
 * (src/prims/reduce.c's pairwise_cols: under 8 rows in order, else eight
 * partial sums of every 8th row, added as a tree, then the tail). The
 * partial sums start at -0, the identity of + (-0 + v is v for every v,
 * where +0 + -0 is +0), so the first eight rows add like the others instead
 * of being copied: the producers' code appears twice in the kernel, not
 * four times, and a column reduction compiles in about half the time. A
 * short group adds its rows COL_PASS_ROWS a pass first (put_col_rows: four
 * more copies of its code). */
static int put_col_leaf(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                        const jx_fusion_group *g, const char *t, const char *u) {
  jx_strbuf_appendf(b, "      int64_t q_ = 0;\n      if (n_ >= 8) {\n");
  jx_strbuf_appendf(b, "      for (int k_ = 0; k_ < 8; k_++)\n"
                       "        for (int64_t jj_ = 0; jj_ < cw; jj_++) {\n"
                       "          r_[k_][jj_] = 0;\n"
                       "          r_[k_][jj_] = -r_[k_][jj_];\n"
                       "        }\n");
  if (col_pass_rows(dl, g) > 1) {
    jx_strbuf_appendf(b, "      for (; q_ + %d <= n_ - n_ %% 8; q_ += %d)\n", 8 * COL_PASS_ROWS,
                      8 * COL_PASS_ROWS);
    jx_strbuf_appendf(b, "      for (int k_ = 0; k_ < 8; k_++)\n");
    if (put_col_rows(b, dl, p, g, t, u)) return -1;
  }
  jx_strbuf_appendf(b, "      for (; q_ < n_ - n_ %% 8; q_ += 8)\n");
  jx_strbuf_appendf(b, "      for (int k_ = 0; k_ < 8; k_++) {\n");
  put_col_row(b, dl, p, g, "rb_ + s_ + q_ + k_");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      r_[k_][jj_] += %s;\n      }\n      }\n      }\n", u);
  jx_strbuf_appendf(
      b, "      for (int64_t jj_ = 0; jj_ < cw; jj_++)\n"
         "        leaf_[jj_] = ((r_[0][jj_] + r_[1][jj_]) + (r_[2][jj_] + r_[3][jj_])) +\n"
         "                     ((r_[4][jj_] + r_[5][jj_]) + (r_[6][jj_] + r_[7][jj_]));\n");
  jx_strbuf_appendf(b, "      } else {\n"
                       "      for (int64_t jj_ = 0; jj_ < cw; jj_++) leaf_[jj_] = 0;\n"
                       "      }\n");
  jx_strbuf_appendf(b, "      for (; q_ < n_; q_++) {\n");
  put_col_row(b, dl, p, g, "rb_ + s_ + q_");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b, "      leaf_[jj_] += %s;\n      }\n      }\n      }\n", u);
  return 0;
}

/* A column max/min over the rows [from, to) into acc_[jj_], in order: once
 * a column holds a NaN it keeps it; a NaN replaces any number. */
static int put_col_extremum(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                            const jx_fusion_group *g, const char *t, int op, const char *u,
                            const char *from, const char *to) {
  jx_strbuf_appendf(b, "      for (int64_t q_ = %s; q_ < %s; q_++) {\n", from, to);
  put_col_row(b, dl, p, g, "q_");
  if (put_body(b, dl, p, g)) return -1;
  jx_strbuf_appendf(b,
                    "      const %s a_ = acc_[jj_];\n"
                    "      acc_[jj_] = a_ != a_ ? a_ : (%s != %s || %s %s a_) ? %s : a_;\n"
                    "      }\n      }\n      }\n",
                    t, u, u, u, op == 2 ? ">" : "<", u);
  return 0;
}

/* A column reduction tiled over a block's threads (dialects with col_tile_loop):
 * col_tile_loop gives each thread a column c0 of the tile (cw 1, or 0 past
 * the last column) and a row group ty_ of grp_. Sums: thread 0 walks the
 * pairwise tree's leaves by index (jx_pwi), grp_ at a time; row group k sums
 * leaf k of every column of the tile into shared memory, and the threads of
 * row group 0 add the leaves on their column's stack as the recursion
 * would, so each column's bits are the one-thread walk's. Max/min: row
 * group k scans strip k of the rows, and row group 0 combines the strips in
 * order (the first NaN, else the first extreme value, as the scan keeps). */
static int put_col_tiled(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                         const jx_fusion_group *g, const char *t, int op, const char *u,
                         int s_red) {
  const char *sh = dl->shared_kw, *tid = dl->thread_id, *bar = dl->barrier;
  /* raw storage: a shared array may not have a constructor (complex types) */
  jx_strbuf_appendf(b,
                    "    %s double tv_raw_[(32 * 32 * sizeof(%s) + 7) / 8];\n"
                    "    %s *const tv_ = (%s *)tv_raw_;\n",
                    sh, t, t, t);
  jx_strbuf_appendf(b, "    %s\n", dl->col_tile_loop);
  jx_strbuf_appendf(b, "      %s acc_[1];\n", t);
  if (op == 1) {
    jx_strbuf_appendf(b,
                      "      %s int64_t ts_[32], tn_[32];\n      %s int ta_[32], tl_;\n"
                      "      %s jx_pwi tw_;\n",
                      sh, sh, sh);
    jx_strbuf_appendf(b, "      %s stk_[%d][1], r_[8][1];\n      int sp_ = 0;\n", t,
                      JX_FUSION_COL_DEPTH);
    jx_strbuf_appendf(b, "      if (%s == 0) jx_pwi_init(&tw_, re_ - rb_);\n      for (;;) {\n",
                      tid);
    jx_strbuf_appendf(b,
                      "      if (%s == 0) {\n        int c_ = 0;\n        int64_t s_, n_;\n"
                      "        while (c_ < grp_ && jx_pwi_leaf(&tw_, &s_, &n_)) {\n"
                      "          ts_[c_] = s_;\n          tn_[c_] = n_;\n"
                      "          ta_[c_++] = jx_pwi_done(&tw_);\n        }\n        tl_ = c_;\n"
                      "      }\n      %s\n      const int nl_ = tl_;\n      if (nl_ == 0) break;\n",
                      tid, bar);
    jx_strbuf_appendf(b,
                      "      if (ty_ < nl_) {\n      const int64_t s_ = ts_[ty_], n_ = tn_[ty_];\n"
                      "      %s *const leaf_ = stk_[sp_];\n",
                      t);
    if (put_col_leaf(b, dl, p, g, t, u)) return -1;
    jx_strbuf_appendf(b, "      if (cw) tv_[ty_ * 32 + tx_] = leaf_[0];\n      }\n      %s\n", bar);
    /* a node's value is left + right: the stack's top two, in that order */
    jx_strbuf_appendf(b,
                      "      if (ty_ == 0 && cw)\n        for (int c_ = 0; c_ < nl_; c_++) {\n"
                      "          stk_[sp_++][0] = tv_[c_ * 32 + tx_];\n"
                      "          for (int a_ = ta_[c_]; a_ > 0; a_--) {\n            sp_--;\n"
                      "            stk_[sp_ - 1][0] = stk_[sp_ - 1][0] + stk_[sp_][0];\n"
                      "          }\n        }\n      %s\n      }\n      acc_[0] = stk_[0][0];\n",
                      bar);
  } else {
    jx_strbuf_appendf(b,
                      "      acc_[0] = %sINFINITY;\n"
                      "      const int64_t w_ = (re_ - rb_ + grp_ - 1) / grp_;\n"
                      "      const int64_t q0_ = rb_ + (ty_ < grp_ ? ty_ : grp_) * w_;\n"
                      "      const int64_t q1_ = q0_ + w_ < re_ ? q0_ + w_ : re_;\n",
                      op == 2 ? "-" : "");
    if (put_col_extremum(b, dl, p, g, t, op, u, "q0_", "q1_")) return -1;
    jx_strbuf_appendf(b,
                      "      if (cw) tv_[ty_ * 32 + tx_] = acc_[0];\n      %s\n"
                      "      if (ty_ == 0 && cw)\n        for (int k_ = 1; k_ < grp_; k_++) {\n"
                      "          const %s a_ = acc_[0], v_ = tv_[k_ * 32 + tx_];\n"
                      "          acc_[0] = a_ != a_ ? a_ : (v_ != v_ || v_ %s a_) ? v_ : a_;\n"
                      "        }\n",
                      bar, t, op == 2 ? ">" : "<");
  }
  const char *round = s_red >= 0 ? bf16_store(p->avals[g->stores[s_red]].dtype) : "";
  if (s_red >= 0 && *round && dl->pieces_flag) /* split: f32 partial results, rounded once */
    jx_strbuf_appendf(b,
                      "      if (ty_ == 0 && cw) {\n        if (%s)\n"
                      "          ((float *)%s[%d])[%s + row * inner + c0] = acc_[0];\n"
                      "        else\n          ((%s *)%s[%d])[row * inner + c0] = %s(acc_[0]);\n"
                      "      }\n",
                      dl->pieces_flag, dl->buf, g->nloads + s_red, dl->piece_part,
                      stype(p->avals[g->stores[s_red]].dtype), dl->buf, g->nloads + s_red, round);
  else if (s_red >= 0)
    jx_strbuf_appendf(
        b, "      if (ty_ == 0 && cw) ((%s *)%s[%d])[%s + row * inner + c0] = %s(acc_[0]);\n",
        stype(p->avals[g->stores[s_red]].dtype), dl->buf, g->nloads + s_red,
        dl->piece_part ? dl->piece_part : "0", round);
  /* the next tile's thread 0 must not refill the shared arrays before every
   * thread has read them */
  jx_strbuf_appendf(b, "      %s\n    }\n", bar);
  return 0;
}

/* A reduction over the leading dims [0, lead) of the group's shape: each
 * output column (of the kept dims) gets exactly the eager kernel's value
 * (src/prims/reduce.c). Sums: its column-wise pairwise tree over the
 * flattened reduced rows (pairwise_cols: leaves of up to 128 rows in eight
 * partial sums, then the tail), walked by jx_pwi with a stack of partial
 * sums per column of the block; max/min: the rows in order, the first NaN
 * wins. The producers are computed a row of the block at a time, in the
 * order the tree needs them, and never stored (unless used elsewhere). */
static int put_col_reduction(jx_strbuf *b, const jx_dialect *dl, const jx_program *p,
                             const jx_fusion_group *g) {
  const jx_eqn *r = &p->eqns[g->first + g->count - 1];
  const char *t = ctype(p->avals[r->out[0]].dtype);
  const int rank = g->shape.rank, last = rank - 1, cb = dl->col_block;
  int lead = 0, op = jx_fusion_col_reduce_on(r, p, 1, &lead);
  char u[24];
  if (reduced_value(p, g, r, u, sizeof u)) return -1;
  int windows = 0; /* jx_fuse keeps pad and concatenate out of column reductions */
  for (int k = 0; k < g->nloads; k++) windows |= g->loads[k].nwin > 0;
  if (!op || lead != g->lead || (!dl->col_tile_loop && (!cb || !dl->col_block_loop)) || windows) {
    jx_error_set(JX_ERR_INTERNAL,
                 "render: the %s dialect cannot render the reduction over %d leading axes",
                 dl->name, g->lead);
    return -1;
  }
  /* the kept dims' offsets of this kernel row, innermost kept dim first */
  for (int k = 0; k < g->nloads; k++) jx_strbuf_appendf(b, "    int64_t kb%d_ = 0;\n", k);
  if (last > lead) jx_strbuf_appendf(b, "    int64_t rem = row, i;\n");
  for (int d = last - 1; d >= lead; d--) {
    if (d > lead)
      jx_strbuf_appendf(b, "    i = rem %% %s;\n    rem /= %s;\n", dim_of(dl, g, d).s,
                        dim_of(dl, g, d).s);
    else
      jx_strbuf_appendf(b, "    i = rem;\n");
    for (int k = 0; k < g->nloads; k++)
      jx_strbuf_appendf(b, "    kb%d_ += i * %s[%d];\n", k, dl->strides, k * JX_MAX_RANK + d);
  }
  jx_strbuf_appendf(b, "    int64_t nred_ = 1, kept_ = 1;\n");
  for (int d = 0; d < rank; d++)
    jx_strbuf_appendf(b, "    %s *= %s;\n", d < lead ? "nred_" : "kept_", dim_of(dl, g, d).s);
  if (dl->piece_range) {
    jx_strbuf_appendf(b, "    ");
    jx_strbuf_appendf(b, dl->piece_range, "nred_");
    jx_strbuf_appendf(b, "\n");
  } else if (dl->red_range && op == 1)
    jx_strbuf_appendf(b, "    const int64_t rb_ = %s[%d], re_ = %s[%d];\n", dl->dims, JX_MAX_RANK,
                      dl->dims, JX_MAX_RANK + 1);
  else
    jx_strbuf_appendf(b, "    const int64_t rb_ = 0, re_ = nred_;\n");
  int s_red = -1;
  for (int s = 0; s < g->nstores; s++)
    if (g->stores[s] == r->out[0]) s_red = s;
  if (dl->col_tile_loop) return put_col_tiled(b, dl, p, g, t, op, u, s_red);
  jx_strbuf_appendf(b, "    %s\n", dl->col_block_loop);
  jx_strbuf_appendf(b, "      %s acc_[%d];\n", t, cb);
  if (op == 1) {
    jx_strbuf_appendf(b, "      %s stk_[%d][%d], r_[8][%d];\n      int sp_ = 0;\n", t,
                      JX_FUSION_COL_DEPTH, cb, cb);
    jx_strbuf_appendf(
        b, "      jx_pwi w_;\n      jx_pwi_init(&w_, re_ - rb_);\n      int64_t s_, n_;\n");
    jx_strbuf_appendf(
        b, "      while (jx_pwi_leaf(&w_, &s_, &n_)) {\n      %s *leaf_ = stk_[sp_];\n", t);
    if (put_col_leaf(b, dl, p, g, t, u)) return -1;
    jx_strbuf_appendf(b, "      sp_++;\n      for (int a_ = jx_pwi_done(&w_); a_ > 0; a_--) {\n"
                         "        sp_--;\n"
                         "        for (int64_t jj_ = 0; jj_ < cw; jj_++)\n"
                         "          stk_[sp_ - 1][jj_] = stk_[sp_ - 1][jj_] + stk_[sp_][jj_];\n"
                         "      }\n      }\n");
    jx_strbuf_appendf(b,
                      "      for (int64_t jj_ = 0; jj_ < cw; jj_++) acc_[jj_] = stk_[0][jj_];\n");
  } else {
    jx_strbuf_appendf(b, "      for (int64_t jj_ = 0; jj_ < cw; jj_++) acc_[jj_] = %sINFINITY;\n",
                      op == 2 ? "-" : "");
    if (put_col_extremum(b, dl, p, g, t, op, u, "rb_", "re_")) return -1;
  }
  if (s_red >= 0)
    jx_strbuf_appendf(b,
                      "      %s *%s yr_ = (%s *)%s[%d] + row * inner + c0;\n"
                      "      for (int64_t jj_ = 0; jj_ < cw; jj_++) yr_[jj_] = %s(acc_[jj_]);\n",
                      stype(p->avals[r->out[0]].dtype), dl->restrict_kw,
                      stype(p->avals[r->out[0]].dtype), dl->buf, g->nloads + s_red,
                      bf16_store(p->avals[r->out[0]].dtype));
  jx_strbuf_appendf(b, "    }\n");
  return 0;
}

/* Whether a member of g reads or makes a complex value. */
static int computes_complex(const jx_program *p, const jx_fusion_group *g) {
  for (int m = g->first; m < g->first + g->count; m++) {
    const jx_eqn *e = &p->eqns[m];
    for (int i = 0; i < e->nin; i++)
      if (jx_is_complex(p->avals[e->in[i]].dtype)) return 1;
    if (jx_is_complex(p->avals[e->out[0]].dtype)) return 1;
  }
  return 0;
}

char *jx_render_kernel(const jx_dialect *dl, const jx_program *p, const jx_fusion_group *g,
                       const char *name) {
  jx_strbuf b = JX_STRBUF_INIT;
  const char *close = NULL;
  if (computes_complex(p, g)) {
    if (!dl->complex_prelude) {
      jx_error_set(JX_ERR_INTERNAL, "render: the %s dialect renders no complex value", dl->name);
      return NULL;
    }
    if (dl->complex_kernel_open) jx_strbuf_appendf(&b, "%s", dl->complex_kernel_open);
    close = dl->complex_kernel_close;
  }
  const int rank = g->shape.rank > 0 ? g->shape.rank : 1;
  const int last = rank - 1;
  const char *rs = dl->restrict_kw;
  const int red = g->reduces ? p->eqns[g->first + g->count - 1].out[0] : -1;
  jx_strbuf_appendf(&b, dl->signature, name);
  jx_strbuf_appendf(&b, "  const int64_t inner = %s;\n", dim_of(dl, g, last).s);
  jx_strbuf_appendf(&b, "  %s\n", dl->row_loop);
  if (g->reduces && g->lead > 0) {
    if (put_col_reduction(&b, dl, p, g)) {
      jx_strbuf_free(&b);
      if (!jx_error_pending()) jx_error_set(JX_ERR_OUT_OF_MEMORY, "render: out of memory");
      return NULL;
    }
    jx_strbuf_appendf(&b, "  }\n}\n%s", close ? close : "");
    return jx_strbuf_take(&b, "render");
  }
  for (int k = 0; k < g->nloads; k++) {
    jx_strbuf_appendf(&b, "    int64_t off%d = 0;\n", k);
    for (int w = 0; w < g->loads[k].nwin; w++)
      if (g->loads[k].win[w].dim != last) {
        jx_strbuf_appendf(&b, "    int ok%d_ = 1;\n", k);
        break;
      }
  }
  /* the row's index along each outer dimension, innermost first, unrolled:
   * the rank is fixed per kernel, so dims and strides take constant indices */
  if (rank > 1) jx_strbuf_appendf(&b, "    int64_t rem = row, i;\n");
  for (int d = rank - 2; d >= 0; d--) {
    if (d > 0)
      jx_strbuf_appendf(&b, "    i = rem %% %s;\n    rem /= %s;\n", dim_of(dl, g, d).s,
                        dim_of(dl, g, d).s);
    else
      jx_strbuf_appendf(&b, "    i = rem;\n"); /* row < the product of the outer dims */
    for (int k = 0; k < g->nloads; k++) {
      const jx_fusion_window *w = window_on(&g->loads[k], d);
      if (!w) {
        jx_strbuf_appendf(&b, "    off%d += i * %s[%d];\n", k, dl->strides, k * JX_MAX_RANK + d);
        continue;
      }
      char okvar[32];
      snprintf(okvar, sizeof okvar, "ok%d_ &=", k);
      jx_strbuf_appendf(&b, "    {\n");
      put_window(&b, "    ", k, "i", w, okvar);
      jx_strbuf_appendf(&b, "    off%d += c%d_ * %s[%d];\n    }\n", k, k, dl->strides,
                        k * JX_MAX_RANK + d);
    }
  }
  for (int k = 0; k < g->nloads; k++) {
    const char *t = stype(p->avals[g->loads[k].var].dtype);
    jx_strbuf_appendf(&b, "    const %s *%s x%d = (const %s *)%s[%d] + off%d;\n", t, rs, k, t,
                      dl->buf, k, k);
  }
  for (int s = 0; s < g->nstores; s++) {
    const char *t = stype(p->avals[g->stores[s]].dtype);
    jx_strbuf_appendf(&b, "    %s *%s y%d = (%s *)%s[%d] + row%s;\n", t, rs, s, t, dl->buf,
                      g->nloads + s, g->stores[s] == red ? "" : " * inner");
  }
  /* the innermost stride is 0 or 1 for most loads: constants let the loop
   * vectorize. Loads that do not move along the row are read once per row,
   * before the loop: inside it gcc cannot tell them from the stores (restrict
   * on local pointers does not help it) and gives up vectorizing. */
  for (int k = 0; k < g->nloads; k++) {
    int64_t st = g->loads[k].strides[g->shape.rank ? last : 0];
    jx_dtype dt = p->avals[g->loads[k].var].dtype;
    if (g->shape.rank == 0 || st == 0)
      jx_strbuf_appendf(&b,
                        dt == JX_BF16 ? "    const %s l%d = jx_bf16_f32(x%d[0]);\n"
                                      : "    const %s l%d = x%d[0];\n",
                        ctype(dt), k, k);
  }
  int bad;
  if (g->reduces) {
    bad = put_reduction(&b, dl, p, g);
  } else {
    jx_strbuf_appendf(&b, "    %s\n", dl->col_loop);
    bad = put_body(&b, dl, p, g);
    jx_strbuf_appendf(&b, "    }\n");
  }
  if (bad) {
    jx_strbuf_free(&b);
    if (!jx_error_pending()) jx_error_set(JX_ERR_OUT_OF_MEMORY, "render: out of memory");
    return NULL;
  }
  jx_strbuf_appendf(&b, "  }\n}\n%s", close ? close : "");
  return jx_strbuf_take(&b, "render");
}

char *jx_render_c_prelude(void) { return jx_render_prelude(&jx_dialect_c); }

char *jx_render_c(const jx_program *p, const jx_fusion_group *g, const char *name) {
  return jx_render_kernel(&jx_dialect_c, p, g, name);
}
