/* Pipelines across processes: run by tests/mpi/run_mpi_test.sh under
 * `mpirun -np 2` with 2 CPU devices per process. The mesh is
 * stage (the processes) x data (each process's devices), so each process
 * holds one stage and the activations and cotangents cross between the
 * processes by the ppermutes. jx_pipeline_value_and_grad's loss and
 * gradients (gathered from their stages' processes) equal jx_value_and_grad
 * of the stages run one after another on one device, for GPipe, 1F1B and
 * interleaved 1F1B (2 virtual stages: a ring over the processes), with the
 * batch split over data or replicated, eagerly and (1F1B) under jx_jit. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "mpi_check.h"
#define PIPELINE_ORACLE_CHECK(expr) CHECK((expr) == JX_OK)
#include "../unit/pipeline_oracle.h"

enum { BATCH = 16, D = 4, H = 6, M = 4 };

/* x + tanh(x @ w1 + b1) @ w2 */
static void mlp_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[3], in[0]), in[1]));
  out[0] = jx_add(in[3], jx_matmul(h, in[2]));
}

static void mse_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_sub(in[0], in[1]);
  out[0] = jx_mean(jx_mul(e, e), JX_AXES(), 0);
}

static jx_array *values(jx_shape s, uint32_t seed, double scale) {
  return jx_mul(jx_random_normal(jx_random_key(seed), JX_F32, s), jx_scalar(JX_F32, scale));
}

static double max_abs_diff(jx_array *a, jx_array *b) {
  if (jx_is_poisoned(a) || jx_is_poisoned(b)) return INFINITY;
  return jx_item(jx_max(jx_abs(jx_sub(jx_astype(a, JX_F64), jx_astype(b, JX_F64))), JX_AXES(), 0));
}

static void check_schedule(jx_pipeline_schedule schedule, int V, const char *batch_spec,
                           int jit_too) {
  jx_scope_begin();
  int G = P * V;
  jx_mesh *mesh = jx_mesh_create(JX_SHAPE(P, L), (const char *[]){"stage", "data"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  jx_pipeline_train_options o = {.virtual_stages = V, .batch_spec = batch_spec};
  jx_fn *pipe = jx_pipeline_value_and_grad(stage, loss, mesh, "stage", M, schedule, &o);
  CHECK(pipe != NULL);
  sequence q = {stage, loss, G};
  jx_fn *lseq = jx_fn_create("sequence_loss", 5, 1, sequence_loss, &q);
  jx_fn *vg = jx_value_and_grad(lseq, JX_AXES(0, 1, 2), 0);
  jx_array *in[5] = {values(JX_SHAPE(G, D, H), 1, 0.5), values(JX_SHAPE(G, H), 2, 0.3),
                     values(JX_SHAPE(G, H, D), 3, 0.5), values(JX_SHAPE(BATCH, D), 4, 1.0),
                     values(JX_SHAPE(BATCH, D), 5, 1.0)};
  jx_array *want[4], *got[4];
  CHECK(jx_call(vg, in, want) == JX_OK);
  jx_fn *jpipe = jx_jit(pipe, NULL);
  for (int jit = 0; jit <= jit_too; jit++) {
    CHECK(jx_call(jit ? jpipe : pipe, in, got) == JX_OK);
    for (int k = 0; k < 4; k++) {
      /* a gradient's stage blocks live on their stages' processes */
      double diff = max_abs_diff(k ? jx_process_allgather(got[k]) : got[k], want[k]);
      if (!(diff <= 1e-5))
        fprintf(stderr, "process %d: schedule %d, V %d, batch '%s', jit %d: output %d off by %g\n",
                me, (int)schedule, V, batch_spec, jit, k, diff);
      CHECK(diff <= 1e-5);
    }
  }
  CHECK(jx_item(jx_sum(jx_abs(want[1]), JX_AXES(), 0)) > 1e-3); /* not trivially equal */
  jx_fn_release(jpipe);
  jx_fn_release(vg);
  jx_fn_release(lseq);
  jx_fn_release(pipe);
  jx_fn_release(loss);
  jx_fn_release(stage);
  jx_mesh_release(mesh);
  jx_scope_end();
}

int main(void) {
  if (mpi_check_begin()) return 2;
  check_schedule(JX_PIPELINE_GPIPE, 1, "data", 0);
  check_schedule(JX_PIPELINE_1F1B, 1, "data", 1);
  check_schedule(JX_PIPELINE_1F1B, 1, "", 0);
  check_schedule(JX_PIPELINE_INTERLEAVED, 2, "data", 0);
  return mpi_check_end();
}
