/* Decoding throughput with the KV cache (jx_gpt_generate): the reference
 * GPT (4 layers, d 256, 8 heads) and a GPT-2-small-shaped one (12 layers,
 * d 768, 12 heads, byte vocabulary), batch 1 and 16, a 128-token prompt and
 * 256 new tokens, greedy. Prints JSON lines per case: the median over runs
 * of the decode time per step (median_ns) with decode tokens/s, and the
 * prefill's tokens/s. bench/compare.py --workload generate runs the same
 * decoding in PyTorch and JAX.
 *
 *   bench_generate [runs] [ref|gpt2s|all] [1|16|all] */
#include "bench_util.h"
#include <jx/jx.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { PROMPT = 128, NEW = 256, MAX_RUNS = 100 };

typedef struct {
  const char *name;
  jx_gpt_config cfg;
} model;

static void one_case(const model *m, int64_t batch, int runs) {
  jx_tree *params = jx_gpt_init(&m->cfg, jx_random_key(0), JX_F32);
  int32_t *prompt = malloc(sizeof *prompt * PROMPT);
  const int32_t **prompts = malloc(sizeof *prompts * (size_t)batch);
  int64_t *lengths = malloc(sizeof *lengths * (size_t)batch);
  for (int i = 0; i < PROMPT; i++) prompt[i] = (int32_t)((i * 37 + 11) % 256);
  for (int64_t b = 0; b < batch; b++) {
    prompts[b] = prompt;
    lengths[b] = PROMPT;
  }
  jx_generate_options o = {.max_tokens = NEW}; /* greedy */
  double step_ns[MAX_RUNS + 1], prefill_tps[MAX_RUNS + 1];
  for (int r = 0; r <= runs; r++) { /* run 0 warms the kernel cache */
    jx_generate_stats st;
    if (jx_gpt_generate(&m->cfg, params, batch, prompts, lengths, &o, &st)) {
      fprintf(stderr, "bench_generate: %s\n", jx_last_error());
      exit(1);
    }
    step_ns[r] = st.decode_s * 1e9 / (double)(st.decode_tokens / batch);
    prefill_tps[r] = (double)st.prefill_tokens / st.prefill_s;
  }
  qsort(step_ns + 1, (size_t)runs, sizeof *step_ns, bench_cmp_double);
  qsort(prefill_tps + 1, (size_t)runs, sizeof *prefill_tps, bench_cmp_double);
  double med = step_ns[1 + runs / 2];
  printf("{\"bench\": \"generate_%s_b%lld\", \"impl\": \"jx\", \"median_ns\": %.0f, \"runs\": %d, "
         "\"decode_tokens_per_s\": %.1f, \"prefill_tokens_per_s\": %.1f}\n",
         m->name, (long long)batch, med, runs, (double)batch * 1e9 / med,
         prefill_tps[1 + runs / 2]);
  fflush(stdout);
  free(prompt);
  free(prompts);
  free(lengths);
  jx_tree_release(params);
}

int main(int argc, char **argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 3;
  if (runs < 1) runs = 1;
  if (runs > MAX_RUNS) runs = MAX_RUNS;
  const char *which = argc > 2 ? argv[2] : "all", *batches = argc > 3 ? argv[3] : "all";
  const model models[2] = {
      {"ref",
       {.vocab = 256, .n_layers = 4, .d_model = 256, .n_heads = 8, .context = 384, .mlp_ratio = 4}},
      {"gpt2s",
       {.vocab = 256,
        .n_layers = 12,
        .d_model = 768,
        .n_heads = 12,
        .context = 384,
        .mlp_ratio = 4}},
  };
  const int64_t bs[2] = {1, 16};
  for (int i = 0; i < 2; i++)
    for (int j = 0; j < 2; j++)
      if ((!strcmp(which, "all") || !strcmp(which, models[i].name)) &&
          (!strcmp(batches, "all") || atoll(batches) == bs[j]))
        one_case(&models[i], bs[j], runs);
  jx_shutdown();
  return 0;
}
