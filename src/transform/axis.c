/* Named axes inside transformed functions: jx_axis_size and jx_axis_index
 * (the position along a named vmap axis, as jax.lax.axis_index). The index is
 * the primitive axis_index, recorded while the unbatched body is traced and
 * turned into an iota by the batching of the vmap that binds its axis, or,
 * on a device thread of jx_spmd_run (shard_map, pmap), the device's mesh
 * coordinate. The collectives use the same environment. */
#include <ctype.h>
#include <string.h>

#include <jx/transform.h>

#include "../base/error.h"
#include "../prims/rules.h"
#include "../ir/axis_env.h"
#include "../trace/trace.h"
#include "../trace/vma.h"

static jx_status infer_axis_index(const jx_rule_ctx *ctx, const jx_aval *in, jx_aval *out) {
  (void)ctx, (void)in;
  out[0] = (jx_aval){JX_I32, 0, {0, {0}}, 0};
  return JX_OK;
}

static void eval_axis_index(const jx_rule_ctx *ctx, const jx_tensor *in, jx_tensor *out) {
  (void)ctx, (void)in;
  (void)out;
}

/* Concretely, on a device thread of jx_spmd_run: the device's coordinate
 * along the mesh axis. */
static jx_status impl_axis_index(const jx_rule_ctx *ctx, jx_array *const *in, jx_array **out) {
  (void)in;
  const char *name = jx_axis_name((int)ctx->params->i[0]);
  int64_t coord = jx_device_axis_coord(name);
  if (coord < 0)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_axis_index: the axis '%s' is not bound here; call it inside a "
                        "function mapped by jx_vmap_axis, jx_shard_map or jx_pmap with that name",
                        name);
  out[0] = jx_array_alloc(JX_I32, (jx_shape){0, {0}}, 0);
  if (out[0]->poisoned) return jx_last_status();
  *(int32_t *)out[0]->buf->data = (int32_t)coord;
  return JX_OK;
}

static jx_status batch_axis_index(const jx_rule_ctx *ctx, jx_array *const *in, const int *bdim,
                                  int64_t n, jx_array **out, int *out_bdim) {
  const jx_params *p = ctx->params;
  (void)in;
  (void)bdim;
  if (p->i[0] != 0 && p->i[0] == jx_axis_innermost_id()) {
    out[0] = jx_iota(JX_I32, (jx_shape){1, {n}}, 0);
    out_bdim[0] = 0;
  } else { /* another (outer) axis: its own vmap handles it */
    out[0] = jx_bind1(&jx_prim_axis_index, 0, NULL, p);
    out_bdim[0] = JX_NOT_MAPPED;
  }
  return jx_last_status();
}

const jx_prim jx_prim_axis_index = {.name = "axis_index",
                                    .id = JX_PRIM_axis_index,
                                    .nin = 0,
                                    .nout = 1,
                                    .params = "axis=i0",
                                    .infer = infer_axis_index,
                                    .eval = eval_axis_index,
                                    .impl = impl_axis_index,
                                    .jvp = jx_jvp_zero,
                                    .batch = batch_axis_index,
                                    .uses_axis = 1,
                                    .vma = JX_VMA_AXIS_INDEX};

/* The axes of "a" or "a,b" (a major), each bound; 0 with an error naming op. */
static int named_axes(const char *op, const char *axis, char (*names)[128], int64_t *sizes) {
  int n = 0;
  const char *s = axis ? axis : "";
  do {
    while (isspace((unsigned char)*s)) s++;
    const char *e = s;
    while (*e && *e != ',') e++;
    size_t len = (size_t)(e - s);
    while (len && isspace((unsigned char)s[len - 1])) len--;
    if (!len || len >= 128 || n == JX_MAX_RANK) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: '%s' is not a list of axis names", op,
                   axis ? axis : "(null)");
      return 0;
    }
    memcpy(names[n], s, len);
    names[n][len] = 0;
    sizes[n] = jx_axis_env_size(names[n]);
    if (sizes[n] < 0) sizes[n] = jx_device_axis_size(names[n]);
    if (sizes[n] < 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: no enclosing transformation binds an axis named '%s'", op, names[n]);
      return 0;
    }
    n++;
    s = e;
  } while (*s++ == ',');
  return n;
}

int jx_axis_size(const char *axis) {
  char names[JX_MAX_RANK][128];
  int64_t sizes[JX_MAX_RANK], total = 1;
  int n = named_axes("jx_axis_size", axis, names, sizes);
  if (!n) return -1;
  for (int k = 0; k < n; k++) total *= sizes[k];
  return (int)total;
}

/* Several axes: row-major over them, as JAX (index_a * size_b + index_b). */
jx_array *jx_axis_index(const char *axis) {
  char names[JX_MAX_RANK][128];
  int64_t sizes[JX_MAX_RANK];
  int n = named_axes("jx_axis_index", axis, names, sizes);
  if (!n) return jx_poison();
  jx_array *index = NULL;
  for (int k = 0; k < n; k++) {
    jx_params p = JX_PARAMS_INIT;
    p.i[0] = jx_axis_id(names[k]);
    jx_array *ik = jx_bind1(&jx_prim_axis_index, 0, NULL, &p);
    index = index ? jx_add(jx_mul(index, jx_scalar(JX_I32, (double)sizes[k])), ik) : ik;
  }
  return index;
}
