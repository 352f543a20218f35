/* Gaussian-process regression (gp.h). */
#include "gp.h"

#include <math.h>
#include <stdio.h>

static const char *const NAMES[3] = {"log_amplitude", "log_lengthscale", "log_noise"};

jx_status gp_make_data(jx_array **x, jx_array **y) {
  jx_scope_begin();
  jx_array *xs = jx_random_uniform(jx_random_key(0), JX_F64, JX_SHAPE(GP_POINTS), -3, 3);
  jx_array *noise = jx_random_normal(jx_random_key(1), JX_F64, JX_SHAPE(GP_POINTS));
  jx_array *ys =
      jx_add(jx_add(jx_sin(jx_mul(xs, jx_scalar(JX_F64, 2))), jx_mul(xs, jx_scalar(JX_F64, 0.5))),
             jx_mul(noise, jx_scalar(JX_F64, GP_NOISE)));
  *x = jx_keep(xs);
  *y = jx_keep(ys);
  jx_scope_end();
  return jx_last_status();
}

/* K(a, b) = amp2 exp(-(a_i - b_j)^2 / (2 l^2)): [len(a), len(b)] */
static jx_array *rbf(jx_array *log_amp, jx_array *log_len, jx_array *a, jx_array *b) {
  jx_array *d = jx_sub(jx_expand_dims(a, 1), jx_expand_dims(b, 0));
  jx_array *len = jx_exp(log_len);
  jx_array *r2 = jx_div(jx_mul(d, d), jx_mul(len, len));
  return jx_mul(jx_exp(jx_mul(log_amp, jx_scalar(JX_F64, 2))),
                jx_exp(jx_mul(r2, jx_scalar(JX_F64, -0.5))));
}

/* The lower Cholesky factor of K(x, x) + s^2 I. */
static jx_array *factor(jx_array *log_amp, jx_array *log_len, jx_array *log_noise, jx_array *x) {
  jx_array *noise_var = jx_exp(jx_mul(log_noise, jx_scalar(JX_F64, 2)));
  jx_array *k = jx_add(rbf(log_amp, log_len, x, x), jx_mul(jx_eye(JX_F64, GP_POINTS), noise_var));
  return jx_linalg_cholesky(k);
}

static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[3], *y = in[4];
  jx_array *l = factor(in[0], in[1], in[2], x);
  /* z = L^-1 y: |z|^2 = y^T K^-1 y */
  jx_array *z = jx_linalg_triangular_solve(l, jx_expand_dims(y, 1), 1, 1, 0, 0);
  jx_array *fit = jx_mul(jx_sum(jx_mul(z, z), JX_AXES(), 0), jx_scalar(JX_F64, 0.5));
  /* log det K / 2 = sum log L_ii */
  jx_array *diag = jx_sum(jx_mul(l, jx_eye(JX_F64, GP_POINTS)), JX_AXES(1), 0);
  jx_array *half_logdet = jx_sum(jx_log(diag), JX_AXES(), 0);
  jx_array *nll =
      jx_add(jx_add(fit, half_logdet), jx_scalar(JX_F64, 0.5 * GP_POINTS * log(2 * acos(-1.0))));
  out[0] = jx_div(nll, jx_scalar(JX_F64, GP_POINTS));
}

jx_fn *gp_loss_fn(void) { return jx_fn_create("gp_nll", 5, 1, loss_body, NULL); }

jx_array *gp_initial_theta(void) {
  double t[3] = {0, 0, log(0.5)};
  return jx_array_from(JX_F64, JX_SHAPE(3), t);
}

jx_array *gp_fit(jx_array *x, jx_array *y, double *nll) {
  double t0[3];
  if (jx_read(gp_initial_theta(), t0, sizeof t0)) return NULL;
  jx_fn *loss = gp_loss_fn();
  jx_optimizer *opt = jx_optim_adam(GP_LR, 0.9, 0.999, 1e-8);
  jx_tree *params = jx_tree_create();
  for (int i = 0; i < 3; i++) jx_tree_set(params, NAMES[i], jx_full(JX_F64, JX_SHAPE(), t0[i]));
  jx_tree *state = jx_optim_init(opt, params);
  int ns = jx_tree_size(state);
  jx_fn *plain = jx_train_step(loss, params, state, opt), *step = jx_jit(plain, NULL);
  jx_array *in[16], *out[16], *theta = NULL;
  jx_status st = ns + 5 > 16 ? JX_ERR_INTERNAL : JX_OK;
  for (int s = 0; !st && s < GP_STEPS; s++) {
    jx_scope_begin();
    jx_tree_flatten(params, in);
    jx_tree_flatten(state, in + 3);
    in[3 + ns] = x;
    in[4 + ns] = y;
    st = jx_call(step, in, out);
    if (!st) {
      if (nll) nll[s] = jx_item(out[0]);
      for (int i = 0; i < 3; i++) jx_tree_set(params, NAMES[i], out[1 + i]);
      for (int i = 0; i < ns; i++) jx_tree_set(state, jx_tree_name(state, i), out[4 + i]);
    }
    jx_scope_end();
  }
  if (!st) {
    jx_array *parts[3];
    for (int i = 0; i < 3; i++) parts[i] = jx_reshape(jx_tree_get(params, NAMES[i]), JX_SHAPE(1));
    theta = jx_keep(jx_concatenate(3, parts, 0));
  }
  jx_fn_release(step);
  jx_fn_release(plain);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(opt);
  jx_fn_release(loss);
  return theta;
}

jx_array *gp_posterior_mean(jx_array *theta, jx_array *x, jx_array *y, jx_array *xs) {
  jx_array *t[3];
  for (int i = 0; i < 3; i++)
    t[i] = jx_reshape(jx_slice(theta, JX_SHAPE(i), JX_SHAPE(i + 1), JX_SHAPE(1)), JX_SHAPE());
  jx_array *l = factor(t[0], t[1], t[2], x);
  /* alpha = K^-1 y = L^-T L^-1 y */
  jx_array *z = jx_linalg_triangular_solve(l, jx_expand_dims(y, 1), 1, 1, 0, 0);
  jx_array *alpha = jx_linalg_triangular_solve(l, z, 1, 1, 1, 0);
  return jx_squeeze(jx_matmul(rbf(t[0], t[1], xs, x), alpha), JX_AXES(1));
}
