/* The patterns cuda_fuse.h fuses, found on the lowered program. Each
 * matcher marks a "core" of equations, then close_pattern absorbs what only
 * the core reads (the broadcasts of its constants and of the bias, the
 * iotas of the mask) and refuses the match when an intermediate is read
 * outside it. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../prims/dot_kernels.h"
#include "../prims/prims.h"
#include "cuda_exec.h"
#include "cuda_fuse.h"
#include "kernels_attention.h"

jx_status jx_cuda_fuse_index_build(const jx_program *p, jx_cuda_fuse_index *ix) {
  ix->readers = calloc((size_t)p->nvars + 1, sizeof *ix->readers);
  ix->def = malloc(sizeof *ix->def * ((size_t)p->nvars + 1));
  if (!ix->readers || !ix->def) {
    jx_cuda_fuse_index_free(ix);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA executor: out of host memory");
  }
  for (int v = 0; v < p->nvars; v++) ix->def[v] = -1;
  for (int e = 0; e < p->neqns; e++) {
    for (int i = 0; i < p->eqns[e].nin; i++) ix->readers[p->eqns[e].in[i]]++;
    for (int o = 0; o < p->eqns[e].nout; o++) ix->def[p->eqns[e].out[o]] = e;
  }
  for (int o = 0; o < p->nout; o++) ix->readers[p->out[o]]++;
  return JX_OK;
}

void jx_cuda_fuse_index_free(jx_cuda_fuse_index *ix) {
  free(ix->readers);
  free(ix->def);
  ix->readers = ix->def = NULL;
}

static const jx_eqn *def_of(const jx_program *p, const jx_cuda_fuse_index *ix, int v,
                            const jx_prim *prim) {
  int e = ix->def[v];
  if (e < 0 || p->eqns[e].prim != prim) return NULL;
  return &p->eqns[e];
}

static int index_of(const jx_program *p, const jx_eqn *e) { return (int)(e - p->eqns); }

static int list_is(const jx_ilist *l, int n, const int64_t *v) {
  if (l->n != n) return 0;
  for (int i = 0; i < n; i++)
    if (l->v[i] != v[i]) return 0;
  return 1;
}

/* v's value when it is a scalar constant broadcast (broadcast_in_dim of a
 * one-element constant), as every literal of a traced expression is. */
static int scalar_const(const jx_program *p, const jx_cuda_fuse_index *ix, int v, double *value) {
  const jx_eqn *b = def_of(p, ix, v, &jx_prim_broadcast_in_dim);
  if (b) v = b->in[0];
  jx_array *c = NULL;
  if (!jx_program_is_const(p, v, &c) || jx_shape_numel(p->avals[v].shape) != 1) return 0;
  int clean = jx_last_status() == JX_OK;
  *value = jx_item(c);
  if (clean && jx_last_status()) jx_clear_error();
  return !isnan(*value);
}

/* Marks what only the core reads, then checks that nothing outside reads
 * an intermediate (every output of the core but ys[0..nys)), reads[] being
 * the pattern's inputs. On success the core is copied to member[]. */
static int close_many(const jx_program *p, const jx_cuda_fuse_index *ix, uint8_t *core,
                      const int *ys, int nys, const int *reads, int nreads, uint8_t *member) {
  int *inside = calloc((size_t)p->nvars + 1, sizeof *inside);
  if (!inside) return 0;
  for (int e = 0; e < p->neqns; e++)
    if (core[e])
      for (int i = 0; i < p->eqns[e].nin; i++) inside[p->eqns[e].in[i]]++;
  /* readers come after their writer: one backward pass absorbs chains */
  for (int e = p->neqns - 1; e >= 0; e--) {
    const jx_eqn *q = &p->eqns[e];
    if (core[e] || q->nout < 1 || q->nsub || jx_eqn_has_effect(q)) continue;
    int only_core = 1;
    for (int o = 0; o < q->nout && only_core; o++) {
      int v = q->out[o];
      only_core = ix->readers[v] > 0 && inside[v] == ix->readers[v];
      for (int i = 0; i < nys && only_core; i++) only_core = v != ys[i];
      for (int r = 0; r < nreads && only_core; r++) only_core = v != reads[r];
    }
    if (!only_core) continue;
    core[e] = 1;
    for (int i = 0; i < q->nin; i++) inside[q->in[i]]++;
  }
  int closed = 1;
  for (int e = 0; e < p->neqns && closed; e++)
    for (int o = 0; core[e] && o < p->eqns[e].nout && closed; o++) {
      int v = p->eqns[e].out[o];
      closed = inside[v] == ix->readers[v];
      for (int i = 0; i < nys && !closed; i++) closed = v == ys[i];
    }
  free(inside);
  if (closed) memcpy(member, core, (size_t)p->neqns);
  return closed;
}

static int close_pattern(const jx_program *p, const jx_cuda_fuse_index *ix, uint8_t *core, int y,
                         const jx_cuda_fused_op *op, uint8_t *member) {
  return close_many(p, ix, core, &y, 1, op->reads, op->nreads, member);
}

/* ---- activations, recognised by evaluation ---- */

enum { PROBES = 33, MAX_CHAIN = 32 };

static double probe(int i) { return -6.0 + 12.0 * i / (PROBES - 1) + 0.013; }
static double relu_ref(double x) { return x > 0 ? x : 0; }
static double gelu_ref(double x) {
  return 0.5 * x * (1 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
}

/* Evaluates one elementwise equation on the probes; 0 if it is not one. */
static int eval_eqn(const jx_eqn *e, double *const in[2], double *out) {
  for (int i = 0; i < PROBES; i++) {
    double a = in[0][i], b = e->nin > 1 ? in[1][i] : 0;
    switch (e->prim->id) {
    case JX_PRIM_add: out[i] = a + b; break;
    case JX_PRIM_sub: out[i] = a - b; break;
    case JX_PRIM_mul: out[i] = a * b; break;
    case JX_PRIM_div: out[i] = a / b; break;
    case JX_PRIM_max: out[i] = a > b ? a : b; break;
    case JX_PRIM_min: out[i] = a < b ? a : b; break;
    case JX_PRIM_neg: out[i] = -a; break;
    case JX_PRIM_tanh: out[i] = tanh(a); break;
    case JX_PRIM_exp: out[i] = exp(a); break;
    case JX_PRIM_logistic: out[i] = 1 / (1 + exp(-a)); break;
    case JX_PRIM_erf: out[i] = erf(a); break;
    case JX_PRIM_integer_pow: out[i] = pow(a, (double)e->params.i[0]); break;
    default: return 0;
    }
  }
  return 1;
}

/* The activation the chain after `a` (the biased GEMM) computes, when one
 * of its prefixes is ReLU or tanh-GELU and closed; marks it in core. */
static jx_cuda_act match_activation(const jx_program *p, const jx_cuda_fuse_index *ix, int a,
                                    int after, uint8_t *core, int *y, const jx_cuda_fused_op *op,
                                    uint8_t *member) {
  int chain[MAX_CHAIN], n = 0;
  static const jx_prim *const ok[] = {&jx_prim_add,      &jx_prim_sub,  &jx_prim_mul,
                                      &jx_prim_div,      &jx_prim_max,  &jx_prim_min,
                                      &jx_prim_neg,      &jx_prim_tanh, &jx_prim_exp,
                                      &jx_prim_logistic, &jx_prim_erf,  &jx_prim_integer_pow};
  jx_aval av = p->avals[a];
  /* the elementwise equations reading only a, each other and scalar constants */
  for (int e = after + 1; e < p->neqns && n < MAX_CHAIN; e++) {
    const jx_eqn *q = &p->eqns[e];
    int fits = 0;
    for (size_t k = 0; k < sizeof ok / sizeof *ok; k++) fits |= q->prim == ok[k];
    if (!fits || q->nout != 1 || q->nin > 2 || p->avals[q->out[0]].dtype != av.dtype ||
        !jx_shape_equal(p->avals[q->out[0]].shape, av.shape))
      continue;
    int from_chain = 0;
    for (int i = 0; i < q->nin && fits; i++) {
      int v = q->in[i], known = v == a;
      for (int c = 0; c < n && !known; c++) known = p->eqns[chain[c]].out[0] == v;
      double unused;
      from_chain |= known;
      fits = known || scalar_const(p, ix, v, &unused);
    }
    if (fits && from_chain) chain[n++] = e;
  }
  double(*vals)[PROBES] = malloc(sizeof *vals * (MAX_CHAIN + 1));
  double *consts = malloc(sizeof *consts * 2 * PROBES);
  uint8_t *trial = malloc((size_t)p->neqns + 1);
  jx_cuda_act found = JX_CUDA_ACT_NONE;
  if (!vals || !consts || !trial) n = 0;
  for (int i = 0; i < PROBES && n; i++) vals[MAX_CHAIN][i] = probe(i);
  /* each chain member as the activation's output: its ancestors in the chain */
  for (int last = 0; last < n && found == JX_CUDA_ACT_NONE; last++) {
    uint8_t need[MAX_CHAIN] = {0};
    need[last] = 1;
    for (int c = last; c >= 0; c--)
      for (int i = 0; need[c] && i < p->eqns[chain[c]].nin; i++)
        for (int d = 0; d < c; d++) need[d] |= p->eqns[chain[d]].out[0] == p->eqns[chain[c]].in[i];
    int evaluated = 1;
    for (int c = 0; c <= last && evaluated; c++) {
      if (!need[c]) continue;
      const jx_eqn *q = &p->eqns[chain[c]];
      double *in[2] = {consts, consts + PROBES};
      for (int i = 0; i < q->nin; i++) {
        int v = q->in[i], src = v == a ? MAX_CHAIN : -1;
        for (int d = 0; d < c && src < 0; d++)
          if (need[d] && p->eqns[chain[d]].out[0] == v) src = d;
        double k = 0;
        if (src >= 0) {
          in[i] = vals[src];
        } else {
          evaluated = scalar_const(p, ix, v, &k);
          for (int j = 0; j < PROBES; j++) in[i][j] = k;
        }
      }
      evaluated = evaluated && eval_eqn(q, in, vals[c]);
    }
    int relu = evaluated, gelu = evaluated;
    for (int i = 0; i < PROBES && evaluated; i++) {
      double x = probe(i), got = vals[last][i];
      relu &= fabs(got - relu_ref(x)) <= 1e-5 * (1 + fabs(x));
      gelu &= fabs(got - gelu_ref(x)) <= 1e-5 * (1 + fabs(x));
    }
    if (!relu && !gelu) continue;
    memcpy(trial, core, (size_t)p->neqns);
    for (int c = 0; c <= last; c++) trial[chain[c]] |= need[c];
    if (close_pattern(p, ix, trial, p->eqns[chain[last]].out[0], op, member)) {
      found = relu ? JX_CUDA_ACT_RELU : JX_CUDA_ACT_GELU;
      *y = p->eqns[chain[last]].out[0];
    }
  }
  free(vals);
  free(consts);
  free(trial);
  return found;
}

/* ---- epilogue ---- */

int jx_cuda_match_epilogue(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                           jx_cuda_fused_op *op, uint8_t *member) {
  const jx_eqn *dot = &p->eqns[root];
  jx_cuda_fused_op m = {.kind = JX_CUDA_FUSED_EPILOGUE};
  if (!jx_cuda_dot_as_gemm(p, dot, &m.gemm) || ix->readers[dot->out[0]] != 1) return 0;
  int d = dot->out[0], add = -1;
  for (int e = root + 1; e < p->neqns && add < 0; e++)
    for (int i = 0; i < p->eqns[e].nin; i++)
      if (p->eqns[e].in[i] == d) add = e;
  if (add < 0 || p->eqns[add].prim != &jx_prim_add) return 0;
  const jx_eqn *sum = &p->eqns[add];
  int other = sum->in[0] == d ? sum->in[1] : sum->in[0];
  const jx_eqn *bc = def_of(p, ix, other, &jx_prim_broadcast_in_dim);
  jx_aval out = p->avals[d];
  int rank = out.shape.rank;
  if (!bc) return 0;
  int bias = bc->in[0];
  jx_aval b = p->avals[bias];
  if (b.dtype != out.dtype || b.shape.rank != 1 || b.shape.dims[0] != m.gemm.n ||
      !list_is(&bc->params.l[1], 1, (int64_t[]){rank - 1}) ||
      p->avals[sum->out[0]].dtype != out.dtype)
    return 0;
  m.dtype = out.dtype;
  m.nreads = 3;
  m.reads[0] = dot->in[0];
  m.reads[1] = dot->in[1];
  m.reads[2] = bias;
  m.gemm.has_bias = 1;
  uint8_t *core = calloc((size_t)p->neqns + 1, 1);
  if (!core) return 0;
  core[root] = core[add] = 1;
  core[index_of(p, bc)] = ix->readers[other] == 1;
  int y = sum->out[0];
  m.gemm.act = match_activation(p, ix, y, add, core, &y, &m, member);
  int ok = m.gemm.act != JX_CUDA_ACT_NONE || close_pattern(p, ix, core, y, &m, member);
  free(core);
  if (!ok) return 0;
  m.nouts = 1;
  m.outs[0] = y;
  *op = m;
  return 1;
}

/* ---- softmax ---- */

/* Follows v, of shape full, back through a row broadcast (reshape adding or
 * dropping a trailing 1, broadcast_in_dim keeping the leading dims,
 * stop_gradient) to the reduction over the last axis it broadcasts; marks
 * the equations on the way and returns the reduction's, or NULL. */
static const jx_eqn *row_source(const jx_program *p, const jx_cuda_fuse_index *ix, int v,
                                jx_shape full, const jx_prim *reduce, uint8_t *core) {
  int r = full.rank;
  for (int steps = 0; steps < 8; steps++) {
    int e = ix->def[v];
    if (e < 0) return NULL;
    const jx_eqn *q = &p->eqns[e];
    jx_shape s = p->avals[v].shape;
    int lead_ok = s.rank == r - 1 ||
                  (s.rank == r && (s.dims[r - 1] == 1 || s.dims[r - 1] == full.dims[r - 1]));
    for (int d = 0; d < r - 1 && lead_ok; d++) lead_ok = s.dims[d] == full.dims[d];
    if (!lead_ok) return NULL;
    core[e] = 1;
    if (q->prim == reduce) {
      return s.rank == r - 1 && list_is(&q->params.l[0], 1, (int64_t[]){r - 1}) ? q : NULL;
    } else if (q->prim == &jx_prim_broadcast_in_dim) {
      int k = p->avals[q->in[0]].shape.rank;
      for (int d = 0; d < k; d++)
        if (q->params.l[1].n != k || q->params.l[1].v[d] != d) return NULL;
    } else if (q->prim != &jx_prim_reshape && q->prim != &jx_prim_stop_gradient) {
      return NULL;
    }
    v = q->in[0];
  }
  return NULL;
}

/* Marks the lowered softmax ending at div equation `root`; its input in *x. */
static int softmax_core(const jx_program *p, const jx_cuda_fuse_index *ix, int root, uint8_t *core,
                        int *x) {
  const jx_eqn *div = &p->eqns[root];
  if (div->prim != &jx_prim_div) return 0;
  jx_aval av = p->avals[div->out[0]];
  if ((av.dtype != JX_F32 && av.dtype != JX_BF16) || av.shape.rank < 1) return 0;
  const jx_eqn *ex = def_of(p, ix, div->in[0], &jx_prim_exp);
  const jx_eqn *sum = row_source(p, ix, div->in[1], av.shape, &jx_prim_reduce_sum, core);
  if (!ex || !sum || sum->in[0] != div->in[0]) return 0;
  const jx_eqn *sub = def_of(p, ix, ex->in[0], &jx_prim_sub);
  if (!sub) return 0;
  const jx_eqn *max = row_source(p, ix, sub->in[1], av.shape, &jx_prim_reduce_max, core);
  if (!max || max->in[0] != sub->in[0] || p->avals[sub->in[0]].dtype != av.dtype) return 0;
  core[root] = core[index_of(p, ex)] = core[index_of(p, sub)] = 1;
  *x = sub->in[0];
  return 1;
}

int jx_cuda_match_softmax(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                          jx_cuda_fused_op *op, uint8_t *member) {
  uint8_t *core = calloc((size_t)p->neqns + 1, 1);
  int x = -1, ok = core && softmax_core(p, ix, root, core, &x);
  jx_cuda_fused_op m = {.kind = JX_CUDA_FUSED_SOFTMAX, .nreads = 1, .reads = {x}};
  m.nouts = 1;
  m.outs[0] = ok ? p->eqns[root].out[0] : -1;
  ok = ok && close_pattern(p, ix, core, m.outs[0], &m, member);
  free(core);
  if (!ok) return 0;
  jx_aval av = p->avals[m.outs[0]];
  m.dtype = av.dtype;
  m.cols = av.shape.dims[av.shape.rank - 1];
  m.rows = m.cols ? jx_shape_numel(av.shape) / m.cols : 0;
  *op = m;
  return 1;
}

/* ---- attention ---- */

static int is_dot(const jx_eqn *e, int64_t lc, int64_t rc, int64_t lb1, int64_t rb1) {
  const jx_params *q = &e->params;
  return e->prim == &jx_prim_dot_general && list_is(&q->l[JX_DOT_LC], 1, (int64_t[]){lc}) &&
         list_is(&q->l[JX_DOT_RC], 1, (int64_t[]){rc}) &&
         list_is(&q->l[JX_DOT_LB], 2, (int64_t[]){0, lb1}) &&
         list_is(&q->l[JX_DOT_RB], 2, (int64_t[]){0, rb1});
}

/* 1 when pred is broadcast_in_dim(ge(iota dim 0, iota dim 1) [t, t], dims
 * (2, 3)): query i sees key j <= i. */
static int causal_mask(const jx_program *p, const jx_cuda_fuse_index *ix, int pred, int64_t t) {
  const jx_eqn *bc = def_of(p, ix, pred, &jx_prim_broadcast_in_dim);
  const jx_eqn *ge = bc ? def_of(p, ix, bc->in[0], &jx_prim_ge) : NULL;
  if (!ge || !list_is(&bc->params.l[1], 2, (int64_t[]){2, 3})) return 0;
  const jx_eqn *rows = def_of(p, ix, ge->in[0], &jx_prim_iota);
  const jx_eqn *cols = def_of(p, ix, ge->in[1], &jx_prim_iota);
  jx_shape s = p->avals[ge->out[0]].shape;
  if (!rows || !cols || s.rank != 2 || s.dims[0] != t || s.dims[1] != t || rows->params.i[0] != 0 ||
      cols->params.i[0] != 1)
    return 0;
  return 1; /* constants: close_pattern absorbs them unless other layers share them */
}

int jx_cuda_match_attention(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                            jx_cuda_fused_op *op, uint8_t *member) {
  const jx_eqn *pv = &p->eqns[root];
  if (!is_dot(pv, 3, 1, 1, 2) || pv->nin != 2) return 0;
  jx_shape vs = p->avals[pv->in[1]].shape, ps = p->avals[pv->in[0]].shape;
  if (vs.rank != 4 || ps.rank != 4 || p->avals[pv->out[0]].dtype != JX_F32 ||
      p->avals[pv->in[1]].dtype != JX_F32)
    return 0;
  jx_cuda_fused_op m = {.kind = JX_CUDA_FUSED_ATTENTION, .dtype = JX_F32, .scale = 1};
  m.batch = vs.dims[0];
  m.t = vs.dims[1];
  m.heads = vs.dims[2];
  m.head_dim = vs.dims[3];
  if (!jx_cuda_attention_kernel(JX_F32, m.head_dim) || m.batch > 65535 || m.heads > 65535) return 0;
  uint8_t *core = calloc((size_t)p->neqns + 1, 1);
  if (!core) return 0;
  int ok = 0, x = -1, soft = ix->def[pv->in[0]];
  core[root] = 1;
  if (soft >= 0 && softmax_core(p, ix, soft, core, &x)) {
    const jx_eqn *sel = def_of(p, ix, x, &jx_prim_select_n);
    double neg = 0, scale = 1;
    int scores = x;
    if (sel && sel->nin == 3 && scalar_const(p, ix, sel->in[1], &neg) && neg <= -1e30 &&
        causal_mask(p, ix, sel->in[0], m.t)) {
      core[index_of(p, sel)] = 1;
      m.causal = 1;
      scores = sel->in[2];
    }
    const jx_eqn *mul = def_of(p, ix, scores, &jx_prim_mul);
    if (mul && scalar_const(p, ix, mul->in[1], &scale)) {
      scores = mul->in[0];
    } else if (mul && scalar_const(p, ix, mul->in[0], &scale)) {
      scores = mul->in[1];
    } else {
      mul = NULL;
      scale = 1;
    }
    if (mul) core[index_of(p, mul)] = 1;
    int qk = ix->def[scores];
    if (qk >= 0 && is_dot(&p->eqns[qk], 3, 3, 2, 2)) {
      const jx_eqn *d = &p->eqns[qk];
      core[qk] = 1;
      m.scale = (float)scale;
      m.nreads = 3;
      m.reads[0] = d->in[0];
      m.reads[1] = d->in[1];
      m.reads[2] = pv->in[1];
      m.nouts = 1;
      m.outs[0] = pv->out[0];
      ok = 1;
      for (int i = 0; i < 2; i++) {
        jx_aval a = p->avals[d->in[i]];
        ok &= a.dtype == JX_F32 && jx_shape_equal(a.shape, vs);
      }
      ok = ok && p->avals[scores].dtype == JX_F32 && ps.dims[2] == m.t && ps.dims[3] == m.t;
    }
  }
  ok = ok && close_pattern(p, ix, core, m.outs[0], &m, member);
  free(core);
  if (ok) *op = m;
  return ok;
}

/* ---- softmax cross-entropy ---- */

/* The equations reading v (each once), up to max of them; how many. */
static int readers_of(const jx_program *p, const jx_cuda_fuse_index *ix, int v, int *out, int max) {
  int n = 0;
  for (int e = ix->def[v] + 1; e < p->neqns; e++)
    for (int i = 0; i < p->eqns[e].nin; i++)
      if (p->eqns[e].in[i] == v) {
        if (n < max) out[n] = e;
        n++;
        break;
      }
  return n;
}

/* The one equation reading v, when v has exactly one read and it is by an
 * equation of prim (NULL: any); else -1. */
static int sole_reader(const jx_program *p, const jx_cuda_fuse_index *ix, int v,
                       const jx_prim *prim) {
  int r = -1;
  if (ix->readers[v] != 1 || readers_of(p, ix, v, &r, 1) != 1) return -1;
  return !prim || p->eqns[r].prim == prim ? r : -1;
}

/* v through the reshapes and expand_dims that made it (the same elements in
 * the same order). */
static int through_views(const jx_program *p, const jx_cuda_fuse_index *ix, int v) {
  for (int steps = 0; steps < 4; steps++) {
    int e = ix->def[v];
    if (e < 0 || (p->eqns[e].prim != &jx_prim_reshape && p->eqns[e].prim != &jx_prim_expand_dims))
      break;
    v = p->eqns[e].in[0];
  }
  return v;
}

/* When v (of shape full, rank r) is broadcast_in_dim of an f32 array of
 * `rows` elements along full's leading dims (one per row of the [rows,
 * last] view), that array seen through its views; else -1. Marks the
 * broadcast in core. */
static int row_operand(const jx_program *p, const jx_cuda_fuse_index *ix, int v, jx_shape full,
                       int64_t rows, uint8_t *core) {
  const jx_eqn *b = def_of(p, ix, v, &jx_prim_broadcast_in_dim);
  if (!b) return -1;
  jx_shape s = p->avals[b->in[0]].shape;
  int k = s.rank, r = full.rank;
  if (k < r - 1 || k > r || (k == r && s.dims[r - 1] != 1) || b->params.l[1].n != k) return -1;
  for (int d = 0; d < k; d++)
    if (b->params.l[1].v[d] != d || (d < r - 1 && s.dims[d] != full.dims[d])) return -1;
  int w = through_views(p, ix, b->in[0]);
  if (p->avals[w].dtype != JX_F32 || jx_shape_numel(p->avals[w].shape) != rows) return -1;
  core[index_of(p, b)] = 1;
  return w;
}

/* 1 when e is a reduction of prim over its operand's last axis alone. */
static int over_last(const jx_program *p, const jx_eqn *e, const jx_prim *prim) {
  if (e->prim != prim || e->nin != 1) return 0;
  int r = p->avals[e->in[0]].shape.rank;
  return list_is(&e->params.l[0], 1, (int64_t[]){r - 1});
}

/* 1 when v is a select_n(pred, zeros, x) ; then *pred and *x. */
static int select_or_zero(const jx_program *p, const jx_cuda_fuse_index *ix, const jx_eqn *e,
                          int *pred, int *x) {
  double zero = 1;
  if (e->prim != &jx_prim_select_n || e->nin != 3 || !scalar_const(p, ix, e->in[1], &zero) ||
      zero != 0)
    return 0;
  *pred = e->in[0];
  *x = e->in[2];
  return 1;
}

/* The label mask eq(row broadcast of label, broadcast of an f32 iota over
 * the last axis), marked in core: the label's array, or -1. */
static int label_mask(const jx_program *p, const jx_cuda_fuse_index *ix, int mask, jx_shape full,
                      int64_t rows, uint8_t *core) {
  const jx_eqn *eq = def_of(p, ix, mask, &jx_prim_eq);
  if (!eq) return -1;
  for (int side = 0; side < 2; side++) {
    const jx_eqn *b = def_of(p, ix, eq->in[side], &jx_prim_broadcast_in_dim);
    const jx_eqn *io = b ? def_of(p, ix, b->in[0], &jx_prim_iota) : NULL;
    jx_aval ia = io ? p->avals[io->out[0]] : (jx_aval){0};
    if (!io || ia.dtype != JX_F32 || io->params.i[0] != ia.shape.rank - 1 ||
        ia.shape.rank != full.rank || ia.shape.dims[full.rank - 1] != full.dims[full.rank - 1])
      continue;
    int label = row_operand(p, ix, eq->in[1 - side], full, rows, core);
    if (label < 0) return -1;
    core[index_of(p, b)] = core[index_of(p, eq)] = 1;
    return label;
  }
  return -1;
}

int jx_cuda_match_xent(const jx_program *p, const jx_cuda_fuse_index *ix, int root,
                       jx_cuda_fused_op ops[3], uint8_t *const member[3]) {
  const jx_eqn *mx = &p->eqns[root];
  if (!over_last(p, mx, &jx_prim_reduce_max)) return 0;
  int x = mx->in[0];
  jx_aval xa = p->avals[x];
  int r = xa.shape.rank;
  if (xa.dtype != JX_F32 || r < 2 || ix->readers[x] != 3) return 0;
  int64_t cols = xa.shape.dims[r - 1], rows = cols ? jx_shape_numel(xa.shape) / cols : 0;
  if (cols < 1 || rows < 1 || cols >= (int64_t)1 << 24) return 0;
  /* the row statistics' equations, the label's logit's, the gradient's */
  uint8_t *core = calloc((size_t)p->neqns + 1, 1), *core_p = calloc((size_t)p->neqns + 1, 1);
  uint8_t *core_b = calloc((size_t)p->neqns + 1, 1), *all = calloc((size_t)p->neqns + 1, 1);
  int *owner = malloc(sizeof *owner * ((size_t)p->neqns + 1));
  if (!core || !core_p || !core_b || !all || !owner) {
    free(core);
    free(core_p);
    free(core_b);
    free(all);
    free(owner);
    return 0;
  }
  int found = 0;
  /* the logits: x, or x = convert(bf16 logits) */
  int logits = x;
  const jx_eqn *cv = def_of(p, ix, x, &jx_prim_convert_element_type);
  if (cv && p->avals[cv->in[0]].dtype == JX_BF16) {
    logits = cv->in[0];
    core[index_of(p, cv)] = 1;
  }
  core[root] = 1;
  /* the max made finite: select_n(is_finite(m), 0, m), then stop_gradient */
  int rd[3], fin = -1, sel = -1, pred = -1, m = mx->out[0], v = -1;
  if (ix->readers[m] != 2 || readers_of(p, ix, m, rd, 3) != 2) goto done;
  for (int i = 0; i < 2; i++) {
    if (p->eqns[rd[i]].prim == &jx_prim_is_finite) fin = rd[i];
    if (p->eqns[rd[i]].prim == &jx_prim_select_n) sel = rd[i];
  }
  if (fin < 0 || sel < 0 || !select_or_zero(p, ix, &p->eqns[sel], &pred, &v) ||
      pred != p->eqns[fin].out[0] || v != m || sole_reader(p, ix, pred, NULL) != sel)
    goto done;
  core[fin] = core[sel] = 1;
  int mvar = p->eqns[sel].out[0], sg = sole_reader(p, ix, mvar, &jx_prim_stop_gradient);
  if (sg >= 0) {
    core[sg] = 1;
    mvar = p->eqns[sg].out[0];
  }
  /* x's other two readers: sub(x, max) and the label's select */
  int sub = -1, pick = -1;
  if (readers_of(p, ix, x, rd, 3) != 3) goto done;
  for (int i = 0; i < 3; i++) {
    const jx_eqn *q = &p->eqns[rd[i]];
    if (q->prim == &jx_prim_sub && q->in[0] == x) sub = rd[i];
    if (q->prim == &jx_prim_select_n && q->nin == 3 && q->in[2] == x) pick = rd[i];
  }
  if (sub < 0 || pick < 0 || row_operand(p, ix, p->eqns[sub].in[1], xa.shape, rows, core) != mvar)
    goto done;
  int ex = sole_reader(p, ix, p->eqns[sub].out[0], &jx_prim_exp);
  if (ex < 0) goto done;
  core[sub] = core[ex] = 1;
  int e_var = p->eqns[ex].out[0], sum = -1, km = -1;
  int ne = readers_of(p, ix, e_var, rd, 3);
  if (ne != ix->readers[e_var] || ne < 1 || ne > 2) goto done;
  for (int i = 0; i < ne; i++) {
    if (over_last(p, &p->eqns[rd[i]], &jx_prim_reduce_sum))
      sum = rd[i];
    else if (p->eqns[rd[i]].prim == &jx_prim_mul)
      km = rd[i];
  }
  if (sum < 0 || (ne == 2 && km < 0)) goto done;
  core[sum] = 1;
  /* the label's logit: sum(select_n(mask, 0, x)) */
  int mask = -1, picked_x = -1;
  if (!select_or_zero(p, ix, &p->eqns[pick], &mask, &picked_x)) goto done;
  int label = label_mask(p, ix, mask, xa.shape, rows, core_p);
  int psum = sole_reader(p, ix, p->eqns[pick].out[0], &jx_prim_reduce_sum);
  if (label < 0 || psum < 0 || !over_last(p, &p->eqns[psum], &jx_prim_reduce_sum)) goto done;
  core_p[pick] = core_p[psum] = 1;
  jx_cuda_fused_op f = {.kind = JX_CUDA_FUSED_XENT, .dtype = p->avals[logits].dtype};
  f.rows = rows;
  f.cols = cols;
  f.nreads = 1;
  f.reads[0] = logits;
  f.nouts = 2;
  f.outs[0] = mvar;
  f.outs[1] = p->eqns[sum].out[0];
  jx_cuda_fused_op pk = f, b = f;
  pk.kind = JX_CUDA_FUSED_XENT_PICK;
  pk.nreads = 2;
  pk.reads[1] = label;
  pk.nouts = 1;
  pk.outs[0] = p->eqns[psum].out[0];
  b.kind = JX_CUDA_FUSED_XENT_BWD;
  int ys[4] = {f.outs[0], f.outs[1], pk.outs[0], -1}, reads[5] = {logits, label, mvar, -1, -1};
  int nmask = ix->readers[mask];
  if (km >= 0) {
    /* the gradient: scale * exp(x - max) + select_n(mask, 0, at_label) */
    const jx_eqn *mul = &p->eqns[km];
    int scale =
        row_operand(p, ix, mul->in[0] == e_var ? mul->in[1] : mul->in[0], xa.shape, rows, core_b);
    int add = sole_reader(p, ix, mul->out[0], &jx_prim_add);
    if (scale < 0 || add < 0 || nmask != 2) goto done;
    int other = p->eqns[add].in[0] == mul->out[0] ? p->eqns[add].in[1] : p->eqns[add].in[0];
    int ls = ix->def[other], bmask = -1, lv = -1;
    if (ls < 0 || !select_or_zero(p, ix, &p->eqns[ls], &bmask, &lv) || bmask != mask ||
        sole_reader(p, ix, other, NULL) != add)
      goto done;
    int at_label = row_operand(p, ix, lv, xa.shape, rows, core_b);
    if (at_label < 0) goto done;
    int g = p->eqns[add].out[0], cvt = sole_reader(p, ix, g, &jx_prim_convert_element_type);
    if (f.dtype != JX_F32) {
      if (cvt < 0 || p->avals[p->eqns[cvt].out[0]].dtype != f.dtype) goto done;
      core_b[cvt] = 1;
      g = p->eqns[cvt].out[0];
    }
    core_b[km] = core_b[add] = core_b[ls] = 1;
    b.nreads = 5;
    b.reads[0] = logits;
    b.reads[1] = label;
    b.reads[2] = mvar;
    b.reads[3] = reads[3] = scale;
    b.reads[4] = reads[4] = at_label;
    b.nouts = 1;
    b.outs[0] = ys[3] = g;
  } else if (nmask != 1) {
    goto done;
  }
  for (int e = 0; e < p->neqns; e++) all[e] = core[e] | core_p[e] | core_b[e];
  if (!close_many(p, ix, all, ys, km >= 0 ? 4 : 3, reads, km >= 0 ? 5 : 3, all)) goto done;
  /* what the closure added goes with the op of its first reader */
  for (int e = p->neqns - 1; e >= 0; e--) {
    owner[e] = core[e] ? 0 : core_p[e] ? 1 : core_b[e] ? 2 : -1;
    for (int q = e + 1; all[e] && owner[e] < 0 && q < p->neqns; q++)
      for (int i = 0; i < p->eqns[q].nin && all[q] && owner[e] < 0; i++)
        for (int o = 0; o < p->eqns[e].nout; o++)
          if (p->eqns[q].in[i] == p->eqns[e].out[o]) owner[e] = owner[q];
    if (all[e] && owner[e] < 0) goto done;
  }
  found = km >= 0 ? 3 : 2;
  for (int k = 0; k < found; k++)
    for (int e = 0; e < p->neqns; e++) member[k][e] = all[e] && owner[e] == k;
  ops[0] = f;
  ops[1] = pk;
  ops[2] = b;
done:
  free(core);
  free(core_p);
  free(core_b);
  free(all);
  free(owner);
  return found;
}
