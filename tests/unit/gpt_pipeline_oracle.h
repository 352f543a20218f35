/* The oracle of the GPT pipeline tests: the unpipelined model on one
 * device (jx_gpt_loss_fn) on a fixed batch. The includer includes cmocka,
 * test_util.h and test_close.h first. */
#ifndef JX_TESTS_GPT_PIPELINE_ORACLE_H
#define JX_TESTS_GPT_PIPELINE_ORACLE_H

#include <stdlib.h>

#include <jx/jx.h>

/* tokens and next-token targets [rows, t] from a fixed sequence of bytes */
static inline void gpt_pipeline_batch(int64_t rows, int64_t t, jx_array **tokens,
                                      jx_array **targets) {
  int64_t n = rows * t;
  int32_t *tok = malloc(sizeof *tok * (size_t)n), *tgt = malloc(sizeof *tgt * (size_t)n);
  for (int64_t i = 0; tok && tgt && i < n; i++) {
    tok[i] = (int32_t)((37 * i + 11) % 256);
    tgt[i] = (int32_t)((37 * (i + 1) + 11) % 256);
  }
  *tokens = tok ? jx_array_from(JX_I32, JX_SHAPE(rows, t), tok) : NULL;
  *targets = tgt ? jx_array_from(JX_I32, JX_SHAPE(rows, t), tgt) : NULL;
  free(tok);
  free(tgt);
}

/* The loss and gradients of pipe (the GPT c's loss over params' layout,
 * through a pipeline) equal jx_gpt_loss_fn's (1e-5) on the batch [rows,
 * t]: in (np + 2) receives the inputs, want and got (np + 1) the
 * oracle's and pipe's (loss, gradients...). */
static inline void gpt_pipeline_check(const jx_gpt_config *c, const jx_tree *params, jx_fn *pipe,
                                      int64_t rows, int64_t t, jx_array **in, jx_array **want,
                                      jx_array **got) {
  int np = jx_tree_size(params);
  jx_fn *ref = jx_gpt_loss_fn(c, params);
  jx_fn *vg_ref = jx_value_and_grad_first(ref, np, 0), *vg = jx_value_and_grad_first(pipe, np, 0);
  jx_tree_flatten(params, in);
  gpt_pipeline_batch(rows, t, &in[np], &in[np + 1]);
  check_ok(jx_call(vg_ref, in, want));
  check_ok(jx_call(vg, in, got));
  for (int k = 0; k < np + 1; k++) assert_close(got[k], want[k], 1e-5);
  jx_fn_release(vg);
  jx_fn_release(vg_ref);
  jx_fn_release(ref);
}

#endif
