/* Optimizers with Optax's semantics (optax.sgd, adam, adamw,
 * clip_by_global_norm, MultiSteps, scale_by_schedule), written with array
 * ops so that one call inside a traced train step records the whole update.
 * The order of operations follows Optax's, so results agree to rounding. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "nn_util.h"

typedef enum { SGD, ADAM } optim_kind;

struct jx_optimizer {
  optim_kind kind;
  double lr;
  jx_schedule *schedule; /* NULL: constant lr */
  double momentum;
  int nesterov;
  double b1, b2, eps, wd;
  double clip; /* max global norm; 0: no clipping */
  int every_k; /* gradient accumulation; 1: none */
};

static jx_optimizer *make(jx_optimizer o) {
  jx_optimizer *p = malloc(sizeof *p);
  if (!p) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "out of memory making an optimizer");
    return NULL;
  }
  o.every_k = 1;
  *p = o;
  return p;
}

jx_optimizer *jx_optim_sgd(double lr, double momentum) {
  return make((jx_optimizer){.kind = SGD, .lr = lr, .momentum = momentum});
}
jx_optimizer *jx_optim_sgd_nesterov(double lr, double momentum) {
  return make((jx_optimizer){.kind = SGD, .lr = lr, .momentum = momentum, .nesterov = 1});
}
jx_optimizer *jx_optim_adam(double lr, double b1, double b2, double eps) {
  return make((jx_optimizer){.kind = ADAM, .lr = lr, .b1 = b1, .b2 = b2, .eps = eps});
}
jx_optimizer *jx_optim_adamw(double lr, double b1, double b2, double eps, double wd) {
  return make((jx_optimizer){.kind = ADAM, .lr = lr, .b1 = b1, .b2 = b2, .eps = eps, .wd = wd});
}

jx_optimizer *jx_optim_with_schedule(jx_optimizer *o, jx_schedule *s) {
  if (!o || !s) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_optim_with_schedule: the %s is NULL",
                    o ? "schedule" : "optimizer");
    jx_schedule_release(s);
    return o;
  }
  jx_schedule_release(o->schedule);
  o->schedule = s;
  return o;
}

jx_optimizer *jx_optim_chain_clip(jx_optimizer *o, double max_global_norm) {
  if (o && !(max_global_norm > 0))
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_optim_chain_clip: max_global_norm must be positive, got %g",
                    max_global_norm);
  else if (o)
    o->clip = max_global_norm;
  return o;
}

jx_optimizer *jx_optim_accumulate(jx_optimizer *o, int every_k) {
  if (o && every_k < 1)
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_optim_accumulate: every_k must be >= 1, got %d",
                    every_k);
  else if (o)
    o->every_k = every_k;
  return o;
}

void jx_optim_release(jx_optimizer *o) {
  if (!o) return;
  jx_schedule_release(o->schedule);
  free(o);
}

/* ---- state ---- */
static void state_name(char *buf, size_t cap, const char *moment, const char *param) {
  snprintf(buf, cap, "%s/%s", moment, param);
}

/* f32 zeros shaped and laid out like p. */
static jx_array *zeros_like(jx_array *p) {
  jx_array *z = jx_zeros(JX_F32, jx_shape_of(p));
  jx_sharding *s = jx_sharding_of(p);
  return s ? jx_device_put(z, s) : z;
}

static const char *const SGD_MOMENTS[] = {"trace"};
static const char *const ADAM_MOMENTS[] = {"mu", "nu"};

static int moments(const jx_optimizer *o, const char *const **names) {
  if (o->kind == ADAM) {
    *names = ADAM_MOMENTS;
    return 2;
  }
  *names = SGD_MOMENTS;
  return o->momentum != 0 ? 1 : 0;
}

/* A state array: an f32 moment like a parameter, or (like NULL) an i32
 * counter; zeros, or with shapes_only its shape and dtype alone
 * (jx_shape_dtype_struct), nothing allocated. */
static jx_array *state_array(jx_array *like, int shapes_only) {
  if (!like)
    return shapes_only ? jx_shape_dtype_struct(JX_I32, JX_SHAPE()) : jx_zeros(JX_I32, JX_SHAPE());
  return shapes_only ? jx_shape_dtype_struct(JX_F32, jx_shape_of(like)) : zeros_like(like);
}

static jx_tree *init_state(const char *fn, jx_optimizer *o, const jx_tree *params,
                           int shapes_only) {
  if (!o || !params) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "%s: the %s is NULL", fn,
                    o ? "parameter tree" : "optimizer");
    return NULL;
  }
  jx_tree *st = jx_tree_create();
  jx_scope_begin();
  jx_tree_set(st, "count", state_array(NULL, shapes_only));
  const char *const *names;
  int nm = moments(o, &names);
  char buf[512];
  for (int m = 0; m < nm; m++)
    for (int i = 0; i < jx_tree_size(params); i++) {
      state_name(buf, sizeof buf, names[m], jx_tree_name(params, i));
      jx_tree_set(st, buf, state_array(jx_tree_at(params, i), shapes_only));
    }
  if (o->every_k > 1) {
    jx_tree_set(st, "mini_step", state_array(NULL, shapes_only));
    for (int i = 0; i < jx_tree_size(params); i++) {
      state_name(buf, sizeof buf, "acc", jx_tree_name(params, i));
      jx_tree_set(st, buf, state_array(jx_tree_at(params, i), shapes_only));
    }
  }
  jx_scope_end();
  return st;
}

jx_tree *jx_optim_init(jx_optimizer *o, const jx_tree *params) {
  return init_state("jx_optim_init", o, params, 0);
}

jx_tree *jx_optim_init_shapes(jx_optimizer *o, const jx_tree *params_like) {
  return init_state("jx_optim_init_shapes", o, params_like, 1);
}

static jx_array *f32(double v) { return jx_full(JX_F32, JX_SHAPE(), v); }

jx_array *jx_optim_global_norm(const jx_tree *t) {
  jx_array *total = f32(0);
  for (int i = 0; i < jx_tree_size(t); i++) {
    jx_array *x = jx_astype(jx_tree_at(t, i), JX_F32);
    total = jx_add(total, jx_sum(jx_mul(x, x), JX_AXES(), 0));
  }
  return jx_sqrt(total);
}

/* A state array that must exist; records an error naming it otherwise. */
static jx_array *state_get(const jx_tree *state, const char *name) {
  jx_array *a = jx_tree_get(state, name);
  if (!a)
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_optim_update: the state has no '%s'; make it with jx_optim_init for "
                    "these parameters",
                    name);
  return a;
}

/* One optimizer step on the f32 gradients g[i] (in params' order): writes
 * the new parameters and moments into new_params / new_state. */
static void step(const jx_optimizer *o, jx_array **g, const jx_tree *state, const jx_tree *params,
                 jx_tree *new_state, jx_tree *new_params) {
  int n = jx_tree_size(params);
  char buf[512];
  if (o->clip > 0) { /* optax.clip_by_global_norm */
    jx_array *sq = f32(0);
    for (int i = 0; i < n; i++) sq = jx_add(sq, jx_sum(jx_mul(g[i], g[i]), JX_AXES(), 0));
    jx_array *norm = jx_sqrt(sq), *keep = jx_lt(norm, f32(o->clip));
    for (int i = 0; i < n; i++)
      g[i] = jx_where(keep, g[i], jx_mul(jx_div(g[i], norm), f32(o->clip)));
  }
  jx_array *count = state_get(state, "count");
  if (!count) return;
  jx_array *neg_lr = o->schedule ? jx_neg(jx_schedule_value(o->schedule, count)) : f32(-o->lr);
  jx_array *count1 = jx_add(count, jx_full(JX_I32, JX_SHAPE(), 1));
  jx_array *bc1 = NULL, *bc2 = NULL;
  if (o->kind == ADAM) { /* optax.bias_correction: 1 - decay ** count, in f32 */
    jx_array *t = jx_astype(count1, JX_F32);
    bc1 = jx_sub(f32(1), jx_pow(f32(o->b1), t));
    bc2 = jx_sub(f32(1), jx_pow(f32(o->b2), t));
  }
  for (int i = 0; i < n; i++) {
    const char *pn = jx_tree_name(params, i);
    jx_array *p = jx_tree_at(params, i), *u = g[i];
    if (o->kind == SGD && o->momentum != 0) { /* optax.trace */
      state_name(buf, sizeof buf, "trace", pn);
      jx_array *tr = state_get(state, buf);
      if (!tr) return;
      jx_array *t = jx_add(u, jx_mul(f32(o->momentum), tr));
      jx_tree_set(new_state, buf, t);
      u = o->nesterov ? jx_add(u, jx_mul(f32(o->momentum), t)) : t;
    } else if (o->kind == ADAM) { /* optax.scale_by_adam, then add_decayed_weights */
      state_name(buf, sizeof buf, "mu", pn);
      jx_array *mu = state_get(state, buf);
      char nbuf[512];
      state_name(nbuf, sizeof nbuf, "nu", pn);
      jx_array *nu = state_get(state, nbuf);
      if (!mu || !nu) return;
      mu = jx_add(jx_mul(f32(1 - o->b1), u), jx_mul(f32(o->b1), mu));
      nu = jx_add(jx_mul(f32(1 - o->b2), jx_mul(u, u)), jx_mul(f32(o->b2), nu));
      jx_tree_set(new_state, buf, mu);
      jx_tree_set(new_state, nbuf, nu);
      u = jx_div(jx_div(mu, bc1), jx_add(jx_sqrt(jx_div(nu, bc2)), f32(o->eps)));
      if (o->wd != 0) u = jx_add(u, jx_mul(f32(o->wd), jx_astype(p, JX_F32)));
    }
    /* scale_by_learning_rate, then apply_updates: (p + u) in p's dtype */
    u = jx_mul(neg_lr, u);
    jx_tree_set(new_params, pn, jx_astype(jx_add(jx_astype(p, JX_F32), u), jx_dtype_of(p)));
  }
  jx_tree_set(new_state, "count", count1);
}

/* The gradient of parameter `name` must be an array of its shape: grads
 * that do not fit are named here rather than by the arithmetic they break. */
static jx_status check_gradient(const char *name, const jx_array *g, const jx_array *p) {
  if (jx_is_poisoned(g))
    return jx_report_error(JX_ERR_POISONED,
                           "jx_optim_update: grads: the gradient of '%s' carries an earlier error",
                           name);
  if (jx_is_poisoned(p))
    return jx_report_error(JX_ERR_POISONED,
                           "jx_optim_update: params: '%s' carries an earlier error", name);
  jx_shape gs = jx_shape_of(g), ps = jx_shape_of(p);
  int same = gs.rank == ps.rank;
  for (int d = 0; same && d < gs.rank; d++) same = gs.dims[d] == ps.dims[d];
  if (same) return JX_OK;
  char gb[96], pb[96];
  return jx_report_error(JX_ERR_SHAPE,
                         "jx_optim_update: grads: the gradient of '%s' is %s but the parameter "
                         "is %s",
                         name, nn_aval(g, gb), nn_aval(p, pb));
}

/* Copies every array of src into dst under the same name. */
static void tree_update(jx_tree *dst, const jx_tree *src) {
  for (int i = 0; i < jx_tree_size(src); i++)
    jx_tree_set(dst, jx_tree_name(src, i), jx_tree_at(src, i));
}

void jx_optim_update(jx_optimizer *o, const jx_tree *grads, jx_tree *state, jx_tree *params) {
  if (!o || !grads || !state || !params) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_optim_update: NULL argument");
    return;
  }
  int n = jx_tree_size(params);
  jx_array **g = calloc((size_t)n + 1, sizeof *g);
  jx_tree *new_state = jx_tree_create(), *new_params = jx_tree_create();
  if (!g || !new_state || !new_params) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "jx_optim_update: out of memory");
    goto done;
  }
  for (int i = 0; i < n; i++) {
    jx_array *gi = jx_tree_get(grads, jx_tree_name(params, i));
    if (!gi) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_optim_update: no gradient for parameter '%s'",
                      jx_tree_name(params, i));
      goto done;
    }
    if (check_gradient(jx_tree_name(params, i), gi, jx_tree_at(params, i))) goto done;
    g[i] = jx_astype(gi, JX_F32);
  }
  if (o->every_k <= 1) {
    step(o, g, state, params, new_state, new_params);
  } else { /* optax.MultiSteps with use_grad_mean: a running mean of the gradients */
    jx_array *mini = state_get(state, "mini_step");
    if (!mini) goto done;
    jx_array *k1 = jx_astype(jx_add(mini, jx_full(JX_I32, JX_SHAPE(), 1)), JX_F32);
    jx_array *emit = jx_ge(mini, jx_full(JX_I32, JX_SHAPE(), o->every_k - 1));
    char buf[512];
    jx_array **acc = calloc((size_t)n + 1, sizeof *acc);
    if (!acc) goto done;
    for (int i = 0; i < n; i++) {
      state_name(buf, sizeof buf, "acc", jx_tree_name(params, i));
      jx_array *a = state_get(state, buf);
      if (!a) {
        free(acc);
        goto done;
      }
      acc[i] = jx_add(a, jx_div(jx_sub(g[i], a), k1));
    }
    jx_tree *stepped_state = jx_tree_create(), *stepped_params = jx_tree_create();
    step(o, acc, state, params, stepped_state, stepped_params);
    /* every k-th call takes the step; the others keep parameters and moments */
    for (int i = 0; i < jx_tree_size(stepped_params); i++) {
      const char *name = jx_tree_name(stepped_params, i);
      jx_tree_set(new_params, name,
                  jx_where(emit, jx_tree_at(stepped_params, i), jx_tree_get(params, name)));
    }
    for (int i = 0; i < jx_tree_size(stepped_state); i++) {
      const char *name = jx_tree_name(stepped_state, i);
      jx_tree_set(new_state, name,
                  jx_where(emit, jx_tree_at(stepped_state, i), jx_tree_get(state, name)));
    }
    for (int i = 0; i < n; i++) {
      state_name(buf, sizeof buf, "acc", jx_tree_name(params, i));
      jx_tree_set(new_state, buf, jx_where(emit, f32(0), acc[i]));
    }
    jx_tree_set(
        new_state, "mini_step",
        jx_where(emit, jx_zeros(JX_I32, JX_SHAPE()), jx_add(mini, jx_full(JX_I32, JX_SHAPE(), 1))));
    free(acc);
    jx_tree_release(stepped_state);
    jx_tree_release(stepped_params);
  }
  if (!jx_last_status()) {
    tree_update(state, new_state);
    tree_update(params, new_params);
  }
done:
  free(g);
  jx_tree_release(new_state);
  jx_tree_release(new_params);
}
