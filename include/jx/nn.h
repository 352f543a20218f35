/* jx/nn.h: parameter trees, and (as they land) layers, initializers and
 * losses as plain functions over arrays and trees.
 *
 * A jx_tree is an ordered list of named arrays ("blocks.0.attn.wq") — the C
 * form of a pytree — used for parameters, gradients, optimizer state and
 * checkpoints. A tree holds a reference to each of its arrays, so they
 * outlive the scopes they were made in; inside a traced function a tree may
 * hold tracers (a train step takes trees flattened into its inputs and
 * returns them flattened: jx_tree_flatten / jx_tree_unflatten). */
#ifndef JX_NN_H
#define JX_NN_H

#include "array.h"
#include "parallel.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jx_tree jx_tree;

JX_API jx_tree *jx_tree_create(void);
/* Sets name to a (a new reference), replacing an earlier array of that name
 * in place or appending. Errors (NULL name, poisoned a) are recorded. */
JX_API void jx_tree_set(jx_tree *t, const char *name, jx_array *a);
JX_API jx_array *jx_tree_get(const jx_tree *t, const char *name); /* borrowed; NULL if absent */
JX_API int jx_tree_size(const jx_tree *t);
JX_API const char *jx_tree_name(const jx_tree *t, int i);
JX_API jx_array *jx_tree_at(const jx_tree *t, int i); /* borrowed */
JX_API void jx_tree_release(jx_tree *t);

/* The arrays in order into out[0..size) (borrowed). */
JX_API void jx_tree_flatten(const jx_tree *t, jx_array **out);
/* A tree with like's names (and order) holding arrays[i]. */
JX_API jx_tree *jx_tree_unflatten(const jx_tree *like, jx_array *const *arrays);
/* A tree with t's names holding fn(ctx, name, array); NULL from fn is an error. */
typedef jx_array *(*jx_tree_map_fn)(void *ctx, const char *name, jx_array *a);
JX_API jx_tree *jx_tree_map(const jx_tree *t, jx_tree_map_fn fn, void *ctx);
/* Several trees with the same names (in any order) at once, as JAX's
 * tree_map(f, a, b, ...): a tree with trees[0]'s names and order holding
 * fn(ctx, name, n, arrays), arrays[k] being trees[k]'s array of that name.
 * Names missing from a tree are an error naming the tree and the name; NULL
 * from fn is an error. */
typedef jx_array *(*jx_tree_map_n_fn)(void *ctx, const char *name, int n, jx_array *const *arrays);
JX_API jx_tree *jx_tree_map_n(int n, const jx_tree *const *trees, jx_tree_map_n_fn fn, void *ctx);
/* JAX's leaf order: a dotted name is a path of nested dicts ("blocks.0.w" is
 * tree["blocks"]["0"]["w"]) and JAX sorts dict keys at every level, as
 * strings ("10" before "2"). The tree's own order (jx_tree_flatten, which
 * optimizer states and checkpoints follow) stays the order of insertion;
 * these give JAX's order for exchanging flat lists with JAX code
 * (jax.tree_util.tree_leaves, tree_unflatten). unflatten_sorted: a tree
 * with like's names in like's order, name i holding its array from arrays
 * in JAX's order. */
JX_API void jx_tree_flatten_sorted(const jx_tree *t, jx_array **out);
JX_API jx_tree *jx_tree_unflatten_sorted(const jx_tree *like, jx_array *const *arrays);
/* Sum of the sizes of all arrays (the parameter count). */
JX_API int64_t jx_tree_numel(const jx_tree *t);
/* Mixed precision (jmp's cast_to_compute, Flax's dtype vs param_dtype): a
 * tree with t's names whose float arrays are cast to the float dtype dt
 * and whose other arrays (integer counts, keys) are t's own; an array that
 * already has dtype dt is kept as it is (no op is recorded). Inside a
 * traced loss, casting the f32 parameters to bf16 makes the computation
 * bf16 while the gradient flows back through the cast and arrives in f32.
 * Casts belong to the innermost scope; the caller releases the tree. */
JX_API jx_tree *jx_tree_cast(const jx_tree *t, jx_dtype dt);

/* ==== initializers: jax.nn.initializers, bit for bit ====
 * Each returns a fresh array of shape s drawn with key; the same key gives
 * the same values as JAX's initializer of that name (jx's PRNG is JAX's
 * threefry). Fans are computed as JAX's: in axis -2, out axis -1, and every
 * other axis a receptive field (a dense [in, out] kernel has fan_in = in; an
 * HWIO conv kernel has fan_in = H*W*I, fan_out = H*W*O); s needs rank >= 2.
 * The *_normal variance-scaling initializers draw from a normal truncated
 * at +-2 (as JAX's); jx_init_normal is an untruncated normal. dt: a float
 * dtype. */
JX_API jx_array *jx_init_glorot_uniform(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_init_glorot_normal(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_init_lecun_uniform(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_init_lecun_normal(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_init_he_uniform(jx_array *key, jx_dtype dt, jx_shape s);
JX_API jx_array *jx_init_he_normal(jx_array *key, jx_dtype dt, jx_shape s);
/* jax.nn.initializers.variance_scaling: mode "fan_in", "fan_out", "fan_avg"
 * or "fan_geo_avg"; distribution "truncated_normal", "normal" or "uniform". */
JX_API jx_array *jx_init_variance_scaling(jx_array *key, jx_dtype dt, jx_shape s, double scale,
                                          const char *mode, const char *distribution);
JX_API jx_array *jx_init_normal(jx_array *key, jx_dtype dt, jx_shape s, double stddev);
/* truncated at +-2 stddev */
JX_API jx_array *jx_init_truncated_normal(jx_array *key, jx_dtype dt, jx_shape s, double stddev);

/* ==== layers ====
 * A layer is a pair of plain functions: jx_<layer>_init puts its parameters
 * into a tree under "<prefix>.<name>" (the names below), and jx_<layer>
 * applies it, reading them from the tree. Both work eagerly and inside
 * traced functions (jit, grad, vmap): the apply functions take trees that
 * may hold tracers. Inputs carry any leading (batch) dims. A missing
 * parameter or a shape that does not fit records an error naming the layer,
 * the prefix and the parameter, and returns a poisoned array (init
 * functions return the status). Results belong to the innermost scope; the
 * tree holds its own references. */

/* Dense: y = x @ w + b over x's last dim.  "<p>.w" [in, out] (lecun_normal,
 * Flax's default), "<p>.b" [out] (zeros; a tree without it means no bias). */
JX_API jx_status jx_dense_init(jx_tree *t, const char *prefix, jx_array *key, int64_t in,
                               int64_t out, jx_dtype dt);
JX_API jx_array *jx_dense(const jx_tree *t, const char *prefix, jx_array *x);

/* Embedding lookup: table rows by integer ids, y = table[ids] (ids of any
 * shape; indices as jx_take: out-of-range ids give NaN rows).
 * "<p>.table" [vocab, dim] (normal, stddev 1/sqrt(dim): Flax's nn.Embed). */
JX_API jx_status jx_embedding_init(jx_tree *t, const char *prefix, jx_array *key, int64_t vocab,
                                   int64_t dim, jx_dtype dt);
JX_API jx_array *jx_embedding(const jx_tree *t, const char *prefix, jx_array *ids);

/* Layer norm over the last dim: (x - mean) / sqrt(var + eps) * scale + bias.
 * "<p>.scale" [dim] (ones), "<p>.bias" [dim] (zeros). RMS norm:
 * x / sqrt(mean(x^2) + eps) * scale, "<p>.scale" only. Both compute their
 * statistics in f32 for f16/bf16 inputs and return x's dtype. */
JX_API jx_status jx_layer_norm_init(jx_tree *t, const char *prefix, int64_t dim, jx_dtype dt);
JX_API jx_array *jx_layer_norm(const jx_tree *t, const char *prefix, jx_array *x, double eps);
JX_API jx_status jx_rms_norm_init(jx_tree *t, const char *prefix, int64_t dim, jx_dtype dt);
JX_API jx_array *jx_rms_norm(const jx_tree *t, const char *prefix, jx_array *x, double eps);

/* Causal multi-head self-attention on x [..., T, d]: q, k, v = x Wq + bq, ...
 * split into n_heads heads of d / n_heads; softmax(q k^T / sqrt(d_head))
 * with position i attending to positions <= i; heads merged and projected by
 * Wo + bo. The softmax runs in f32 for f16/bf16 inputs. Parameters
 * "<p>.wq" "<p>.wk" "<p>.wv" "<p>.wo" [d, d] (normal, stddev 0.02; wo
 * 0.02 / sqrt(2 * n_layers) where the GPT model says so), "<p>.bq" "<p>.bk"
 * "<p>.bv" "<p>.bo" [d] (zeros). */
JX_API jx_status jx_attention_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d,
                                   double wo_stddev, jx_dtype dt);
JX_API jx_array *jx_causal_self_attention(const jx_tree *t, const char *prefix, jx_array *x,
                                          int n_heads);
/* Its core (after the projections, before the heads merge) is a
 * jx_custom_vjp function made of two calls, custom_jvp calls whose function
 * carries one of these names: forward (q, k, v) -> (o, lse), backward (q, k,
 * v, o, lse, do) -> (dq, dk, dv). A backend with kernels for them (CUDA:
 * flash attention) runs each as one step; elsewhere they run their
 * equations. Forward mode (jx_jvp) through the attention is an error, as
 * for any jx_custom_vjp function. */
#define JX_ATTENTION_FWD_CALL "jx.causal_attention_fwd"
#define JX_ATTENTION_BWD_CALL "jx.causal_attention_bwd"
/* The KV-cache decode step's attention (jx_gpt_decode_step): a custom_jvp
 * call with this name, (q [n, H, dh], k, v [n, S, H, dh], lo, hi i32 [n])
 * -> o [n, H, dh], attends sequence b's query to its cache slots lo[b] <= j
 * < hi[b]. The CPU executor runs it as a kernel that reads only those
 * slots; elsewhere it runs its equations (a masked softmax over every slot). */
#define JX_DECODE_ATTENTION_CALL "jx.decode_attention"

/* MLP block: dense, gelu (tanh form, as GPT-2 and jax.nn.gelu), dense.
 * "<p>.fc.w" [d, hidden], "<p>.fc.b" [hidden], "<p>.proj.w" [hidden, d],
 * "<p>.proj.b" [d] (weights normal 0.02, proj.w proj_stddev; biases zeros). */
JX_API jx_status jx_mlp_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d,
                             int64_t hidden, double proj_stddev, jx_dtype dt);
JX_API jx_array *jx_mlp(const jx_tree *t, const char *prefix, jx_array *x);

/* Pre-norm transformer block (GPT-2):
 *   x = x + attn(ln1(x));  x = x + mlp(ln2(x))
 * "<p>.ln1.*", "<p>.attn.*", "<p>.ln2.*", "<p>.mlp.*" as above. Residual
 * projections (attn.wo, mlp.proj.w) start at resid_stddev. */
JX_API jx_status jx_transformer_block_init(jx_tree *t, const char *prefix, jx_array *key, int64_t d,
                                           int64_t hidden, double resid_stddev, jx_dtype dt);
JX_API jx_array *jx_transformer_block(const jx_tree *t, const char *prefix, jx_array *x,
                                      int n_heads, double eps);

/* 2-D convolution, NHWC input and HWIO kernel, plus bias: "<p>.w" [kh, kw,
 * cin, cout] (lecun_normal), "<p>.b" [cout] (zeros; optional). strides
 * JX_SHAPE() means 1; padding "SAME" or "VALID" (SAME pads as
 * lax.padtype_to_pads: the extra row/column goes to the end). */
JX_API jx_status jx_conv2d_init(jx_tree *t, const char *prefix, jx_array *key, int64_t kh,
                                int64_t kw, int64_t cin, int64_t cout, jx_dtype dt);
JX_API jx_array *jx_conv2d(const jx_tree *t, const char *prefix, jx_array *x, jx_shape strides,
                           const char *padding);
/* Pooling: jx_max_pool and jx_avg_pool in ops.h (NHWC; avg counts padding
 * as Flax's default). */

/* Dropout (Flax's nn.Dropout): when training, each element is kept with
 * probability 1 - rate (jx_random_bernoulli(key, 1 - rate, shape)) and
 * scaled by 1 / (1 - rate), else zero; rate 1 gives zeros. Not training, or
 * rate 0: x itself. rate must lie in [0, 1]. */
JX_API jx_array *jx_dropout(jx_array *key, jx_array *x, double rate, int training);

/* ==== losses and metrics ==== */
/* optax.softmax_cross_entropy_with_integer_labels: logits [..., C], labels
 * integer [...]; the per-example loss [...]. label_smoothing a in [0, 1)
 * trains against optax.smooth_labels: (1 - a) one_hot + a / C. */
JX_API jx_array *jx_softmax_cross_entropy(jx_array *logits, jx_array *labels,
                                          double label_smoothing);
JX_API jx_array *jx_mse(jx_array *pred, jx_array *target); /* mean of squares, a scalar */
/* Fraction of rows whose argmax equals the label: f32 scalar. */
JX_API jx_array *jx_accuracy(jx_array *logits, jx_array *labels);

/* ==== a GPT (GPT-2 shaped, byte-level) ====
 * Tokens [B, T] (integer, T <= context) -> logits [B, T, vocab]:
 *   h = wte[tokens] + wpe[0..T);  h = block_i(h) for each layer;
 *   logits = ln_f(h) @ wte^T   (the head is tied to the token embedding).
 * Parameters (jx_gpt_init, all normal 0.02 except as noted):
 *   "wte" [vocab, d], "wpe" [context, d],
 *   "blocks.<i>.ln1.scale|bias", "blocks.<i>.attn.wq|wk|wv|wo" [d, d] (wo at
 *   0.02 / sqrt(2 n_layers)), "blocks.<i>.attn.bq|bk|bv|bo" [d] (zeros),
 *   "blocks.<i>.ln2.scale|bias", "blocks.<i>.mlp.fc.w" [d, ratio d],
 *   "blocks.<i>.mlp.fc.b", "blocks.<i>.mlp.proj.w" [ratio d, d] (0.02 /
 *   sqrt(2 n_layers)), "blocks.<i>.mlp.proj.b", "ln_f.scale|bias"
 * in that order; the i-th parameter is drawn with row i of
 * jx_random_split(key, count). Layer norms use eps 1e-5. */
typedef struct {
  int64_t vocab; /* 256: bytes */
  int64_t n_layers, d_model, n_heads, context;
  int64_t mlp_ratio; /* hidden = mlp_ratio * d_model; 4 */
  /* Mixed precision: 0 (a zeroed config and the default) computes in the
   * parameters' dtype. A float dtype (JX_BF16) casts the parameters to it
   * inside jx_gpt_forward (jx_tree_cast), so activations and matmuls are
   * bf16 while the parameters (master weights), their gradients and the
   * optimizer state stay f32; layer-norm statistics and the attention
   * softmax run in f32, and jx_gpt_loss computes the cross-entropy of
   * 16-bit logits in f32. The logits come out in this dtype. */
  jx_dtype compute_dtype;
} jx_gpt_config;

/* 256 vocab, 2 layers, d 32, 4 heads, context 16 */
JX_API jx_gpt_config jx_gpt_config_default(void);
/* caller releases */
JX_API jx_tree *jx_gpt_init(const jx_gpt_config *c, jx_array *key, jx_dtype dt);
/* jax.eval_shape of jx_gpt_init: the same tree of names and shapes, each a
 * jx_shape_dtype_struct (no value, nothing allocated), for jx_gpt_loss_fn,
 * jx_train_step and the sharding estimates of a model too large to hold. */
JX_API jx_tree *jx_gpt_init_shapes(const jx_gpt_config *c, jx_dtype dt);
JX_API jx_array *jx_gpt_forward(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens);
/* Mean next-token cross-entropy of logits(tokens) against targets [B, T]. */
JX_API jx_array *jx_gpt_loss(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                             jx_array *targets);
/* jx_gpt_loss as a function (params..., tokens, targets) -> loss, with the
 * parameters flattened in params_like's order (for jx_train_step and
 * jx_jit; the names are copied). */
JX_API jx_fn *jx_gpt_loss_fn(const jx_gpt_config *c, const jx_tree *params_like);
/* The partition spec of each parameter of params on a mesh with axes
 * "data" and/or "model" (an axis the mesh lacks is not used), for
 * jx_sharding_create: Megatron tensor parallelism over "model" (wq, wk, wv
 * and mlp.fc.w column-parallel "None,model", their biases "model"; wo and
 * mlp.proj.w row-parallel "model,None"; wte split over the vocabulary
 * "model,None"), and with fsdp the other dim of each matrix (wpe's rows,
 * wte's columns) split over "data". A dim the axes' size does not divide
 * stays whole; norms and the other biases are replicated (""). specs
 * receives jx_tree_size(params) strings. */
JX_API jx_status jx_gpt_param_specs(const jx_gpt_config *c, const jx_tree *params, const jx_mesh *m,
                                    int fsdp, char (*specs)[64]);

/* jx_gpt_loss_fn trained through a pipeline over mesh axis stage_axis
 * (jx_pipeline_value_and_grad): the layers split evenly over its stages,
 * the embeddings before the first stage and the final norm, the tied head
 * and the cross-entropy after the last, the batch cut into microbatches
 * (and split over batch_spec's axes, NULL or "": not split). The function
 * has jx_gpt_loss_fn's inputs and value; its gradient (jx_train_step,
 * jx_grad) runs the schedule: GPipe, 1F1B, or interleaved with
 * virtual_stages per device (the layers split over stages x virtual
 * stages; others take 1). A mesh axis "model" (not the stage axis nor in
 * batch_spec) whose size divides the heads runs Megatron's tensor
 * parallelism inside the stages: the stacked block parameters are split
 * as jx_gpt_param_specs says, after the stage dim. Errors name the numbers:
 * layers not divisible into the stages, a mesh without the axis, the
 * schedule's limits; mixed precision is not implemented over stages. */
JX_API jx_fn *jx_gpt_pipeline_loss_fn(const jx_gpt_config *c, const jx_tree *params_like,
                                      jx_mesh *m, const char *stage_axis, int microbatches,
                                      jx_pipeline_schedule schedule, int virtual_stages,
                                      const char *batch_spec);

/* ==== inference: decoding with a key/value cache ====
 * B sequences decode in lockstep over a cache of S slots: per layer i a key
 * and a value array [B, S, n_heads, d_model / n_heads] in the compute
 * dtype, 2 n_layers arrays in the order k0, v0, k1, v1, ... Prompts of
 * different lengths are left-padded to one length P: sequence b's first
 * pad[b] slots hold no token and are masked out, and the token in slot s
 * has position s - pad[b]. So every sequence gets the logits it would get
 * decoded alone, while all of them write the same slot at each step (one
 * dynamic_update_slice per layer). A sequence can grow while its slot is
 * below S and its position below the context.
 *
 * jx_gpt_prefill runs the prompts tokens [B, P] (integers; pad i32 [B],
 * each in [0, P)) in one pass: logits [B, P, vocab] (rows of pad slots are
 * finite and meaningless) and a fresh cache of cache_len slots (P <=
 * cache_len) filled in slots [0, P), written to cache[0 .. 2 n_layers).
 * jx_gpt_decode_step runs one token per sequence, tokens [B], in slot
 * `slot` (an i32 scalar array, so that one trace serves every step):
 * logits [B, vocab], and the cache with that slot written into cache_out.
 * Both work eagerly and inside traced functions; errors are recorded and
 * give poisoned arrays. */
JX_API int jx_gpt_cache_count(const jx_gpt_config *c); /* 2 n_layers */
JX_API jx_array *jx_gpt_prefill(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                                jx_array *pad, int64_t cache_len, jx_array **cache);
JX_API jx_array *jx_gpt_decode_step(const jx_gpt_config *c, const jx_tree *params, jx_array *tokens,
                                    jx_array *pad, jx_array *slot, jx_array *const *cache,
                                    jx_array **cache_out);
/* The same as functions of the parameters flattened in params_like's order
 * (for jx_jit; jit the decode function with the cache donated, and one
 * trace serves every step):
 *   prefill (params..., tokens, pad) -> (logits, cache...)
 *   decode  (params..., cache..., tokens, pad, slot) -> (logits, cache...) */
JX_API jx_fn *jx_gpt_prefill_fn(const jx_gpt_config *c, const jx_tree *params_like,
                                int64_t cache_len);
JX_API jx_fn *jx_gpt_decode_fn(const jx_gpt_config *c, const jx_tree *params_like);

/* ==== sampling ====
 * The next token of each row of logits [B, vocab] (any float dtype), i32
 * [B], on the device and traceable (it belongs inside the jitted step):
 *   repetition_penalty r > 1: where seen (bool [B, vocab], or NULL) a
 *     positive logit is divided by r and a negative one multiplied (as
 *     Hugging Face's RepetitionPenaltyLogitsProcessor);
 *   temperature 0: greedy, the argmax (first of ties); else logits / T;
 *   top_k k > 0: only logits >= the k-th largest of the row stay;
 *   top_p in (0, 1): only the smallest set of most likely tokens whose
 *     probability reaches top_p stays (nucleus; ties at its edge stay);
 * then a draw of jx_random_categorical(key, ..., 1). A zeroed struct is
 * plain sampling at temperature 0, i.e. greedy. */
typedef struct {
  double temperature;
  int64_t top_k;
  double top_p;              /* 0 or >= 1: off */
  double repetition_penalty; /* 0 or 1: off */
} jx_sampling;
JX_API jx_array *jx_sample_logits(jx_array *logits, jx_array *key, jx_array *seen,
                                  const jx_sampling *s);

/* ==== generation ====
 * jx_gpt_generate decodes `batch` prompts (prompts[b] of lengths[b] >= 1
 * tokens, at most the context, each token in [0, vocab)) with a jitted
 * prefill and a jitted decode step that samples on the device (on one
 * device the cache is donated to each step; one trace serves every step).
 * When the slots reach the context, the last half of each sequence is
 * prefilled again into a fresh cache (a sliding window), so max_tokens is
 * not bounded by the context. On a mesh (mesh not NULL) the parameters are
 * laid out as jx_gpt_param_specs says (Megatron over "model"), the batch
 * over "data" and the cache over both (batch, heads). on_token(ctx, b,
 * token) is called with each new token as soon as it is known; a sequence
 * ends after max_tokens tokens or once its output ends with one of the
 * stop strings (bytes; the stop string is emitted). Generation ends when
 * every sequence has. stats, if not NULL, receives the token counts and
 * seconds of the prefill (its first call traces and compiles) and of the
 * decode steps after the first (which traces and compiles). */
typedef struct {
  jx_sampling sampling;
  int64_t max_tokens;
  uint64_t seed;
  const char *const *stop;
  int nstop;
  jx_mesh *mesh;
  void (*on_token)(void *ctx, int64_t seq, int32_t token);
  void *ctx;
} jx_generate_options;
typedef struct {
  int64_t prefill_tokens, decode_tokens;
  double prefill_s, decode_s;
} jx_generate_stats;
JX_API jx_status jx_gpt_generate(const jx_gpt_config *c, const jx_tree *params, int64_t batch,
                                 const int32_t *const *prompts, const int64_t *lengths,
                                 const jx_generate_options *o, jx_generate_stats *stats);

#ifndef JX_NO_LOCATION_MACROS
#define jx_init_glorot_uniform(...)   JX_LOCATED(jx_init_glorot_uniform, __VA_ARGS__)
#define jx_init_glorot_normal(...)    JX_LOCATED(jx_init_glorot_normal, __VA_ARGS__)
#define jx_init_lecun_uniform(...)    JX_LOCATED(jx_init_lecun_uniform, __VA_ARGS__)
#define jx_init_lecun_normal(...)     JX_LOCATED(jx_init_lecun_normal, __VA_ARGS__)
#define jx_init_he_uniform(...)       JX_LOCATED(jx_init_he_uniform, __VA_ARGS__)
#define jx_init_he_normal(...)        JX_LOCATED(jx_init_he_normal, __VA_ARGS__)
#define jx_init_variance_scaling(...) JX_LOCATED(jx_init_variance_scaling, __VA_ARGS__)
#define jx_init_normal(...)           JX_LOCATED(jx_init_normal, __VA_ARGS__)
#define jx_init_truncated_normal(...) JX_LOCATED(jx_init_truncated_normal, __VA_ARGS__)
#define jx_dense(...)                 JX_LOCATED(jx_dense, __VA_ARGS__)
#define jx_embedding(...)             JX_LOCATED(jx_embedding, __VA_ARGS__)
#define jx_layer_norm(...)            JX_LOCATED(jx_layer_norm, __VA_ARGS__)
#define jx_rms_norm(...)              JX_LOCATED(jx_rms_norm, __VA_ARGS__)
#define jx_causal_self_attention(...) JX_LOCATED(jx_causal_self_attention, __VA_ARGS__)
#define jx_mlp(...)                   JX_LOCATED(jx_mlp, __VA_ARGS__)
#define jx_transformer_block(...)     JX_LOCATED(jx_transformer_block, __VA_ARGS__)
#define jx_conv2d(...)                JX_LOCATED(jx_conv2d, __VA_ARGS__)
#define jx_dropout(...)               JX_LOCATED(jx_dropout, __VA_ARGS__)
#define jx_softmax_cross_entropy(...) JX_LOCATED(jx_softmax_cross_entropy, __VA_ARGS__)
#define jx_mse(...)                   JX_LOCATED(jx_mse, __VA_ARGS__)
#define jx_accuracy(...)              JX_LOCATED(jx_accuracy, __VA_ARGS__)
#define jx_gpt_forward(...)           JX_LOCATED(jx_gpt_forward, __VA_ARGS__)
#define jx_gpt_loss(...)              JX_LOCATED(jx_gpt_loss, __VA_ARGS__)
#define jx_gpt_prefill(...)           JX_LOCATED(jx_gpt_prefill, __VA_ARGS__)
#define jx_gpt_decode_step(...)       JX_LOCATED(jx_gpt_decode_step, __VA_ARGS__)
#define jx_sample_logits(...)         JX_LOCATED(jx_sample_logits, __VA_ARGS__)
#define jx_gpt_generate(...)          JX_LOCATED_STATUS(jx_gpt_generate, __VA_ARGS__)

#define jx_tree_set(...)               JX_LOCATED_VOID(jx_tree_set, __VA_ARGS__)
#define jx_tree_flatten(...)           JX_LOCATED_VOID(jx_tree_flatten, __VA_ARGS__)
#define jx_tree_unflatten(...)         JX_LOCATED_PTR(jx_tree *, jx_tree_unflatten, __VA_ARGS__)
#define jx_tree_map(...)               JX_LOCATED_PTR(jx_tree *, jx_tree_map, __VA_ARGS__)
#define jx_tree_cast(...)              JX_LOCATED_PTR(jx_tree *, jx_tree_cast, __VA_ARGS__)
#define jx_gpt_init(...)               JX_LOCATED_PTR(jx_tree *, jx_gpt_init, __VA_ARGS__)
#define jx_gpt_init_shapes(...)        JX_LOCATED_PTR(jx_tree *, jx_gpt_init_shapes, __VA_ARGS__)
#define jx_gpt_loss_fn(...)            JX_LOCATED_PTR(jx_fn *, jx_gpt_loss_fn, __VA_ARGS__)
#define jx_gpt_pipeline_loss_fn(...)   JX_LOCATED_PTR(jx_fn *, jx_gpt_pipeline_loss_fn, __VA_ARGS__)
#define jx_dense_init(...)             JX_LOCATED_STATUS(jx_dense_init, __VA_ARGS__)
#define jx_embedding_init(...)         JX_LOCATED_STATUS(jx_embedding_init, __VA_ARGS__)
#define jx_layer_norm_init(...)        JX_LOCATED_STATUS(jx_layer_norm_init, __VA_ARGS__)
#define jx_rms_norm_init(...)          JX_LOCATED_STATUS(jx_rms_norm_init, __VA_ARGS__)
#define jx_attention_init(...)         JX_LOCATED_STATUS(jx_attention_init, __VA_ARGS__)
#define jx_mlp_init(...)               JX_LOCATED_STATUS(jx_mlp_init, __VA_ARGS__)
#define jx_transformer_block_init(...) JX_LOCATED_STATUS(jx_transformer_block_init, __VA_ARGS__)
#define jx_conv2d_init(...)            JX_LOCATED_STATUS(jx_conv2d_init, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
