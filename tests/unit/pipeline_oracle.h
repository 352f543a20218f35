/* The oracle of the pipeline tests: a pipeline's stages, each with its own
 * entry of stacked parameters (W1, B1, W2), run one after another on one
 * device, then the loss. The includer defines PIPELINE_ORACLE_CHECK(expr)
 * first: how a failed call fails its test (cmocka's check_ok, the MPI
 * tests' CHECK). */
#ifndef JX_TESTS_PIPELINE_ORACLE_H
#define JX_TESTS_PIPELINE_ORACLE_H

#include <jx/jx.h>

/* Stage s's own parameter: entry s of the stacked one. */
static inline jx_array *stage_slice(jx_array *stacked, int s) {
  jx_shape start = jx_shape_of(stacked), stop = start;
  for (int d = 0; d < start.rank; d++) start.dims[d] = 0;
  start.dims[0] = s;
  stop.dims[0] = s + 1;
  return jx_squeeze(jx_slice(stacked, start, stop, JX_SHAPE()), JX_AXES(0));
}

typedef struct {
  jx_fn *stage, *loss;
  int nstages;
} sequence;

/* (W1, B1, W2, x, t) -> loss(stage_{S-1}(... stage_0(x)), t) */
static inline void sequence_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const sequence *q = ctx;
  jx_array *x = in[3];
  for (int s = 0; s < q->nstages; s++) {
    jx_array *args[4] = {stage_slice(in[0], s), stage_slice(in[1], s), stage_slice(in[2], s), x};
    PIPELINE_ORACLE_CHECK(jx_call(q->stage, args, &x));
  }
  PIPELINE_ORACLE_CHECK(jx_call(q->loss, (jx_array *[]){x, in[4]}, out));
}

/* Device 0's peak bytes above those live before, over a second call of
 * pipe on in (the first traces and warms it up); out[1] is waited for. */
static inline double pipeline_second_call_peak(jx_fn *pipe, jx_array **in, jx_array **out) {
  PIPELINE_ORACLE_CHECK(jx_call(pipe, in, out));
  PIPELINE_ORACLE_CHECK(jx_block_until_ready(out[1]));
  jx_memory_stats before, after;
  PIPELINE_ORACLE_CHECK(jx_memory_stats(0, &before));
  jx_memory_reset_peak(0);
  PIPELINE_ORACLE_CHECK(jx_call(pipe, in, out));
  PIPELINE_ORACLE_CHECK(jx_block_until_ready(out[1]));
  PIPELINE_ORACLE_CHECK(jx_memory_stats(0, &after));
  return (double)(after.peak_bytes - before.live_bytes);
}

#endif
