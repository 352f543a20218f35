/* jx_pipeline_value_and_grad: a schedule's table (pipeline_schedule.c) run
 * as one program per device of the stage axis. The function made is
 *   smap = jx_shard_map(body, mesh, {stage_axis for each stacked parameter,
 *                                    "" for each outer one, the batch spec
 *                                    for the batch and the targets},
 *                       {"" for the loss, the same for the gradients})
 * where body, on the device at position s, unrolls the table's ticks. Each
 * tick it looks up its row (s, t) in the table (a constant indexed by
 * jx_axis_index), files what its neighbours sent at the end of the last
 * tick in its inboxes, and runs one jx_switch over the actions: idle,
 * forward (the linearized stage's known part: the output, and the
 * residuals into a stash slot), backward (the transposed linear part on the
 * stashed residuals and the cotangent from the right; its gradients added
 * to the ones so far), the first stage's forward and backward (from the
 * batch's microbatch, through the first function if any) and, on the last
 * stage, forward-loss-backward. The stash, the gradients and the loss so
 * far are operands a branch passes through unless it writes them. A
 * device's switch runs only its own branch, so a device computes only what
 * the schedule gives it. Then it sends its output right and its input's
 * cotangent left, one jx_ppermute each at the ticks where the table has
 * some device send that way (a ring with virtual stages, where
 * the last device hands on to the first and each action names its chunk
 * of the device's parameter blocks). The buffers have the table's slot
 * counts plus one spare slot that writes with nothing to keep go to: the
 * stash holds the schedule's residuals per device, all microbatches' for
 * GPipe and at most the stage count's for 1F1B. A residual that is one of
 * the parameters is read from the parameter instead of being stashed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>
#include <jx/parallel.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../ir/axis_env.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../trace/vma.h"
#include "../transform/ad.h"
#include "../transform/build.h"
#include "../transform/control.h"
#include "mesh.h"
#include "pipeline.h"
#include "pipeline_schedule.h"
#include "sharding.h"

typedef struct {
  jx_fn *stage, *loss, *first; /* references; first may be NULL */
  jx_mesh *mesh;
  char *axis;
  char *data_axes; /* the batch spec's axes, "a,b", or NULL */
  int nstages, microbatches, remat, overlap;
  int virtual_stages;  /* per device: its blocks hold V chunks, global stage chunk S + device */
  int nparams, nouter; /* the stage's parameters (stacked), the loss's (whole) */
  pipe_table table;
  int profile_tag; /* its switches' tag (pipe_profile_tag) */
  jx_sharding *batch;
  int64_t batch_shards;
  /* per stacked parameter: its spec over the other axes (NULL: whole), and
   * its shard_map spec, the stage axis first */
  jx_sharding **param_sh;
  char **param_spec;
  jx_fn *body, *smap;
} train_data;

static void free_train_data(void *data) {
  train_data *d = data;
  if (!d) return;
  jx_fn_release(d->smap);
  jx_fn_release(d->body);
  jx_fn_release(d->first);
  jx_fn_release(d->loss);
  jx_fn_release(d->stage);
  jx_sharding_release(d->batch);
  jx_mesh_release(d->mesh);
  pipe_table_free(&d->table);
  for (int k = 0; k < d->nparams && d->param_sh; k++) jx_sharding_release(d->param_sh[k]);
  for (int k = 0; k < d->nparams && d->param_spec; k++) free(d->param_spec[k]);
  free(d->param_sh);
  free(d->param_spec);
  free(d->data_axes);
  free(d->axis);
  free(d);
}

/* x[start * rows : (start + 1) * rows] along dim 0, start an i32 scalar. */
static jx_array *rows_at(jx_array *x, jx_array *index, int64_t rows) {
  jx_array *starts[JX_MAX_RANK];
  starts[0] = jx_mul(index, jx_scalar(JX_I32, (double)rows));
  for (int k = 1; k < x->shape.rank; k++) starts[k] = jx_scalar(JX_I32, 0);
  jx_shape size = x->shape;
  size.dims[0] = rows;
  return jx_dynamic_slice(x, starts, size);
}

/* buf[slot] (buf: [slots, ...]). */
static jx_array *slot_read(jx_array *buf, jx_array *slot) {
  return jx_squeeze(rows_at(buf, slot, 1), JX_AXES(0));
}

/* buf with buf[slot] = v. */
static jx_array *slot_write(jx_array *buf, jx_array *slot, jx_array *v) {
  jx_array *starts[JX_MAX_RANK];
  starts[0] = slot;
  for (int k = 1; k < buf->shape.rank; k++) starts[k] = jx_scalar(JX_I32, 0);
  return jx_dynamic_update_slice(buf, jx_expand_dims(v, 0), starts);
}

/* A buffer of n slots of aval a. */
static jx_array *slots(jx_aval a, int n) { return jx_zeros(a.dtype, jx_aval_stacked(a, n).shape); }

/* ---- one trace of the body: the programs and the branches' layout ----
 * Forwards and backwards run as linearized programs traced for the blocks'
 * types, so the body's own values decide what varies over which mesh axis:
 * the explicit psum and pmean at the end are the only reductions. Each
 * program takes (params..., outer..., input, targets):
 *   mid:   stage(params, input)                         (input: activations)
 *   first: stage(params, first(outer, input))           (input: the batch's)
 *   last:  loss(outer, stage(params, h), targets)       h: the input, or
 *          first(outer, input) when one stage is both first and last. */
typedef struct {
  jx_program *fwd; /* inputs -> (output, residuals...) */
  jx_program *bwd; /* (residuals..., output cotangent) -> cotangents of the wrt inputs */
  int nres;
  uint8_t *wrt;  /* per input: differentiated (the float ones) */
  int *res_from; /* per residual: the parameter it is (params, then outer), or -1 - stash index */
  int stash0;    /* where its stashed residuals start in the branches' stash list */
} linearized;

static jx_status linearize(jx_program *p, const jx_aval *in, linearized *out) {
  out->wrt = calloc((size_t)p->nin + 1, 1);
  if (!out->wrt) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  for (int i = 0; i < p->nin; i++) out->wrt[i] = jx_is_float(in[i].dtype);
  uint8_t sel = 1;
  jx_linearized lz = {0};
  jx_status st = jx_linearize(p, out->wrt, &sel, &lz);
  if (st) return st;
  out->fwd = lz.fwd;
  out->nres = lz.nres;
  out->bwd = jx_transpose_program(lz.lin, lz.nres);
  jx_program_release(lz.lin);
  return out->bwd ? JX_OK : jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
}

static void release_linearized(linearized *l) {
  jx_program_release(l->fwd);
  jx_program_release(l->bwd);
  free(l->wrt);
  free(l->res_from);
}

/* The branches take (params..., outer..., x, raw, cotangent, stashed...,
 * targets): x the activations from the left (on the first stage without a
 * first function: its microbatch), raw the batch's microbatch. They give
 * (output, input cotangent, to stash..., gradients..., outer gradients...,
 * loss). */
typedef struct {
  const train_data *d;
  int P, O, nstash;
  jx_aval act;
  const jx_aval *av; /* borrowed: params..., outer..., raw, targets */
  jx_aval *stash_av;
  jx_dtype loss_dtype;
  linearized mid, first, last;
  jx_array **res; /* scratch: a program's residuals */
} tick_ctx;

/* Operands past the params and outer params: x, raw, the cotangent, the
 * stash slot and the chunk (i32), the action's label (i32: its microbatch,
 * -1 when idle; only a profile reads it), then the stash buffers, the
 * gradients so far, the loss so far and the targets. */
enum { IN_X, IN_RAW, IN_CT, IN_SLOT, IN_CHUNK, IN_LABEL, IN_STASH };

static int stash_at(const tick_ctx *c) { return c->P + c->O + IN_STASH; }
static int acc_at(const tick_ctx *c) { return stash_at(c) + c->nstash; }
static int loss_at(const tick_ctx *c) { return acc_at(c) + c->P + c->O; }
static int branch_nin(const tick_ctx *c) { return loss_at(c) + 2; }
static int branch_nout(const tick_ctx *c) { return 3 + c->nstash + c->P + c->O; }
static int grad_at(const tick_ctx *c) { return 2 + c->nstash; }

static jx_array *zeros_of(jx_aval a) { return jx_zeros(a.dtype, a.shape); }

/* A branch's outputs as it found them: nothing sent, the stash, the
 * gradients and the loss unchanged; the branch then sets its own. */
static void pass_outputs(const tick_ctx *c, jx_array *const *in, jx_array **out) {
  out[0] = zeros_of(c->act);
  out[1] = zeros_of(c->act);
  for (int k = 0; k < c->nstash; k++) out[2 + k] = in[stash_at(c) + k];
  for (int j = 0; j <= c->P + c->O; j++) out[grad_at(c) + j] = in[acc_at(c) + j];
}

static void poison_outputs(const tick_ctx *c, jx_array **out) {
  for (int o = 0; o < branch_nout(c); o++) out[o] = jx_poison();
}

/* Parameter j (stacked, then outer) from a branch's operands: with virtual
 * stages, the chunk's entry of the stacked ones' blocks. */
static jx_array *param_of(const tick_ctx *c, jx_array *const *in, int j) {
  return j < c->P && c->d->virtual_stages > 1 ? slot_read(in[j], in[c->P + c->O + IN_CHUNK])
                                              : in[j];
}

/* The program's inputs from a branch's operands, with `input` as its input. */
static void program_args(const tick_ctx *c, jx_array *const *in, jx_array *input, jx_array **args) {
  int n = c->P + c->O;
  for (int j = 0; j < n; j++) args[j] = param_of(c, in, j);
  args[n] = input;
  args[n + 1] = in[loss_at(c) + 1];
}

/* l's forward on args: its output, and its residuals into c->res. */
static jx_status forward(const tick_ctx *c, const linearized *l, jx_array *const *args,
                         jx_array **y) {
  jx_array **fo = calloc((size_t)l->fwd->nout, sizeof *fo);
  if (!fo) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  jx_status st = jx_program_eval(l->fwd, args, fo);
  if (!st) {
    *y = fo[0];
    memcpy(c->res, fo + 1, (size_t)l->nres * sizeof *c->res);
  }
  free(fo);
  return st;
}

/* l's backward from c->res and the output's cotangent: the gradients added
 * to the branch's (and, with send_ct, the input's cotangent) in out. */
static jx_status backward(const tick_ctx *c, const linearized *l, jx_array *ct, int send_ct,
                          jx_array *chunk, jx_array **out) {
  int n = c->P + c->O;
  jx_array **args = calloc((size_t)l->nres + 1, sizeof *args);
  jx_array **cts = calloc((size_t)l->bwd->nout + 1, sizeof *cts);
  jx_status st =
      args && cts ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  if (!st) {
    memcpy(args, c->res, (size_t)l->nres * sizeof *args);
    args[l->nres] = ct;
    st = jx_program_eval(l->bwd, args, cts);
  }
  for (int i = 0, w = 0; !st && i < n + 2; i++) {
    if (!l->wrt[i]) continue;
    if (i < c->P && c->d->virtual_stages > 1) { /* into the chunk's entry */
      jx_array *acc = out[grad_at(c) + i];
      out[grad_at(c) + i] = slot_write(acc, chunk, jx_add(slot_read(acc, chunk), cts[w]));
    } else if (i < n)
      out[grad_at(c) + i] = jx_add(out[grad_at(c) + i], cts[w]);
    else if (i == n && send_ct)
      out[1] = cts[w];
    w++;
  }
  free(args);
  free(cts);
  return st;
}

/* Stash entry k of l at the operands' slot. */
static jx_array *stashed(const tick_ctx *c, const linearized *l, jx_array *const *in, int k) {
  return slot_read(in[stash_at(c) + l->stash0 + k], in[c->P + c->O + IN_SLOT]);
}

/* c->res from a branch's operands: parameters read in place, the rest
 * from the stash. */
static void residuals_from(const tick_ctx *c, const linearized *l, jx_array *const *in) {
  for (int k = 0; k < l->nres; k++)
    c->res[k] = l->res_from[k] >= 0 ? param_of(c, in, l->res_from[k])
                                    : stashed(c, l, in, -1 - l->res_from[k]);
}

static void idle_branch(void *ctx, jx_array *const *in, jx_array **out) {
  pass_outputs(ctx, in, out);
}

static void run_forward(const tick_ctx *c, const linearized *l, jx_array *const *in,
                        jx_array *input, jx_array **out) {
  pass_outputs(c, in, out);
  if (!l->fwd) return; /* a branch no stage of this pipeline takes */
  jx_array **a = calloc((size_t)(c->P + c->O + 2), sizeof *a);
  if (!a) return poison_outputs(c, out);
  program_args(c, in, input, a);
  jx_status st = forward(c, l, a, &out[0]);
  free(a);
  if (st) return poison_outputs(c, out);
  jx_array *slot = in[c->P + c->O + IN_SLOT];
  if (c->d->remat) { /* only the input waits for the backward */
    out[2 + l->stash0] = slot_write(out[2 + l->stash0], slot, input);
    return;
  }
  for (int k = 0; k < l->nres; k++)
    if (l->res_from[k] < 0) {
      int at = 2 + l->stash0 - 1 - l->res_from[k];
      out[at] = slot_write(out[at], slot, c->res[k]);
    }
}

static void run_backward(const tick_ctx *c, const linearized *l, jx_array *const *in, int send_ct,
                         jx_array **out) {
  pass_outputs(c, in, out);
  if (!l->fwd) return; /* a branch no stage of this pipeline takes */
  if (c->d->remat) {   /* the forward again, from the stashed input */
    jx_array **a = calloc((size_t)(c->P + c->O + 2), sizeof *a), *y = NULL;
    int bad = !a;
    if (!bad) {
      program_args(c, in, stashed(c, l, in, 0), a);
      bad = forward(c, l, a, &y) != JX_OK;
    }
    free(a);
    if (bad) return poison_outputs(c, out);
  } else {
    residuals_from(c, l, in);
  }
  int n = c->P + c->O;
  if (backward(c, l, in[n + IN_CT], send_ct, in[n + IN_CHUNK], out)) poison_outputs(c, out);
}

static void forward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  run_forward(c, &c->mid, in, in[c->P + c->O + IN_X], out);
}

static void backward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  run_backward(c, &c->mid, in, 1, out);
}

/* The first stage: its input is the batch's microbatch, through the first
 * function if there is one. */
static void first_forward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  run_forward(c, c->d->first ? &c->first : &c->mid, in, in[c->P + c->O + IN_RAW], out);
}

static void first_backward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  run_backward(c, c->d->first ? &c->first : &c->mid, in, 0, out);
}

/* The last stage: the loss after the stage, scaled by 1 / M, and its
 * cotangents, at once. */
static void forward_backward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  int n = c->P + c->O, one = c->d->nstages == 1;
  pass_outputs(c, in, out);
  jx_array **a = calloc((size_t)n + 2, sizeof *a), *loss = NULL;
  double scale = 1.0 / c->d->microbatches;
  int bad = !a;
  if (!bad) {
    program_args(c, in, in[n + (one && c->d->first ? IN_RAW : IN_X)], a);
    bad = forward(c, &c->last, a, &loss) ||
          backward(c, &c->last, jx_full(c->loss_dtype, JX_SHAPE(), scale), !one, in[n + IN_CHUNK],
                   out);
  }
  free(a);
  if (bad) return poison_outputs(c, out);
  out[grad_at(c) + n] = jx_add(out[grad_at(c) + n], jx_mul(loss, jx_scalar(c->loss_dtype, scale)));
}

static const jx_body branches[PIPE_NKINDS] = {
    [PIPE_IDLE] = idle_branch,
    [PIPE_FORWARD] = forward_branch,
    [PIPE_BACKWARD] = backward_branch,
    [PIPE_FORWARD_BACKWARD] = forward_backward_branch,
    [PIPE_FIRST_FORWARD] = first_forward_branch,
    [PIPE_FIRST_BACKWARD] = first_backward_branch,
};

/* ---- the programs ---- */
static jx_status run_first(const train_data *d, jx_array *const *in, jx_array **h) {
  int n = d->nparams + d->nouter;
  if (!d->first) {
    *h = in[n];
    return JX_OK;
  }
  jx_array **a = calloc((size_t)d->nouter + 1, sizeof *a);
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  memcpy(a, in + d->nparams, (size_t)d->nouter * sizeof *a);
  a[d->nouter] = in[n];
  jx_status st = jx_call(d->first, a, h);
  free(a);
  return st;
}

static jx_status run_stage(const train_data *d, jx_array *const *in, jx_array *x, jx_array **y) {
  jx_array **a = calloc((size_t)d->nparams + 1, sizeof *a);
  if (!a) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  memcpy(a, in, (size_t)d->nparams * sizeof *a);
  a[d->nparams] = x;
  jx_status st = jx_call(d->stage, a, y);
  if (!st && ((*y)->dtype != x->dtype || !jx_shape_equal((*y)->shape, x->shape))) {
    char want[JX_AVAL_STR_CAP], got[JX_AVAL_STR_CAP];
    st = jx_error_set(JX_ERR_SHAPE,
                      "jx_pipeline: the stage '%s' takes activations %s but gives %s; a stage "
                      "must give activations of the type it takes",
                      d->stage->name, jx_aval_str(x->dtype, x->shape, want),
                      jx_aval_str((*y)->dtype, (*y)->shape, got));
  }
  free(a);
  return st;
}

static void mid_program(void *ctx, jx_array *const *in, jx_array **out) {
  const train_data *d = ctx;
  if (run_stage(d, in, in[d->nparams + d->nouter], out)) out[0] = jx_poison();
}

static void first_program(void *ctx, jx_array *const *in, jx_array **out) {
  const train_data *d = ctx;
  jx_array *h = NULL;
  if (run_first(d, in, &h) || run_stage(d, in, h, out)) out[0] = jx_poison();
}

static void last_program(void *ctx, jx_array *const *in, jx_array **out) {
  const train_data *d = ctx;
  int n = d->nparams + d->nouter;
  jx_array *h = in[n], *y = NULL;
  jx_array **a = calloc((size_t)d->nouter + 2, sizeof *a);
  jx_status st = a ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  if (!st && d->nstages == 1) st = run_first(d, in, &h);
  if (!st) st = run_stage(d, in, h, &y);
  if (!st) {
    memcpy(a, in + d->nparams, (size_t)d->nouter * sizeof *a);
    a[d->nouter] = y;
    a[d->nouter + 1] = in[n + 1];
    st = jx_call(d->loss, a, out);
  }
  if (!st && (out[0]->shape.rank != 0 || !jx_is_float(out[0]->dtype))) {
    char s[JX_AVAL_STR_CAP];
    st = jx_error_set(JX_ERR_SHAPE,
                      "jx_pipeline_value_and_grad: the loss '%s' gives %s; it must give a "
                      "float scalar",
                      d->loss->name, jx_aval_str(out[0]->dtype, out[0]->shape, s));
  }
  free(a);
  if (st) out[0] = jx_poison();
}

/* p (one of the three above) traced for av with the input's aval `input`,
 * linearized into l. */
static jx_status linearize_program(const train_data *d, jx_body body, const char *name,
                                   const jx_aval *av, jx_aval input, linearized *l,
                                   jx_aval *out_aval) {
  int n = d->nparams + d->nouter;
  jx_aval *in = malloc(sizeof *in * (size_t)(n + 2));
  jx_fn *f = jx_fn_create(name, n + 2, 1, body, (void *)d);
  jx_program *p = NULL;
  jx_status st = in && f ? JX_OK : jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  if (!st) {
    memcpy(in, av, sizeof *in * (size_t)n);
    in[n] = input;
    in[n + 1] = av[n + 1];
    p = jx_fn_program(f, in);
    st = p ? JX_OK : jx_last_status();
  }
  if (!st) {
    if (out_aval) *out_aval = p->avals[p->out[0]];
    st = linearize(p, in, l);
  }
  jx_program_release(p);
  jx_fn_release(f);
  free(in);
  return st;
}

/* Which residuals of l are parameters, and the stash entries of the rest
 * (appended to c's list; with remat, the input alone). */
static jx_status stash_layout(tick_ctx *c, linearized *l, jx_aval input) {
  int n = c->P + c->O;
  l->stash0 = c->nstash;
  l->res_from = calloc((size_t)l->nres + 1, sizeof *l->res_from);
  jx_aval *grown = realloc(c->stash_av, sizeof *grown * (size_t)(c->nstash + l->nres + 1));
  if (!l->res_from || !grown)
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  c->stash_av = grown;
  if (c->d->remat) {
    c->stash_av[c->nstash++] = input;
    return JX_OK;
  }
  for (int k = 0; k < l->nres; k++) {
    int v = l->fwd->out[1 + k], from = -1;
    for (int j = 0; j < n && from < 0; j++)
      if (l->fwd->in[j] == v) from = j;
    if (from < 0) {
      c->stash_av[c->nstash] = l->fwd->avals[v];
      from = -1 - (c->nstash++ - l->stash0);
    }
    l->res_from[k] = from;
  }
  return JX_OK;
}

/* Fills c for the blocks' types av (params..., outer..., raw microbatch,
 * targets microbatch). */
static jx_status prepare_ticks(const train_data *d, const jx_aval *av, tick_ctx *c) {
  int S = d->nstages, n = d->nparams + d->nouter;
  c->d = d;
  c->P = d->nparams;
  c->O = d->nouter;
  c->av = av;
  c->act = av[n];
  jx_status st = JX_OK;
  if (d->first) { /* the activations are what the first function gives */
    jx_program *p = NULL;
    jx_aval *fin = malloc(sizeof *fin * (size_t)(d->nouter + 1));
    if (!fin) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    memcpy(fin, av + d->nparams, sizeof *fin * (size_t)d->nouter);
    fin[d->nouter] = av[n];
    p = jx_fn_program(d->first, fin);
    free(fin);
    if (!p) return jx_last_status();
    c->act = p->avals[p->out[0]];
    jx_program_release(p);
  }
  int G = S * d->virtual_stages;
  int uses_mid = G > 2 || (G == 2 && !d->first), uses_first = d->first && G > 1;
  if (uses_mid) st = linearize_program(d, mid_program, "pipeline_stage", av, c->act, &c->mid, NULL);
  if (!st && uses_mid) st = stash_layout(c, &c->mid, c->act);
  if (!st && uses_first)
    st = linearize_program(d, first_program, "pipeline_first_stage", av, av[n], &c->first, NULL);
  if (!st && uses_first) st = stash_layout(c, &c->first, av[n]);
  jx_aval loss;
  if (!st)
    st = linearize_program(d, last_program, "pipeline_last_stage", av, S == 1 ? av[n] : c->act,
                           &c->last, &loss);
  if (st) return st;
  c->loss_dtype = loss.dtype;
  int most = c->mid.nres > c->first.nres ? c->mid.nres : c->first.nres;
  if (c->last.nres > most) most = c->last.nres;
  c->res = calloc((size_t)most + 1, sizeof *c->res);
  if (!c->res) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  return JX_OK;
}

static void release_ticks(tick_ctx *c) {
  release_linearized(&c->mid);
  release_linearized(&c->first);
  release_linearized(&c->last);
  free(c->stash_av);
  free(c->res);
}

/* The table's kind for device s at a tick: the first stage's forward and
 * backward take the batch's microbatch (through the first function if
 * there is one). */
static int step_kind(const pipe_step *p, int s) {
  if (s == 0 && p->chunk == 0) {
    if (p->kind == PIPE_FORWARD) return PIPE_FIRST_FORWARD;
    if (p->kind == PIPE_BACKWARD) return PIPE_FIRST_BACKWARD;
  }
  return p->kind;
}

/* Whether some device sends activations (way 0) or a cotangent (way 1) to
 * a neighbour at the end of tick t. */
static int table_sends(const train_data *d, int t, int way) {
  int S = d->nstages, G = S * d->virtual_stages;
  for (int s = 0; s < S; s++) {
    const pipe_step *p = &d->table.steps[t * S + s];
    int g = p->chunk * S + s;
    if (way == 0 && p->kind == PIPE_FORWARD && g + 1 < G) return 1;
    if (way == 1 && (p->kind == PIPE_BACKWARD || p->kind == PIPE_FORWARD_BACKWARD) && g > 0)
      return 1;
  }
  return 0;
}

/* x after f(x, axis, dim) for each dim of stacked parameter j that its
 * spec splits over an axis of the batch spec (stored sharded, FSDP); dim
 * counts in the body's block (after the stage dim with virtual stages). */
static jx_array *each_fsdp_dim(const train_data *d, int j, jx_array *x,
                               jx_array *(*f)(jx_array *, const char *, int)) {
  const jx_sharding *b = d->param_sh ? d->param_sh[j] : NULL;
  for (int dim = 0; b && dim < b->ndims; dim++)
    for (int k = 0; k < b->naxes[dim]; k++)
      if (jx_sharding_uses_axis(d->batch, b->axis[dim][k]))
        x = f(x, jx_mesh_axis_name(d->mesh, b->axis[dim][k]), dim + (d->virtual_stages > 1));
  return x;
}

static jx_array *gather_dim(jx_array *x, const char *axis, int dim) {
  return jx_all_gather(x, axis, dim, 1);
}

/* The gradient's mean over the axis, split back as the parameter. */
static jx_array *scatter_dim(jx_array *g, const char *axis, int dim) {
  return jx_div(jx_psum_scatter(g, axis, dim, 1), jx_scalar(g->dtype, jx_axis_size(axis)));
}

/* Stacked parameter j whole over the batch spec's axes. */
static jx_array *fsdp_gather(const train_data *d, int j, jx_array *x) {
  return each_fsdp_dim(d, j, x, gather_dim);
}

/* Stacked parameter j's gradient averaged over the batch spec's axes:
 * reduce-scattered over those it is stored split over, pmean over the others. */
static jx_array *over_data(const train_data *d, int j, jx_array *g) {
  g = each_fsdp_dim(d, j, g, scatter_dim);
  const jx_sharding *b = d->param_sh ? d->param_sh[j] : NULL, *batch = d->batch;
  for (int a = 0; batch->ndims > 0 && a < batch->naxes[0]; a++)
    if (!b || !jx_sharding_uses_axis(b, batch->axis[0][a]))
      g = jx_pmean(g, jx_mesh_axis_name(d->mesh, batch->axis[0][a]));
  return g;
}

/* The manual axes the stage's programs take x to vary over: always the
 * stage axis and the batch spec's (the pipeline reduces the gradients over
 * those itself, so no cast in the programs may put a psum over them into a
 * transpose), and the others as x's own type says (a parameter split over
 * model varies over it, the activations do not, so the stage's own psum
 * over model and its transpose are Megatron's). */
static int program_vma(const train_data *d, const jx_array *x) {
  int64_t ids[JX_MAX_RANK + 1];
  int n = 0;
  ids[n++] = jx_axis_id(d->axis);
  for (int a = 0; d->batch->ndims > 0 && a < d->batch->naxes[0] && n <= JX_MAX_RANK; a++)
    ids[n++] = jx_axis_id(jx_mesh_axis_name(d->mesh, d->batch->axis[0][a]));
  return jx_vma_add(jx_array_vma(x), n, ids);
}

/* A row of the table as the body reads it: the step's fields, then the
 * label a profile shows. */
enum { ROW_FIELDS = PIPE_STEP_FIELDS + 1 };

/* The per-device body: (parameter blocks [1, ...]..., outer..., batch,
 * targets) -> (loss, gradient blocks..., outer gradients...). */
static void train_body(void *ctx, jx_array *const *in, jx_array **out) {
  train_data *d = ctx;
  const pipe_table *tb = &d->table;
  int S = d->nstages, M = d->microbatches, P = d->nparams, O = d->nouter, n = P + O;
  int T = tb->nticks;
  jx_array *x = in[n], *tg = in[n + 1];
  int64_t rows = x->shape.dims[0] / M, trows = tg->shape.dims[0] / M;
  tick_ctx c = {0};
  jx_fn *fns[PIPE_NKINDS] = {0};
  jx_array **params = calloc((size_t)n + 1, sizeof *params);
  jx_array **grads = calloc((size_t)n + 1, sizeof *grads);
  jx_aval *av = calloc((size_t)n + 2, sizeof *av);
  int32_t *rowdata = malloc(sizeof *rowdata * (size_t)S * ROW_FIELDS);
  int(*right)[2] = calloc((size_t)S, sizeof *right), (*left)[2] = calloc((size_t)S, sizeof *left);
  jx_array **ops = NULL, **res = NULL, **stash = NULL;
  jx_status st = params && grads && av && rowdata && right && left
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  for (int j = 0; !st && j < n; j++) {
    /* with virtual stages a block holds the device's chunks, taken per action */
    params[j] = j < P && d->virtual_stages == 1 ? jx_squeeze(in[j], JX_AXES(0)) : in[j];
    if (j < P) params[j] = fsdp_gather(d, j, params[j]);
    av[j] = (jx_aval){
        .dtype = params[j]->dtype, .shape = params[j]->shape, .vma = program_vma(d, params[j])};
    if (j < P && d->virtual_stages > 1) av[j] = jx_aval_unstacked(av[j]);
  }
  if (!st) {
    jx_shape mb = x->shape, tmb = tg->shape;
    mb.dims[0] = rows;
    tmb.dims[0] = trows;
    av[n] = (jx_aval){.dtype = x->dtype, .shape = mb, .vma = program_vma(d, x)};
    av[n + 1] = (jx_aval){.dtype = tg->dtype, .shape = tmb, .vma = program_vma(d, tg)};
    st = prepare_ticks(d, av, &c);
  }
  int nin = branch_nin(&c), nout = branch_nout(&c);
  if (!st) {
    ops = calloc((size_t)nin, sizeof *ops);
    res = calloc((size_t)nout, sizeof *res);
    stash = calloc((size_t)c.nstash + 1, sizeof *stash);
    if (!ops || !res || !stash)
      st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  }
  /* a profile's names of the actions, followed by the microbatch */
  static const char *names[PIPE_NKINDS] = {"idle",    "forward", "backward", "forward+backward",
                                           "forward", "backward"};
  for (int k = 0; !st && k < PIPE_NKINDS; k++)
    if (!(fns[k] = jx_fn_create(names[k], nin, nout, branches[k], &c))) st = jx_last_status();
  if (st) goto fail;

  jx_array *position = jx_axis_index(d->axis);
  jx_array *act_inbox = slots(c.act, tb->act_slots + 1),
           *cot_inbox = slots(c.act, tb->cot_slots + 1);
  for (int k = 0; k < c.nstash; k++) stash[k] = slots(c.stash_av[k], tb->stash_slots + 1);
  for (int j = 0; j < n; j++) grads[j] = jx_zeros(params[j]->dtype, params[j]->shape);
  jx_array *loss = jx_zeros(c.loss_dtype, JX_SHAPE());
  /* with virtual stages the last device hands on to the first: a ring */
  int npairs = d->virtual_stages > 1 ? S : S - 1;
  for (int s = 0; s < npairs; s++) {
    right[s][0] = s, right[s][1] = (s + 1) % S;
    left[s][0] = (s + 1) % S, left[s][1] = s;
  }
  jx_array *sent_act = NULL, *sent_cot = NULL;
  for (int t = 0; t < T && !st; t++) {
    /* this tick's row of the table for this device */
    for (int s = 0; s < S; s++) {
      const pipe_step *p = &tb->steps[t * S + s];
      int32_t *r = rowdata + (size_t)s * ROW_FIELDS;
      r[0] = step_kind(p, s), r[1] = p->microbatch, r[2] = p->chunk, r[3] = p->act_slot;
      r[4] = p->stash_slot, r[5] = p->cot_slot, r[6] = p->recv_act_slot, r[7] = p->recv_cot_slot;
      r[8] = p->kind == PIPE_IDLE ? -1 : p->microbatch;
    }
    jx_array *table = jx_array_from(JX_I32, JX_SHAPE(S, ROW_FIELDS), rowdata);
    jx_array *row = slot_read(table, position), *field[ROW_FIELDS];
    for (int f = 0; f < ROW_FIELDS; f++)
      field[f] = jx_reshape(jx_slice(row, JX_SHAPE(f), JX_SHAPE(f + 1), JX_SHAPE()), JX_SHAPE());
    /* what the neighbours sent at the end of the last tick, when the table
     * says some device sent anything that way */
    jx_array *arrived_act =
        sent_act && table_sends(d, t - 1, 0) ? jx_ppermute(sent_act, d->axis, npairs, right) : NULL;
    jx_array *arrived_cot =
        sent_cot && table_sends(d, t - 1, 1) ? jx_ppermute(sent_cot, d->axis, npairs, left) : NULL;
    /* with overlap no action of this tick reads them: they are filed after
     * the switch, which runs while they are in flight */
    if (arrived_act && !d->overlap) act_inbox = slot_write(act_inbox, field[6], arrived_act);
    if (arrived_cot && !d->overlap) cot_inbox = slot_write(cot_inbox, field[7], arrived_cot);
    memcpy(ops, params, (size_t)n * sizeof *ops);
    jx_array *raw = rows_at(x, field[1], rows);
    ops[n + IN_X] = S > 1 ? slot_read(act_inbox, field[3]) : d->first ? zeros_of(c.act) : raw;
    ops[n + IN_RAW] = raw;
    ops[n + IN_CT] = slot_read(cot_inbox, field[5]);
    ops[n + IN_SLOT] = field[4];
    ops[n + IN_CHUNK] = field[2];
    ops[n + IN_LABEL] = field[8];
    memcpy(ops + stash_at(&c), stash, (size_t)c.nstash * sizeof *ops);
    memcpy(ops + acc_at(&c), grads, (size_t)n * sizeof *ops);
    ops[loss_at(&c)] = loss;
    ops[loss_at(&c) + 1] = rows_at(tg, field[1], trows);
    st = jx_switch_labeled(field[0], n + IN_LABEL, d->profile_tag, PIPE_NKINDS, fns, nin, ops, res);
    if (st) break;
    if (arrived_act && d->overlap) act_inbox = slot_write(act_inbox, field[6], arrived_act);
    if (arrived_cot && d->overlap) cot_inbox = slot_write(cot_inbox, field[7], arrived_cot);
    if (S > 1) sent_act = res[0], sent_cot = res[1];
    memcpy(stash, res + 2, (size_t)c.nstash * sizeof *stash);
    memcpy(grads, res + grad_at(&c), (size_t)n * sizeof *grads);
    loss = res[grad_at(&c) + n];
  }
  if (st) goto fail;
  /* the loss is the last stage's, an outer gradient the first's plus the
   * last's; over the batch spec's axes, the mean of the shards' */
  loss = jx_psum(loss, d->axis);
  if (d->data_axes) loss = jx_pmean(loss, d->data_axes);
  out[0] = loss;
  for (int j = 0; j < n; j++) {
    jx_array *g = j < P ? over_data(d, j, grads[j]) : jx_psum(grads[j], d->axis);
    if (j >= P && d->data_axes) g = jx_pmean(g, d->data_axes);
    out[1 + j] = j < P && d->virtual_stages == 1 ? jx_expand_dims(g, 0) : g;
  }
  goto done;
fail:
  for (int o = 0; o < 1 + n; o++) out[o] = jx_poison();
done:
  for (int k = 0; k < PIPE_NKINDS; k++) jx_fn_release(fns[k]);
  release_ticks(&c);
  free(ops);
  free(res);
  free(stash);
  free(params);
  free(grads);
  free(av);
  free(rowdata);
  free(right);
  free(left);
}

/* a [A B, ...] as [B A, ...]: entry a B + b moved to b A + a. */
static jx_array *regroup(jx_array *a, int A, int B) {
  jx_shape split = a->shape;
  int r = a->shape.rank;
  split.rank = r + 1;
  split.dims[0] = A;
  split.dims[1] = B;
  for (int k = 1; k < r; k++) split.dims[k + 1] = a->shape.dims[k];
  jx_axes perm = {.n = r + 1};
  perm.v[0] = 1, perm.v[1] = 0;
  for (int k = 2; k <= r; k++) perm.v[k] = k;
  return jx_reshape(jx_transpose(jx_reshape(a, split), perm), a->shape);
}

/* The global shapes checked against the stages and the microbatches, then smap. */
static jx_status train_trace(void *ctx, jx_array *const *in, jx_array **out) {
  train_data *d = ctx;
  char s[JX_AVAL_STR_CAP];
  int n = d->nparams + d->nouter;
  int V = d->virtual_stages, G = d->nstages * V;
  for (int k = 0; k < d->nparams; k++)
    if (in[k]->shape.rank < 1 || in[k]->shape.dims[0] != G) {
      char virt[64] = "";
      if (V > 1) snprintf(virt, sizeof virt, " x %d virtual stages", V);
      return jx_error_set(JX_ERR_SHAPE,
                          "jx_pipeline_value_and_grad: parameter %d is %s; its leading dim must "
                          "be the %d stages of mesh axis '%s'%s",
                          k, jx_aval_str(in[k]->dtype, in[k]->shape, s), d->nstages, d->axis, virt);
    }
  jx_array *x = in[n], *tg = in[n + 1];
  if (x->shape.rank < 1 || x->shape.dims[0] % (d->batch_shards * d->microbatches)) {
    char shards[JX_SPEC_CAP + 64] = "";
    if (d->batch_shards > 1)
      snprintf(shards, sizeof shards, " on each of the %lld shards of the batch spec '%s'",
               (long long)d->batch_shards, jx_sharding_spec(d->batch));
    return jx_error_set(JX_ERR_SHAPE,
                        "jx_pipeline_value_and_grad: the batch is %s; its leading dim %lld is not "
                        "divisible into %d microbatches%s",
                        jx_aval_str(x->dtype, x->shape, s),
                        (long long)(x->shape.rank ? x->shape.dims[0] : 0), d->microbatches, shards);
  }
  if (tg->shape.rank < 1 || tg->shape.dims[0] != x->shape.dims[0]) {
    char b[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE,
                        "jx_pipeline_value_and_grad: the targets are %s and the batch %s; their "
                        "leading dims must agree",
                        jx_aval_str(tg->dtype, tg->shape, s), jx_aval_str(x->dtype, x->shape, b));
  }
  if (V == 1) {
    jx_status st = jx_call(d->smap, in, out);
    return st ? st : jx_last_status();
  }
  /* global stage g = chunk S + device: device-major for the blocks, and back */
  jx_array **args = calloc((size_t)n + 2, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  memcpy(args, in, (size_t)(n + 2) * sizeof *args);
  for (int k = 0; k < d->nparams; k++) args[k] = regroup(in[k], V, d->nstages);
  jx_status st = jx_call(d->smap, args, out);
  free(args);
  for (int k = 0; !st && k < d->nparams; k++) out[1 + k] = regroup(out[1 + k], d->nstages, V);
  return st ? st : jx_last_status();
}

static jx_program *train_build(jx_fn *f, const jx_aval *in) {
  train_data *d = f->data;
  int n = d->nparams + d->nouter;
  return jx_program_build(f->name, n + 2, in, n + 1, train_trace, d);
}

static const jx_fn_kind train_kind = {
    .name = "pipeline_value_and_grad", .build = train_build, .free_data = free_train_data};

/* "a,b": the mesh axes the batch spec splits the batch over, or NULL. */
static char *split_axes(const jx_sharding *b) {
  if (b->ndims < 1 || b->naxes[0] < 1) return NULL;
  size_t cap = 1;
  for (int k = 0; k < b->naxes[0]; k++)
    cap += strlen(jx_mesh_axis_name(b->mesh, b->axis[0][k])) + 1;
  char *s = calloc(cap, 1);
  for (int k = 0; s && k < b->naxes[0]; k++) {
    if (k) strcat(s, ",");
    strcat(s, jx_mesh_axis_name(b->mesh, b->axis[0][k]));
  }
  return s;
}

/* The stacked parameters' specs over the other axes (opts->param_specs),
 * checked, and their shard_map specs: "stage,<spec>". */
static jx_status param_specs(train_data *d, const char *const *specs) {
  d->param_sh = calloc((size_t)d->nparams + 1, sizeof *d->param_sh);
  d->param_spec = calloc((size_t)d->nparams + 1, sizeof *d->param_spec);
  if (!d->param_sh || !d->param_spec)
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  for (int k = 0; k < d->nparams; k++) {
    const char *spec = specs[k] ? specs[k] : "";
    jx_sharding *b = jx_sharding_create(d->mesh, spec);
    if (!b) {
      char context[400];
      snprintf(context, sizeof context, "jx_pipeline_value_and_grad: parameter %d's spec '%s'", k,
               spec);
      jx_sharding_restate_error(context);
      return jx_last_status();
    }
    d->param_sh[k] = b;
    for (int dim = 0; dim < b->ndims; dim++)
      for (int a = 0; b->naxes[dim] > 1 && a < b->naxes[dim]; a++)
        if (jx_sharding_uses_axis(d->batch, b->axis[dim][a]))
          return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                              "jx_pipeline_value_and_grad: parameter %d's spec '%s' splits dim "
                              "%d over the batch axis '%s' and another; a dim stored split over "
                              "a batch axis (FSDP) takes that axis alone",
                              k, jx_sharding_spec(b), dim,
                              jx_mesh_axis_name(d->mesh, b->axis[dim][a]));
    if (jx_sharding_uses_axis(b, jx_mesh_axis_index(d->mesh, d->axis)))
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "jx_pipeline_value_and_grad: parameter %d's spec '%s' names the stage "
                          "axis '%s'; the stage dim is the pipeline's own",
                          k, jx_sharding_spec(b), d->axis);
    size_t cap = strlen(d->axis) + strlen(jx_sharding_spec(b)) + 2;
    if (!(d->param_spec[k] = malloc(cap)))
      return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    snprintf(d->param_spec[k], cap, "%s%s%s", d->axis, b->ndims ? "," : "",
             b->ndims ? jx_sharding_spec(b) : "");
  }
  return JX_OK;
}

jx_status jx_pipeline_schedule_stats(jx_pipeline_schedule schedule, int stages, int virtual_stages,
                                     int microbatches, jx_pipeline_stats *out) {
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline_schedule_stats: out is NULL");
  pipe_table t;
  jx_status st = pipe_table_build(schedule, stages, virtual_stages, microbatches, &t);
  if (st) return st;
  out->ticks = t.nticks;
  out->bubble_fraction = 1.0 - (double)t.busy_ticks / ((double)t.nticks * stages);
  out->most_stashed = 0;
  for (int s = 0; s < stages; s++)
    if (t.stashed[s] > out->most_stashed) out->most_stashed = t.stashed[s];
  pipe_table_free(&t);
  return JX_OK;
}

jx_fn *jx_pipeline_value_and_grad(jx_fn *stage, jx_fn *loss_fn, jx_mesh *m, const char *stage_axis,
                                  int microbatches, jx_pipeline_schedule schedule,
                                  const jx_pipeline_train_options *opts) {
  if (!stage || !loss_fn || !m || !stage_axis) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline_value_and_grad: the %s is NULL",
                 !stage     ? "stage function"
                 : !loss_fn ? "loss function"
                 : !m       ? "mesh"
                            : "stage axis");
    return NULL;
  }
  if (stage->nin < 1 || stage->nout != 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline_value_and_grad: the stage '%s' takes %d inputs and gives %d "
                 "outputs; it must take (params..., activations) and give activations",
                 stage->name, stage->nin, stage->nout);
    return NULL;
  }
  jx_fn *first = opts ? opts->first : NULL;
  int nouter = loss_fn->nin - 2;
  if (nouter < 0 || loss_fn->nout != 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline_value_and_grad: the loss '%s' takes %d inputs and gives %d "
                 "outputs; it must take (outer params..., the last stage's output, targets) and "
                 "give the loss",
                 loss_fn->name, loss_fn->nin, loss_fn->nout);
    return NULL;
  }
  if (first && (first->nin != nouter + 1 || first->nout != 1)) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline_value_and_grad: the first function '%s' takes %d inputs and gives "
                 "%d outputs; it must take the loss's %d outer params and the batch and give "
                 "the first stage's activations",
                 first->name, first->nin, first->nout, nouter);
    return NULL;
  }
  int64_t nstages = jx_pipeline_stage_count(m, stage_axis);
  if (nstages < 0) return NULL;
  train_data *d = calloc(1, sizeof *d);
  if (!d) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    return NULL;
  }
  int V = opts && opts->virtual_stages > 0 ? opts->virtual_stages : 1;
  if (V > 1 && schedule != JX_PIPELINE_INTERLEAVED) {
    free_train_data(d);
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline_value_and_grad: %d virtual stages need JX_PIPELINE_INTERLEAVED", V);
    return NULL;
  }
  d->virtual_stages = V;
  d->overlap = opts ? opts->overlap : 0;
  if (pipe_table_build_overlapped(schedule, (int)nstages, V, microbatches, d->overlap, &d->table)) {
    free_train_data(d);
    return NULL;
  }
  d->profile_tag = pipe_profile_tag(schedule, &d->table);
  d->batch = jx_pipeline_batch_sharding(m, opts && opts->batch_spec ? opts->batch_spec : "",
                                        stage_axis, &d->batch_shards);
  if (!d->batch) {
    free_train_data(d);
    return NULL;
  }
  d->stage = stage;
  atomic_fetch_add(&stage->refs, 1);
  d->loss = loss_fn;
  atomic_fetch_add(&loss_fn->refs, 1);
  d->first = first;
  if (first) atomic_fetch_add(&first->refs, 1);
  d->mesh = jx_mesh_retain(m);
  d->nstages = (int)nstages;
  d->microbatches = microbatches;
  d->nparams = stage->nin - 1;
  d->nouter = nouter;
  d->remat = opts ? opts->remat : 0;
  d->axis = malloc(strlen(stage_axis) + 1);
  d->data_axes = split_axes(d->batch);
  int P = d->nparams, n = P + nouter;
  const char **in_specs = calloc((size_t)n + 2, sizeof *in_specs);
  const char **out_specs = calloc((size_t)n + 1, sizeof *out_specs);
  if (!d->axis || !in_specs || !out_specs || (d->batch_shards > 1 && !d->data_axes)) {
    free(in_specs);
    free(out_specs);
    free_train_data(d);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    return NULL;
  }
  strcpy(d->axis, stage_axis);
  if (opts && opts->param_specs && param_specs(d, opts->param_specs)) {
    free(in_specs);
    free(out_specs);
    free_train_data(d);
    return NULL;
  }
  const char *batch_spec = jx_sharding_spec(d->batch);
  for (int k = 0; k < n; k++)
    in_specs[k] = out_specs[1 + k] = k >= P ? "" : d->param_spec ? d->param_spec[k] : d->axis;
  in_specs[n] = in_specs[n + 1] = batch_spec;
  out_specs[0] = "";
  char name[300];
  snprintf(name, sizeof name, "pipeline_train_body(%s)", stage->name);
  d->body = jx_fn_create(name, n + 2, n + 1, train_body, d);
  if (d->body) d->smap = jx_shard_map(d->body, m, in_specs, out_specs);
  free(in_specs);
  free(out_specs);
  if (!d->smap) {
    free_train_data(d);
    return NULL;
  }
  return jx_fn_new_transform(&train_kind, stage, n + 2, n + 1, d);
}
