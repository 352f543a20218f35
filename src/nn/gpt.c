/* A byte-level GPT (GPT-2's architecture, small): token and position
 * embeddings, pre-norm transformer blocks, a final layer norm and a head
 * tied to the token embedding. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt_check.h"
#include "mixed_precision.h"

#define GPT_EPS 1e-5

jx_gpt_config jx_gpt_config_default(void) {
  return (jx_gpt_config){
      .vocab = 256, .n_layers = 2, .d_model = 32, .n_heads = 4, .context = 16, .mlp_ratio = 4};
}

int nn_gpt_check_config(const char *fn, const jx_gpt_config *c) {
  if (!c) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the config is NULL", fn);
    return 0;
  }
  if (c->vocab < 1 || c->n_layers < 0 || c->d_model < 1 || c->n_heads < 1 || c->context < 1 ||
      c->mlp_ratio < 1 || c->d_model % c->n_heads || !nn_valid_compute_dtype(c->compute_dtype)) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s: bad config (vocab %lld, n_layers %lld, d_model %lld, n_heads %lld, "
                    "context %lld, mlp_ratio %lld, compute_dtype %s): sizes must be positive, "
                    "n_heads must divide d_model and compute_dtype be 0 or a float dtype",
                    fn, (long long)c->vocab, (long long)c->n_layers, (long long)c->d_model,
                    (long long)c->n_heads, (long long)c->context, (long long)c->mlp_ratio,
                    c->compute_dtype ? jx_dtype_name(c->compute_dtype) : "0");
    return 0;
  }
  return 1;
}

/* The parameters in their documented order: name, shape, init stddev
 * (0: zeros, -1: ones). */
typedef struct {
  char name[64];
  jx_shape shape;
  double std;
} param_spec;

static int param_list(const jx_gpt_config *c, param_spec **out) {
  int64_t d = c->d_model, h = c->mlp_ratio * c->d_model;
  int n = 2 + 16 * (int)c->n_layers + 2;
  param_spec *p = calloc((size_t)n, sizeof *p);
  if (!p) return -1;
  double resid = 0.02 / sqrt(2.0 * (double)(c->n_layers ? c->n_layers : 1));
  int k = 0;
#define ADD(nm, sh, sd)                                                                            \
  do {                                                                                             \
    snprintf(p[k].name, sizeof p[k].name, "%s", nm);                                               \
    p[k].shape = sh;                                                                               \
    p[k].std = sd;                                                                                 \
    k++;                                                                                           \
  } while (0)
  ADD("wte", JX_SHAPE(c->vocab, d), 0.02);
  ADD("wpe", JX_SHAPE(c->context, d), 0.02);
  for (int64_t i = 0; i < c->n_layers; i++) {
    static const struct {
      const char *suffix;
      int kind; /* 0 [d], 1 [d,d], 2 [d,h], 3 [h], 4 [h,d] */
      double std;
    } block[16] = {
        {"ln1.scale", 0, -1},  {"ln1.bias", 0, 0}, {"attn.wq", 1, 0.02},  {"attn.wk", 1, 0.02},
        {"attn.wv", 1, 0.02},  {"attn.wo", 1, -2}, {"attn.bq", 0, 0},     {"attn.bk", 0, 0},
        {"attn.bv", 0, 0},     {"attn.bo", 0, 0},  {"ln2.scale", 0, -1},  {"ln2.bias", 0, 0},
        {"mlp.fc.w", 2, 0.02}, {"mlp.fc.b", 3, 0}, {"mlp.proj.w", 4, -2}, {"mlp.proj.b", 0, 0}};
    for (int j = 0; j < 16; j++) {
      char nm[64];
      snprintf(nm, sizeof nm, "blocks.%lld.%s", (long long)i, block[j].suffix);
      jx_shape s = block[j].kind == 0   ? JX_SHAPE(d)
                   : block[j].kind == 1 ? JX_SHAPE(d, d)
                   : block[j].kind == 2 ? JX_SHAPE(d, h)
                   : block[j].kind == 3 ? JX_SHAPE(h)
                                        : JX_SHAPE(h, d);
      ADD(nm, s, block[j].std == -2 ? resid : block[j].std);
    }
  }
  ADD("ln_f.scale", JX_SHAPE(d), -1);
  ADD("ln_f.bias", JX_SHAPE(d), 0);
#undef ADD
  *out = p;
  return k;
}

/* The parameter tree: each drawn with row i of split(key), or with key NULL
 * each a jx_shape_dtype_struct (jax.eval_shape(init): the same names, shapes
 * and order, nothing drawn or allocated). */
static jx_tree *make_params(const char *fn, const jx_gpt_config *c, jx_array *key, jx_dtype dt) {
  if (!nn_gpt_check_config(fn, c)) return NULL;
  param_spec *p;
  int n = param_list(c, &p);
  if (n < 0) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    return NULL;
  }
  jx_tree *t = jx_tree_create();
  jx_scope_begin(); /* the keys die here; the tree keeps its arrays */
  jx_array *keys = key ? jx_random_split(key, n) : NULL;
  for (int i = 0; i < n && t; i++) {
    jx_scope_begin(); /* one parameter's key and draw: at most one in flight */
    jx_array *a = !key           ? jx_shape_dtype_struct(dt, p[i].shape)
                  : p[i].std > 0 ? jx_init_normal(nn_key_at(keys, i), dt, p[i].shape, p[i].std)
                  : p[i].std < 0 ? jx_ones(dt, p[i].shape)
                                 : jx_zeros(dt, p[i].shape);
    jx_tree_set(t, p[i].name, a);
    if (jx_is_poisoned(a)) {
      jx_tree_release(t);
      t = NULL;
    }
    jx_scope_end();
  }
  jx_scope_end();
  free(p);
  return t;
}

jx_tree *jx_gpt_init(const jx_gpt_config *c, jx_array *key, jx_dtype dt) {
  if (!nn_gpt_check_config("jx_gpt_init", c)) return NULL;
  if (jx_is_poisoned(key)) {
    if (!key) jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_gpt_init: the key is NULL");
    return NULL;
  }
  return make_params("jx_gpt_init", c, key, dt);
}

jx_tree *jx_gpt_init_shapes(const jx_gpt_config *c, jx_dtype dt) {
  return make_params("jx_gpt_init_shapes", c, NULL, dt);
}

jx_array *jx_gpt_forward(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens) {
  const char *fn = "jx_gpt_forward";
  char buf[96], name[64];
  if (!nn_gpt_check_config(fn, c)) return nn_fail();
  if (jx_is_poisoned(tokens)) {
    if (!tokens) jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the tokens are NULL", fn);
    return nn_fail();
  }
  jx_shape ts = jx_shape_of(tokens);
  jx_dtype tt = jx_dtype_of(tokens);
  if (ts.rank != 2 || ts.dims[1] > c->context || tt == JX_BOOL || nn_is_float(tt)) {
    jx_report_error(JX_ERR_SHAPE,
                    "%s: tokens %s: expected integers [batch, T] with T <= context %lld", fn,
                    nn_aval(tokens, buf), (long long)c->context);
    return nn_fail();
  }
  int64_t T = ts.dims[1], d = c->d_model;
  int ok = 1;
  jx_array *wte = nn_param(fn, params, "", "wte", 2, (int64_t[]){c->vocab, d}, 0, &ok);
  jx_array *wpe = nn_param(fn, params, "", "wpe", 2, (int64_t[]){c->context, d}, 0, &ok);
  if (!ok) return nn_fail();
  /* mixed precision: every layer reads the compute-dtype casts */
  jx_tree *cast = c->compute_dtype ? jx_tree_cast(params, c->compute_dtype) : NULL;
  if (cast) {
    params = cast;
    wte = jx_tree_get(cast, "wte");
    wpe = jx_tree_get(cast, "wpe");
  }
  jx_array *pos = jx_slice(wpe, JX_SHAPE(0, 0), JX_SHAPE(T, d), JX_SHAPE());
  jx_array *h = jx_add(jx_take(wte, tokens, 0), pos);
  for (int64_t i = 0; i < c->n_layers; i++) {
    snprintf(name, sizeof name, "blocks.%lld", (long long)i);
    h = jx_transformer_block(params, name, h, (int)c->n_heads, GPT_EPS);
  }
  h = jx_layer_norm(params, "ln_f", h, GPT_EPS);
  jx_array *logits = jx_dot_general(h, wte, JX_AXES(2), JX_AXES(1), JX_AXES(), JX_AXES());
  jx_tree_release(cast);
  return logits;
}

jx_array *jx_gpt_loss(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                      jx_array *targets) {
  jx_array *logits = jx_gpt_forward(c, params, tokens);
  if (jx_is_poisoned(logits)) return logits;
  /* the log-sum-exp over the vocabulary and the mean in f32, as mixed
   * precision recipes do: bf16's 8 bits would round the loss itself */
  if (nn_is_low_float(jx_dtype_of(logits))) logits = jx_astype(logits, JX_F32);
  return jx_mean(jx_softmax_cross_entropy(logits, targets, 0), JX_AXES(), 0);
}

/* "spec" for one parameter: dims split over "model" (tp) or "data" (fsdp)
 * where the axis exists and divides the dim. */
static void spec_for(const char *name, jx_shape s, int64_t data, int64_t model, int fsdp,
                     char *out) {
  const char *dims[2] = {"None", "None"};
  size_t len = strlen(name);
#define ENDS(suf) (len >= strlen(suf) && !strcmp(name + len - strlen(suf), suf))
  int col = ENDS(".attn.wq") || ENDS(".attn.wk") || ENDS(".attn.wv") || ENDS(".mlp.fc.w");
  int colb = ENDS(".attn.bq") || ENDS(".attn.bk") || ENDS(".attn.bv") || ENDS(".mlp.fc.b");
  int row = ENDS(".attn.wo") || ENDS(".mlp.proj.w");
#undef ENDS
  int wte = !strcmp(name, "wte"), wpe = !strcmp(name, "wpe");
  int tp_dim = col ? 1 : colb ? 0 : (row || wte) ? 0 : -1;
  int dp_dim = !fsdp ? -1 : col ? 0 : (row || wte) ? 1 : wpe ? 0 : -1;
  if (tp_dim >= 0 && tp_dim < s.rank && model > 1 && s.dims[tp_dim] % model == 0)
    dims[tp_dim] = "model";
  if (dp_dim >= 0 && dp_dim < s.rank && data > 1 && s.dims[dp_dim] % data == 0)
    dims[dp_dim] = "data";
  if (!strcmp(dims[0], "None") && !strcmp(dims[1], "None"))
    out[0] = '\0';
  else if (s.rank == 1)
    snprintf(out, 64, "%s", dims[0]);
  else
    snprintf(out, 64, "%s,%s", dims[0], dims[1]);
}

jx_status jx_gpt_param_specs(const jx_gpt_config *c, const jx_tree *params, const jx_mesh *m,
                             int fsdp, char (*specs)[64]) {
  const char *fn = "jx_gpt_param_specs";
  if (!nn_gpt_check_config(fn, c)) return JX_ERR_INVALID_ARGUMENT;
  if (!params || !m || !specs)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: NULL argument", fn);
  int64_t data = jx_mesh_axis_size(m, "data"), model = jx_mesh_axis_size(m, "model");
  for (int i = 0; i < jx_tree_size(params); i++)
    spec_for(jx_tree_name(params, i), jx_shape_of(jx_tree_at(params, i)), data, model, fsdp,
             specs[i]);
  return JX_OK;
}

/* ---- the loss as a function of flattened parameters ---- */
typedef struct {
  jx_gpt_config cfg;
  int np;
  char **names;
} loss_ctx;

static void free_loss_ctx(void *p) {
  loss_ctx *c = p;
  if (!c) return;
  for (int i = 0; c->names && i < c->np; i++) free(c->names[i]);
  free(c->names);
  free(c);
}

static void loss_fn_body(void *ctx, jx_array *const *in, jx_array **out) {
  loss_ctx *c = ctx;
  jx_tree *p = jx_tree_create();
  for (int i = 0; p && i < c->np; i++) jx_tree_set(p, c->names[i], in[i]);
  out[0] = jx_gpt_loss(&c->cfg, p, in[c->np], in[c->np + 1]);
  jx_tree_release(p);
}

jx_fn *jx_gpt_loss_fn(const jx_gpt_config *c, const jx_tree *params_like) {
  int np = jx_tree_size(params_like);
  loss_ctx *x = c && np > 0 ? calloc(1, sizeof *x) : NULL;
  if (x) x->names = calloc((size_t)np, sizeof *x->names);
  if (!x || !x->names) {
    free(x);
    jx_report_error(c && np > 0 ? JX_ERR_OUT_OF_MEMORY : JX_ERR_INVALID_ARGUMENT,
                    "jx_gpt_loss_fn: needs a config and a parameter tree");
    return NULL;
  }
  x->cfg = *c;
  x->np = np;
  for (int i = 0; i < np; i++)
    if (!(x->names[i] = strdup(jx_tree_name(params_like, i)))) {
      free_loss_ctx(x);
      jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_gpt_loss_fn: out of memory");
      return NULL;
    }
  return jx_fn_create_owning("gpt_loss", np + 2, 1, loss_fn_body, x, free_loss_ctx);
}
