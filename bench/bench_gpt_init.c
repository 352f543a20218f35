/* jx_gpt_init of the 8-layer, d 512 GPT (context 256, byte vocabulary):
 * wall time, parameter bytes, the buffers' peak and the process's peak
 * resident set, each also as a multiple of the parameter bytes. One draw
 * per run (the peak RSS is the process's), so run it once per figure. */
#include "bench_util.h"

#include <jx/jx.h>
#include <stdio.h>
#include <sys/resource.h>

int main(void) {
  jx_gpt_config c = jx_gpt_config_default();
  c.vocab = 256;
  c.n_layers = 8;
  c.d_model = 512;
  c.n_heads = 8;
  c.context = 256;
  jx_array *key = jx_random_key(0);
  jx_memory_stats before, after;
  if (jx_memory_stats(0, &before)) return 1;
  jx_memory_reset_peak(0);
  double t0 = bench_now_s();
  jx_tree *t = jx_gpt_init(&c, key, JX_F32);
  double secs = bench_now_s() - t0;
  if (!t || jx_memory_stats(0, &after)) return 1;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  double mib = 1024.0 * 1024.0, params = (double)jx_tree_numel(t) * 4;
  double peak = (double)(after.peak_bytes - before.live_bytes), rss = (double)ru.ru_maxrss * 1024;
  printf("jx_gpt_init 8x512: %.2f s, parameters %.1f MiB, peak buffers %.1f MiB (%.2fx), "
         "peak RSS %.1f MiB (%.2fx)\n",
         secs, params / mib, peak / mib, peak / params, rss / mib, rss / params);
  jx_tree_release(t);
  jx_shutdown();
  return 0;
}
