/* CartPole-v1 in jx ops, and the PPO trainer (see cartpole.h). */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include "cartpole.h"

#include <stdlib.h>
#include <time.h>

/* ==== the environment ==== */

/* gym's constants; products and sums as gym computes them (in double) */
#define GRAVITY         9.8
#define MASSCART        1.0
#define MASSPOLE        0.1
#define TOTAL_MASS      (MASSPOLE + MASSCART)
#define LENGTH          0.5 /* half the pole's length */
#define POLEMASS_LENGTH (MASSPOLE * LENGTH)
#define FORCE_MAG       10.0
#define TAU             0.02
#define THETA_THRESHOLD (12 * 2 * 3.141592653589793 / 360) /* gym: 12 * 2 * math.pi / 360 */
#define X_THRESHOLD     2.4

/* element i of a [4] vector, as a scalar */
static jx_array *component(jx_array *s, int64_t i) {
  return jx_reshape(jx_slice(s, JX_SHAPE(i), JX_SHAPE(i + 1), JX_SHAPE()), JX_SHAPE());
}

/* Weak scalars take the state's dtype, so the whole step runs in it. */
static jx_array *c(double v) { return jx_scalar(JX_F64, v); }

jx_status cartpole_step(jx_array *state, jx_array *action, jx_array **next, jx_array **terminated) {
  if (!next || !terminated)
    return jx_report_error(JX_ERR_INVALID_ARGUMENT, "cartpole_step: an output pointer is NULL");
  jx_shape s = jx_shape_of(state);
  jx_status st = JX_OK;
  if (jx_is_poisoned(state) || jx_is_poisoned(action))
    st = jx_last_status() ? jx_last_status() : JX_ERR_POISONED;
  else if (s.rank != 1 || s.dims[0] != 4 || jx_ndim(action) != 0)
    st = jx_report_error(JX_ERR_SHAPE,
                         "cartpole_step: the state must have shape [4] and the action be a "
                         "scalar (one environment; batch with jx_vmap), got ranks %d and %d",
                         s.rank, jx_ndim(action));
  if (st) {
    *next = *terminated = jx_stop_gradient(NULL); /* a poisoned array; the first error stays */
    return st;
  }
  jx_dtype dt = jx_dtype_of(state);
  jx_array *x = component(state, 0), *x_dot = component(state, 1);
  jx_array *theta = component(state, 2), *theta_dot = component(state, 3);
  /* force = +10 for action 1, -10 otherwise: exact in any float dtype */
  jx_array *right = jx_astype(jx_eq(action, jx_scalar(JX_I32, 1)), dt);
  jx_array *force = jx_mul(jx_sub(jx_mul(right, c(2)), c(1)), c(FORCE_MAG));
  jx_array *costheta = jx_cos(theta), *sintheta = jx_sin(theta);
  jx_array *temp =
      jx_div(jx_add(force, jx_mul(jx_mul(c(POLEMASS_LENGTH), jx_square(theta_dot)), sintheta)),
             c(TOTAL_MASS));
  jx_array *thetaacc =
      jx_div(jx_sub(jx_mul(c(GRAVITY), sintheta), jx_mul(costheta, temp)),
             jx_mul(c(LENGTH), jx_sub(c(4.0 / 3.0), jx_div(jx_mul(c(MASSPOLE), jx_square(costheta)),
                                                           c(TOTAL_MASS)))));
  jx_array *xacc =
      jx_sub(temp, jx_div(jx_mul(jx_mul(c(POLEMASS_LENGTH), thetaacc), costheta), c(TOTAL_MASS)));
  jx_array *nx = jx_add(x, jx_mul(c(TAU), x_dot));
  jx_array *nx_dot = jx_add(x_dot, jx_mul(c(TAU), xacc));
  jx_array *ntheta = jx_add(theta, jx_mul(c(TAU), theta_dot));
  jx_array *ntheta_dot = jx_add(theta_dot, jx_mul(c(TAU), thetaacc));
  *next = jx_stack(4, (jx_array *[]){nx, nx_dot, ntheta, ntheta_dot}, 0);
  jx_array *out_x = jx_logical_or(jx_lt(nx, c(-X_THRESHOLD)), jx_gt(nx, c(X_THRESHOLD)));
  jx_array *out_theta =
      jx_logical_or(jx_lt(ntheta, c(-THETA_THRESHOLD)), jx_gt(ntheta, c(THETA_THRESHOLD)));
  *terminated = jx_logical_or(out_x, out_theta);
  return jx_last_status();
}

jx_array *cartpole_reset(jx_array *key, jx_dtype dt) {
  return jx_random_uniform(key, dt, JX_SHAPE(4), -0.05, 0.05);
}

static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  cartpole_step(in[0], in[1], &out[0], &out[2]);
  out[1] = jx_full(jx_dtype_of(in[0]), JX_SHAPE(), 1.0);
}

jx_fn *cartpole_step_fn(void) { return jx_fn_create("cartpole_step", 2, 3, step_body, NULL); }

/* (state, t, key, action) -> (state', t', reward, done), resetting on done */
static void auto_step_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *next, *terminated;
  cartpole_step(in[0], in[3], &next, &terminated);
  jx_array *t1 = jx_add(in[1], jx_scalar(JX_I32, 1));
  jx_array *done = jx_logical_or(terminated, jx_ge(t1, jx_scalar(JX_I32, CARTPOLE_MAX_STEPS)));
  out[0] = jx_where(done, cartpole_reset(in[2], jx_dtype_of(in[0])), next);
  out[1] = jx_where(done, jx_zeros(JX_I32, JX_SHAPE()), t1);
  out[2] = jx_full(JX_F32, JX_SHAPE(), 1.0);
  out[3] = done;
}

jx_fn *cartpole_auto_step_fn(void) {
  return jx_fn_create("cartpole_auto_step", 4, 4, auto_step_body, NULL);
}

/* ==== PPO ==== */

enum { MAX_PARAMS = 16, MAX_STATE = 40, NYS = 7, NDATA = 6, NMETRICS = 4, RING = 100 };
#define AXIS "dev"

typedef struct {
  cartpole_ppo_config c;
  int eloc; /* environments per device */
  int np, ns;
  jx_tree *params_like, *state_like;
  jx_optimizer *opt;
  /* batched over a device's environments with jx_vmap */
  jx_fn *split3, *sample, *auto_step, *reset;
  /* bodies of the scans, the loss and its gradient, one iteration */
  jx_fn *rollout, *gae, *update, *loss, *value_and_grad, *iteration;
} ppo;

/* two tanh layers and a linear head: "<net>.0", "<net>.1", "<net>.out" */
static jx_array *mlp(const jx_tree *p, const char *net, jx_array *x) {
  char name[32];
  snprintf(name, sizeof name, "%s.0", net);
  x = jx_tanh(jx_dense(p, name, x));
  snprintf(name, sizeof name, "%s.1", net);
  x = jx_tanh(jx_dense(p, name, x));
  snprintf(name, sizeof name, "%s.out", net);
  return jx_dense(p, name, x);
}

/* obs [B, 4] -> logits [B, 2], value [B] */
static void policy(const jx_tree *p, jx_array *obs, jx_array **logits, jx_array **value) {
  *logits = mlp(p, "actor", obs);
  *value = jx_squeeze(mlp(p, "critic", obs), JX_AXES(-1));
}

static jx_array *log_prob(jx_array *logits, jx_array *action) {
  return jx_sum(jx_mul(jx_log_softmax(logits, -1), jx_one_hot(action, 2, JX_F32)), JX_AXES(-1), 0);
}

/* key -> three keys: the environment's next key, the action's, the reset's */
static void split3_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *k = jx_random_split(in[0], 3);
  for (int i = 0; i < 3; i++)
    out[i] = jx_reshape(jx_slice(k, JX_SHAPE(i, 0), JX_SHAPE(i + 1, 2), JX_SHAPE()), JX_SHAPE(2));
}

/* (key, logits [2]) -> action i32 */
static void sample_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_random_categorical(in[0], in[1], 0);
}

static void reset_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = cartpole_reset(in[0], JX_F32);
}

/* One step of every environment of a device under the current policy.
 * carry: params..., state [E,4], t [E], keys [E,2], episode return [E]
 * ys:    obs, action, log prob, value, reward, done (f32), return of the
 *        episode that ended here (0 where none did) */
static void rollout_body(void *ctx, jx_array *const *in, jx_array **out) {
  ppo *P = ctx;
  int np = P->np;
  jx_tree *p = jx_tree_unflatten(P->params_like, in);
  jx_array *obs = in[np], *t = in[np + 1], *keys = in[np + 2], *ep_ret = in[np + 3];
  jx_array *k[3], *logits, *value, *action, *env[4];
  jx_call(P->split3, &keys, k);
  policy(p, obs, &logits, &value);
  jx_call(P->sample, (jx_array *[]){k[1], logits}, &action);
  jx_call(P->auto_step, (jx_array *[]){obs, t, k[2], action}, env);
  jx_array *done = jx_astype(env[3], JX_F32);
  jx_array *ret = jx_add(ep_ret, env[2]);
  for (int i = 0; i < np; i++) out[i] = in[i];
  out[np] = env[0];
  out[np + 1] = env[1];
  out[np + 2] = k[0];
  out[np + 3] = jx_mul(ret, jx_sub(jx_scalar(JX_F32, 1), done));
  jx_array *ys[NYS] = {obs,    action, log_prob(logits, action), value,
                       env[2], done,   jx_mul(ret, done)};
  for (int i = 0; i < NYS; i++) out[np + 4 + i] = ys[i];
  jx_tree_release(p);
}

/* GAE, run backwards: carry (gae, value of the next step), xs (reward,
 * value, done) -> y advantage. A done step's successor is a new episode. */
static void gae_body(void *ctx, jx_array *const *in, jx_array **out) {
  ppo *P = ctx;
  jx_array *gae = in[0], *next_v = in[1], *r = in[2], *v = in[3], *done = in[4];
  jx_array *live = jx_sub(jx_scalar(JX_F32, 1), done);
  jx_array *delta =
      jx_sub(jx_add(r, jx_mul(jx_mul(jx_scalar(JX_F32, P->c.gamma), next_v), live)), v);
  gae = jx_add(delta, jx_mul(jx_mul(jx_scalar(JX_F32, P->c.gamma * P->c.lambda), live), gae));
  out[0] = gae;
  out[1] = v;
  out[2] = gae;
}

/* (params..., obs, action, old log prob, old value, advantage, return)
 * -> (loss, policy loss, value loss, entropy): PPO's clipped objective */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  ppo *P = ctx;
  const cartpole_ppo_config *c = &P->c;
  int np = P->np;
  jx_tree *p = jx_tree_unflatten(P->params_like, in);
  jx_array *obs = in[np], *action = in[np + 1], *old_logp = in[np + 2], *old_v = in[np + 3];
  jx_array *adv = in[np + 4], *ret = in[np + 5];
  jx_array *logits, *v;
  policy(p, obs, &logits, &v);
  jx_array *logp_all = jx_log_softmax(logits, -1);
  jx_array *logp = jx_sum(jx_mul(logp_all, jx_one_hot(action, 2, JX_F32)), JX_AXES(-1), 0);
  jx_array *ratio = jx_exp(jx_sub(logp, old_logp));
  jx_array *surrogate =
      jx_minimum(jx_mul(ratio, adv), jx_mul(jx_clip(ratio, 1 - c->clip, 1 + c->clip), adv));
  jx_array *pg = jx_neg(jx_mean(surrogate, JX_AXES(), 0));
  jx_array *v_clipped = jx_add(old_v, jx_clip(jx_sub(v, old_v), -c->clip, c->clip));
  jx_array *vf =
      jx_mul(jx_scalar(JX_F32, 0.5),
             jx_mean(jx_maximum(jx_square(jx_sub(v, ret)), jx_square(jx_sub(v_clipped, ret))),
                     JX_AXES(), 0));
  jx_array *ent =
      jx_neg(jx_mean(jx_sum(jx_mul(jx_exp(logp_all), logp_all), JX_AXES(-1), 0), JX_AXES(), 0));
  out[0] = jx_sub(jx_add(pg, jx_mul(jx_scalar(JX_F32, c->vf_coef), vf)),
                  jx_mul(jx_scalar(JX_F32, c->ent_coef), ent));
  out[1] = pg;
  out[2] = vf;
  out[3] = ent;
  jx_tree_release(p);
}

/* One minibatch: carry (params..., optimizer state...), xs the minibatch's
 * NDATA arrays -> y the NMETRICS losses. Gradients are averaged over the
 * devices (pmean), so every device takes the same step. */
static void update_body(void *ctx, jx_array *const *in, jx_array **out) {
  ppo *P = ctx;
  int np = P->np, ns = P->ns;
  jx_array *args[MAX_PARAMS + NDATA], *vg[NMETRICS + MAX_PARAMS];
  for (int i = 0; i < np; i++) args[i] = in[i];
  for (int i = 0; i < NDATA; i++) args[np + i] = in[np + ns + i];
  if (jx_call(P->value_and_grad, args, vg)) {
    for (int i = 0; i < np + ns + 1; i++) out[i] = jx_stop_gradient(NULL);
    return;
  }
  jx_array *g[MAX_PARAMS];
  for (int i = 0; i < np; i++) g[i] = jx_pmean(vg[NMETRICS + i], AXIS);
  jx_tree *params = jx_tree_unflatten(P->params_like, in);
  jx_tree *state = jx_tree_unflatten(P->state_like, in + np);
  jx_tree *grads = jx_tree_unflatten(P->params_like, g);
  jx_optim_update(P->opt, grads, state, params);
  jx_tree_flatten(params, out);
  jx_tree_flatten(state, out + np);
  out[np + ns] = jx_stack(NMETRICS, vg, 0);
  jx_tree_release(params);
  jx_tree_release(state);
  jx_tree_release(grads);
}

/* [T, E, ...] rows picked by idx [U * T/M] -> [U, T/M * E, ...] */
static jx_array *minibatches(jx_array *x, jx_array *idx, int64_t u) {
  jx_array *g = jx_take(x, idx, 0);
  jx_shape s = jx_shape_of(g);
  int64_t rows = s.dims[0] / u * s.dims[1];
  if (s.rank == 2) return jx_reshape(g, JX_SHAPE(u, rows));
  return jx_reshape(g, JX_SHAPE(u, rows, s.dims[2]));
}

/* One PPO iteration on one device (the body of the pmap). Every input and
 * output has the device axis (pmap's in_axes hold at most JX_MAX_RANK
 * entries, so replicated values travel as per-device copies):
 *   in:  params..., opt state..., env state [E,4], t [E], keys [E,2],
 *        episode return [E], iteration key [2]
 *   out: params'..., opt state'..., env state', t', keys', episode return',
 *        finished returns [T, E], metrics [NMETRICS] */
static void iteration_body(void *ctx, jx_array *const *in, jx_array **out) {
  ppo *P = ctx;
  const cartpole_ppo_config *c = &P->c;
  int np = P->np, ns = P->ns, T = c->steps, U = c->epochs * c->minibatches;
  jx_array *carry[MAX_PARAMS + 4], *ro[MAX_PARAMS + 4 + NYS];
  for (int i = 0; i < np; i++) carry[i] = in[i];
  for (int i = 0; i < 4; i++) carry[np + i] = in[np + ns + i];
  jx_array *iter_key = in[np + ns + 4];
  jx_status st = jx_scan(P->rollout, np + 4, carry, 0, NULL, T, 0, ro);
  jx_array **ys = ro + np + 4; /* obs, action, logp, value, reward, done, finished */

  /* advantages: bootstrap from the value of the state after the rollout */
  jx_tree *p = jx_tree_unflatten(P->params_like, in);
  jx_array *logits, *last_v, *g[3];
  policy(p, ro[np], &logits, &last_v);
  jx_tree_release(p);
  if (!st)
    st = jx_scan(P->gae, 2, (jx_array *[]){jx_zeros(JX_F32, JX_SHAPE(P->eloc)), last_v}, 3,
                 (jx_array *[]){ys[4], ys[3], ys[5]}, T, 1, g);
  jx_array *adv = st ? jx_stop_gradient(NULL) : g[2];
  jx_array *ret = jx_add(adv, ys[3]);
  /* normalized over every environment of every device */
  jx_array *mean = jx_pmean(jx_mean(adv, JX_AXES(), 0), AXIS);
  jx_array *var = jx_pmean(jx_mean(jx_square(jx_sub(adv, mean)), JX_AXES(), 0), AXIS);
  adv = jx_div(jx_sub(adv, mean), jx_add(jx_sqrt(var), jx_scalar(JX_F32, 1e-8)));

  /* minibatches: whole time steps, a permutation of them per epoch (the
   * same on every device), so a minibatch is the same set of transitions
   * whatever the number of devices */
  jx_array *perms[64];
  for (int e = 0; e < c->epochs; e++)
    perms[e] = jx_random_permutation(jx_random_fold_in(iter_key, (uint32_t)e), T);
  jx_array *idx = jx_reshape(jx_stack(c->epochs, perms, 0), JX_SHAPE(-1));
  jx_array *data[NDATA] = {ys[0], ys[1], ys[2], ys[3], adv, ret};
  jx_array *upd_in[MAX_PARAMS + MAX_STATE], *xs[NDATA], *upd[MAX_PARAMS + MAX_STATE + 1];
  for (int i = 0; i < NDATA; i++) xs[i] = minibatches(data[i], idx, U);
  for (int i = 0; i < np + ns; i++) upd_in[i] = in[i];
  if (!st) st = jx_scan(P->update, np + ns, upd_in, NDATA, xs, U, 0, upd);
  for (int i = 0; i < np + ns; i++) out[i] = st ? jx_stop_gradient(NULL) : upd[i];
  for (int i = 0; i < 4; i++) out[np + ns + i] = ro[np + i];
  out[np + ns + 4] = ys[6];
  out[np + ns + 5] =
      st ? jx_stop_gradient(NULL) : jx_pmean(jx_mean(upd[np + ns], JX_AXES(0), 0), AXIS);
}

cartpole_ppo_config cartpole_ppo_config_default(void) {
  return (cartpole_ppo_config){.devices = 1,
                               .envs = 128,
                               .steps = 32,
                               .epochs = 4,
                               .minibatches = 4,
                               .hidden = 64,
                               .iterations = 300,
                               .lr = 1e-3,
                               .gamma = 0.99,
                               .lambda = 0.95,
                               .clip = 0.2,
                               .ent_coef = 0.01,
                               .vf_coef = 0.5,
                               .max_grad_norm = 0.5,
                               .seed = 0,
                               .solved_return = 475};
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static jx_status check_config(const cartpole_ppo_config *c) {
  const char *bad = NULL;
  if (c->devices < 1 || c->devices != jx_device_count())
    bad = "devices must equal jx_device_count()";
  else if (c->envs < 1 || c->envs % c->devices)
    bad = "envs must be a positive multiple of devices";
  else if (c->minibatches < 1 || c->steps < 1 || c->steps % c->minibatches)
    bad = "steps must be a positive multiple of minibatches";
  else if (c->epochs < 1 || c->epochs > 64 || c->hidden < 1 || c->iterations < 0)
    bad = "epochs must be in [1, 64], hidden and iterations positive";
  if (!bad) return JX_OK;
  return jx_report_error(JX_ERR_INVALID_ARGUMENT,
                         "cartpole_ppo_train: %s (devices %d of %d, envs %d, steps %d, "
                         "minibatches %d, epochs %d, hidden %d, iterations %d)",
                         bad, c->devices, jx_device_count(), c->envs, c->steps, c->minibatches,
                         c->epochs, c->hidden, c->iterations);
}

/* the initial parameters: actor and critic MLPs, the actor's head scaled
 * down so that the first policy is nearly uniform */
static jx_tree *init_params(const cartpole_ppo_config *c, jx_array *key) {
  jx_tree *t = jx_tree_create();
  const char *names[6] = {"actor.0", "actor.1", "actor.out", "critic.0", "critic.1", "critic.out"};
  int64_t h = c->hidden, in[6] = {4, h, h, 4, h, h}, out[6] = {h, h, 2, h, h, 1};
  for (int i = 0; i < 6; i++)
    jx_dense_init(t, names[i], jx_random_fold_in(key, (uint32_t)i), in[i], out[i], JX_F32);
  jx_tree_set(t, "actor.out.w", jx_mul(jx_tree_get(t, "actor.out.w"), jx_scalar(JX_F32, 0.01)));
  return t;
}

/* x [...] -> [devices, ...] copies */
static jx_array *per_device(jx_array *x, int devices) {
  jx_shape s = jx_shape_of(x), r = {s.rank + 1, {devices}};
  for (int d = 0; d < s.rank; d++) r.dims[d + 1] = s.dims[d];
  return jx_broadcast_to(jx_expand_dims(x, 0), r);
}

/* [E, ...] -> [devices, E / devices, ...]: environment e on device
 * e / (E / devices) */
static jx_array *split_envs(jx_array *x, int devices) {
  jx_shape s = jx_shape_of(x), r = {s.rank + 1, {devices, s.dims[0] / devices}};
  for (int d = 1; d < s.rank; d++) r.dims[d + 1] = s.dims[d];
  return jx_reshape(x, r);
}

static void ppo_free(ppo *P) {
  jx_fn *fns[] = {P->split3, P->sample, P->auto_step,      P->reset, P->rollout,
                  P->gae,    P->update, P->value_and_grad, P->loss,  P->iteration};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++) jx_fn_release(fns[i]);
  jx_tree_release(P->params_like);
  jx_tree_release(P->state_like);
  jx_optim_release(P->opt);
}

static jx_fn *vmapped(jx_fn *f) {
  jx_fn *v = jx_vmap(f, JX_AXES(), JX_AXES());
  jx_fn_release(f);
  return v;
}

jx_status cartpole_ppo_train(const cartpole_ppo_config *cfg, cartpole_ppo_callback cb, void *ctx,
                             cartpole_ppo_metrics *last) {
  if (!cfg) return jx_report_error(JX_ERR_INVALID_ARGUMENT, "cartpole_ppo_train: config is NULL");
  jx_status st = check_config(cfg);
  if (st) return st;
  ppo P = {.c = *cfg};
  const cartpole_ppo_config *c = &P.c;
  const int D = c->devices, E = c->envs, T = c->steps;
  P.eloc = E / D;
  jx_scope_begin();
  jx_array *root = jx_random_key(c->seed);
  jx_tree *params = init_params(c, jx_random_fold_in(root, 0));
  P.np = jx_tree_size(params);
  int64_t updates = (int64_t)c->iterations * c->epochs * c->minibatches;
  P.opt = jx_optim_chain_clip(
      jx_optim_with_schedule(jx_optim_adam(c->lr, 0.9, 0.999, 1e-5),
                             jx_schedule_linear(c->lr, 0, updates > 0 ? updates : 1)),
      c->max_grad_norm);
  jx_tree *state = jx_optim_init(P.opt, params);
  P.ns = jx_tree_size(state);
  P.params_like = params;
  P.state_like = state;
  if (P.np > MAX_PARAMS || P.ns > MAX_STATE) {
    st = jx_report_error(JX_ERR_INTERNAL, "cartpole_ppo_train: too many parameters");
    goto done;
  }
  P.split3 = vmapped(jx_fn_create("split3", 1, 3, split3_body, NULL));
  P.sample = vmapped(jx_fn_create("sample", 2, 1, sample_body, NULL));
  P.auto_step = vmapped(cartpole_auto_step_fn());
  P.reset = vmapped(jx_fn_create("reset", 1, 1, reset_body, NULL));
  P.rollout = jx_fn_create("rollout_step", P.np + 4, P.np + 4 + NYS, rollout_body, &P);
  P.gae = jx_fn_create("gae_step", 5, 3, gae_body, &P);
  P.loss = jx_fn_create("ppo_loss", P.np + NDATA, NMETRICS, loss_body, &P);
  P.value_and_grad = jx_value_and_grad_first(P.loss, P.np, 1);
  P.update = jx_fn_create("ppo_minibatch", P.np + P.ns + NDATA, P.np + P.ns + 1, update_body, &P);
  jx_fn *body = jx_fn_create("ppo_iteration", P.np + P.ns + 5, P.np + P.ns + 6, iteration_body, &P);
  jx_fn *pm = jx_pmap(body, AXIS, JX_AXES(0), JX_AXES(0));
  P.iteration = jx_jit(pm, NULL);
  jx_fn_release(pm);
  jx_fn_release(body);
  if (jx_last_status()) {
    st = jx_last_status();
    goto done;
  }

  /* the environments: keys from the root key, one per environment, then a
   * reset each; all laid out [devices, E / devices, ...] */
  const int ncarry = P.np + P.ns + 4; /* inputs carried from iteration to iteration */
  jx_array *io[MAX_PARAMS + MAX_STATE + 4], *k3[3], *phys;
  jx_array *env_keys = jx_random_split(jx_random_fold_in(root, 1), E);
  jx_call(P.split3, &env_keys, k3);
  jx_call(P.reset, &k3[2], &phys);
  jx_tree_flatten(params, io);
  jx_tree_flatten(state, io + P.np);
  for (int i = 0; i < P.np + P.ns; i++) io[i] = jx_keep(per_device(io[i], D));
  io[P.np + P.ns] = jx_keep(split_envs(phys, D));
  io[P.np + P.ns + 1] = jx_keep(jx_zeros(JX_I32, JX_SHAPE(D, E / D)));
  io[P.np + P.ns + 2] = jx_keep(split_envs(k3[0], D));
  io[P.np + P.ns + 3] = jx_keep(jx_zeros(JX_F32, JX_SHAPE(D, E / D)));

  float *finished = malloc(sizeof(float) * (size_t)(T * E));
  if (!finished) st = jx_report_error(JX_ERR_OUT_OF_MEMORY, "cartpole_ppo_train: out of memory");
  double ring[RING], t0 = now_s();
  int nring = 0;
  cartpole_ppo_metrics m = {0};
  for (int it = 0; it < c->iterations && !st; it++) {
    jx_scope_begin();
    jx_array *out[MAX_PARAMS + MAX_STATE + 6], *in[MAX_PARAMS + MAX_STATE + 5];
    for (int i = 0; i < ncarry; i++) in[i] = io[i];
    in[ncarry] = per_device(jx_random_fold_in(jx_random_fold_in(root, 2), (uint32_t)it), D);
    st = jx_call(P.iteration, in, out);
    float metrics[NMETRICS];
    /* finished returns: [D, T, E/D] -> time-major, global environment order */
    if (!st)
      st = jx_read(jx_transpose(out[ncarry], JX_AXES(1, 0, 2)), finished,
                   sizeof(float) * (size_t)(T * E));
    if (!st)
      st = jx_read(jx_slice(out[ncarry + 1], JX_SHAPE(0, 0), JX_SHAPE(1, NMETRICS), JX_SHAPE()),
                   metrics, sizeof metrics);
    if (!st) {
      for (int i = 0; i < ncarry; i++) {
        jx_release(io[i]);
        io[i] = jx_keep(out[i]);
      }
      double sum = 0;
      int n = 0;
      for (int k = 0; k < T * E; k++) {
        if (finished[k] <= 0) continue;
        sum += finished[k];
        n++;
        ring[m.total_episodes % RING] = finished[k];
        m.total_episodes++;
      }
      nring = m.total_episodes < RING ? (int)m.total_episodes : RING;
      double rsum = 0;
      for (int k = 0; k < nring; k++) rsum += ring[k];
      m.iteration = it + 1;
      m.env_steps = (int64_t)(it + 1) * T * E;
      m.episodes = n;
      m.iter_return = n ? sum / n : 0;
      m.mean_return = nring ? rsum / nring : 0;
      m.loss = metrics[0];
      m.pg_loss = metrics[1];
      m.value_loss = metrics[2];
      m.entropy = metrics[3];
      m.seconds = now_s() - t0;
    }
    jx_scope_end();
    if (st) break;
    if (cb && cb(ctx, &m)) break;
    if (c->solved_return > 0 && nring == RING && m.mean_return >= c->solved_return) break;
  }
  if (last) *last = m;
  free(finished);
  for (int i = 0; i < ncarry; i++) jx_release(io[i]);
done:
  ppo_free(&P);
  jx_scope_end();
  return st;
}
