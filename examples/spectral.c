/* The pseudo-spectral Burgers solver of spectral.h. */
#include "spectral.h"

#include <math.h>
#include <stdlib.h>

static const double PI = 3.14159265358979323846;

struct spectral_solver {
  jx_array *derivative; /* c128 [N, N/2 + 1]: i (kx + ky) where the 2/3 rule keeps k, else 0 */
  jx_array *implicit;   /* f64 [N, N/2 + 1]: 1 / (1 + nu dt |k|^2) */
  jx_fn *step, *rollout, *loss;
};

jx_array *spectral_true_u0(void) {
  double u[SPEC_N * SPEC_N];
  for (int i = 0; i < SPEC_N; i++)
    for (int j = 0; j < SPEC_N; j++) {
      double x = 2 * PI * i / SPEC_N, y = 2 * PI * j / SPEC_N;
      u[i * SPEC_N + j] = sin(x) * cos(y) + 0.5 * cos(2 * x + y) + 0.3 * sin(3 * y);
    }
  return jx_array_from(JX_F64, JX_SHAPE(SPEC_N, SPEC_N), u);
}

/* carry uh -> uh after one step */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  const spectral_solver *s = ctx;
  jx_array *u = jx_fft_irfft2(in[0], JX_SHAPE(SPEC_N, SPEC_N), JX_AXES(), NULL);
  jx_array *flux =
      jx_fft_rfft2(jx_mul(jx_mul(u, u), jx_scalar(JX_F64, 0.5)), JX_SHAPE(), JX_AXES(), NULL);
  jx_array *advection = jx_mul(flux, s->derivative);
  out[0] = jx_mul(jx_sub(in[0], jx_mul(advection, jx_scalar(JX_F64, SPEC_DT))), s->implicit);
}

static void rollout_body(void *ctx, jx_array *const *in, jx_array **out) {
  const spectral_solver *s = ctx;
  jx_array *uh = jx_fft_rfft2(in[0], JX_SHAPE(), JX_AXES(), NULL), *end;
  if (jx_scan(s->step, 1, &uh, 0, NULL, SPEC_STEPS, 0, &end)) return;
  out[0] = jx_fft_irfft2(end, JX_SHAPE(SPEC_N, SPEC_N), JX_AXES(), NULL);
}

static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  const spectral_solver *s = ctx;
  jx_array *u;
  if (jx_call(s->rollout, in, &u)) return;
  jx_array *d = jx_sub(u, in[1]);
  out[0] = jx_mul(jx_sum(jx_mul(d, d), JX_AXES(), 0), jx_scalar(JX_F64, 0.5));
}

spectral_solver *spectral_create(void) {
  spectral_solver *s = calloc(1, sizeof *s);
  if (!s) return NULL;
  enum { M = SPEC_N / 2 + 1 };
  double ik[2 * SPEC_N * M], im[SPEC_N * M]; /* complex i k (re, im pairs), implicit factor */
  for (int i = 0; i < SPEC_N; i++)
    for (int j = 0; j < M; j++) {
      int kx = i < (SPEC_N + 1) / 2 ? i : i - SPEC_N, ky = j; /* fftfreq, rfftfreq (times N) */
      int kept = 3 * abs(kx) < SPEC_N && 3 * ky < SPEC_N;     /* |k| < N/3 */
      ik[2 * (i * M + j)] = 0;
      ik[2 * (i * M + j) + 1] = kept ? kx + ky : 0;
      im[i * M + j] = 1 / (1 + SPEC_NU * SPEC_DT * (kx * kx + ky * ky));
    }
  s->derivative = jx_keep(jx_array_from(JX_C128, JX_SHAPE(SPEC_N, M), ik));
  s->implicit = jx_keep(jx_array_from(JX_F64, JX_SHAPE(SPEC_N, M), im));
  s->step = jx_fn_create("burgers_step", 1, 1, step_body, s);
  s->rollout = jx_fn_create("burgers_rollout", 1, 1, rollout_body, s);
  s->loss = jx_fn_create("burgers_loss", 2, 1, loss_body, s);
  return s;
}

void spectral_release(spectral_solver *s) {
  if (!s) return;
  jx_fn_release(s->loss);
  jx_fn_release(s->rollout);
  jx_fn_release(s->step);
  jx_release(s->derivative);
  jx_release(s->implicit);
  free(s);
}

jx_fn *spectral_rollout(spectral_solver *s) { return s->rollout; }
jx_fn *spectral_loss(spectral_solver *s) { return s->loss; }

jx_array *spectral_recover(spectral_solver *s, jx_array *true_u0, double *loss, jx_array **grad0) {
  jx_array *observed, *u0 = jx_keep(jx_zeros(JX_F64, JX_SHAPE(SPEC_N, SPEC_N)));
  if (jx_call(s->rollout, &true_u0, &observed)) return NULL;
  observed = jx_keep(observed);
  jx_fn *vg = jx_value_and_grad(s->loss, JX_AXES(0), 0), *step = jx_jit(vg, NULL);
  jx_status st = JX_OK;
  for (int it = 0; !st && it < SPEC_ITERS; it++) {
    jx_scope_begin();
    jx_array *in[2] = {u0, observed}, *out[2];
    st = jx_call(step, in, out);
    if (!st) {
      if (loss) loss[it] = jx_item(out[0]);
      if (grad0 && it == 0) *grad0 = jx_keep(out[1]);
      jx_array *next = jx_keep(jx_sub(u0, jx_mul(out[1], jx_scalar(JX_F64, SPEC_LR))));
      jx_release(u0);
      u0 = next;
      st = jx_last_status();
    }
    jx_scope_end();
  }
  jx_fn_release(step);
  jx_fn_release(vg);
  jx_release(observed);
  if (st) {
    jx_release(u0);
    return NULL;
  }
  return u0;
}
