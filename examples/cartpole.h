/* examples/cartpole.h: CartPole-v1 written in jx ops, and a PPO trainer for
 * it that runs data-parallel over devices. Shared by examples/cartpole_ppo.c
 * (the command) and tests/unit/test_cartpole.c; public API only.
 *
 * The environment is gym's CartPole-v1: gravity 9.8, cart mass 1.0, pole
 * mass 0.1, half pole length 0.5, force +-10, tau 0.02, explicit Euler;
 * an episode terminates when |x| > 2.4 or |theta| > 12 degrees and is
 * truncated after 500 steps; every step (the last one included) gives
 * reward 1; a reset draws each of the four state variables uniformly from
 * [-0.05, 0.05). The observation is the state (x, x_dot, theta, theta_dot).
 *
 * Functions here describe ONE environment; the trainer batches them with
 * jx_vmap. Every result belongs to the innermost scope. */
#ifndef JX_EXAMPLES_CARTPOLE_H
#define JX_EXAMPLES_CARTPOLE_H

#include <jx/jx.h>

#define CARTPOLE_MAX_STEPS 500

/* One physics step of gym's equations in state's float dtype: state [4],
 * action an integer scalar (1 pushes right, anything else left) -> the next
 * state [4] and whether it terminated (bool scalar). Traceable. */
jx_status cartpole_step(jx_array *state, jx_array *action, jx_array **next, jx_array **terminated);
/* A reset state [4] of dtype dt drawn from key. */
jx_array *cartpole_reset(jx_array *key, jx_dtype dt);

/* As jx_fn (caller releases):
 *   cartpole_step_fn:      (state [4], action i32) -> (next [4], reward, terminated bool)
 *   cartpole_auto_step_fn: (state f32[4], t i32, key u32[2], action i32)
 *                          -> (state', t', reward f32, done bool)
 *     t counts the steps of the current episode; when the step terminates or
 *     reaches CARTPOLE_MAX_STEPS, done is set and state'/t' are a fresh
 *     episode drawn from key (auto-reset), so a batch never stops. */
jx_fn *cartpole_step_fn(void);
jx_fn *cartpole_auto_step_fn(void);

/* ---- PPO (clipped objective, GAE) on a batch of environments ----
 * envs environments in all (fixed), split evenly over `devices` devices
 * with jx_pmap; environment e has its own key stream whatever the split,
 * and every mean (advantage statistics, gradients, losses) is over the
 * whole batch via jx_pmean, so the learning curve does not depend on the
 * device count except through f32 rounding. One iteration = a rollout of
 * `steps` steps of every environment, then `epochs` passes over it in
 * `minibatches` minibatches (of whole time steps, shuffled per epoch). */
typedef struct {
  int devices;     /* must equal jx_device_count() */
  int envs;        /* total, divisible by devices */
  int steps;       /* rollout length T, divisible by minibatches */
  int epochs;      /* PPO epochs per iteration */
  int minibatches; /* per epoch */
  int hidden;      /* width of the two tanh layers of each MLP */
  int iterations;  /* the most to run */
  double lr;       /* Adam, annealed linearly to 0 over `iterations` */
  double gamma, lambda, clip, ent_coef, vf_coef, max_grad_norm;
  uint64_t seed;
  double solved_return; /* stop when the last 100 episodes average this (0: never) */
} cartpole_ppo_config;

cartpole_ppo_config cartpole_ppo_config_default(void);

typedef struct {
  int iteration;     /* 1-based */
  int64_t env_steps; /* so far, all environments */
  int episodes;      /* finished in this iteration */
  int64_t total_episodes;
  double iter_return; /* mean return of the episodes finished in this iteration (0: none) */
  double mean_return; /* mean of the last (up to) 100 finished episodes */
  double loss, pg_loss, value_loss, entropy; /* means over the iteration's minibatches */
  double seconds; /* since training started (the first iteration compiles) */
} cartpole_ppo_metrics;

/* Called after every iteration; a nonzero return stops training. */
typedef int (*cartpole_ppo_callback)(void *ctx, const cartpole_ppo_metrics *m);

/* Trains from scratch; returns JX_OK, or the error (jx_last_error says
 * what). *last receives the final iteration's metrics (may be NULL). */
jx_status cartpole_ppo_train(const cartpole_ppo_config *c, cartpole_ppo_callback cb, void *ctx,
                             cartpole_ppo_metrics *last);

#endif
