/* NumPy-level contractions over the dot_general and conv_general_dilated
 * primitives: jx_dot_general(_typed), jx_matmul, jx_einsum, jx_conv and
 * jx_conv_general_dilated. Operands are promoted to their common dtype with
 * weak types (as jnp does before calling lax) and everything else is built
 * from primitives: transposes, broadcasts, reductions and selects.
 *
 * Where JAX and NumPy differ, JAX wins: integer results wrap in the operand
 * dtype (einsum of i8 gives i8, not NumPy's i64), and einsum broadcasts a
 * label of size 1 against the same label of another size, as opt_einsum does. */
#include <stdlib.h>
#include <string.h>

#include "ops_util.h"

/* ---- small wrappers over primitives ---- */

static jx_ilist ilist_of(int n, const int *v) {
  jx_ilist l = {n, {0}};
  for (int i = 0; i < n; i++) l.v[i] = v[i];
  return l;
}

static jx_array *dot(jx_array *a, jx_array *b, jx_ilist lc, jx_ilist rc, jx_ilist lb, jx_ilist rb) {
  jx_params p = JX_PARAMS_INIT;
  p.l[0] = lc;
  p.l[1] = rc;
  p.l[2] = lb;
  p.l[3] = rb;
  return jx_bind1(&jx_prim_dot_general, 2, (jx_array *[]){a, b}, &p);
}

/* a transposed by perm (a itself for the identity). */
static jx_array *transpose(jx_array *a, int n, const int *perm) {
  int ident = 1;
  for (int i = 0; i < n; i++) ident = ident && perm[i] == i;
  if (ident || !a || a->poisoned) return a;
  jx_params p = JX_PARAMS_INIT;
  p.l[0] = ilist_of(n, perm);
  return jx_bind1(&jx_prim_transpose, 1, &a, &p);
}

/* Sums (or-reduces, for bool) a over the n sorted axes, keeping its dtype. */
static jx_array *reduce(jx_array *a, int n, const int *axes) {
  if (n == 0 || !a || a->poisoned) return a;
  jx_params p = JX_PARAMS_INIT;
  p.l[0] = ilist_of(n, axes);
  return jx_bind1(a->dtype == JX_BOOL ? &jx_prim_reduce_or : &jx_prim_reduce_sum, 1, &a, &p);
}

/* a broadcast (dims of size 1 stretched) to the shape s of the same rank. */
static jx_array *stretch(jx_array *a, jx_shape s) {
  if (!a || a->poisoned || jx_shape_equal(a->shape, s)) return a;
  jx_params p = JX_PARAMS_INIT;
  p.l[0].n = p.l[1].n = s.rank;
  for (int i = 0; i < s.rank; i++) {
    p.l[0].v[i] = s.dims[i];
    p.l[1].v[i] = i;
  }
  return jx_bind1(&jx_prim_broadcast_in_dim, 1, &a, &p);
}

/* The common dtype of n operands (weak only when all are) and the operands
 * converted to it; records an error naming op for NULL operands. */
static jx_status promote_all(const char *op, int n, jx_array *const *xs, jx_array **out) {
  jx_status st = jx_check_inputs(op, n, xs);
  if (st) return st;
  jx_dtype dt = xs[0]->dtype;
  int weak = xs[0]->weak;
  for (int i = 1; i < n; i++) dt = jx_promote_weak(dt, weak, xs[i]->dtype, xs[i]->weak, &weak);
  for (int i = 0; i < n; i++) out[i] = jx_ops_convert(xs[i], dt, weak);
  return jx_check_inputs(op, n, out);
}

/* ---- dot_general ---- */

/* A user axis list as primitive dims: -rank <= v < 0 counts from the end;
 * anything else is passed on for the primitive's rule to report. */
static jx_ilist dims_of(jx_axes ax, int rank) {
  jx_ilist l = {ax.n < 0 || ax.n > JX_MAX_RANK ? JX_MAX_RANK + 1 : ax.n, {0}};
  for (int i = 0; i < ax.n && i < JX_MAX_RANK; i++)
    l.v[i] = ax.v[i] < 0 && ax.v[i] >= -rank ? ax.v[i] + rank : ax.v[i];
  return l;
}

static jx_array *dot_general_impl(const char *op, jx_array *a, jx_array *b, jx_axes lc, jx_axes rc,
                                  jx_axes lb, jx_axes rb, int typed, jx_dtype preferred) {
  jx_array *x[2];
  if (promote_all(op, 2, (jx_array *[]){a, b}, x)) return jx_poison();
  if (typed && !jx_dtype_valid(preferred)) {
    jx_error_set(JX_ERR_DTYPE, "%s: preferred element type %d is not a dtype", op, (int)preferred);
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  int ra = x[0]->shape.rank, rb_ = x[1]->shape.rank;
  p.l[0] = dims_of(lc, ra);
  p.l[1] = dims_of(rc, rb_);
  p.l[2] = dims_of(lb, ra);
  p.l[3] = dims_of(rb, rb_);
  p.i[0] = typed;
  p.dtype = typed ? preferred : JX_BOOL;
  return jx_bind1(&jx_prim_dot_general, 2, x, &p);
}

jx_array *jx_dot_general(jx_array *a, jx_array *b, jx_axes lhs_contract, jx_axes rhs_contract,
                         jx_axes lhs_batch, jx_axes rhs_batch) {
  return dot_general_impl("jx_dot_general", a, b, lhs_contract, rhs_contract, lhs_batch, rhs_batch,
                          0, JX_BOOL);
}

jx_array *jx_dot_general_typed(jx_array *a, jx_array *b, jx_axes lhs_contract, jx_axes rhs_contract,
                               jx_axes lhs_batch, jx_axes rhs_batch, jx_dtype preferred) {
  return dot_general_impl("jx_dot_general_typed", a, b, lhs_contract, rhs_contract, lhs_batch,
                          rhs_batch, 1, preferred);
}

/* ---- matmul ----
 * NumPy's rules: a 1-D lhs is a row [1, K], a 1-D rhs a column [K, 1], and
 * the added dim is dropped from the result; the dims before the last two
 * broadcast. An operand without batch dims needs no broadcast: it enters
 * dot_general with its matrix dims free, and at most a transpose puts the
 * other operand's batch dims first. */
jx_array *jx_matmul(jx_array *a, jx_array *b) {
  const char *op = "jx_matmul";
  jx_array *x[2];
  if (promote_all(op, 2, (jx_array *[]){a, b}, x)) return jx_poison();
  a = x[0];
  b = x[1];
  int ra = a->shape.rank, rb = b->shape.rank;
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  jx_aval_str(a->dtype, a->shape, sa);
  jx_aval_str(b->dtype, b->shape, sb);
  if (ra == 0 || rb == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: operands must be at least 1-D, got %s and %s", op, sa, sb);
    return jx_poison();
  }
  int64_t ka = a->shape.dims[ra - 1], kb = b->shape.dims[rb == 1 ? 0 : rb - 2];
  if (ka != kb) {
    jx_error_set(JX_ERR_SHAPE, "%s: inner dimensions differ: %s @ %s (%lld vs %lld)", op, sa, sb,
                 (long long)ka, (long long)kb);
    return jx_poison();
  }
  int na = ra > 2 ? ra - 2 : 0, nb = rb > 2 ? rb - 2 : 0; /* batch ranks */
  jx_ilist lc = {1, {ra - 1}}, rc = {1, {rb == 1 ? 0 : rb - 2}}, none = {0, {0}};
  if (nb == 0) /* result: a's batch, a's row, b's column */
    return dot(a, b, lc, rc, none, none);
  if (na == 0) { /* result: a's row, b's batch, b's column -> batch first */
    jx_array *r = dot(a, b, lc, rc, none, none);
    int rows = ra == 2, perm[JX_MAX_RANK], k = 0;
    for (int i = 0; i < nb; i++) perm[k++] = rows + i;
    if (rows) perm[k++] = 0;
    perm[k++] = rows + nb;
    return transpose(r, k, perm);
  }
  /* both batched: broadcast the batch dims to their common shape */
  jx_shape ba = {na, {0}}, bb = {nb, {0}}, bc;
  memcpy(ba.dims, a->shape.dims, sizeof(int64_t) * (size_t)na);
  memcpy(bb.dims, b->shape.dims, sizeof(int64_t) * (size_t)nb);
  if (jx_ops_broadcast_shapes(op, ba, bb, &bc)) return jx_poison();
  jx_shape fa = bc, fb = bc;
  fa.rank = fb.rank = bc.rank + 2;
  fa.dims[bc.rank] = a->shape.dims[ra - 2];
  fa.dims[bc.rank + 1] = ka;
  fb.dims[bc.rank] = kb;
  fb.dims[bc.rank + 1] = b->shape.dims[rb - 1];
  a = jx_ops_broadcast(a, fa);
  b = jx_ops_broadcast(b, fb);
  jx_ilist batch = {bc.rank, {0}};
  for (int i = 0; i < bc.rank; i++) batch.v[i] = i;
  lc.v[0] = bc.rank + 1;
  rc.v[0] = bc.rank;
  return dot(a, b, lc, rc, batch, batch);
}

/* ---- einsum ----
 * Labels: 'A'..'Z' are ids 0..25 and 'a'..'z' 26..51, so that id order is
 * NumPy's alphabetical order for the implicit output; the dims an ellipsis
 * stands for are ids 52.. (right-aligned across operands, as broadcasting).
 * Plan: promote; stretch size-1 dims to their label's size; per operand take
 * diagonals of repeated labels and sum labels no one else needs; then
 * contract left to right with dot_general (a label shared by the two sides
 * is a batch dim while a later operand or the output needs it, else it is
 * contracted); a final transpose gives the output order. */

enum { NLETTER = 52, ELL = NLETTER, NLABEL = NLETTER + JX_MAX_RANK, SPEC_CAP = 512 };

typedef struct {
  int n;                /* dims */
  int lab[JX_MAX_RANK]; /* label id of each dim */
} term;

static int label_id(char c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return 26 + c - 'a';
  return -1;
}
static char label_char(int id) {
  return id < 26 ? (char)('A' + id) : id < NLETTER ? (char)('a' + id - 26) : '.';
}

/* Parses one term of letters and at most one "...": fills letters (ids, with
 * ELL marking the ellipsis) and returns their count, or -1 with an error. */
static int parse_term(const char *op, const char *s, size_t len, int *ids, int cap) {
  int n = 0, ell = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] == '.') {
      if (!(i + 2 < len && s[i + 1] == '.' && s[i + 2] == '.')) goto bad_dot;
      if (ell++) {
        jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: more than one \"...\" in term \"%.*s\"", op,
                     (int)len, s);
        return -1;
      }
      if (n >= cap) goto too_many;
      ids[n++] = ELL;
      i += 2;
      continue;
    }
    int id = label_id(s[i]);
    if (id < 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: invalid character '%c' in term \"%.*s\"", op, s[i],
                   (int)len, s);
      return -1;
    }
    if (n >= cap) goto too_many;
    ids[n++] = id;
  }
  return n;
bad_dot:
  jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: a '.' that is not part of \"...\" in term \"%.*s\"",
               op, (int)len, s);
  return -1;
too_many:
  jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: term \"%.*s\" has more than %d dims", op, (int)len, s,
               JX_MAX_RANK);
  return -1;
}

typedef struct {
  int n;       /* operands */
  term in[64]; /* their labels, ellipsis expanded */
  term out;
  int64_t size[NLABEL]; /* size of each label (max over operands) */
} einsum_plan;

/* Parses spec against the operands' shapes; fills the plan or records an error. */
static jx_status plan_einsum(const char *op, const char *spec, int n, jx_array *const *xs,
                             einsum_plan *pl) {
  char buf[SPEC_CAP];
  size_t len = 0;
  for (const char *c = spec; *c; c++) {
    if (*c == ' ') continue;
    if (len + 1 >= sizeof buf)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: spec is longer than %d characters", op,
                          SPEC_CAP - 1);
    buf[len++] = *c;
  }
  buf[len] = '\0';
  const char *arrow = strstr(buf, "->");
  size_t in_len = arrow ? (size_t)(arrow - buf) : len;
  for (size_t i = 0; i < len; i++)
    if ((buf[i] == '-' || buf[i] == '>') && (!arrow || (buf + i != arrow && buf + i != arrow + 1)))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: malformed \"->\" in spec \"%s\"", op, spec);
  int nterms = 1;
  for (size_t i = 0; i < in_len; i++) nterms += buf[i] == ',';
  if (arrow && strchr(arrow + 2, ','))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: the output of spec \"%s\" has a ','", op,
                        spec);
  if (nterms != n)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: spec \"%s\" names %d operands but %d were given", op, spec, nterms, n);

  /* input terms */
  int ids[64][JX_MAX_RANK + 1], nids[64], ell_rank[64], E = 0;
  size_t start = 0;
  for (int t = 0; t < n; t++) {
    size_t end = start;
    while (end < in_len && buf[end] != ',') end++;
    nids[t] = parse_term(op, buf + start, end - start, ids[t], JX_MAX_RANK + 1);
    if (nids[t] < 0) return JX_ERR_INVALID_ARGUMENT;
    int letters = 0, has_ell = 0;
    for (int i = 0; i < nids[t]; i++) {
      letters += ids[t][i] != ELL;
      has_ell |= ids[t][i] == ELL;
    }
    int rank = xs[t]->shape.rank;
    char sa[JX_AVAL_STR_CAP];
    jx_aval_str(xs[t]->dtype, xs[t]->shape, sa);
    if (has_ell ? rank < letters : rank != letters)
      return jx_error_set(JX_ERR_SHAPE, "%s: term \"%.*s\" names %d dims but operand %d is %s", op,
                          (int)(end - start), buf + start, letters, t, sa);
    ell_rank[t] = has_ell ? rank - letters : 0;
    if (ell_rank[t] > E) E = ell_rank[t];
    start = end + 1;
  }
  for (int l = 0; l < NLABEL; l++) pl->size[l] = -1;
  pl->n = n;
  for (int t = 0; t < n; t++) {
    term *tm = &pl->in[t];
    tm->n = 0;
    for (int i = 0; i < nids[t]; i++) {
      if (ids[t][i] != ELL) {
        tm->lab[tm->n++] = ids[t][i];
        continue;
      }
      for (int e = 0; e < ell_rank[t]; e++) tm->lab[tm->n++] = ELL + E - ell_rank[t] + e;
    }
    for (int d = 0; d < tm->n; d++) {
      int l = tm->lab[d];
      int64_t s = xs[t]->shape.dims[d];
      for (int d2 = 0; d2 < d; d2++)
        if (tm->lab[d2] == l && xs[t]->shape.dims[d2] != s)
          return jx_error_set(JX_ERR_SHAPE,
                              "%s: label '%c' repeats in operand %d with sizes "
                              "%lld and %lld",
                              op, label_char(l), t, (long long)xs[t]->shape.dims[d2], (long long)s);
      if (pl->size[l] < 0 || pl->size[l] == 1) {
        pl->size[l] = s;
      } else if (s != 1 && s != pl->size[l]) {
        if (l >= ELL)
          return jx_error_set(JX_ERR_SHAPE,
                              "%s: the \"...\" dims of operand %d do not "
                              "broadcast (%lld vs %lld)",
                              op, t, (long long)s, (long long)pl->size[l]);
        return jx_error_set(JX_ERR_SHAPE,
                            "%s: label '%c' has size %lld in operand %d but %lld "
                            "in an earlier operand",
                            op, label_char(l), (long long)s, t, (long long)pl->size[l]);
      }
    }
  }

  /* output term */
  term *o = &pl->out;
  o->n = 0;
  if (arrow) {
    int oid[JX_MAX_RANK + 1];
    int no = parse_term(op, arrow + 2, strlen(arrow + 2), oid, JX_MAX_RANK + 1);
    if (no < 0) return JX_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < no; i++) {
      if (oid[i] == ELL) {
        for (int e = 0; e < E; e++) {
          if (o->n >= JX_MAX_RANK) goto too_long;
          o->lab[o->n++] = ELL + e;
        }
        continue;
      }
      if (pl->size[oid[i]] < 0)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "%s: output label '%c' is not an input "
                            "label in spec \"%s\"",
                            op, label_char(oid[i]), spec);
      for (int j = 0; j < o->n; j++)
        if (o->lab[j] == oid[i])
          return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                              "%s: output label '%c' appears twice in "
                              "spec \"%s\"",
                              op, label_char(oid[i]), spec);
      if (o->n >= JX_MAX_RANK) goto too_long;
      o->lab[o->n++] = oid[i];
    }
  } else { /* implicit: the ellipsis dims, then labels used once, alphabetically */
    int count[NLABEL] = {0};
    for (int t = 0; t < n; t++)
      for (int d = 0; d < pl->in[t].n; d++) count[pl->in[t].lab[d]]++;
    for (int e = 0; e < E; e++) {
      if (o->n >= JX_MAX_RANK) goto too_long;
      o->lab[o->n++] = ELL + e;
    }
    for (int l = 0; l < NLETTER; l++)
      if (count[l] == 1) {
        if (o->n >= JX_MAX_RANK) goto too_long;
        o->lab[o->n++] = l;
      }
  }
  return JX_OK;
too_long:
  return jx_error_set(JX_ERR_SHAPE, "%s: the output of spec \"%s\" has more than %d dims", op, spec,
                      JX_MAX_RANK);
}

static int has_label(const term *t, int l) {
  for (int d = 0; d < t->n; d++)
    if (t->lab[d] == l) return 1;
  return 0;
}

/* x with the dims of each repeated label reduced to their diagonal (kept at
 * the label's first dim): a mask selects the diagonal, then a sum. */
static jx_array *diagonals(jx_array *x, term *t) {
  for (int d = 0; d < t->n && !x->poisoned; d++) {
    int axes[JX_MAX_RANK], na = 0;
    for (int e = d; e < t->n; e++)
      if (t->lab[e] == t->lab[d]) axes[na++] = e;
    if (na == 1) continue;
    int64_t size = x->shape.dims[d], total = 1;
    jx_shape ms = {na, {0}};
    for (int i = 0; i < na; i++) {
      ms.dims[i] = size;
      total *= size;
    }
    uint8_t *mask = calloc((size_t)total + 1, 1);
    if (!mask) {
      jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_einsum: out of memory");
      return jx_poison();
    }
    int64_t step = 0, pw = 1; /* flat index of (i, i, ..., i) is i * (1 + s + s^2 + ...) */
    for (int i = 0; i < na; i++, pw *= size) step += pw;
    for (int64_t i = 0; i < size; i++) mask[i * step] = 1;
    jx_array *m = jx_array_from(JX_BOOL, ms, mask);
    free(mask);
    jx_params bp = JX_PARAMS_INIT;
    bp.l[0].n = x->shape.rank;
    for (int i = 0; i < x->shape.rank; i++) bp.l[0].v[i] = x->shape.dims[i];
    bp.l[1] = ilist_of(na, axes);
    m = jx_bind1(&jx_prim_broadcast_in_dim, 1, &m, &bp);
    jx_array *zero = jx_ops_convert(jx_zeros(x->dtype, x->shape), x->dtype, x->weak);
    x = jx_bind1(&jx_prim_select_n, 3, (jx_array *[]){m, zero, x}, NULL);
    x = reduce(x, na - 1, axes + 1);
    int k = 0;
    for (int e = 0; e < t->n; e++)
      if (e == d || t->lab[e] != t->lab[d]) t->lab[k++] = t->lab[e];
    t->n = k;
  }
  return x;
}

jx_array *jx_einsum(const char *spec, int n, jx_array *const *xs) {
  const char *op = "jx_einsum";
  if (!spec || !xs || n < 1 || n > 64) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: needs a spec and 1 to 64 operands, got %s and %d",
                 op, spec ? "a spec" : "no spec", n);
    return jx_poison();
  }
  jx_array *x[64];
  if (promote_all(op, n, xs, x)) return jx_poison();
  jx_dtype dt = x[0]->dtype;
  int weak = x[0]->weak;
  einsum_plan pl;
  if (plan_einsum(op, spec, n, x, &pl)) return jx_poison();

  /* per operand: stretch, diagonals, sums of labels only it has */
  for (int t = 0; t < n; t++) {
    term *tm = &pl.in[t];
    jx_shape full = {tm->n, {0}};
    for (int d = 0; d < tm->n; d++) full.dims[d] = pl.size[tm->lab[d]];
    x[t] = diagonals(stretch(x[t], full), tm);
    int axes[JX_MAX_RANK], na = 0, k = 0;
    for (int d = 0; d < tm->n; d++) {
      int l = tm->lab[d], elsewhere = has_label(&pl.out, l);
      for (int u = 0; u < n && !elsewhere; u++) elsewhere = u != t && has_label(&pl.in[u], l);
      if (elsewhere)
        tm->lab[k++] = l;
      else
        axes[na++] = d;
    }
    tm->n = k;
    x[t] = reduce(x[t], na, axes);
  }

  /* contract left to right */
  jx_array *acc = x[0];
  term at = pl.in[0];
  for (int t = 1; t < n; t++) {
    const term *rt = &pl.in[t];
    jx_ilist lc = {0, {0}}, rc = lc, lb = lc, rb = lc;
    term res = {0, {0}};
    for (int d = 0; d < at.n; d++) {
      int l = at.lab[d], later = has_label(&pl.out, l);
      for (int u = t + 1; u < n && !later; u++) later = has_label(&pl.in[u], l);
      int e = 0;
      while (e < rt->n && rt->lab[e] != l) e++;
      if (e == rt->n) continue;
      jx_ilist *ll = later ? &lb : &lc, *rl = later ? &rb : &rc;
      ll->v[ll->n++] = d;
      rl->v[rl->n++] = e;
      if (later) res.lab[res.n++] = l;
    }
    for (int d = 0; d < at.n; d++)
      if (!has_label(rt, at.lab[d])) res.lab[res.n++] = at.lab[d];
    for (int e = 0; e < rt->n; e++)
      if (!has_label(&at, rt->lab[e])) res.lab[res.n++] = rt->lab[e];
    if (res.n > JX_MAX_RANK) {
      jx_error_set(JX_ERR_SHAPE, "%s: an intermediate of spec \"%s\" has more than %d dims", op,
                   spec, JX_MAX_RANK);
      return jx_poison();
    }
    acc = dot(acc, x[t], lc, rc, lb, rb);
    at = res;
  }

  int perm[JX_MAX_RANK];
  for (int i = 0; i < pl.out.n; i++)
    for (int d = 0; d < at.n; d++)
      if (at.lab[d] == pl.out.lab[i]) perm[i] = d;
  acc = transpose(acc, pl.out.n, perm);
  return jx_ops_convert(acc, dt, weak);
}

/* ---- convolutions ---- */

/* Parses "NHWC,HWIO,NHWC" into the primitive's specs (l5, l6, l7) as
 * lax.conv_dimension_numbers: N/C (lhs, out) and O/I (rhs) once each, the
 * other letters spatial, the same set in all three, ordered as in the rhs
 * spec. NULL means lax's default: N, C (O, I) then the spatial dims in order. */
static jx_status parse_layout(const char *op, const char *layout, int rank, jx_params *p) {
  if (!layout) {
    for (int s = 0; s < 3; s++) {
      p->l[5 + s].n = rank;
      for (int i = 0; i < rank; i++) p->l[5 + s].v[i] = i;
    }
    return JX_OK;
  }
  const char *parts[3];
  size_t lens[3];
  const char *c = layout;
  for (int s = 0; s < 3; s++) {
    parts[s] = c;
    while (*c && *c != ',') c++;
    lens[s] = (size_t)(c - parts[s]);
    if (s < 2) {
      if (*c != ',') goto bad;
      c++;
    }
  }
  if (*c) goto bad;
  static const char pair[3][2] = {{'N', 'C'}, {'O', 'I'}, {'N', 'C'}};
  for (int s = 0; s < 3; s++) {
    if ((int)lens[s] != rank)
      return jx_error_set(JX_ERR_SHAPE,
                          "%s: layout \"%s\": \"%.*s\" has %d letters but the "
                          "operands have rank %d",
                          op, layout, (int)lens[s], parts[s], (int)lens[s], rank);
    for (size_t i = 0; i < lens[s]; i++)
      for (size_t j = 0; j < i; j++)
        if (parts[s][i] == parts[s][j])
          return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                              "%s: layout \"%s\": letter '%c' repeats "
                              "in \"%.*s\"",
                              op, layout, parts[s][i], (int)lens[s], parts[s]);
    for (int k = 0; k < 2; k++) {
      const char *hit = memchr(parts[s], pair[s][k], lens[s]);
      if (!hit)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "%s: layout \"%s\": \"%.*s\" needs one '%c' "
                            "(%s)",
                            op, layout, (int)lens[s], parts[s], pair[s][k],
                            s == 1 ? (k ? "input features" : "output features")
                                   : (k ? "features" : "batch"));
      p->l[5 + s].v[k] = hit - parts[s];
    }
    p->l[5 + s].n = rank;
  }
  /* spatial dims, in the rhs spec's order */
  int k = 2;
  for (size_t i = 0; i < lens[1]; i++) {
    char ch = parts[1][i];
    if (ch == 'O' || ch == 'I') continue;
    for (int s = 0; s < 3; s += 2) {
      const char *hit = memchr(parts[s], ch, lens[s]);
      if (!hit || ch == 'N' || ch == 'C')
        return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                            "%s: layout \"%s\": spatial dim '%c' of the "
                            "kernel is missing from \"%.*s\"",
                            op, layout, ch, (int)lens[s], parts[s]);
      p->l[5 + s].v[k] = hit - parts[s];
    }
    p->l[6].v[k++] = (int64_t)i;
  }
  return JX_OK;
bad:
  return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                      "%s: layout \"%s\" must be three comma-separated "
                      "specs such as \"NHWC,HWIO,NHWC\"",
                      op, layout);
}

/* A per-spatial-dim list from a user shape: JX_SHAPE() stays empty (the
 * primitive's default), otherwise it needs nsp entries. */
static jx_status spatial_list(const char *op, const char *what, jx_shape s, int nsp,
                              jx_ilist *out) {
  if (s.rank != 0 && s.rank != nsp)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "%s: %s has %d entries but there are %d "
                        "spatial dims",
                        op, what, s.rank, nsp);
  out->n = s.rank;
  for (int i = 0; i < s.rank; i++) out->v[i] = s.dims[i];
  return JX_OK;
}

static jx_array *conv_impl(const char *op, jx_array *x, jx_array *w, jx_shape strides,
                           jx_shape pad_lo, jx_shape pad_hi, jx_shape lhs_dil, jx_shape rhs_dil,
                           const char *layout, int groups) {
  jx_array *in[2];
  if (promote_all(op, 2, (jx_array *[]){x, w}, in)) return jx_poison();
  int rank = in[0]->shape.rank;
  char sa[JX_AVAL_STR_CAP], sb[JX_AVAL_STR_CAP];
  if (rank < 2 || rank != in[1]->shape.rank) {
    jx_error_set(JX_ERR_SHAPE, "%s: input %s and kernel %s need one rank of at least 2", op,
                 jx_aval_str(in[0]->dtype, in[0]->shape, sa),
                 jx_aval_str(in[1]->dtype, in[1]->shape, sb));
    return jx_poison();
  }
  jx_params p = JX_PARAMS_INIT;
  int nsp = rank - 2;
  if (parse_layout(op, layout, rank, &p) || spatial_list(op, "strides", strides, nsp, &p.l[0]) ||
      spatial_list(op, "pad_lo", pad_lo, nsp, &p.l[1]) ||
      spatial_list(op, "pad_hi", pad_hi, nsp, &p.l[2]) ||
      spatial_list(op, "lhs_dilation", lhs_dil, nsp, &p.l[3]) ||
      spatial_list(op, "rhs_dilation", rhs_dil, nsp, &p.l[4]))
    return jx_poison();
  int64_t C = in[0]->shape.dims[p.l[5].v[1]], I = in[1]->shape.dims[p.l[6].v[1]];
  if (groups >= 1 && C != I * groups) {
    jx_error_set(JX_ERR_SHAPE,
                 "%s: input %s has %lld features but kernel %s expects %lld x %d "
                 "groups = %lld (layout \"%s\")",
                 op, jx_aval_str(in[0]->dtype, in[0]->shape, sa), (long long)C,
                 jx_aval_str(in[1]->dtype, in[1]->shape, sb), (long long)I, groups,
                 (long long)(I * groups), layout ? layout : "default");
    return jx_poison();
  }
  p.i[0] = groups;
  p.i[1] = 1;
  return jx_bind1(&jx_prim_conv_general_dilated, 2, in, &p);
}

jx_array *jx_conv(jx_array *x, jx_array *w, jx_shape strides, jx_shape pad_lo, jx_shape pad_hi,
                  const char *layout) {
  return conv_impl("jx_conv", x, w, strides, pad_lo, pad_hi, JX_SHAPE(), JX_SHAPE(), layout, 1);
}

jx_array *jx_conv_general_dilated(jx_array *x, jx_array *w, jx_shape strides, jx_shape pad_lo,
                                  jx_shape pad_hi, jx_shape lhs_dilation, jx_shape rhs_dilation,
                                  const char *layout, int feature_group_count) {
  return conv_impl("jx_conv_general_dilated", x, w, strides, pad_lo, pad_hi, lhs_dilation,
                   rhs_dilation, layout, feature_group_count);
}
