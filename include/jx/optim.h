/* jx/optim.h: optimizers with Optax's semantics, traceable so that the whole
 * update runs inside a jitted train step.
 *
 *   jx_optimizer *opt = jx_optim_chain_clip(jx_optim_adamw(1e-3, 0.9, 0.999, 1e-8, 0.01), 1.0);
 *   jx_tree *state = jx_optim_init(opt, params);
 *   ... inside the step, with grads of the loss:
 *   jx_optim_update(opt, grads, state, params);   (replaces state's and params' arrays)
 *
 * State trees hold "count" (i32 scalar, steps taken) and one array per
 * parameter and moment, named "<moment>/<param name>" ("mu/w", "nu/w");
 * moments are f32 whatever the parameters' dtype, and laid out like their
 * parameters (ZeRO: parameters sharded over the data axis shard their state
 * the same way). */
#ifndef JX_OPTIM_H
#define JX_OPTIM_H

#include "nn.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jx_optimizer jx_optimizer;
typedef struct jx_schedule jx_schedule;

/* ---- learning-rate schedules: lr as a function of the step count ---- */
JX_API jx_schedule *jx_schedule_constant(double lr);
/* optax.linear_schedule: init -> end over steps, then end. */
JX_API jx_schedule *jx_schedule_linear(double init, double end, int64_t steps);
/* optax.warmup_cosine_decay_schedule: linear init -> peak over warmup steps,
 * then cosine peak -> end until decay_steps (counted from 0, warmup included). */
JX_API jx_schedule *jx_schedule_warmup_cosine(double init, double peak, int64_t warmup,
                                              int64_t decay_steps, double end);
/* The rate at step count (an i32 scalar array, traced or concrete), f32. */
JX_API jx_array *jx_schedule_value(const jx_schedule *s, jx_array *count);
JX_API void jx_schedule_release(jx_schedule *s);

/* ---- optimizers ---- */
JX_API jx_optimizer *jx_optim_sgd(double lr, double momentum); /* momentum 0: plain SGD */
JX_API jx_optimizer *jx_optim_sgd_nesterov(double lr, double momentum);
JX_API jx_optimizer *jx_optim_adam(double lr, double b1, double b2, double eps);
/* optax.adamw: Adam's step plus wd * param, all scaled by -lr. */
JX_API jx_optimizer *jx_optim_adamw(double lr, double b1, double b2, double eps, double wd);
/* Wrappers take over o and return it changed: */
JX_API jx_optimizer *jx_optim_with_schedule(jx_optimizer *o, jx_schedule *s); /* takes s */
JX_API jx_optimizer *jx_optim_chain_clip(jx_optimizer *o, double max_global_norm);
/* optax.MultiSteps: gradients averaged over every_k calls; parameters move
 * on every k-th call only. */
JX_API jx_optimizer *jx_optim_accumulate(jx_optimizer *o, int every_k);
JX_API void jx_optim_release(jx_optimizer *o);

JX_API jx_tree *jx_optim_init(jx_optimizer *o, const jx_tree *params);
/* jax.eval_shape of jx_optim_init: the same tree of names, shapes and
 * dtypes as jx_shape_dtype_struct arrays, nothing allocated (params_like may
 * be jx_gpt_init_shapes'), for planning a step too large to hold. */
JX_API jx_tree *jx_optim_init_shapes(jx_optimizer *o, const jx_tree *params_like);
/* One step: reads grads, replaces the arrays of state and params. */
JX_API void jx_optim_update(jx_optimizer *o, const jx_tree *grads, jx_tree *state, jx_tree *params);
/* A whole training step as one function, to jit (with shardings) and call
 * every step:
 *   (params..., state..., data...) -> (loss, params'..., state'...)
 * where loss is a function (params..., data...) -> scalar, params are
 * flattened in params_like's order and state in state_like's (from
 * jx_optim_init); the step differentiates the loss with respect to every
 * parameter and applies opt. The names are copied; opt must outlive the
 * step. */
JX_API jx_fn *jx_train_step(jx_fn *loss, const jx_tree *params_like, const jx_tree *state_like,
                            jx_optimizer *opt);

/* Options of jx_train_step_with; a zeroed struct is jx_train_step. */
typedef struct {
  /* Mixed precision: 0 computes in the parameters' own dtype. A float
   * dtype (JX_BF16) casts, inside the step, every float parameter and
   * float data input to it before the loss, and the loss to f32 if it is
   * 16-bit; the gradients come back through the casts as f32, and the
   * optimizer updates the f32 parameters (master weights) with its f32
   * state. bf16 needs no loss scaling (its exponent range is f32's); f16
   * would, and the step does not scale the loss. The loss itself should
   * keep its reductions (norm statistics, softmax, cross-entropy) in f32,
   * as jx's layers and jx_gpt_loss do. */
  jx_dtype compute_dtype;
} jx_train_step_options;

/* jx_train_step with options (NULL: none). */
JX_API jx_fn *jx_train_step_with(jx_fn *loss, const jx_tree *params_like, const jx_tree *state_like,
                                 jx_optimizer *opt, const jx_train_step_options *o);

/* sqrt of the sum of squares of every array of t (f32 scalar). */
JX_API jx_array *jx_optim_global_norm(const jx_tree *t);

#ifndef JX_NO_LOCATION_MACROS
#define jx_optim_init(...)        JX_LOCATED_PTR(jx_tree *, jx_optim_init, __VA_ARGS__)
#define jx_optim_init_shapes(...) JX_LOCATED_PTR(jx_tree *, jx_optim_init_shapes, __VA_ARGS__)
#define jx_optim_update(...)      JX_LOCATED_VOID(jx_optim_update, __VA_ARGS__)
#define jx_train_step(...)        JX_LOCATED_PTR(jx_fn *, jx_train_step, __VA_ARGS__)
#define jx_train_step_with(...)   JX_LOCATED_PTR(jx_fn *, jx_train_step_with, __VA_ARGS__)
#define jx_optim_global_norm(...) JX_LOCATED(jx_optim_global_norm, __VA_ARGS__)
#define jx_schedule_value(...)    JX_LOCATED(jx_schedule_value, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
