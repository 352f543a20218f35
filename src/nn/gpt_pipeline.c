/* The GPT trained through a pipeline: its layers split evenly over the
 * stages, each stage a run of transformer blocks whose parameters are
 * stacked by stage; the token and position embeddings run before the first
 * stage and the final norm, the head (tied to the token embedding) and the
 * cross-entropy after the last, as jx_pipeline_value_and_grad's first
 * function and loss with the outer parameters wte, wpe and ln_f. On a
 * mesh with a "model" axis the stages run Megatron's tensor parallelism
 * over it: each device holds its shards of the stacked block parameters
 * (jx_gpt_param_specs's specs) and runs its own heads and MLP columns. The
 * function made is jx_gpt_loss_fn's with a custom VJP: its value is the
 * GPT's loss, and its reverse mode runs the pipeline's schedule, which
 * gives the loss and the gradients at once (kept as residuals; the
 * backward scales them by the loss's cotangent). So jx_train_step and
 * jx_jit take it as they take jx_gpt_loss_fn. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../parallel/pipeline.h"
#include "attention.h"
#include "gpt_check.h"

#define GPT_EPS 1e-5

typedef struct {
  jx_gpt_config cfg;
  int np, nstages, per_stage, nq, nouter; /* nstages: global stages, virtual ones counted */
  char **names;                           /* the GPT's parameters, in params_like's order */
  char **suffix;                          /* nq: a layer's parameters after "blocks.<i>." */
  char **outer_names;                     /* nouter: the others (embeddings, final norm) */
  int *source;       /* [(j * nq + q) * nstages + s]: the parameter of layer s * per_stage + j */
  int *outer_source; /* [nouter]: the parameter index */
  jx_fn *stage, *first, *loss, *pipe;
  const char *tp_axis; /* "model" when the stages run Megatron over it, else NULL */
  char (*specs)[64];   /* np: jx_gpt_param_specs's, when tp_axis */
} gpt_pipe;

static void free_gpt_pipe(void *p) {
  gpt_pipe *g = p;
  if (!g) return;
  jx_fn_release(g->pipe);
  jx_fn_release(g->stage);
  jx_fn_release(g->first);
  jx_fn_release(g->loss);
  for (int i = 0; g->names && i < g->np; i++) free(g->names[i]);
  for (int i = 0; g->suffix && i < g->nq; i++) free(g->suffix[i]);
  for (int i = 0; g->outer_names && i < g->nouter; i++) free(g->outer_names[i]);
  free(g->names);
  free(g->suffix);
  free(g->outer_names);
  free(g->source);
  free(g->outer_source);
  free(g->specs);
  free(g);
}

/* A stage: (its layers' parameters..., h) -> h after its blocks (on this
 * device's shards over tp_axis, when set). */
static void stage_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gpt_pipe *g = ctx;
  jx_tree *t = jx_tree_create();
  char name[300];
  for (int j = 0; j < g->per_stage; j++)
    for (int q = 0; q < g->nq; q++) {
      snprintf(name, sizeof name, "blocks.%d.%s", j, g->suffix[q]);
      jx_tree_set(t, name, in[j * g->nq + q]);
    }
  jx_array *h = in[g->per_stage * g->nq];
  for (int j = 0; j < g->per_stage; j++) {
    snprintf(name, sizeof name, "blocks.%d", j);
    h = nn_transformer_block_over(t, name, h, (int)g->cfg.n_heads, GPT_EPS, g->tp_axis);
  }
  jx_tree_release(t);
  out[0] = h;
}

static jx_tree *outer_tree(const gpt_pipe *g, jx_array *const *in) {
  jx_tree *t = jx_tree_create();
  for (int k = 0; k < g->nouter; k++) jx_tree_set(t, g->outer_names[k], in[k]);
  return t;
}

/* Before the first stage: (outer..., tokens) -> wte[tokens] + wpe[0..T). */
static void embed_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gpt_pipe *g = ctx;
  jx_tree *t = outer_tree(g, in);
  jx_array *tokens = in[g->nouter], *wte = jx_tree_get(t, "wte"), *wpe = jx_tree_get(t, "wpe");
  int64_t T = jx_shape_of(tokens).dims[1], d = g->cfg.d_model;
  out[0] =
      jx_add(jx_take(wte, tokens, 0), jx_slice(wpe, JX_SHAPE(0, 0), JX_SHAPE(T, d), JX_SHAPE()));
  jx_tree_release(t);
}

/* After the last stage: (outer..., h, targets) -> the mean cross-entropy of
 * ln_f(h) @ wte^T. */
static void head_loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gpt_pipe *g = ctx;
  jx_tree *t = outer_tree(g, in);
  jx_array *h = jx_layer_norm(t, "ln_f", in[g->nouter], GPT_EPS);
  jx_array *logits =
      jx_dot_general(h, jx_tree_get(t, "wte"), JX_AXES(2), JX_AXES(1), JX_AXES(), JX_AXES());
  out[0] = jx_mean(jx_softmax_cross_entropy(logits, in[g->nouter + 1], 0), JX_AXES(), 0);
  jx_tree_release(t);
}

/* The custom VJP's forward: (params..., tokens, targets) -> (loss, the
 * gradients in the params' order..., tokens, targets), from the pipeline
 * (the tokens and targets as residuals for the types of their zero
 * cotangents). */
static void pipeline_fwd(void *ctx, jx_array *const *in, jx_array **out) {
  const gpt_pipe *g = ctx;
  int S = g->nstages, nst = g->per_stage * g->nq, n = nst + g->nouter;
  jx_array **pin = calloc((size_t)n + 2, sizeof *pin), **pout = calloc((size_t)n + 1, sizeof *pout);
  jx_array **layer = calloc((size_t)S, sizeof *layer);
  if (!pin || !pout || !layer) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_gpt_pipeline_loss_fn: out of memory");
    for (int o = 0; o < 3 + g->np; o++) out[o] = nn_fail();
  } else {
    for (int k = 0; k < nst; k++) {
      for (int s = 0; s < S; s++) layer[s] = in[g->source[k * S + s]];
      pin[k] = jx_stack(S, layer, 0);
    }
    for (int k = 0; k < g->nouter; k++) pin[nst + k] = in[g->outer_source[k]];
    pin[n] = in[g->np];
    pin[n + 1] = in[g->np + 1];
    if (jx_call(g->pipe, pin, pout)) {
      for (int o = 0; o < 3 + g->np; o++) out[o] = nn_fail();
    } else {
      out[0] = pout[0];
      for (int k = 0; k < nst; k++) {
        jx_shape start = jx_shape_of(pout[1 + k]), stop = start;
        for (int s = 0; s < S; s++) {
          for (int a = 0; a < start.rank; a++) start.dims[a] = 0;
          start.dims[0] = s;
          stop.dims[0] = s + 1;
          out[1 + g->source[k * S + s]] =
              jx_squeeze(jx_slice(pout[1 + k], start, stop, JX_SHAPE()), JX_AXES(0));
        }
      }
      for (int k = 0; k < g->nouter; k++) out[1 + g->outer_source[k]] = pout[1 + nst + k];
      out[1 + g->np] = in[g->np];
      out[2 + g->np] = in[g->np + 1];
    }
  }
  free(pin);
  free(pout);
  free(layer);
}

/* The custom VJP's backward: (gradients..., tokens, targets, loss
 * cotangent) -> (gradients scaled..., zeros for the tokens and targets). */
static void pipeline_bwd(void *ctx, jx_array *const *in, jx_array **out) {
  const int *np = ctx;
  jx_array *tokens = in[*np], *targets = in[*np + 1], *ct = in[*np + 2];
  for (int i = 0; i < *np; i++) out[i] = jx_mul(in[i], ct);
  out[*np] = jx_zeros(jx_dtype_of(tokens), jx_shape_of(tokens));
  out[*np + 1] = jx_zeros(jx_dtype_of(targets), jx_shape_of(targets));
}

static jx_fn *fail(const char *msg, gpt_pipe *g) {
  free_gpt_pipe(g);
  if (msg) jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_gpt_pipeline_loss_fn: %s", msg);
  return NULL;
}

/* Fills g's name tables from params_like; a message on a tree the GPT did not make. */
static const char *layout(gpt_pipe *g, const jx_tree *params_like, char *msg, size_t cap) {
  int L = (int)g->cfg.n_layers, S = g->nstages;
  g->names = calloc((size_t)g->np, sizeof *g->names);
  g->suffix = calloc((size_t)g->np, sizeof *g->suffix);
  g->outer_names = calloc((size_t)g->np, sizeof *g->outer_names);
  g->outer_source = calloc((size_t)g->np, sizeof *g->outer_source);
  if (!g->names || !g->suffix || !g->outer_names || !g->outer_source) return "out of memory";
  for (int i = 0; i < g->np; i++) {
    const char *name = jx_tree_name(params_like, i);
    if (!(g->names[i] = strdup(name))) return "out of memory";
    int layer = -1, used = 0;
    if (sscanf(name, "blocks.%d.%n", &layer, &used) == 1 && used > 0) {
      if (layer == 0 && !(g->suffix[g->nq++] = strdup(name + used))) return "out of memory";
    } else {
      g->outer_source[g->nouter] = i;
      if (!(g->outer_names[g->nouter++] = strdup(name))) return "out of memory";
    }
  }
  g->source = malloc(sizeof *g->source * (size_t)(g->per_stage * g->nq * S + 1));
  if (!g->source) return "out of memory";
  char want[300];
  for (int j = 0; j < g->per_stage; j++)
    for (int q = 0; q < g->nq; q++)
      for (int s = 0; s < S; s++) {
        snprintf(want, sizeof want, "blocks.%d.%s", s * g->per_stage + j, g->suffix[q]);
        int at = -1;
        for (int i = 0; i < g->np && at < 0; i++)
          if (!strcmp(g->names[i], want)) at = i;
        if (at < 0) {
          snprintf(msg, cap, "the parameters have no '%s' (of %d layers)", want, L);
          return msg;
        }
        g->source[(j * g->nq + q) * S + s] = at;
      }
  return NULL;
}

/* 1 if the stages run Megatron's tensor parallelism over the mesh's
 * "model" axis: it is not the stage axis nor in the batch spec, and its
 * size divides the heads (so each device holds whole heads); g->specs are
 * then jx_gpt_param_specs's. Else 0 (the model axis, if any, replicates
 * the stages' work); -1 on an error (recorded). */
static int tensor_parallel(gpt_pipe *g, const jx_tree *params_like, jx_mesh *m,
                           const char *stage_axis, const char *batch_spec) {
  int64_t model = jx_mesh_axis_size(m, "model");
  if (model < 2 || !strcmp(stage_axis, "model") || (batch_spec && strstr(batch_spec, "model")) ||
      g->cfg.n_heads % model)
    return 0;
  if (!(g->specs = calloc((size_t)g->np, sizeof *g->specs))) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_gpt_pipeline_loss_fn: out of memory");
    return -1;
  }
  if (jx_gpt_param_specs(&g->cfg, params_like, m, 0, g->specs)) return -1;
  g->tp_axis = "model";
  return 1;
}

jx_fn *jx_gpt_pipeline_loss_fn(const jx_gpt_config *c, const jx_tree *params_like, jx_mesh *m,
                               const char *stage_axis, int microbatches,
                               jx_pipeline_schedule schedule, int virtual_stages,
                               const char *batch_spec) {
  const char *fn = "jx_gpt_pipeline_loss_fn";
  if (!nn_gpt_check_config(fn, c)) return NULL;
  if (!params_like || !m || !stage_axis)
    return fail("needs a parameter tree, a mesh and an axis", NULL);
  int64_t S = jx_mesh_axis_size(m, stage_axis);
  if (S < 1) {
    char axes[256];
    jx_pipeline_describe_axes(m, axes, sizeof axes);
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the mesh has no stage axis '%s' (its axes: %s)",
                    fn, stage_axis, axes);
    return NULL;
  }
  int V = virtual_stages > 1 ? virtual_stages : 1;
  if (c->n_layers % (S * V)) {
    char virt[64] = "";
    if (V > 1) snprintf(virt, sizeof virt, " x %d virtual stages", V);
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "%s: %lld layers do not split evenly into %lld stages%s of mesh axis '%s'", fn,
                    (long long)c->n_layers, (long long)S, virt, stage_axis);
    return NULL;
  }
  if (c->compute_dtype) {
    jx_report_error(JX_ERR_UNIMPLEMENTED,
                    "%s: mixed precision (compute_dtype) is not implemented over stages", fn);
    return NULL;
  }
  gpt_pipe *g = calloc(1, sizeof *g);
  if (!g) return fail("out of memory", NULL);
  g->cfg = *c;
  g->np = jx_tree_size(params_like);
  g->nstages = (int)S * V; /* global stages */
  g->per_stage = (int)(c->n_layers / g->nstages);
  char msg[400];
  const char *bad = layout(g, params_like, msg, sizeof msg);
  if (bad) return fail(bad, g);
  g->stage = jx_fn_create("gpt_stage", g->per_stage * g->nq + 1, 1, stage_body, g);
  g->first = jx_fn_create("gpt_embed", g->nouter + 1, 1, embed_body, g);
  g->loss = jx_fn_create("gpt_head_loss", g->nouter + 2, 1, head_loss_body, g);
  if (!g->stage || !g->first || !g->loss) return fail(NULL, g);
  jx_pipeline_train_options o = {.batch_spec = batch_spec, .first = g->first, .virtual_stages = V};
  const char **stage_specs = NULL;
  int tp = tensor_parallel(g, params_like, m, stage_axis, batch_spec);
  if (tp < 0) return fail(NULL, g);
  if (tp) {
    int nst = g->per_stage * g->nq;
    if (!(stage_specs = calloc((size_t)nst, sizeof *stage_specs))) return fail("out of memory", g);
    for (int k = 0; k < nst; k++) stage_specs[k] = g->specs[g->source[k * g->nstages]];
    o.param_specs = stage_specs;
  }
  g->pipe =
      jx_pipeline_value_and_grad(g->stage, g->loss, m, stage_axis, microbatches, schedule, &o);
  free(stage_specs);
  if (!g->pipe) return fail(NULL, g);
  int *np = malloc(sizeof *np);
  if (!np) return fail("out of memory", g);
  *np = g->np;
  int nparams = g->np;
  jx_fn *primal = jx_gpt_loss_fn(c, params_like);
  jx_fn *fwd = jx_fn_create_owning("gpt_pipeline_fwd", nparams + 2, 3 + nparams, pipeline_fwd, g,
                                   free_gpt_pipe);
  jx_fn *bwd =
      jx_fn_create_owning("gpt_pipeline_bwd", nparams + 3, nparams + 2, pipeline_bwd, np, free);
  jx_fn *f = primal && fwd && bwd ? jx_custom_vjp(primal, fwd, bwd) : NULL;
  jx_fn_release(primal);
  jx_fn_release(fwd);
  jx_fn_release(bwd);
  return f;
}
