/* jx_train_step: value_and_grad of a loss with respect to a parameter tree,
 * then the optimizer's update, as one function of flattened trees; with a
 * compute dtype, the loss runs on bf16 casts of the f32 parameters (mixed
 * precision). A loop that replaces its trees with the step's outputs should
 * jit the step donating the parameters and the optimizer state (inputs
 * 0 .. np + ns - 1, jx_jit_options.donate): their buffers then hold the new
 * ones, and the peak drops by about a copy of both (docs/compiler.md). */
#include <stdlib.h>
#include <string.h>

#include "mixed_precision.h"

typedef struct {
  jx_fn *value_and_grad; /* (params..., data...) -> (loss, grads...) */
  jx_optimizer *opt;
  int np, ns, ndata;
  char **names;           /* np parameter names, then ns state names */
  jx_dtype compute_dtype; /* 0: none */
} step_ctx;

static void free_step(void *p) {
  step_ctx *c = p;
  if (!c) return;
  jx_fn_release(c->value_and_grad);
  for (int i = 0; c->names && i < c->np + c->ns; i++) free(c->names[i]);
  free(c->names);
  free(c);
}

static jx_tree *tree_of(char *const *names, int n, jx_array *const *arrays) {
  jx_tree *t = jx_tree_create();
  for (int i = 0; t && i < n; i++) jx_tree_set(t, names[i], arrays[i]);
  return t;
}

static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  step_ctx *c = ctx;
  int nargs = c->np + c->ndata;
  jx_array **args = malloc(sizeof *args * (size_t)(nargs + 1));
  jx_array **vg = malloc(sizeof *vg * (size_t)(c->np + 1));
  if (!args || !vg) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_train_step: out of memory");
    free(args);
    free(vg);
    return;
  }
  /* Mixed precision: differentiating through the casts would give the
   * same f32 gradients as casting the compute-dtype gradients back here
   * (the transpose of a cast is the cast back), which is what we do. */
  for (int i = 0; i < c->np; i++) args[i] = nn_cast_float(in[i], c->compute_dtype);
  for (int i = 0; i < c->ndata; i++)
    args[c->np + i] = nn_cast_float(in[c->np + c->ns + i], c->compute_dtype);
  if (jx_call(c->value_and_grad, args, vg) == JX_OK) {
    if (c->compute_dtype && nn_is_low_float(jx_dtype_of(vg[0]))) vg[0] = jx_astype(vg[0], JX_F32);
    for (int i = 0; c->compute_dtype && i < c->np; i++)
      vg[1 + i] = nn_cast_float(vg[1 + i], jx_dtype_of(in[i]));
    jx_tree *params = tree_of(c->names, c->np, in);
    jx_tree *state = tree_of(c->names + c->np, c->ns, in + c->np);
    jx_tree *grads = tree_of(c->names, c->np, vg + 1);
    jx_optim_update(c->opt, grads, state, params);
    out[0] = vg[0];
    jx_tree_flatten(params, out + 1);
    jx_tree_flatten(state, out + 1 + c->np);
    jx_tree_release(params);
    jx_tree_release(state);
    jx_tree_release(grads);
  }
  free(args);
  free(vg);
}

jx_fn *jx_train_step(jx_fn *loss, const jx_tree *params_like, const jx_tree *state_like,
                     jx_optimizer *opt) {
  return jx_train_step_with(loss, params_like, state_like, opt, NULL);
}

jx_fn *jx_train_step_with(jx_fn *loss, const jx_tree *params_like, const jx_tree *state_like,
                          jx_optimizer *opt, const jx_train_step_options *o) {
  int np = jx_tree_size(params_like), ns = jx_tree_size(state_like);
  jx_dtype compute = o ? o->compute_dtype : 0;
  if (!nn_valid_compute_dtype(compute)) {
    jx_report_error(JX_ERR_DTYPE,
                    "jx_train_step: compute dtype %s is not a float dtype (or 0 for none)",
                    jx_dtype_name(compute));
    return NULL;
  }
  if (!loss || !opt || np < 1 || jx_fn_nin(loss) < np) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_train_step: needs a loss taking the %d parameters first, parameter and "
                    "state trees and an optimizer",
                    np);
    return NULL;
  }
  step_ctx *c = calloc(1, sizeof *c);
  if (!c || !(c->names = calloc((size_t)(np + ns), sizeof *c->names))) {
    free(c);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_train_step: out of memory");
    return NULL;
  }
  c->opt = opt;
  c->compute_dtype = compute;
  c->np = np;
  c->ns = ns;
  c->ndata = jx_fn_nin(loss) - np;
  for (int i = 0; i < np + ns; i++) {
    const char *n = i < np ? jx_tree_name(params_like, i) : jx_tree_name(state_like, i - np);
    if (!(c->names[i] = strdup(n))) {
      free_step(c);
      jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_train_step: out of memory");
      return NULL;
    }
  }
  c->value_and_grad = jx_value_and_grad_first(loss, np, 0);
  if (!c->value_and_grad) {
    free_step(c);
    return NULL;
  }
  char name[256];
  snprintf(name, sizeof name, "train_step(%s)", jx_fn_name(loss));
  return jx_fn_create_owning(name, np + ns + c->ndata, 1 + np + ns, step_body, c, free_step);
}
