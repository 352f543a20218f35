/* Learning-rate schedules as in Optax, written with array ops so that the
 * rate at a traced step count is part of the jitted step. Values are f32,
 * as Optax computes them from an i32 count. */
#include <math.h>
#include <stdlib.h>

#include <jx/jx.h>

typedef enum { CONSTANT, LINEAR, WARMUP_COSINE } schedule_kind;

struct jx_schedule {
  schedule_kind kind;
  double init, peak, end;
  int64_t warmup, steps;
};

static jx_schedule *make(jx_schedule s) {
  jx_schedule *p = malloc(sizeof *p);
  if (!p) {
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "out of memory making a schedule");
    return NULL;
  }
  *p = s;
  return p;
}

jx_schedule *jx_schedule_constant(double lr) {
  return make((jx_schedule){.kind = CONSTANT, .init = lr});
}

jx_schedule *jx_schedule_linear(double init, double end, int64_t steps) {
  return make((jx_schedule){.kind = LINEAR, .init = init, .end = end, .steps = steps});
}

jx_schedule *jx_schedule_warmup_cosine(double init, double peak, int64_t warmup,
                                       int64_t decay_steps, double end) {
  if (warmup < 0 || decay_steps < warmup) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT,
                    "jx_schedule_warmup_cosine: need 0 <= warmup (%lld) <= decay_steps (%lld)",
                    (long long)warmup, (long long)decay_steps);
    return NULL;
  }
  return make((jx_schedule){.kind = WARMUP_COSINE,
                            .init = init,
                            .peak = peak,
                            .end = end,
                            .warmup = warmup,
                            .steps = decay_steps});
}

void jx_schedule_release(jx_schedule *s) { free(s); }

static jx_array *f32(double v) { return jx_full(JX_F32, JX_SHAPE(), v); }

/* optax.linear_schedule: (init - end) * (1 - min(count, steps) / steps) + end. */
static jx_array *linear(double init, double end, int64_t steps, jx_array *count) {
  if (steps <= 0) return f32(init);
  jx_array *c = jx_clip(jx_astype(count, JX_F32), 0, (double)steps);
  jx_array *frac = jx_sub(f32(1), jx_div(c, f32((double)steps)));
  return jx_add(jx_mul(f32(init - end), frac), f32(end));
}

/* optax.cosine_decay_schedule(peak, steps, alpha = end / peak). */
static jx_array *cosine(double peak, double end, int64_t steps, jx_array *count) {
  if (steps <= 0) return f32(peak);
  double alpha = peak != 0 ? end / peak : 0;
  jx_array *c = jx_minimum(jx_astype(count, JX_F32), f32((double)steps));
  jx_array *cosv = jx_cos(jx_mul(f32(M_PI), jx_div(c, f32((double)steps))));
  jx_array *decay = jx_mul(f32(0.5), jx_add(f32(1), cosv));
  return jx_mul(f32(peak), jx_add(jx_mul(f32(1 - alpha), decay), f32(alpha)));
}

jx_array *jx_schedule_value(const jx_schedule *s, jx_array *count) {
  if (!s) {
    jx_report_error(JX_ERR_INVALID_ARGUMENT, "jx_schedule_value: the schedule is NULL");
    return jx_scalar(JX_F32, NAN);
  }
  switch (s->kind) {
  case CONSTANT: return f32(s->init);
  case LINEAR: return linear(s->init, s->end, s->steps, count);
  case WARMUP_COSINE: {
    /* optax.join_schedules: the warmup before the boundary, the decay after,
     * counting from the boundary */
    jx_array *up = linear(s->init, s->peak, s->warmup, count);
    jx_array *after = jx_sub(count, jx_full(JX_I32, JX_SHAPE(), (double)s->warmup));
    jx_array *down = cosine(s->peak, s->end, s->steps - s->warmup, after);
    return jx_where(jx_lt(count, jx_full(JX_I32, JX_SHAPE(), (double)s->warmup)), up, down);
  }
  }
  return jx_scalar(JX_F32, NAN);
}
