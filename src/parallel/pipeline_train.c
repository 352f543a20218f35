/* jx_pipeline_value_and_grad: a schedule's table (pipeline_schedule.c) run
 * as one program per device of the stage axis. The function made is
 *   smap = jx_shard_map(body, mesh, {stage_axis for each parameter, the
 *                                    batch spec for the batch and targets},
 *                       {"" for the loss, stage_axis for each gradient})
 * where body, on the device at position s, unrolls the table's ticks. Each
 * tick it looks up its row (s, t) in the table (a constant indexed by
 * jx_axis_index), stores what its neighbours sent at the end of the last
 * tick in its inboxes, and runs one jx_switch over the actions: idle,
 * forward (the linearized stage's known part: the output and the residuals,
 * which go to a stash slot), backward (the transposed linear part on the
 * stashed residuals and the cotangent from the right) and, on the last
 * stage, forward-loss-backward (the same for loss_fn after the stage). A
 * device's switch runs only its own branch, so a stage computes only what
 * the schedule gives it. Then it sends its output right and its input's
 * cotangent left (one jx_ppermute each) and adds its parameters' gradients
 * to theirs. The buffers have the table's slot counts plus one spare slot
 * that writes with nothing to keep go to: the stash holds at most the
 * schedule's residuals per stage, all microbatches' for GPipe and the
 * stage count's for 1F1B. A residual that is one of the stage's parameters
 * is read from the parameter instead of being stashed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>
#include <jx/parallel.h>

#include "../array/dtype.h"
#include "../base/error.h"
#include "../trace/eval.h"
#include "../trace/fn.h"
#include "../transform/ad.h"
#include "../transform/build.h"
#include "mesh.h"
#include "pipeline.h"
#include "pipeline_schedule.h"
#include "sharding.h"

typedef struct {
  jx_fn *stage, *loss; /* references */
  jx_fn *last;         /* (params..., x, targets) -> loss_fn(stage(params..., x), targets) */
  jx_mesh *mesh;
  char *axis;
  char *data_axes; /* the batch spec's axes, "a,b", or NULL */
  int nstages, microbatches, nparams, remat;
  pipe_table table;
  jx_sharding *batch;
  int64_t batch_shards;
  jx_fn *body, *smap;
} train_data;

static void free_train_data(void *data) {
  train_data *d = data;
  if (!d) return;
  jx_fn_release(d->smap);
  jx_fn_release(d->body);
  jx_fn_release(d->last);
  jx_fn_release(d->loss);
  jx_fn_release(d->stage);
  jx_sharding_release(d->batch);
  jx_mesh_release(d->mesh);
  pipe_table_free(&d->table);
  free(d->data_axes);
  free(d->axis);
  free(d);
}

/* ---- one trace of the body: the stage's programs and the branches' layout ----
 * The forward and backward run as the linearized programs of the stage
 * (and of the loss after the last stage), traced for the blocks' types, so
 * the body's own values decide which gradients vary over which mesh axes:
 * the explicit psum and pmean below are the only reductions. */
typedef struct {
  jx_program *fwd; /* inputs -> (outputs, residuals...) */
  jx_program *bwd; /* (residuals..., output cotangent) -> cotangents of the wrt inputs */
  int nres;
  uint8_t *wrt; /* per input: differentiated (the float ones) */
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
}

/* The cotangents of l's inputs from its residuals and the output's
 * cotangent: in_ct[i] for each input i with wrt set (the others untouched). */
static jx_status backward(const linearized *l, int nin, jx_array *const *res, jx_array *ct,
                          jx_array **in_ct) {
  jx_array **args = calloc((size_t)l->nres + 1, sizeof *args);
  jx_array **cts = calloc((size_t)l->bwd->nout + 1, sizeof *cts);
  jx_status st =
      args && cts ? JX_OK : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  if (!st) {
    memcpy(args, res, (size_t)l->nres * sizeof *args);
    args[l->nres] = ct;
    st = jx_program_eval(l->bwd, args, cts);
  }
  for (int i = 0, w = 0; !st && i < nin; i++)
    if (l->wrt[i]) in_ct[i] = cts[w++];
  free(args);
  free(cts);
  return st;
}

/* l->fwd on in: its output, and its residuals into res (nres entries). */
static jx_status forward(const linearized *l, jx_array *const *in, jx_array **y, jx_array **res) {
  jx_array **fo = calloc((size_t)l->fwd->nout, sizeof *fo);
  if (!fo) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  jx_status st = jx_program_eval(l->fwd, in, fo);
  if (!st) {
    *y = fo[0];
    memcpy(res, fo + 1, (size_t)l->nres * sizeof *res);
  }
  free(fo);
  return st;
}

/* A branch takes (params..., x, cotangent, stashed..., targets) and gives
 * (output, input cotangent, to stash..., gradients..., loss). */
typedef struct {
  const train_data *d;
  int P, nstash;
  jx_aval act, *stash_av;
  const jx_aval *param_av; /* borrowed: the body's */
  jx_dtype loss_dtype;
  linearized stage, last; /* the stage; the loss after the last stage */
  int *
      res_from; /* per residual of the stage: the parameter it is (>= 0), or -1 - its stash index */
  jx_array **res, **in_ct; /* scratch: the stage's residuals, the inputs' cotangents */
} tick_ctx;

static int branch_nout(const tick_ctx *c) { return 3 + c->nstash + c->P; }

/* Every output of a branch zero; the branch then sets its own. */
static void zero_outputs(const tick_ctx *c, jx_array **out) {
  out[0] = jx_zeros(c->act.dtype, c->act.shape);
  out[1] = jx_zeros(c->act.dtype, c->act.shape);
  for (int k = 0; k < c->nstash; k++)
    out[2 + k] = jx_zeros(c->stash_av[k].dtype, c->stash_av[k].shape);
  for (int j = 0; j < c->P; j++)
    out[2 + c->nstash + j] = jx_zeros(c->param_av[j].dtype, c->param_av[j].shape);
  out[2 + c->nstash + c->P] = jx_zeros(c->loss_dtype, JX_SHAPE());
}

static void poison_outputs(const tick_ctx *c, jx_array **out) {
  for (int o = 0; o < branch_nout(c); o++) out[o] = jx_poison();
}

/* The gradients and the input's cotangent of c->in_ct into the outputs. */
static void cotangents_out(const tick_ctx *c, jx_array **out) {
  for (int j = 0; j < c->P; j++)
    if (c->stage.wrt[j]) out[2 + c->nstash + j] = c->in_ct[j];
  if (c->stage.wrt[c->P]) out[1] = c->in_ct[c->P];
}

static void idle_branch(void *ctx, jx_array *const *in, jx_array **out) {
  (void)in;
  zero_outputs(ctx, out);
}

static void forward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  zero_outputs(c, out);
  if (forward(&c->stage, in, &out[0], c->res)) return poison_outputs(c, out);
  if (c->d->remat) { /* only the input waits for the backward */
    out[2] = in[c->P];
    return;
  }
  for (int k = 0; k < c->stage.nres; k++)
    if (c->res_from[k] < 0) out[2 + (-1 - c->res_from[k])] = c->res[k];
}

static void backward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  int P = c->P;
  jx_array *const *stashed = in + P + 2;
  zero_outputs(c, out);
  if (c->d->remat) { /* the forward again, from the stashed input */
    jx_array **args = calloc((size_t)P + 1, sizeof *args), *y = NULL;
    int bad = !args;
    if (!bad) {
      memcpy(args, in, (size_t)P * sizeof *args);
      args[P] = stashed[0];
      bad = forward(&c->stage, args, &y, c->res) != JX_OK;
    }
    free(args);
    if (bad) return poison_outputs(c, out);
  } else {
    for (int k = 0; k < c->stage.nres; k++)
      c->res[k] = c->res_from[k] >= 0 ? in[c->res_from[k]] : stashed[-1 - c->res_from[k]];
  }
  if (backward(&c->stage, P + 1, c->res, in[P + 1], c->in_ct)) return poison_outputs(c, out);
  cotangents_out(c, out);
}

/* The last stage: loss_fn(stage(params..., x), targets), scaled by 1 / M,
 * and its cotangents, at once. */
static void forward_backward_branch(void *ctx, jx_array *const *in, jx_array **out) {
  const tick_ctx *c = ctx;
  int P = c->P;
  zero_outputs(c, out);
  jx_array **args = calloc((size_t)P + 2, sizeof *args);
  jx_array **res = calloc((size_t)c->last.nres + 1, sizeof *res), *loss = NULL;
  int bad = !args || !res;
  double scale = 1.0 / c->d->microbatches;
  if (!bad) {
    memcpy(args, in, (size_t)(P + 1) * sizeof *args);
    args[P + 1] = in[P + 2 + c->nstash];
    bad = forward(&c->last, args, &loss, res) ||
          backward(&c->last, P + 1, res, jx_full(c->loss_dtype, JX_SHAPE(), scale), c->in_ct);
  }
  free(args);
  free(res);
  if (bad) return poison_outputs(c, out);
  out[2 + c->nstash + P] = jx_mul(loss, jx_scalar(c->loss_dtype, scale));
  cotangents_out(c, out);
}

static const jx_body branches[PIPE_NKINDS] = {
    [PIPE_IDLE] = idle_branch,
    [PIPE_FORWARD] = forward_branch,
    [PIPE_BACKWARD] = backward_branch,
    [PIPE_FORWARD_BACKWARD] = forward_backward_branch,
};

/* The stage's program for these inputs, checked to give activations of the
 * type it takes; NULL with the error set otherwise. */
static jx_program *stage_program(const train_data *d, const jx_aval *av) {
  jx_program *p = jx_fn_program(d->stage, av);
  if (!p) return NULL;
  jx_aval y = p->avals[p->out[0]], x = av[d->nparams];
  if (y.dtype != x.dtype || !jx_shape_equal(y.shape, x.shape)) {
    char want[JX_AVAL_STR_CAP], got[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE,
                 "jx_pipeline: the stage '%s' takes activations %s but gives %s; a stage must "
                 "give activations of the type it takes",
                 d->stage->name, jx_aval_str(x.dtype, x.shape, want),
                 jx_aval_str(y.dtype, y.shape, got));
    jx_program_release(p);
    return NULL;
  }
  return p;
}

/* Fills c for the inputs av (params..., microbatch activations, microbatch
 * targets): the linearized stage and loss, and what the stash keeps. */
static jx_status prepare_ticks(const train_data *d, const jx_aval *av, tick_ctx *c) {
  int P = d->nparams;
  c->d = d;
  c->P = P;
  c->act = av[P];
  c->param_av = av;
  jx_program *p = stage_program(d, av);
  if (!p) return jx_last_status();
  jx_status st = linearize(p, av, &c->stage);
  jx_program_release(p);
  if (st) return st;
  jx_program *q = jx_fn_program(d->last, av);
  if (!q) return jx_last_status();
  jx_aval l = q->avals[q->out[0]];
  if (l.shape.rank != 0 || !jx_is_float(l.dtype)) {
    char s[JX_AVAL_STR_CAP];
    jx_program_release(q);
    return jx_error_set(JX_ERR_SHAPE,
                        "jx_pipeline_value_and_grad: the loss '%s' gives %s; it must give a "
                        "float scalar",
                        d->loss->name, jx_aval_str(l.dtype, l.shape, s));
  }
  c->loss_dtype = l.dtype;
  st = linearize(q, av, &c->last);
  jx_program_release(q);
  if (st) return st;
  int nres = c->stage.nres;
  c->res_from = calloc((size_t)nres + 1, sizeof *c->res_from);
  c->stash_av = calloc((size_t)nres + 1, sizeof *c->stash_av);
  c->res = calloc((size_t)nres + 1, sizeof *c->res);
  c->in_ct = calloc((size_t)P + 2, sizeof *c->in_ct);
  if (!c->res_from || !c->stash_av || !c->res || !c->in_ct)
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  if (d->remat) {
    c->nstash = 1;
    c->stash_av[0] = c->act;
    return JX_OK;
  }
  for (int k = 0; k < nres; k++) {
    int v = c->stage.fwd->out[1 + k], from = -1;
    for (int j = 0; j < P && from < 0; j++)
      if (c->stage.fwd->in[j] == v) from = j;
    if (from < 0) {
      c->stash_av[c->nstash] = c->stage.fwd->avals[v];
      from = -1 - c->nstash++;
    }
    c->res_from[k] = from;
  }
  return JX_OK;
}

static void release_ticks(tick_ctx *c) {
  release_linearized(&c->stage);
  release_linearized(&c->last);
  free(c->res_from);
  free(c->stash_av);
  free(c->res);
  free(c->in_ct);
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

/* The per-device body: (parameter blocks [1, ...]..., batch, targets) -> (loss, gradient
 * blocks...). */
static void train_body(void *ctx, jx_array *const *in, jx_array **out) {
  train_data *d = ctx;
  const pipe_table *tb = &d->table;
  int S = d->nstages, M = d->microbatches, P = d->nparams, T = tb->nticks;
  jx_array *x = in[P], *tg = in[P + 1];
  int64_t rows = x->shape.dims[0] / M, trows = tg->shape.dims[0] / M;
  tick_ctx c = {0};
  jx_fn *fns[PIPE_NKINDS] = {0};
  jx_array **params = calloc((size_t)P + 1, sizeof *params);
  jx_array **grads = calloc((size_t)P + 1, sizeof *grads);
  jx_aval *av = calloc((size_t)P + 2, sizeof *av);
  int32_t *rowdata = malloc(sizeof *rowdata * (size_t)S * PIPE_STEP_FIELDS);
  jx_array **ops = NULL, **res = NULL;
  jx_status st = params && grads && av && rowdata
                     ? JX_OK
                     : jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  for (int j = 0; !st && j < P; j++) {
    params[j] = jx_squeeze(in[j], JX_AXES(0));
    av[j] = (jx_aval){.dtype = params[j]->dtype, .shape = params[j]->shape};
  }
  if (!st) {
    jx_shape mb = x->shape;
    mb.dims[0] = rows;
    av[P] = (jx_aval){.dtype = x->dtype, .shape = mb};
    jx_shape tmb = tg->shape;
    tmb.dims[0] = trows;
    av[P + 1] = (jx_aval){.dtype = tg->dtype, .shape = tmb};
    st = prepare_ticks(d, av, &c);
  }
  int nin = c.P + 3 + c.nstash, nout = branch_nout(&c);
  if (!st) {
    ops = calloc((size_t)nin, sizeof *ops);
    res = calloc((size_t)nout, sizeof *res);
    if (!ops || !res) st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
  }
  static const char *names[PIPE_NKINDS] = {"pipeline_idle", "pipeline_forward", "pipeline_backward",
                                           "pipeline_forward_backward"};
  for (int k = 0; !st && k < PIPE_NKINDS; k++)
    if (!(fns[k] = jx_fn_create(names[k], nin, nout, branches[k], &c))) st = jx_last_status();
  if (st) goto fail;

  jx_array *position = jx_axis_index(d->axis);
  jx_array *first = jx_eq(position, jx_scalar(JX_I32, 0));
  jx_array *act_inbox = slots(c.act, tb->act_slots + 1),
           *cot_inbox = slots(c.act, tb->cot_slots + 1);
  jx_array **stash = calloc((size_t)c.nstash + 1, sizeof *stash);
  if (!stash) {
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    goto fail;
  }
  for (int k = 0; k < c.nstash; k++) stash[k] = slots(c.stash_av[k], tb->stash_slots + 1);
  for (int j = 0; j < P; j++) grads[j] = jx_zeros(av[j].dtype, av[j].shape);
  jx_array *loss = jx_zeros(c.loss_dtype, JX_SHAPE());
  int(*right)[2] = calloc((size_t)S, sizeof *right), (*left)[2] = calloc((size_t)S, sizeof *left);
  if (!right || !left) {
    free(right);
    free(left);
    free(stash);
    st = jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    goto fail;
  }
  for (int s = 0; s + 1 < S; s++) {
    right[s][0] = s, right[s][1] = s + 1;
    left[s][0] = s + 1, left[s][1] = s;
  }
  jx_array *sent_act = NULL, *sent_cot = NULL;
  for (int t = 0; t < T && !st; t++) {
    /* this tick's row of the table for this device */
    for (int s = 0; s < S; s++) {
      const pipe_step *p = &tb->steps[t * S + s];
      int32_t *r = rowdata + (size_t)s * PIPE_STEP_FIELDS;
      r[0] = p->kind, r[1] = p->microbatch, r[2] = p->act_slot, r[3] = p->stash_slot;
      r[4] = p->cot_slot, r[5] = p->recv_act_slot, r[6] = p->recv_cot_slot;
    }
    jx_array *table = jx_array_from(JX_I32, JX_SHAPE(S, PIPE_STEP_FIELDS), rowdata);
    jx_array *row = slot_read(table, position), *field[PIPE_STEP_FIELDS];
    for (int f = 0; f < PIPE_STEP_FIELDS; f++)
      field[f] = jx_reshape(jx_slice(row, JX_SHAPE(f), JX_SHAPE(f + 1), JX_SHAPE()), JX_SHAPE());
    if (sent_act) { /* what the neighbours sent at the end of the last tick */
      act_inbox = slot_write(act_inbox, field[5], jx_ppermute(sent_act, d->axis, S - 1, right));
      cot_inbox = slot_write(cot_inbox, field[6], jx_ppermute(sent_cot, d->axis, S - 1, left));
    }
    memcpy(ops, params, (size_t)P * sizeof *ops);
    jx_array *batch_mb = rows_at(x, field[1], rows);
    ops[P] = S > 1 ? jx_where(first, batch_mb, slot_read(act_inbox, field[2])) : batch_mb;
    ops[P + 1] = slot_read(cot_inbox, field[4]);
    for (int k = 0; k < c.nstash; k++) ops[P + 2 + k] = slot_read(stash[k], field[3]);
    ops[P + 2 + c.nstash] = rows_at(tg, field[1], trows);
    st = jx_switch(field[0], PIPE_NKINDS, fns, nin, ops, res);
    if (st) break;
    if (S > 1) sent_act = res[0], sent_cot = res[1];
    for (int k = 0; k < c.nstash; k++) stash[k] = slot_write(stash[k], field[3], res[2 + k]);
    for (int j = 0; j < P; j++) grads[j] = jx_add(grads[j], res[2 + c.nstash + j]);
    loss = jx_add(loss, res[2 + c.nstash + P]);
  }
  free(right);
  free(left);
  free(stash);
  if (st) goto fail;
  loss = jx_psum(loss, d->axis);
  if (d->data_axes) loss = jx_pmean(loss, d->data_axes);
  out[0] = loss;
  for (int j = 0; j < P; j++)
    out[1 + j] = jx_expand_dims(d->data_axes ? jx_pmean(grads[j], d->data_axes) : grads[j], 0);
  goto done;
fail:
  for (int o = 0; o < 1 + P; o++) out[o] = jx_poison();
done:
  for (int k = 0; k < PIPE_NKINDS; k++) jx_fn_release(fns[k]);
  release_ticks(&c);
  free(ops);
  free(res);
  free(params);
  free(grads);
  free(av);
  free(rowdata);
}

/* The global shapes checked against the stages and the microbatches, then smap. */
static jx_status train_trace(void *ctx, jx_array *const *in, jx_array **out) {
  train_data *d = ctx;
  char s[JX_AVAL_STR_CAP];
  for (int k = 0; k < d->nparams; k++)
    if (in[k]->shape.rank < 1 || in[k]->shape.dims[0] != d->nstages)
      return jx_error_set(JX_ERR_SHAPE,
                          "jx_pipeline_value_and_grad: parameter %d is %s; its leading dim must "
                          "be the %d stages of mesh axis '%s'",
                          k, jx_aval_str(in[k]->dtype, in[k]->shape, s), d->nstages, d->axis);
  jx_array *x = in[d->nparams], *tg = in[d->nparams + 1];
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
  jx_status st = jx_call(d->smap, in, out);
  return st ? st : jx_last_status();
}

static jx_program *train_build(jx_fn *f, const jx_aval *in) {
  train_data *d = f->data;
  return jx_program_build(f->name, d->nparams + 2, in, d->nparams + 1, train_trace, d);
}

static const jx_fn_kind train_kind = {
    .name = "pipeline_value_and_grad", .build = train_build, .free_data = free_train_data};

/* The loss after the stage: (params..., x, targets) -> loss_fn(stage(params..., x), targets). */
static void last_stage(void *ctx, jx_array *const *in, jx_array **out) {
  const train_data *d = ctx;
  jx_array *y = NULL;
  if (jx_call(d->stage, in, &y) || jx_call(d->loss, (jx_array *[]){y, in[d->nparams + 1]}, out))
    out[0] = jx_poison();
}

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

jx_status jx_pipeline_schedule_stats(jx_pipeline_schedule schedule, int stages, int microbatches,
                                     jx_pipeline_stats *out) {
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline_schedule_stats: out is NULL");
  pipe_table t;
  jx_status st = pipe_table_build(schedule, stages, microbatches, &t);
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
  if (loss_fn->nin != 2 || loss_fn->nout != 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline_value_and_grad: the loss '%s' takes %d inputs and gives %d "
                 "outputs; it must take (the last stage's output, targets) and give the loss",
                 loss_fn->name, loss_fn->nin, loss_fn->nout);
    return NULL;
  }
  int64_t nstages = jx_pipeline_stage_count(m, stage_axis);
  if (nstages < 0) return NULL;
  train_data *d = calloc(1, sizeof *d);
  if (!d) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    return NULL;
  }
  if (pipe_table_build(schedule, (int)nstages, microbatches, &d->table)) {
    free_train_data(d);
    return NULL;
  }
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
  d->mesh = jx_mesh_retain(m);
  d->nstages = (int)nstages;
  d->microbatches = microbatches;
  d->nparams = stage->nin - 1;
  d->remat = opts ? opts->remat : 0;
  d->axis = malloc(strlen(stage_axis) + 1);
  d->data_axes = split_axes(d->batch);
  int P = d->nparams;
  const char **in_specs = calloc((size_t)P + 2, sizeof *in_specs);
  const char **out_specs = calloc((size_t)P + 1, sizeof *out_specs);
  if (!d->axis || !in_specs || !out_specs || (d->batch_shards > 1 && !d->data_axes)) {
    free(in_specs);
    free(out_specs);
    free_train_data(d);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    return NULL;
  }
  strcpy(d->axis, stage_axis);
  char name[300];
  snprintf(name, sizeof name, "pipeline_last(%s)", stage->name);
  d->last = jx_fn_create(name, P + 2, 1, last_stage, d);
  const char *batch_spec = jx_sharding_spec(d->batch);
  for (int k = 0; k < P; k++) in_specs[k] = out_specs[1 + k] = d->axis;
  in_specs[P] = in_specs[P + 1] = batch_spec;
  out_specs[0] = "";
  snprintf(name, sizeof name, "pipeline_train_body(%s)", stage->name);
  if (d->last) d->body = jx_fn_create(name, P + 2, P + 1, train_body, d);
  if (d->body) d->smap = jx_shard_map(d->body, m, in_specs, out_specs);
  free(in_specs);
  free(out_specs);
  if (!d->smap) {
    free_train_data(d);
    return NULL;
  }
  return jx_fn_new_transform(&train_kind, stage, P + 2, P + 1, d);
}
