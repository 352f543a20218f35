/* jx_pmap: a shard_map over a one-axis mesh of every device (as jax.pmap
 * is in spirit): each mapped input has its mapped axis moved to 0 and split
 * over the devices, one slice each, which the body sees without that axis;
 * JX_NONE inputs are replicated. Outputs get the axis back at out_axes
 * (JX_NONE: the output must be the same on every device and is returned
 * once). The function made at jx_pmap time is
 *   smap = jx_shard_map(body, mesh, specs)
 * where body squeezes the size-1 blocks, calls f, and gives outputs a
 * leading axis of size 1; the pmap's program moves axes around smap. */
#include <stdlib.h>
#include <string.h>

#include <jx/parallel.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../trace/fn.h"
#include "../transform/build.h"

typedef struct {
  jx_fn *f; /* borrowed: the pmap's inner function */
  jx_mesh *mesh;
  int ndev, nin, nout;
  int *in_axes, *out_axes; /* one per input / output */
  jx_fn *body, *smap;
} pmap_data;

static void free_pmap_data(void *data) {
  pmap_data *d = data;
  if (!d) return;
  jx_fn_release(d->smap);
  jx_fn_release(d->body);
  jx_mesh_release(d->mesh);
  free(d->in_axes);
  free(d->out_axes);
  free(d);
}

/* The per-device body: blocks of shape [1, ...] -> f -> outputs [1, ...]. */
static void pmap_body(void *ctx, jx_array *const *in, jx_array **out) {
  pmap_data *d = ctx;
  jx_array **args = calloc((size_t)d->nin + 1, sizeof *args);
  jx_array **res = calloc((size_t)d->nout + 1, sizeof *res);
  if (!args || !res) {
    free(args);
    free(res);
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pmap: out of memory");
    for (int o = 0; o < d->nout; o++) out[o] = jx_poison();
    return;
  }
  for (int i = 0; i < d->nin; i++)
    args[i] = d->in_axes[i] == JX_NONE ? in[i] : jx_squeeze(in[i], JX_AXES(0));
  jx_status st = jx_call(d->f, args, res);
  for (int o = 0; o < d->nout; o++)
    out[o] = st ? jx_poison() : d->out_axes[o] == JX_NONE ? res[o] : jx_expand_dims(res[o], 0);
  free(args);
  free(res);
}

/* global inputs -> mapped axes to 0 -> smap -> mapped axes to out_axes */
static jx_status pmap_trace(void *ctx, jx_array *const *in, jx_array **out) {
  pmap_data *d = ctx;
  jx_array **args = calloc((size_t)d->nin + 1, sizeof *args);
  if (!args) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pmap: out of memory");
  jx_status st = JX_OK;
  for (int i = 0; i < d->nin && !st; i++) {
    int a = d->in_axes[i];
    if (a == JX_NONE) {
      args[i] = in[i];
      continue;
    }
    int r = in[i]->shape.rank;
    char s[JX_AVAL_STR_CAP];
    if (a < -r || a >= r) {
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pmap: in_axes[%d] = %d is out of range for input %d, %s", i, a, i,
                        jx_aval_str(in[i]->dtype, in[i]->shape, s));
      break;
    }
    if (a < 0) a += r;
    if (in[i]->shape.dims[a] != d->ndev) {
      st = jx_error_set(JX_ERR_SHAPE,
                        "jx_pmap: input %d is %s; its mapped axis %d has size %lld but there are "
                        "%d devices",
                        i, jx_aval_str(in[i]->dtype, in[i]->shape, s), a,
                        (long long)in[i]->shape.dims[a], d->ndev);
      break;
    }
    args[i] = jx_rule_moveaxis(in[i], a, 0);
  }
  if (!st) st = jx_call(d->smap, args, out);
  for (int o = 0; o < d->nout && !st; o++) {
    int a = d->out_axes[o];
    if (a == JX_NONE) continue;
    int r = out[o]->shape.rank;
    if (a < -r || a >= r) {
      st = jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_pmap: out_axes[%d] = %d is out of range for output %d of rank %d", o, a,
                        o, r);
      break;
    }
    out[o] = jx_rule_moveaxis(out[o], 0, a < 0 ? a + r : a);
  }
  free(args);
  return st ? st : jx_last_status();
}

static jx_program *pmap_build(jx_fn *f, const jx_aval *in) {
  pmap_data *d = f->data;
  return jx_program_build(f->name, d->nin, in, d->nout, pmap_trace, d);
}

static const jx_fn_kind pmap_kind = {
    .name = "pmap", .build = pmap_build, .free_data = free_pmap_data};

/* One entry per input (output); a single entry applies to all. */
static int *expand_axes(int count, const int *axes, int n, const char *what, const jx_fn *f) {
  if ((count != n && count != 1) || !axes) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pmap: %s has %d entries but '%s' has %d %ss", what,
                 axes ? count : 0, f->name, n, what[0] == 'i' ? "input" : "output");
    return NULL;
  }
  int *v = malloc(sizeof *v * (size_t)(n + 1));
  if (!v) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pmap: out of memory");
    return NULL;
  }
  for (int i = 0; i < n; i++) v[i] = count == 1 ? axes[0] : axes[i];
  return v;
}

jx_fn *jx_pmap(jx_fn *f, const char *axis_name, jx_axes in_axes, jx_axes out_axes) {
  return jx_pmap_n(f, axis_name, in_axes.n, in_axes.v, out_axes.n, out_axes.v);
}

jx_fn *jx_pmap_n(jx_fn *f, const char *axis_name, int nin_axes, const int *in_axes, int nout_axes,
                 const int *out_axes) {
  if (!f || !axis_name) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_pmap: the %s is NULL", f ? "axis name" : "function");
    return NULL;
  }
  pmap_data *d = calloc(1, sizeof *d);
  if (!d) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pmap: out of memory");
    return NULL;
  }
  d->f = f;
  d->nin = f->nin;
  d->nout = f->nout;
  d->ndev = jx_device_count();
  d->in_axes = expand_axes(nin_axes, in_axes, f->nin, "in_axes", f);
  d->out_axes = d->in_axes ? expand_axes(nout_axes, out_axes, f->nout, "out_axes", f) : NULL;
  if (d->out_axes) d->mesh = jx_mesh_create(JX_SHAPE(d->ndev), (const char *const[]){axis_name});
  const char **specs = calloc((size_t)(f->nin + f->nout) + 1, sizeof *specs);
  if (d->mesh && specs) {
    for (int i = 0; i < f->nin; i++) specs[i] = d->in_axes[i] == JX_NONE ? "" : axis_name;
    for (int o = 0; o < f->nout; o++)
      specs[f->nin + o] = d->out_axes[o] == JX_NONE ? "" : axis_name;
    char name[300];
    snprintf(name, sizeof name, "pmap_body(%s)", f->name);
    d->body = jx_fn_create(name, f->nin, f->nout, pmap_body, d);
    /* pmap's rule: each device's copy of a replicated value is its own (no
     * varying axes tracked, psum transposes to psum) */
    jx_shard_map_options o = {.no_check_vma = 1};
    if (d->body) d->smap = jx_shard_map_ex(d->body, d->mesh, specs, specs + f->nin, &o);
  } else if (d->mesh) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pmap: out of memory");
  }
  free(specs);
  if (!d->smap) {
    free_pmap_data(d);
    return NULL;
  }
  return jx_fn_new_transform(&pmap_kind, f, f->nin, f->nout, d);
}
