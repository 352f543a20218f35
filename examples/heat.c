/* heat.c: the simulator of heat.h. Public API only.
 *
 * One rollout is an outer jx_scan over the observations whose body is an
 * inner jx_scan over the time steps; the step is wrapped in jx_checkpoint,
 * so reverse mode stores only each step's inputs and recomputes the rest.
 * Sharded, the whole rollout (and the loss) is one jx_shard_map: the blocks
 * stay on their devices for every step and meet only in the halo exchanges
 * (jx_ppermute) and the final psum of the loss. */
#include "heat.h"

#include <math.h>
#include <stdlib.h>

enum { MAX_DEVICES = 64, NCARRY = 5 /* u and the 4 face diffusivities */ };
static const double PI = 3.14159265358979323846;

struct heat_sim {
  heat_config c;
  int px, py; /* mesh shape; 0 when not sharded */
  jx_mesh *mesh;
  jx_fn *step, *step_ck, *inner_body, *outer_body;
  jx_fn *rollout_local, *loss_local; /* per block (or the whole grid) */
  jx_fn *rollout, *loss, *vg, *vg_jit;
};

/* ---- pieces of the per-block program (traced; axis NULL: not sharded) ---- */

/* x[lo:hi] along dim d */
static jx_array *slice_dim(jx_array *x, int d, int64_t lo, int64_t hi) {
  jx_shape start = jx_shape_of(x), stop = jx_shape_of(x);
  for (int i = 0; i < start.rank; i++) start.dims[i] = 0;
  start.dims[d] = lo;
  stop.dims[d] = hi;
  return jx_slice(x, start, stop, JX_SHAPE());
}

/* Each device along axis sends x to its successor (fwd) or predecessor: the
 * result is the neighbour's x, zeros where there is no neighbour (the
 * global edges). */
static jx_array *from_neighbour(jx_array *x, const char *axis, int size, int fwd) {
  if (!axis || size == 1) return jx_zeros(jx_dtype_of(x), jx_shape_of(x));
  int pairs[MAX_DEVICES][2];
  for (int i = 0; i + 1 < size; i++) {
    pairs[i][0] = fwd ? i : i + 1;
    pairs[i][1] = fwd ? i + 1 : i;
  }
  return jx_ppermute(x, axis, size - 1, (const int(*)[2])pairs);
}

/* x with one ghost layer on each side along dim d: the neighbours' edge
 * layers, and at the global edges x's own edge layer (kappa extended
 * outward). */
static jx_array *with_halo(jx_array *x, int d, const char *axis, int size) {
  int64_t m = jx_shape_of(x).dims[d];
  jx_array *first = slice_dim(x, d, 0, 1), *last = slice_dim(x, d, m - 1, m);
  jx_array *lo = first, *hi = last;
  if (axis && size > 1) {
    jx_array *idx = jx_axis_index(axis);
    lo = jx_where(jx_eq(idx, jx_scalar(JX_I32, 0)), first, from_neighbour(last, axis, size, 1));
    hi = jx_where(jx_eq(idx, jx_scalar(JX_I32, size - 1)), last,
                  from_neighbour(first, axis, size, 0));
  }
  return jx_concatenate(3, (jx_array *[]){lo, x, hi}, d);
}

static const char *axis_x(const heat_sim *s) { return s->px ? "x" : NULL; }
static const char *axis_y(const heat_sim *s) { return s->px ? "y" : NULL; }

/* kappa [nl,ml] -> the diffusivities on the faces of each cell: before and
 * after it along rows (k[0], k[1]) and along columns (k[2], k[3]), each
 * [nl,ml]; (kappa[i] + kappa[i+1]) / 2 on the face between cells i, i+1 */
static void faces(const heat_sim *s, jx_array *kappa, jx_array **k) {
  jx_array *half = jx_scalar(JX_F64, 0.5);
  for (int d = 0; d < 2; d++) {
    jx_array *kp = with_halo(kappa, d, d ? axis_y(s) : axis_x(s), d ? s->py : s->px);
    int64_t m = jx_shape_of(kp).dims[d];
    jx_array *kf = jx_mul(jx_add(slice_dim(kp, d, 0, m - 1), slice_dim(kp, d, 1, m)), half);
    k[2 * d] = slice_dim(kf, d, 0, m - 2);
    k[2 * d + 1] = slice_dim(kf, d, 1, m - 1);
  }
}

/* The net flux into each cell along dim d of u [B,nl,ml]:
 * k_after * (u[i+1] - u[i]) - k_before * (u[i] - u[i-1]), where u[i-1] and
 * u[i+1] past the block's edges are the neighbours' edge layers. */
static jx_array *divergence(jx_array *u, jx_array *k_before, jx_array *k_after, int d,
                            const char *axis, int size) {
  int64_t m = jx_shape_of(u).dims[d];
  jx_array *lo = from_neighbour(slice_dim(u, d, m - 1, m), axis, size, 1);
  jx_array *hi = from_neighbour(slice_dim(u, d, 0, 1), axis, size, 0);
  jx_array *prev = jx_concatenate(2, (jx_array *[]){lo, slice_dim(u, d, 0, m - 1)}, d);
  jx_array *next = jx_concatenate(2, (jx_array *[]){slice_dim(u, d, 1, m), hi}, d);
  return jx_sub(jx_mul(k_after, jx_sub(next, u)), jx_mul(k_before, jx_sub(u, prev)));
}

/* (u, k...) -> u' : one explicit step */
static void step_body(void *ctx, jx_array *const *in, jx_array **out) {
  const heat_sim *s = ctx;
  jx_array *dx = divergence(in[0], in[1], in[2], 1, axis_x(s), s->px);
  jx_array *dy = divergence(in[0], in[3], in[4], 2, axis_y(s), s->py);
  out[0] = jx_add(in[0], jx_mul(jx_scalar(JX_F64, s->c.r), jx_add(dx, dy)));
}

/* scan body: (u, k...) -> (u', k...); the face values ride along as carries
 * (scan bodies are closed functions) */
static void inner_body(void *ctx, jx_array *const *in, jx_array **out) {
  const heat_sim *s = ctx;
  if (jx_call(s->step_ck, in, out)) return;
  for (int i = 1; i < NCARRY; i++) out[i] = in[i];
}

/* scan body: (u, k...) -> (u after c.steps steps, k..., that u as a y) */
static void outer_body(void *ctx, jx_array *const *in, jx_array **out) {
  const heat_sim *s = ctx;
  if (jx_scan(s->inner_body, NCARRY, in, 0, NULL, s->c.steps, 0, out)) return;
  out[NCARRY] = out[0];
}

static jx_array *simulate(const heat_sim *s, jx_array *u0, jx_array *kappa) {
  jx_array *carry[NCARRY], *out[NCARRY + 1];
  carry[0] = u0;
  faces(s, kappa, carry + 1);
  if (jx_scan(s->outer_body, NCARRY, carry, 0, NULL, s->c.nobs, 0, out)) return out[0];
  return out[NCARRY];
}

/* (u0, kappa) -> snapshots */
static void rollout_body(void *ctx, jx_array *const *in, jx_array **out) {
  out[0] = simulate(ctx, in[0], in[1]);
}

/* (a, phi, u0, obs) -> mean squared mismatch */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  const heat_sim *s = ctx;
  jx_array *kappa = heat_kappa(&s->c, in[0], in[1]); /* this device's block of it */
  jx_array *sse = jx_sum(jx_square(jx_sub(simulate(s, in[2], kappa), in[3])), JX_AXES(), 0);
  if (s->px) sse = jx_psum(sse, "x,y");
  double count = (double)s->c.nobs * s->c.batch * s->c.n * s->c.n;
  out[0] = jx_div(sse, jx_scalar(JX_F64, count));
}

/* ---- the simulator ---- */

heat_sim *heat_sim_create(const heat_config *c, int devices) {
  if (!c || c->n < 2 || c->batch < 1 || c->steps < 1 || c->nobs < 1 || c->bumps < 1) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "heat_sim_create: bad configuration (n %d >= 2; batch %d, steps %d, nobs %d, "
                    "bumps %d >= 1)",
                    c ? c->n : 0, c ? c->batch : 0, c ? c->steps : 0, c ? c->nobs : 0,
                    c ? c->bumps : 0);
    return NULL;
  }
  if (devices < 0 || devices > MAX_DEVICES) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "heat_sim_create: %d devices (0 to %d)", devices,
                    MAX_DEVICES);
    return NULL;
  }
  heat_sim *s = calloc(1, sizeof *s);
  if (!s) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "heat_sim_create: out of memory");
    return NULL;
  }
  s->c = *c;
  if (devices > 0) {
    s->py = 1;
    for (int d = 1; d * d <= devices; d++)
      if (devices % d == 0) s->py = d;
    s->px = devices / s->py;
    if (c->n % s->px || c->n % s->py) {
      jx_report_error(JX_ERR_INVALID_ARGUMENT,
                      "heat_sim_create: a %dx%d grid does not split over a %dx%d mesh", c->n, c->n,
                      s->px, s->py);
      free(s);
      return NULL;
    }
    s->mesh = jx_mesh_create(JX_SHAPE(s->px, s->py), (const char *[]){"x", "y"});
  }
  s->step = jx_fn_create("heat_step", NCARRY, 1, step_body, s);
  s->step_ck = jx_checkpoint(s->step);
  s->inner_body = jx_fn_create("heat_steps", NCARRY, NCARRY, inner_body, s);
  s->outer_body = jx_fn_create("heat_observe", NCARRY, NCARRY + 1, outer_body, s);
  s->rollout_local = jx_fn_create("heat_rollout", 2, 1, rollout_body, s);
  s->loss_local = jx_fn_create("heat_loss", 4, 1, loss_body, s);
  if (s->mesh) {
    s->rollout = jx_shard_map(s->rollout_local, s->mesh, (const char *[]){"None,x,y", "x,y"},
                              (const char *[]){"None,None,x,y"});
    s->loss = jx_shard_map(s->loss_local, s->mesh,
                           (const char *[]){"", "None,x,y", "None,x,y", "None,None,x,y"},
                           (const char *[]){""});
  } else {
    s->rollout = s->rollout_local;
    s->loss = s->loss_local;
  }
  if (s->rollout && s->loss) s->vg = jx_value_and_grad(s->loss, JX_AXES(0), 0);
  if (s->vg) s->vg_jit = jx_jit(s->vg, NULL);
  if (!s->vg_jit || jx_last_status()) {
    heat_sim_release(s);
    return NULL;
  }
  return s;
}

void heat_sim_release(heat_sim *s) {
  if (!s) return;
  jx_fn *fns[] = {s->vg_jit,     s->vg,         s->step,          s->step_ck,
                  s->inner_body, s->outer_body, s->rollout_local, s->loss_local};
  for (size_t i = 0; i < sizeof fns / sizeof *fns; i++)
    if (fns[i]) jx_fn_release(fns[i]);
  if (s->mesh) {
    if (s->rollout) jx_fn_release(s->rollout);
    if (s->loss) jx_fn_release(s->loss);
    jx_mesh_release(s->mesh);
  }
  free(s);
}

int heat_sim_mesh_shape(const heat_sim *s, int *px, int *py) {
  *px = s->px;
  *py = s->py;
  return s->px != 0;
}

jx_fn *heat_rollout_fn(heat_sim *s) { return s->rollout; }
jx_fn *heat_loss_fn(heat_sim *s) { return s->loss; }
jx_fn *heat_value_and_grad_fn(heat_sim *s) { return s->vg_jit; }

/* ---- host-side helpers ---- */

jx_array *heat_basis(const heat_config *c, jx_dtype dt) {
  int n = c->n, nb = c->bumps * c->bumps;
  double *phi = malloc(sizeof *phi * (size_t)nb * (size_t)n * (size_t)n);
  if (!phi) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "heat_basis: out of memory");
    return jx_zeros(dt, JX_SHAPE(nb, n, n));
  }
  for (int b = 0; b < nb; b++) {
    double cx = (b / c->bumps + 0.5) / c->bumps, cy = (b % c->bumps + 0.5) / c->bumps;
    for (int i = 0; i < n; i++)
      for (int j = 0; j < n; j++) {
        double x = (i + 0.5) / n - cx, y = (j + 0.5) / n - cy;
        phi[((size_t)b * n + i) * n + j] = exp(-(x * x + y * y) / (2 * c->width * c->width));
      }
  }
  jx_array *a = jx_astype(jx_array_from(JX_F64, JX_SHAPE(nb, n, n), phi), dt);
  free(phi);
  return a;
}

jx_array *heat_kappa(const heat_config *c, jx_array *a, jx_array *phi) {
  return jx_add(jx_einsum("b,bij->ij", 2, (jx_array *[]){a, phi}), jx_scalar(JX_F64, c->k0));
}

jx_array *heat_initial(const heat_config *c, jx_dtype dt, uint32_t seed) {
  enum { MODES = 4 };
  int n = c->n;
  double *sines = malloc(sizeof *sines * MODES * (size_t)n);
  if (!sines) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "heat_initial: out of memory");
    return jx_zeros(dt, JX_SHAPE(c->batch, n, n));
  }
  /* sin(p pi x) / p: smooth, zero on the boundary */
  for (int p = 0; p < MODES; p++)
    for (int i = 0; i < n; i++) sines[p * n + i] = sin((p + 1) * PI * (i + 0.5) / n) / (p + 1);
  jx_array *s = jx_array_from(JX_F64, JX_SHAPE(MODES, n), sines);
  free(sines);
  jx_array *coef = jx_random_normal(jx_random_key(seed), JX_F64, JX_SHAPE(c->batch, MODES, MODES));
  return jx_astype(jx_einsum("bpq,pi,qj->bij", 3, (jx_array *[]){coef, s, s}), dt);
}

/* ||a - b|| / ||b|| */
static double rel_error(jx_array *a, jx_array *b) {
  jx_array *d = jx_sum(jx_square(jx_sub(a, b)), JX_AXES(), 0);
  return sqrt(jx_item(d) / jx_item(jx_sum(jx_square(b), JX_AXES(), 0)));
}

jx_status heat_fit(heat_sim *s, jx_array *phi, jx_array *u0, jx_array *obs, jx_array *a0,
                   jx_array *a_true, int iters, double lr, heat_progress_fn progress, void *ctx,
                   jx_array **a_out) {
  *a_out = NULL;
  jx_tree *params = jx_tree_create();
  jx_tree_set(params, "a", a0);
  jx_optimizer *opt = jx_optim_adam(lr, 0.9, 0.999, 1e-8);
  jx_tree *state = jx_optim_init(opt, params);
  jx_status st = jx_last_status();
  jx_array *kappa_true = NULL;
  if (a_true && !st) kappa_true = jx_keep(heat_kappa(&s->c, a_true, phi));
  for (int k = 0; k <= iters && !st; k++) {
    jx_scope_begin();
    jx_array *a = jx_tree_get(params, "a"), *out[2];
    st = jx_call(s->vg_jit, (jx_array *[]){a, phi, u0, obs}, out);
    heat_progress p = {k, st ? NAN : jx_item(out[0]), NAN, NAN};
    if (!st && a_true) {
      p.param_error = rel_error(a, a_true);
      p.kappa_error = rel_error(heat_kappa(&s->c, a, phi), kappa_true);
    }
    if (!st && progress) progress(ctx, &p);
    if (!st && k < iters) {
      jx_tree *grads = jx_tree_create();
      jx_tree_set(grads, "a", out[1]);
      jx_optim_update(opt, grads, state, params);
      jx_tree_release(grads);
    }
    st = st ? st : jx_last_status();
    jx_scope_end();
  }
  if (!st) *a_out = jx_keep(jx_tree_get(params, "a"));
  if (kappa_true) jx_release(kappa_true);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(opt);
  return st;
}
