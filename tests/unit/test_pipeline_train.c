/* jx_pipeline_value_and_grad: the loss and the gradients of training through
 * a pipeline with the loss inside it equal jx_value_and_grad of the loss
 * after the stages run one after another on one device (the oracle), for
 * GPipe, 1F1B and interleaved 1F1B, 2 and 4 stages, 1 to 8 microbatches
 * (2 and 3 virtual stages for interleaved), with and without
 * per-stage recomputation, eagerly and under jx_jit, alone and with a data
 * axis; the schedule tables' figures (ticks, bubble, stashed microbatches)
 * are the textbook ones; 1F1B's measured peak memory on the first stage is
 * under 0.6 of GPipe's for 8 microbatches; bad input gets errors naming
 * the numbers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jx/jx.h>

#include "parallel/pipeline_schedule.h"
#include "test_util.h"
#include "test_close.h"
#define PIPELINE_ORACLE_CHECK(expr) check_ok(expr)
#include "pipeline_oracle.h"

enum { BATCH = 16, D = 4, H = 6 };

/* One stage: x + tanh(x @ w1 + b1) @ w2, with w1 [D, H], b1 [H], w2 [H, D]. */
static void mlp_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_add(jx_matmul(in[3], in[0]), in[1]));
  out[0] = jx_add(in[3], jx_matmul(h, in[2]));
}

/* mean((y - t)^2 * c) with a fixed c, so that every column counts differently. */
static void mse_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *e = jx_sub(in[0], in[1]);
  jx_array *c = jx_astype(val(JX_SHAPE(D), 2.3), JX_F32);
  out[0] = jx_mean(jx_mul(jx_mul(e, e), c), JX_AXES(), 0);
}

static void inputs(int nstages, int64_t batch, jx_array **in) {
  in[0] = jx_astype(jx_mul(val(JX_SHAPE(nstages, D, H), 0.7), jx_scalar(JX_F64, 0.6)), JX_F32);
  in[1] = jx_astype(jx_mul(val(JX_SHAPE(nstages, H), 1.1), jx_scalar(JX_F64, 0.2)), JX_F32);
  in[2] = jx_astype(jx_mul(val(JX_SHAPE(nstages, H, D), 1.9), jx_scalar(JX_F64, 0.6)), JX_F32);
  in[3] = jx_astype(val(JX_SHAPE(batch, D), 0.3), JX_F32);
  in[4] = jx_astype(val(JX_SHAPE(batch, D), 1.3), JX_F32);
}

/* The pipeline on mesh (its stage axis "stage") against the sequence: the
 * loss and the three gradients, eagerly and (when jit) under jx_jit. */
static void check_matches_sequence(jx_mesh *mesh, int nstages, int microbatches,
                                   jx_pipeline_schedule schedule,
                                   const jx_pipeline_train_options *o, int jit) {
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  jx_fn *pipe = jx_pipeline_value_and_grad(stage, loss, mesh, "stage", microbatches, schedule, o);
  if (!pipe) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(pipe);
  sequence seq = {stage, loss, nstages};
  jx_fn *lseq = jx_fn_create("sequence_loss", 5, 1, sequence_loss, &seq);
  jx_fn *vg = jx_value_and_grad(lseq, JX_AXES(0, 1, 2), 0);
  jx_array *in[5], *want[4], *got[4];
  inputs(nstages, BATCH, in);
  check_ok(jx_call(vg, in, want));
  check_ok(jx_call(pipe, in, got));
  for (int k = 0; k < 4; k++) assert_close(got[k], want[k], 1e-5);
  if (jit) {
    jx_fn *jpipe = jx_jit(pipe, NULL);
    check_ok(jx_call(jpipe, in, got));
    for (int k = 0; k < 4; k++) assert_close(got[k], want[k], 1e-5);
    jx_fn_release(jpipe);
  }
  /* the oracle is not trivially satisfied: every gradient has nonzero entries */
  for (int k = 1; k < 4; k++) {
    double norm = 0;
    check_ok(jx_read(jx_astype(jx_sum(jx_abs(want[k]), JX_AXES(), 0), JX_F64), &norm, sizeof norm));
    assert_true(norm > 1e-3);
  }
  jx_fn_release(vg);
  jx_fn_release(lseq);
  jx_fn_release(pipe);
  jx_fn_release(loss);
  jx_fn_release(stage);
}

static void stages(int nstages, jx_pipeline_schedule schedule, int remat) {
  jx_mesh *m = jx_mesh_create(JX_SHAPE(nstages), (const char *const[]){"stage"});
  jx_pipeline_train_options o = {.remat = remat};
  for (int mb = 1; mb <= 8; mb *= 2)
    if (schedule != JX_PIPELINE_1F1B || mb >= nstages)
      check_matches_sequence(m, nstages, mb, schedule, &o, mb == 4);
  jx_mesh_release(m);
}

static void gpipe_two_stages(void **state) {
  (void)state;
  stages(2, JX_PIPELINE_GPIPE, 0);
}

static void gpipe_four_stages(void **state) {
  (void)state;
  stages(4, JX_PIPELINE_GPIPE, 0);
}

static void one_f_one_b_two_stages(void **state) {
  (void)state;
  stages(2, JX_PIPELINE_1F1B, 0);
}

static void one_f_one_b_four_stages(void **state) {
  (void)state;
  stages(4, JX_PIPELINE_1F1B, 0);
}

/* Each stage keeps only its input and recomputes its forward backward. */
static void remat_stages(void **state) {
  (void)state;
  stages(2, JX_PIPELINE_1F1B, 1);
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), (const char *const[]){"stage"});
  jx_pipeline_train_options o = {.remat = 1};
  check_matches_sequence(m, 4, 4, JX_PIPELINE_GPIPE, &o, 0);
  jx_mesh_release(m);
}

/* Interleaved 1F1B: 2 virtual stages per device, the parameters stacked
 * for every global stage (the oracle runs 2 S stages in sequence). */
static void interleaved(void **state) {
  (void)state;
  jx_pipeline_train_options o = {.virtual_stages = 2};
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  for (int mb = 2; mb <= 8; mb *= 2)
    check_matches_sequence(m, 4, mb, JX_PIPELINE_INTERLEAVED, &o, mb == 4);
  jx_mesh_release(m);
  m = jx_mesh_create(JX_SHAPE(4), (const char *const[]){"stage"});
  check_matches_sequence(m, 8, 4, JX_PIPELINE_INTERLEAVED, &o, 0);
  o.remat = 1;
  check_matches_sequence(m, 8, 4, JX_PIPELINE_INTERLEAVED, &o, 0);
  jx_mesh_release(m);
  m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "stage"});
  o = (jx_pipeline_train_options){.virtual_stages = 3, .batch_spec = "data"};
  check_matches_sequence(m, 6, 2, JX_PIPELINE_INTERLEAVED, &o, 0);
  jx_mesh_release(m);
}

/* Overlap: the tables never read at a tick what arrives at it (so the
 * executor files arrivals after the tick's action, their ppermutes in
 * flight meanwhile), for a tick more per hop (GPipe's and 1F1B's bubble
 * 2 (S - 1) / (M + 2 (S - 1))); the results are the same. */
static void overlapped(void **state) {
  (void)state;
  static const struct {
    jx_pipeline_schedule schedule;
    int S, V, M;
  } cases[] = {{JX_PIPELINE_GPIPE, 4, 1, 8},
               {JX_PIPELINE_1F1B, 4, 1, 8},
               {JX_PIPELINE_INTERLEAVED, 2, 2, 4}};
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
    int S = cases[c].S;
    pipe_table plain, t;
    check_ok(pipe_table_build(cases[c].schedule, S, cases[c].V, cases[c].M, &plain));
    check_ok(pipe_table_build_overlapped(cases[c].schedule, S, cases[c].V, cases[c].M, 1, &t));
    assert_int_equal(t.busy_ticks, plain.busy_ticks);
    assert_true(t.nticks > plain.nticks);
    if (cases[c].V == 1) { /* a hop takes two ticks: the bubble is 2 (S - 1) / (M + 2 (S - 1)) */
      double hops = 2.0 * (S - 1), bubble = 1.0 - (double)t.busy_ticks / ((double)t.nticks * S);
      assert_true(fabs(bubble - hops / (cases[c].M + hops)) < 1e-12);
    }
    int same_tick_reads = 0, plain_same_tick_reads = 0;
    for (int k = 0; k < t.nticks * S; k++) {
      const pipe_step *p = &t.steps[k];
      same_tick_reads += (p->kind == PIPE_FORWARD || p->kind == PIPE_FORWARD_BACKWARD) &&
                         p->act_slot == p->recv_act_slot && p->act_slot < t.act_slots;
      same_tick_reads +=
          p->kind == PIPE_BACKWARD && p->cot_slot == p->recv_cot_slot && p->cot_slot < t.cot_slots;
    }
    for (int k = 0; k < plain.nticks * S; k++) {
      const pipe_step *p = &plain.steps[k];
      plain_same_tick_reads += (p->kind == PIPE_FORWARD || p->kind == PIPE_FORWARD_BACKWARD) &&
                               p->act_slot == p->recv_act_slot && p->act_slot < plain.act_slots;
    }
    assert_int_equal(same_tick_reads, 0);
    assert_true(plain_same_tick_reads > 0); /* without overlap they do */
    pipe_table_free(&plain);
    pipe_table_free(&t);
  }
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), (const char *const[]){"stage"});
  jx_pipeline_train_options o = {.overlap = 1};
  check_matches_sequence(m, 4, 8, JX_PIPELINE_GPIPE, &o, 0);
  check_matches_sequence(m, 4, 4, JX_PIPELINE_1F1B, &o, 1);
  jx_mesh_release(m);
  m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  o.virtual_stages = 2;
  check_matches_sequence(m, 4, 4, JX_PIPELINE_INTERLEAVED, &o, 0);
  jx_mesh_release(m);
}

/* One stage: forward, loss and backward of each microbatch in turn. */
static void one_stage(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(1), (const char *const[]){"stage"});
  check_matches_sequence(m, 1, 2, JX_PIPELINE_1F1B, NULL, 0);
  jx_mesh_release(m);
}

/* Data parallelism inside the pipeline: the batch and the targets split over
 * "data"; the loss and the gradients are averaged over it. */
static void batch_split_over_data(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2, 2), (const char *const[]){"data", "stage"});
  jx_pipeline_train_options o = {.batch_spec = "data"};
  check_matches_sequence(m, 2, 4, JX_PIPELINE_1F1B, &o, 1);
  check_matches_sequence(m, 2, 2, JX_PIPELINE_GPIPE, &o, 0);
  check_matches_sequence(m, 2, 2, JX_PIPELINE_1F1B, NULL, 0); /* replicated over data */
  jx_mesh_release(m);
}

/* ---- an embedding on the first stage, a head tied to it on the last ---- */
enum { VOCAB = 10 };

/* (E [VOCAB, D], hb [VOCAB], tokens) -> E[tokens] */
static void embed(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_take(in[0], in[2], 0);
}

/* (E, hb, y, labels) -> mean cross-entropy of y @ E^T + hb */
static void tied_head_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *logits = jx_add(jx_matmul(in[2], jx_transpose(in[0], JX_AXES())), in[1]);
  out[0] = jx_mean(jx_softmax_cross_entropy(logits, in[3], 0), JX_AXES(), 0);
}

typedef struct {
  jx_fn *stage, *embed, *loss;
  int nstages;
} language_model;

/* (W1, B1, W2, E, hb, tokens, labels) -> the loss, stage by stage: the oracle */
static void language_model_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const language_model *m = ctx;
  jx_array *x = NULL;
  check_ok(jx_call(m->embed, (jx_array *[]){in[3], in[4], in[5]}, &x));
  for (int s = 0; s < m->nstages; s++) {
    jx_array *args[4] = {stage_slice(in[0], s), stage_slice(in[1], s), stage_slice(in[2], s), x};
    check_ok(jx_call(m->stage, args, &x));
  }
  check_ok(jx_call(m->loss, (jx_array *[]){in[3], in[4], x, in[6]}, out));
}

static void check_language_model(int nstages, int microbatches, jx_pipeline_schedule schedule,
                                 int remat, int virtual_stages) {
  int V = virtual_stages > 1 ? virtual_stages : 1;
  jx_mesh *mesh = jx_mesh_create(JX_SHAPE(nstages / V), (const char *const[]){"stage"});
  language_model m = {jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL),
                      jx_fn_create("embed", 3, 1, embed, NULL),
                      jx_fn_create("tied_head_loss", 4, 1, tied_head_loss, NULL), nstages};
  jx_pipeline_train_options o = {.first = m.embed, .remat = remat, .virtual_stages = V};
  jx_fn *pipe =
      jx_pipeline_value_and_grad(m.stage, m.loss, mesh, "stage", microbatches, schedule, &o);
  assert_non_null(pipe);
  jx_fn *lseq = jx_fn_create("language_model_loss", 7, 1, language_model_loss, &m);
  jx_fn *vg = jx_value_and_grad(lseq, JX_AXES(0, 1, 2, 3, 4), 0);
  jx_array *in[7], *want[6], *got[6];
  inputs(nstages, BATCH, in);
  in[3] = jx_astype(jx_mul(val(JX_SHAPE(VOCAB, D), 2.1), jx_scalar(JX_F64, 0.5)), JX_F32);
  in[4] = jx_astype(jx_mul(val(JX_SHAPE(VOCAB), 0.4), jx_scalar(JX_F64, 0.1)), JX_F32);
  int32_t tokens[BATCH], labels[BATCH];
  for (int i = 0; i < BATCH; i++) tokens[i] = (7 * i + 3) % VOCAB, labels[i] = (5 * i + 1) % VOCAB;
  in[5] = jx_array_from(JX_I32, JX_SHAPE(BATCH), tokens);
  in[6] = jx_array_from(JX_I32, JX_SHAPE(BATCH), labels);
  check_ok(jx_call(vg, in, want));
  check_ok(jx_call(pipe, in, got));
  for (int k = 0; k < 6; k++) assert_close(got[k], want[k], 1e-5);
  jx_fn_release(vg);
  jx_fn_release(lseq);
  jx_fn_release(pipe);
  jx_fn_release(m.loss);
  jx_fn_release(m.embed);
  jx_fn_release(m.stage);
  jx_mesh_release(mesh);
}

/* The embedding's gradient sums the first stage's and the tied head's. */
static void embedding_and_tied_head(void **state) {
  (void)state;
  check_language_model(1, 2, JX_PIPELINE_GPIPE, 0, 1);
  check_language_model(2, 4, JX_PIPELINE_1F1B, 0, 1);
  check_language_model(4, 4, JX_PIPELINE_1F1B, 0, 1);
  check_language_model(4, 2, JX_PIPELINE_GPIPE, 1, 1);
  check_language_model(4, 2, JX_PIPELINE_INTERLEAVED, 0, 2); /* 2 devices x 2 */
}

/* The tables: 2 (M + S - 1) ticks, the bubble (S - 1) / (M + S - 1), and the
 * residuals a stage holds: every microbatch's for GPipe, at most S for 1F1B;
 * interleaved's as Megatron's. */
static void schedule_tables(void **state) {
  (void)state;
  for (int S = 1; S <= 4; S *= 2)
    for (int M = S; M <= 8; M *= 2) {
      jx_pipeline_stats g, f;
      check_ok(jx_pipeline_schedule_stats(JX_PIPELINE_GPIPE, S, 1, M, &g));
      check_ok(jx_pipeline_schedule_stats(JX_PIPELINE_1F1B, S, 1, M, &f));
      double bubble = (double)(S - 1) / (M + S - 1);
      assert_int_equal(g.ticks, 2 * (M + S - 1));
      assert_int_equal(f.ticks, 2 * (M + S - 1));
      assert_true(fabs(g.bubble_fraction - bubble) < 1e-12);
      assert_true(fabs(f.bubble_fraction - bubble) < 1e-12);
      assert_int_equal(g.most_stashed, S > 1 ? M : 0);
      assert_int_equal(f.most_stashed, S > 1 ? S : 0);
    }
  /* interleaved: the bubble shrinks to (S - 1) / (V M + S - 1); device 0
   * stashes (S - 1) 2 + (V - 1) S + 1 chunks' residuals, as Megatron's */
  for (int S = 2; S <= 4; S *= 2)
    for (int V = 2; V <= 4; V *= 2)
      for (int M = S; M <= 8; M *= 2) {
        jx_pipeline_stats i;
        check_ok(jx_pipeline_schedule_stats(JX_PIPELINE_INTERLEAVED, S, V, M, &i));
        assert_int_equal(i.ticks, 2 * (V * M + S - 1));
        assert_true(fabs(i.bubble_fraction - (double)(S - 1) / (V * M + S - 1)) < 1e-12);
        int warm = (S - 1) * 2 + (V - 1) * S + 1;
        assert_int_equal(i.most_stashed, warm < M * V ? warm : M * V);
      }
}

/* The peak of live memory on the first stage's device while it trains on 8
 * microbatches of wide activations: 1F1B keeps 2 microbatches' residuals
 * there, GPipe all 8. */
enum { WIDE = 256, ROWS = 64 };

static void wide_stage(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *h = jx_tanh(jx_matmul(in[1], in[0]));
  out[0] = jx_add(in[1], jx_sum(h, JX_AXES(1), 1));
}

static int64_t first_stage_peak(jx_pipeline_schedule schedule) {
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("wide_stage", 2, 1, wide_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  jx_fn *pipe = jx_pipeline_value_and_grad(stage, loss, m, "stage", 8, schedule, NULL);
  jx_sharding *by_stage = jx_sharding_create(m, "stage");
  jx_array *w = jx_device_put(jx_astype(val(JX_SHAPE(2, D, WIDE), 0.1), JX_F32), by_stage);
  jx_array *x = jx_astype(val(JX_SHAPE(8 * ROWS, D), 0.3), JX_F32);
  jx_array *t = jx_astype(val(JX_SHAPE(8 * ROWS, D), 1.3), JX_F32), *out[2];
  double peak = pipeline_second_call_peak(pipe, (jx_array *[]){w, x, t}, out);
  jx_sharding_release(by_stage);
  jx_fn_release(pipe);
  jx_fn_release(loss);
  jx_fn_release(stage);
  jx_mesh_release(m);
  return (int64_t)peak;
}

static void one_f_one_b_holds_less(void **state) {
  (void)state;
  int64_t gpipe = first_stage_peak(JX_PIPELINE_GPIPE), ofob = first_stage_peak(JX_PIPELINE_1F1B);
  int64_t residual = ROWS * WIDE * 4; /* one microbatch's tanh output, f32 */
  fprintf(stderr,
          "first stage's peak: GPipe %lld bytes, 1F1B %lld (one microbatch's residual: %lld)\n",
          (long long)gpipe, (long long)ofob, (long long)residual);
  assert_true(gpipe >= 8 * residual);
  assert_true(ofob <= 0.6 * gpipe);
}

/* ---- bad input ---- */
static void one_f_one_b_needs_microbatches(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(4), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  assert_null(jx_pipeline_value_and_grad(stage, loss, m, "stage", 2, JX_PIPELINE_1F1B, NULL));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "test_pipeline_train.c"));
  assert_error_has("1F1B needs at least as many microbatches as stages (as PyTorch's "
                   "Schedule1F1B); got 2 microbatches for 4 stages");
  assert_null(
      jx_pipeline_value_and_grad(stage, loss, m, "stage", 4, JX_PIPELINE_INTERLEAVED, NULL));
  assert_int_equal(jx_last_status(), JX_ERR_INVALID_ARGUMENT);
  assert_error_has("interleaved 1F1B needs at least 2 stages, at least 2 virtual stages each and "
                   "microbatches a multiple of the stages (as Megatron's and PyTorch's "
                   "ScheduleInterleaved1F1B); got 4 microbatches, 4 stages, 1 virtual stages");
  jx_pipeline_train_options virt = {.virtual_stages = 2};
  assert_null(
      jx_pipeline_value_and_grad(stage, loss, m, "stage", 6, JX_PIPELINE_INTERLEAVED, &virt));
  assert_error_has("got 6 microbatches, 4 stages, 2 virtual stages");
  assert_null(jx_pipeline_value_and_grad(stage, loss, m, "stage", 4, JX_PIPELINE_1F1B, &virt));
  assert_error_has("2 virtual stages need JX_PIPELINE_INTERLEAVED");
  assert_null(jx_pipeline_value_and_grad(stage, loss, m, "stage", 0, JX_PIPELINE_GPIPE, NULL));
  assert_error_has("4 stages and 0 microbatches");
  jx_fn *one_input = jx_fn_create("one_input", 1, 1, mlp_stage, NULL);
  assert_null(jx_pipeline_value_and_grad(stage, one_input, m, "stage", 4, JX_PIPELINE_GPIPE, NULL));
  assert_error_has("the loss 'one_input' takes 1 inputs and gives 1 outputs; it must take (outer "
                   "params..., the last stage's output, targets)");
  jx_fn_release(one_input);
  assert_null(jx_pipeline_value_and_grad(stage, loss, m, "pipe", 4, JX_PIPELINE_GPIPE, NULL));
  assert_error_has("the mesh (stage=4) has no stage axis 'pipe'");
  jx_pipeline_stats s;
  assert_int_equal(jx_pipeline_schedule_stats(JX_PIPELINE_1F1B, 4, 1, 3, &s),
                   JX_ERR_INVALID_ARGUMENT);
  assert_error_has("got 3 microbatches for 4 stages");
  jx_fn_release(loss);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

static void sum_loss(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  out[0] = jx_sum(jx_sub(in[0], in[1]), JX_AXES(0), 0);
}

static void shapes_checked(void **state) {
  (void)state;
  jx_mesh *m = jx_mesh_create(JX_SHAPE(2), (const char *const[]){"stage"});
  jx_fn *stage = jx_fn_create("mlp_stage", 4, 1, mlp_stage, NULL);
  jx_fn *loss = jx_fn_create("mse_loss", 2, 1, mse_loss, NULL);
  jx_fn *pipe = jx_pipeline_value_and_grad(stage, loss, m, "stage", 4, JX_PIPELINE_1F1B, NULL);
  jx_array *in[5], *out[4];
  inputs(2, 6, in);
  assert_int_equal(jx_call(pipe, in, out), JX_ERR_SHAPE);
  assert_error_has("the batch is f32[6,4]; its leading dim 6 is not divisible into 4 microbatches");
  inputs(2, BATCH, in);
  in[4] = jx_zeros(JX_F32, JX_SHAPE(8, D));
  assert_int_equal(jx_call(pipe, in, out), JX_ERR_SHAPE);
  assert_error_has(
      "the targets are f32[8,4] and the batch f32[16,4]; their leading dims must agree");
  inputs(3, BATCH, in);
  assert_int_equal(jx_call(pipe, in, out), JX_ERR_SHAPE);
  assert_error_has("parameter 0 is f32[3,4,6]; its leading dim must be the 2 stages of mesh axis "
                   "'stage'");
  jx_fn *vector_loss = jx_fn_create("sum_loss", 2, 1, sum_loss, NULL);
  jx_fn *bad =
      jx_pipeline_value_and_grad(stage, vector_loss, m, "stage", 4, JX_PIPELINE_1F1B, NULL);
  inputs(2, BATCH, in);
  assert_int_not_equal(jx_call(bad, in, out), JX_OK);
  assert_error_has("the loss 'sum_loss' gives f32[4]; it must give a float scalar");
  jx_fn_release(bad);
  jx_fn_release(vector_loss);
  jx_fn_release(pipe);
  jx_fn_release(loss);
  jx_fn_release(stage);
  jx_mesh_release(m);
}

int main(void) {
  jx_set_cpu_device_count(4);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(gpipe_two_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(gpipe_four_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(one_f_one_b_two_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(one_f_one_b_four_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(remat_stages, setup, teardown),
      cmocka_unit_test_setup_teardown(interleaved, setup, teardown),
      cmocka_unit_test_setup_teardown(overlapped, setup, teardown),
      cmocka_unit_test_setup_teardown(one_stage, setup, teardown),
      cmocka_unit_test_setup_teardown(batch_split_over_data, setup, teardown),
      cmocka_unit_test_setup_teardown(embedding_and_tied_head, setup, teardown),
      cmocka_unit_test_setup_teardown(schedule_tables, setup, teardown),
      cmocka_unit_test_setup_teardown(one_f_one_b_holds_less, setup, teardown),
      cmocka_unit_test_setup_teardown(one_f_one_b_needs_microbatches, setup, teardown),
      cmocka_unit_test_setup_teardown(shapes_checked, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
