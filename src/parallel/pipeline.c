/* jx_pipeline: a stage function run as a pipeline over one mesh axis, built
 * from shard_map and ppermute as pipelines are written by hand in JAX. The
 * function made at jx_pipeline time is
 *   smap = jx_shard_map(body, mesh, {stage_axis for each parameter, the
 *                                    batch spec for the batch}, {batch spec})
 * where body, on the device at position s of the axis, runs the GPipe
 * schedule unrolled over its M + S - 1 ticks: at tick t stage 0 takes
 * microbatch t, every other stage what its left neighbour gave at tick t-1
 * (one jx_ppermute to the right per tick), and the last stage's outputs at
 * ticks S-1 .. M+S-2 are the microbatches' results, made the same on every
 * device by a masked jx_psum. Every device computes on every tick (the
 * ticks outside its window work on zeros and are discarded): those are the
 * schedule's bubbles. Reverse mode transposes this forward loop, which runs
 * the backward microbatches in GPipe's order. The pipeline's own program
 * checks the global shapes against the stage count and the microbatches,
 * then calls smap. The batch spec (jx_pipeline_ex) splits the batch over
 * other mesh axes: each device then pipelines its own rows of every
 * microbatch, and shard_map's transpose sums the parameters' gradients over
 * those axes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/ops.h>
#include <jx/parallel.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/fn.h"
#include "../transform/build.h"
#include "mesh.h"
#include "pipeline.h"
#include "sharding.h"

typedef struct {
  jx_fn *stage; /* borrowed: the pipeline's inner function */
  jx_mesh *mesh;
  char *axis;
  int nstages, microbatches;
  int nparams;          /* stage's inputs but the last, the activations */
  jx_sharding *batch;   /* the batch's and the result's layout over the other axes */
  int64_t batch_shards; /* how many blocks the batch's dim 0 is cut into */
  jx_fn *body, *smap;
} pipeline_data;

static void free_pipeline_data(void *data) {
  pipeline_data *d = data;
  if (!d) return;
  jx_fn_release(d->smap);
  jx_fn_release(d->body);
  jx_sharding_release(d->batch);
  jx_mesh_release(d->mesh);
  free(d->axis);
  free(d);
}

/* The activations stage s gives at one tick, or NULL with the error set
 * when the stage function fails or changes the activations' type. */
static jx_array *run_stage(pipeline_data *d, jx_array **args, jx_array *act) {
  args[d->nparams] = act;
  jx_array *res = NULL;
  if (jx_call(d->stage, args, &res)) return NULL;
  if (res->dtype != act->dtype || !jx_shape_equal(res->shape, act->shape)) {
    char want[JX_AVAL_STR_CAP], got[JX_AVAL_STR_CAP];
    jx_error_set(JX_ERR_SHAPE,
                 "jx_pipeline: the stage '%s' takes activations %s but gives %s; a stage must "
                 "give activations of the type it takes",
                 d->stage->name, jx_aval_str(act->dtype, act->shape, want),
                 jx_aval_str(res->dtype, res->shape, got));
    return NULL;
  }
  return res;
}

/* The per-device body: (parameter blocks [1, ...]..., batch) -> result. */
static void pipeline_body(void *ctx, jx_array *const *in, jx_array **out) {
  pipeline_data *d = ctx;
  int S = d->nstages, M = d->microbatches;
  jx_array *x = in[d->nparams];
  int64_t rows = x->shape.dims[0] / M;
  jx_array **args = calloc((size_t)d->nparams + 1, sizeof *args);
  jx_array **results = calloc((size_t)M, sizeof *results);
  int(*right)[2] = calloc((size_t)S, sizeof *right);
  if (!args || !results || !right) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    out[0] = jx_poison();
    goto done;
  }
  for (int k = 0; k < d->nparams; k++) args[k] = jx_squeeze(in[k], JX_AXES(0));
  for (int s = 0; s + 1 < S; s++) right[s][0] = s, right[s][1] = s + 1;
  jx_array *position = jx_axis_index(d->axis);
  jx_array *first = jx_eq(position, jx_scalar(JX_I32, 0));
  jx_array *last = jx_eq(position, jx_scalar(JX_I32, S - 1));
  jx_shape mb = x->shape;
  mb.dims[0] = rows;
  jx_array *received = jx_zeros(x->dtype, mb);
  for (int t = 0; t < M + S - 1; t++) {
    jx_array *act = received;
    if (t < M) {
      jx_shape start = {x->shape.rank, {0}}, stop = x->shape, step = {0};
      start.dims[0] = t * rows;
      stop.dims[0] = (t + 1) * rows;
      act = jx_where(first, jx_slice(x, start, stop, step), received);
    }
    jx_array *given = run_stage(d, args, act);
    if (!given) {
      out[0] = jx_poison();
      goto done;
    }
    if (t >= S - 1) results[t - (S - 1)] = given;
    if (S > 1 && t + 1 < M + S - 1) received = jx_ppermute(given, d->axis, S - 1, right);
  }
  jx_array *y = jx_concatenate(M, results, 0);
  out[0] = jx_psum(jx_where(last, y, jx_zeros(y->dtype, y->shape)), d->axis);
done:
  free(args);
  free(results);
  free(right);
}

/* The global shapes checked against the stage count and the microbatches,
 * then smap. */
static jx_status pipeline_trace(void *ctx, jx_array *const *in, jx_array **out) {
  pipeline_data *d = ctx;
  char s[JX_AVAL_STR_CAP];
  for (int k = 0; k < d->nparams; k++)
    if (in[k]->shape.rank < 1 || in[k]->shape.dims[0] != d->nstages)
      return jx_error_set(JX_ERR_SHAPE,
                          "jx_pipeline: parameter %d is %s; its leading dim must be the %d "
                          "stages of mesh axis '%s'",
                          k, jx_aval_str(in[k]->dtype, in[k]->shape, s), d->nstages, d->axis);
  jx_array *x = in[d->nparams];
  if (x->shape.rank < 1 || x->shape.dims[0] % (d->batch_shards * d->microbatches)) {
    char shards[JX_SPEC_CAP + 64] = "";
    if (d->batch_shards > 1)
      snprintf(shards, sizeof shards, " on each of the %lld shards of the batch spec '%s'",
               (long long)d->batch_shards, jx_sharding_spec(d->batch));
    return jx_error_set(JX_ERR_SHAPE,
                        "jx_pipeline: the batch is %s; its leading dim %lld is not divisible "
                        "into %d microbatches%s",
                        jx_aval_str(x->dtype, x->shape, s),
                        (long long)(x->shape.rank ? x->shape.dims[0] : 0), d->microbatches, shards);
  }
  jx_status st = jx_call(d->smap, in, out);
  return st ? st : jx_last_status();
}

static jx_program *pipeline_build(jx_fn *f, const jx_aval *in) {
  pipeline_data *d = f->data;
  return jx_program_build(f->name, d->nparams + 1, in, 1, pipeline_trace, d);
}

static const jx_fn_kind pipeline_kind = {
    .name = "pipeline", .build = pipeline_build, .free_data = free_pipeline_data};

static const char *schedule_name(jx_pipeline_schedule schedule) {
  switch (schedule) {
  case JX_PIPELINE_GPIPE: return "JX_PIPELINE_GPIPE";
  case JX_PIPELINE_1F1B: return "JX_PIPELINE_1F1B";
  case JX_PIPELINE_INTERLEAVED: return "JX_PIPELINE_INTERLEAVED";
  }
  return NULL;
}

void jx_pipeline_describe_axes(const jx_mesh *m, char *buf, size_t cap) {
  size_t used = 0;
  buf[0] = 0;
  for (int a = 0; a < jx_mesh_ndim(m) && used < cap; a++) {
    const char *name = jx_mesh_axis_name(m, a);
    int n = snprintf(buf + used, cap - used, "%s%s=%lld", a ? ", " : "", name,
                     (long long)jx_mesh_axis_size(m, name));
    if (n < 0) break;
    used += (size_t)n;
  }
}

jx_sharding *jx_pipeline_batch_sharding(jx_mesh *m, const char *spec, const char *stage_axis,
                                        int64_t *shards) {
  jx_sharding *b = jx_sharding_create(m, spec);
  if (!b) {
    char context[400];
    snprintf(context, sizeof context, "jx_pipeline: the batch spec '%s'", spec);
    jx_sharding_restate_error(context);
    return NULL;
  }
  if (jx_sharding_uses_axis(b, jx_mesh_axis_index(m, stage_axis))) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline: the batch spec '%s' splits the batch over the stage axis '%s'",
                 jx_sharding_spec(b), stage_axis);
    jx_sharding_release(b);
    return NULL;
  }
  *shards = 1;
  for (int k = 0; b->ndims > 0 && k < b->naxes[0]; k++) *shards *= m->size[b->axis[0][k]];
  return b;
}

int64_t jx_pipeline_stage_count(jx_mesh *m, const char *stage_axis) {
  int64_t n = jx_mesh_axis_size(m, stage_axis);
  if (n < 0) {
    char axes[256];
    jx_pipeline_describe_axes(m, axes, sizeof axes);
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline: the mesh (%s) has no stage axis '%s'", axes,
                 stage_axis);
  }
  return n;
}

jx_fn *jx_pipeline(jx_fn *stage, jx_mesh *m, const char *stage_axis, int microbatches,
                   jx_pipeline_schedule schedule) {
  return jx_pipeline_ex(stage, m, stage_axis, microbatches, schedule, NULL);
}

jx_fn *jx_pipeline_ex(jx_fn *stage, jx_mesh *m, const char *stage_axis, int microbatches,
                      jx_pipeline_schedule schedule, const jx_pipeline_options *opts) {
  if (!stage || !m || !stage_axis) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline: the %s is NULL",
                 !stage ? "stage function"
                 : !m   ? "mesh"
                        : "stage axis");
    return NULL;
  }
  const char *sched = schedule_name(schedule);
  if (!sched) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline: unknown schedule %d", (int)schedule);
    return NULL;
  }
  if (schedule != JX_PIPELINE_GPIPE) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline: the schedule %s interleaves forwards and backwards, so it needs "
                 "the loss inside the pipeline: use jx_pipeline_value_and_grad (jx_pipeline "
                 "takes JX_PIPELINE_GPIPE)",
                 sched);
    return NULL;
  }
  if (stage->nin < 1 || stage->nout != 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "jx_pipeline: the stage '%s' takes %d inputs and gives %d outputs; it must take "
                 "(params..., activations) and give activations",
                 stage->name, stage->nin, stage->nout);
    return NULL;
  }
  int64_t nstages = jx_pipeline_stage_count(m, stage_axis);
  if (nstages < 0) return NULL;
  if (microbatches < 1) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pipeline: %d microbatches; at least 1 is needed",
                 microbatches);
    return NULL;
  }
  int64_t batch_shards = 1;
  jx_sharding *batch = jx_pipeline_batch_sharding(
      m, opts && opts->batch_spec ? opts->batch_spec : "", stage_axis, &batch_shards);
  if (!batch) return NULL;
  pipeline_data *d = calloc(1, sizeof *d);
  const char **specs = calloc((size_t)stage->nin + 1, sizeof *specs);
  if (d) d->axis = malloc(strlen(stage_axis) + 1);
  if (!d || !specs || !d->axis) {
    free(specs);
    jx_sharding_release(batch);
    free_pipeline_data(d);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pipeline: out of memory");
    return NULL;
  }
  strcpy(d->axis, stage_axis);
  d->stage = stage;
  d->mesh = jx_mesh_retain(m);
  d->nstages = (int)nstages;
  d->microbatches = microbatches;
  d->nparams = stage->nin - 1;
  d->batch = batch;
  d->batch_shards = batch_shards;
  const char *batch_spec = jx_sharding_spec(batch);
  for (int k = 0; k < d->nparams; k++) specs[k] = d->axis;
  specs[d->nparams] = batch_spec;
  char name[300];
  snprintf(name, sizeof name, "pipeline_body(%s)", stage->name);
  d->body = jx_fn_create(name, stage->nin, 1, pipeline_body, d);
  if (d->body) d->smap = jx_shard_map(d->body, m, specs, (const char *const[]){batch_spec});
  free(specs);
  if (!d->smap) {
    free_pipeline_data(d);
    return NULL;
  }
  return jx_fn_new_transform(&pipeline_kind, stage, stage->nin, 1, d);
}
