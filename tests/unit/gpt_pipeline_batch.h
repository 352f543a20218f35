/* The batch of the GPT pipeline tests: tokens and next-token targets
 * [rows, t] from a fixed sequence of bytes. */
#ifndef JX_TESTS_GPT_PIPELINE_BATCH_H
#define JX_TESTS_GPT_PIPELINE_BATCH_H

#include <stdlib.h>

#include <jx/jx.h>

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

#endif
