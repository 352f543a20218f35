/* Decoding the GPT with a key/value cache: the prompt in one pass (prefill)
 * and then one token per sequence per step, attending over the cache.
 *
 * The layers are jx_gpt_forward's (the same layer norms, MLP and
 * projections, in the same order), with the attention written for a cache
 * whose slots are shared by a left-padded batch: each sequence masks its
 * pad slots and takes its positions from its own first slot, so its logits
 * are those of the full forward pass over it alone. The cache is laid out
 * [B, S, H, dh], as the projections make it (no transposes per step), and
 * the heads dim is where the model axis splits it. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attention_core.h"
#include "gpt_check.h"
#include "mixed_precision.h"

#define GPT_EPS    1e-5 /* jx_gpt_forward's */
#define F32_LOWEST -3.4028234663852886e38

int jx_gpt_cache_count(const jx_gpt_config *c) { return c ? 2 * (int)c->n_layers : 0; }

/* After an error has been recorded: every cache output not made is
 * poisoned, and so are the logits returned. */
static jx_array *fail(jx_array **cache, int nc, int made) {
  for (int i = 0; cache && i < nc; i++)
    if (!made || !cache[i]) cache[i] = nn_fail();
  return nn_fail();
}

/* x @ w + b over x's last dim for the block's attention parameters. */
static jx_array *project(const jx_tree *t, const char *prefix, const char *wn, const char *bn,
                         jx_array *x, int64_t d, int *ok) {
  const char *L = "jx_gpt decoding";
  jx_array *w = nn_param(L, t, prefix, wn, 2, (int64_t[]){d, d}, 0, ok);
  jx_array *b = nn_param(L, t, prefix, bn, 1, (int64_t[]){d}, 0, ok);
  if (!*ok) return NULL;
  int r = jx_ndim(x);
  return jx_add(jx_dot_general(x, w, JX_AXES(r - 1), JX_AXES(0), JX_AXES(), JX_AXES()), b);
}

/* Attention of q [B, Tq, H, dh] over keys and values [B, S, H, dh] where
 * mask [B, Tq, S] says which keys each query sees: [B, Tq, d]. The scores
 * and softmax are the training core's (f32, scaled, the lowest f32 where
 * masked, so a masked key weighs exactly 0). */
static jx_array *masked_attention(jx_array *q, jx_array *k, jx_array *v, jx_array *mask) {
  jx_shape qs = jx_shape_of(q);
  int64_t B = qs.dims[0], Tq = qs.dims[1], H = qs.dims[2], dh = qs.dims[3];
  jx_dtype dt = jx_dtype_of(q);
  /* [B, H, Tq, S] */
  jx_array *s = jx_dot_general(q, k, JX_AXES(3), JX_AXES(3), JX_AXES(0, 2), JX_AXES(0, 2));
  s = jx_mul(jx_astype(s, JX_F32), jx_scalar(JX_F32, 1 / sqrt((double)dh)));
  s = jx_where(jx_expand_dims(mask, 1), s, jx_scalar(JX_F32, F32_LOWEST));
  jx_array *p = jx_astype(jx_softmax(s, 3), dt);
  /* [B, H, Tq, dh] -> [B, Tq, H * dh] */
  jx_array *o = jx_dot_general(p, v, JX_AXES(3), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2));
  return jx_reshape(jx_transpose(o, JX_AXES(0, 2, 1, 3)), JX_SHAPE(B, Tq, H * dh));
}

/* One block on h [B, T, d]: its new keys and values go to *k, *v [B, T, H,
 * dh] (the caller places them in the cache, then calls finish_block). */
typedef struct {
  const jx_gpt_config *c;
  const jx_tree *params;
  char prefix[64];
} block_ctx;

static jx_array *block_qkv(const block_ctx *b, jx_array *h, jx_array **k, jx_array **v, int *ok) {
  char name[256];
  jx_shape hs = jx_shape_of(h);
  int64_t B = hs.dims[0], T = hs.dims[1], d = b->c->d_model, H = b->c->n_heads;
  jx_shape heads = JX_SHAPE(B, T, H, d / H);
  snprintf(name, sizeof name, "%s.ln1", b->prefix);
  jx_array *x = jx_layer_norm(b->params, name, h, GPT_EPS);
  snprintf(name, sizeof name, "%s.attn", b->prefix);
  jx_array *q = project(b->params, name, "wq", "bq", x, d, ok);
  jx_array *kk = *ok ? project(b->params, name, "wk", "bk", x, d, ok) : NULL;
  jx_array *vv = *ok ? project(b->params, name, "wv", "bv", x, d, ok) : NULL;
  if (!*ok) return NULL;
  *k = jx_reshape(kk, heads);
  *v = jx_reshape(vv, heads);
  return jx_reshape(q, heads);
}

/* h + wo(o) for the attention's output o [B, T, d], and then the MLP half
 * of the block. */
static jx_array *finish_block(const block_ctx *b, jx_array *h, jx_array *o, int *ok) {
  char name[256];
  snprintf(name, sizeof name, "%s.attn", b->prefix);
  o = project(b->params, name, "wo", "bo", o, b->c->d_model, ok);
  if (!*ok) return NULL;
  h = jx_add(h, o);
  snprintf(name, sizeof name, "%s.ln2", b->prefix);
  jx_array *m = jx_layer_norm(b->params, name, h, GPT_EPS);
  snprintf(name, sizeof name, "%s.mlp", b->prefix);
  return jx_add(h, jx_mlp(b->params, name, m));
}

/* Checks shared by both entry points; the compute-dtype casts of the
 * parameters go to *cast (released by the caller). */
static int check_common(const char *fn, const jx_gpt_config *c, const jx_tree *params,
                        jx_array *tokens, int tokens_rank, jx_array *pad, jx_tree **cast) {
  char buf[96], buf2[96];
  *cast = NULL;
  if (!nn_gpt_check_config(fn, c)) return 0;
  if (!params) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the parameter tree is NULL", fn);
    return 0;
  }
  if (jx_is_poisoned(tokens) || jx_is_poisoned(pad)) {
    if (!tokens || !pad)
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the tokens or the pads are NULL", fn);
    return 0;
  }
  jx_shape ts = jx_shape_of(tokens), ps = jx_shape_of(pad);
  jx_dtype tt = jx_dtype_of(tokens), pt = jx_dtype_of(pad);
  if (ts.rank != tokens_rank || tt == JX_BOOL || nn_is_float(tt) || ps.rank != 1 ||
      ps.dims[0] != ts.dims[0] || pt == JX_BOOL || nn_is_float(pt)) {
    jx_report_error(JX_ERR_SHAPE,
                    "%s: tokens %s and pad %s: expected integer tokens %s and integer pads [batch]",
                    fn, nn_aval(tokens, buf), nn_aval(pad, buf2),
                    tokens_rank == 2 ? "[batch, T]" : "[batch]");
    return 0;
  }
  int ok = 1;
  nn_param(fn, params, "", "wte", 2, (int64_t[]){c->vocab, c->d_model}, 0, &ok);
  nn_param(fn, params, "", "wpe", 2, (int64_t[]){c->context, c->d_model}, 0, &ok);
  if (!ok) return 0;
  if (c->compute_dtype) *cast = jx_tree_cast(params, c->compute_dtype);
  return 1;
}

/* ln_f(h) @ wte^T over h's last dim. */
static jx_array *head(const jx_tree *params, jx_array *h) {
  int r = jx_ndim(h);
  h = jx_layer_norm(params, "ln_f", h, GPT_EPS);
  return jx_dot_general(h, jx_tree_get(params, "wte"), JX_AXES(r - 1), JX_AXES(1), JX_AXES(),
                        JX_AXES());
}

jx_array *jx_gpt_prefill(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                         jx_array *pad, int64_t cache_len, jx_array **cache) {
  const char *fn = "jx_gpt_prefill";
  char buf[96];
  jx_tree *cast;
  int nc = jx_gpt_cache_count(c);
  if (!cache) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the cache output is NULL", fn);
    return nn_fail();
  }
  for (int i = 0; i < nc; i++) cache[i] = NULL;
  if (!check_common(fn, c, params, tokens, 2, pad, &cast)) return fail(cache, nc, 0);
  if (cast) params = cast;
  jx_shape ts = jx_shape_of(tokens);
  int64_t B = ts.dims[0], P = ts.dims[1];
  if (P < 1 || P > c->context || cache_len < P) {
    jx_report_error(JX_ERR_SHAPE,
                    "%s: tokens %s: the prompt length must be in [1, context %lld] and fit the "
                    "cache of %lld slots",
                    fn, nn_aval(tokens, buf), (long long)c->context, (long long)cache_len);
    jx_tree_release(cast);
    return fail(cache, nc, 0);
  }
  jx_array *pad_col = jx_reshape(jx_astype(pad, JX_I32), JX_SHAPE(B, 1));
  jx_array *slots = jx_iota(JX_I32, JX_SHAPE(1, P), 1);
  /* position of slot i in sequence b: i - pad[b] (pad slots read position 0) */
  jx_array *pos = jx_maximum(jx_sub(slots, pad_col), jx_scalar(JX_I32, 0));
  jx_array *h = jx_add(jx_take(jx_tree_get(params, "wte"), tokens, 0),
                       jx_take(jx_tree_get(params, "wpe"), pos, 0));
  /* query i sees key j when pad[b] <= j <= i: [B, P, P] */
  jx_array *qi = jx_iota(JX_I32, JX_SHAPE(1, P, P), 1), *kj = jx_iota(JX_I32, JX_SHAPE(1, P, P), 2);
  jx_array *mask = jx_logical_and(jx_le(kj, qi), jx_ge(kj, jx_reshape(pad_col, JX_SHAPE(B, 1, 1))));
  int ok = 1;
  for (int64_t i = 0; i < c->n_layers && ok; i++) {
    block_ctx b = {c, params, ""};
    snprintf(b.prefix, sizeof b.prefix, "blocks.%lld", (long long)i);
    jx_array *k, *v;
    jx_array *q = block_qkv(&b, h, &k, &v, &ok);
    if (!ok) break;
    h = finish_block(&b, h, masked_attention(q, k, v, mask), &ok);
    /* the cache: the prompt's keys and values in slots [0, P), zeros after */
    cache[2 * i] = jx_pad(k, JX_SHAPE(0, 0, 0, 0), JX_SHAPE(0, cache_len - P, 0, 0), 0);
    cache[2 * i + 1] = jx_pad(v, JX_SHAPE(0, 0, 0, 0), JX_SHAPE(0, cache_len - P, 0, 0), 0);
  }
  jx_array *logits = ok ? head(params, h) : fail(cache, nc, 1);
  jx_tree_release(cast);
  return logits;
}

jx_array *jx_gpt_decode_step(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                             jx_array *pad, jx_array *slot, jx_array *const *cache,
                             jx_array **cache_out) {
  const char *fn = "jx_gpt_decode_step";
  char buf[96], buf2[96];
  jx_tree *cast;
  int nc = jx_gpt_cache_count(c);
  if (!cache || !cache_out) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the cache or its output is NULL", fn);
    return fail(cache_out, nc, 0);
  }
  for (int i = 0; i < nc; i++) cache_out[i] = NULL;
  if (!check_common(fn, c, params, tokens, 1, pad, &cast)) return fail(cache_out, nc, 0);
  if (cast) params = cast;
  int64_t B = jx_shape_of(tokens).dims[0], d = c->d_model, H = c->n_heads;
  jx_dtype cdt = jx_dtype_of(jx_tree_get(params, "wte"));
  int64_t S = -1;
  for (int i = 0; i < nc; i++) {
    jx_shape s = jx_shape_of(cache[i]);
    if (jx_is_poisoned(cache[i]) || s.rank != 4 || s.dims[0] != B || s.dims[2] != H ||
        s.dims[3] != d / H || (S >= 0 && s.dims[1] != S) || jx_dtype_of(cache[i]) != cdt) {
      if (!jx_is_poisoned(cache[i]))
        jx_report_error(JX_ERR_SHAPE,
                        "%s: cache[%d] is %s, expected %s[%lld, slots, %lld, %lld] for tokens %s",
                        fn, i, nn_aval(cache[i], buf), jx_dtype_name(cdt), (long long)B,
                        (long long)H, (long long)(d / H), nn_aval(tokens, buf2));
      jx_tree_release(cast);
      return fail(cache_out, nc, 0);
    }
    S = s.dims[1];
  }
  if (jx_is_poisoned(slot) || jx_ndim(slot) != 0 || nn_is_float(jx_dtype_of(slot))) {
    if (!jx_is_poisoned(slot))
      jx_report_error(JX_ERR_SHAPE, "%s: slot %s: expected an integer scalar", fn,
                      nn_aval(slot, buf));
    else if (!slot)
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the slot is NULL", fn);
    jx_tree_release(cast);
    return fail(cache_out, nc, 0);
  }
  slot = jx_astype(slot, JX_I32);
  jx_array *pad_i = jx_astype(pad, JX_I32);
  jx_array *pos = jx_reshape(jx_sub(slot, pad_i), JX_SHAPE(B, 1));
  jx_array *tok = jx_reshape(tokens, JX_SHAPE(B, 1));
  jx_array *h = jx_add(jx_take(jx_tree_get(params, "wte"), tok, 0),
                       jx_take(jx_tree_get(params, "wpe"), pos, 0)); /* [B, 1, d] */
  /* the query sees slots pad[b] <= j <= slot */
  jx_array *end = jx_broadcast_to(jx_add(slot, jx_scalar(JX_I32, 1)), JX_SHAPE(B));
  jx_array *zero = jx_scalar(JX_I32, 0);
  jx_array *starts[4] = {zero, slot, zero, zero};
  int ok = 1;
  for (int64_t i = 0; i < c->n_layers && ok; i++) {
    block_ctx b = {c, params, ""};
    snprintf(b.prefix, sizeof b.prefix, "blocks.%lld", (long long)i);
    jx_array *k, *v;
    jx_array *q = block_qkv(&b, h, &k, &v, &ok);
    if (!ok) break;
    cache_out[2 * i] = jx_dynamic_update_slice(cache[2 * i], k, starts);
    cache_out[2 * i + 1] = jx_dynamic_update_slice(cache[2 * i + 1], v, starts);
    jx_array *o = nn_decode_attention_core(jx_reshape(q, JX_SHAPE(B, H, d / H)), cache_out[2 * i],
                                           cache_out[2 * i + 1], pad_i, end);
    h = finish_block(&b, h, jx_reshape(o, JX_SHAPE(B, 1, d)), &ok);
  }
  jx_array *logits =
      ok ? jx_reshape(head(params, h), JX_SHAPE(B, c->vocab)) : fail(cache_out, nc, 1);
  jx_tree_release(cast);
  return logits;
}

/* ---- the same as functions of flattened parameters ---- */
typedef struct {
  jx_gpt_config cfg;
  int np;
  int64_t cache_len;
  char **names;
} decode_ctx;

static void free_decode_ctx(void *p) {
  decode_ctx *c = p;
  if (!c) return;
  for (int i = 0; c->names && i < c->np; i++) free(c->names[i]);
  free(c->names);
  free(c);
}

static jx_tree *params_of(const decode_ctx *x, jx_array *const *in) {
  jx_tree *p = jx_tree_create();
  for (int i = 0; p && i < x->np; i++) jx_tree_set(p, x->names[i], in[i]);
  return p;
}

static void prefill_body(void *ctx, jx_array *const *in, jx_array **out) {
  decode_ctx *x = ctx;
  jx_tree *p = params_of(x, in);
  out[0] = jx_gpt_prefill(&x->cfg, p, in[x->np], in[x->np + 1], x->cache_len, out + 1);
  jx_tree_release(p);
}

static void decode_body(void *ctx, jx_array *const *in, jx_array **out) {
  decode_ctx *x = ctx;
  int nc = jx_gpt_cache_count(&x->cfg);
  jx_tree *p = params_of(x, in);
  jx_array *const *rest = in + x->np + nc; /* tokens, pad, slot */
  out[0] = jx_gpt_decode_step(&x->cfg, p, rest[0], rest[1], rest[2], in + x->np, out + 1);
  jx_tree_release(p);
}

static jx_fn *make_fn(const char *fn, const jx_gpt_config *c, const jx_tree *params_like,
                      int64_t cache_len, int prefill) {
  if (!nn_gpt_check_config(fn, c)) return NULL;
  int np = jx_tree_size(params_like);
  decode_ctx *x = np > 0 ? calloc(1, sizeof *x) : NULL;
  if (x) x->names = calloc((size_t)np, sizeof *x->names);
  if (!x || !x->names) {
    free(x);
    jx_report_error(np > 0 ? JX_ERR_OUT_OF_MEMORY : JX_ERR_INVALID_ARGUMENT,
                    "%s: needs a parameter tree", fn);
    return NULL;
  }
  x->cfg = *c;
  x->np = np;
  x->cache_len = cache_len;
  for (int i = 0; i < np; i++)
    if (!(x->names[i] = strdup(jx_tree_name(params_like, i)))) {
      free_decode_ctx(x);
      jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
      return NULL;
    }
  int nc = jx_gpt_cache_count(c);
  return prefill
             ? jx_fn_create_owning("gpt_prefill", np + 2, 1 + nc, prefill_body, x, free_decode_ctx)
             : jx_fn_create_owning("gpt_decode_step", np + nc + 3, 1 + nc, decode_body, x,
                                   free_decode_ctx);
}

jx_fn *jx_gpt_prefill_fn(const jx_gpt_config *c, const jx_tree *params_like, int64_t cache_len) {
  if (c && (cache_len < 1 || cache_len > 1 << 24)) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_gpt_prefill_fn: cache_len %lld out of range",
                    (long long)cache_len);
    return NULL;
  }
  return make_fn("jx_gpt_prefill_fn", c, params_like, cache_len, 1);
}

jx_fn *jx_gpt_decode_fn(const jx_gpt_config *c, const jx_tree *params_like) {
  return make_fn("jx_gpt_decode_fn", c, params_like, 0, 0);
}
