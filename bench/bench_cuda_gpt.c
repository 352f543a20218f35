/* A GPT-2 124M-shaped train step on a GPU (JX_PLATFORM=cuda, set here
 * unless the environment says otherwise): 12 layers, d 768, 12 heads,
 * context 1024, GPT-2's vocabulary of 50257, batch 8; bf16 compute with f32
 * master weights (jx_gpt_config.compute_dtype), AdamW (3e-4, 0.9, 0.95,
 * 1e-8, 0.1), parameters and optimizer state donated; one jitted step with
 * the forward, backward and update, run on the same batch every step.
 *
 * FLOPs per step (PaLM's appendix B, nanoGPT's estimate_mfu), B*T tokens:
 *   6 * N * B*T  +  12 * L * d * T * B*T
 * N counts every parameter (the head is tied to wte, whose matmul it
 * counts; wpe, norms and biases add < 1 % at 124M); the second term is
 * QK^T and AV forward and backward, counted without the causal half.
 * MFU = FLOPs per step / median step time / peak (--peak-tflops, default
 * 989: an H200's dense bf16 tensor-core rate).
 *
 * Prints progress and each step's loss on stderr and one JSON line on
 * stdout; the loss must start near ln(vocab) (small initial weights) and
 * end below where it started, else the program fails: the numbers are
 * only worth printing if the step computes the right thing. Where CUDA is
 * asked for and unusable it prints {"bench":"cuda_gpt_step",...,"skipped":...}
 * and exits 0. --tiny is a small byte-vocabulary model for checking the
 * program on the CPU (JX_PLATFORM=cpu) or under a fake driver. bench/
 * jax_gpt_gpu.py is the same step in JAX. */
#include "bench_util.h"
#include <jx/cuda.h>
#include <jx/jx.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_blaslt.h"
#include "cuda/cuda_copy.h"
#include "cuda/cuda_exec.h"

typedef struct {
  jx_gpt_config cfg;
  int64_t batch;
  int steps, warmup;
  double max_seconds; /* stop timing once this much time has passed (0: never) */
  double peak_tflops;
} options;

static void usage(void) {
  fprintf(stderr, "usage: bench_cuda_gpt [--tiny] [--layers N] [--d N] [--heads N] [--ctx N] "
                  "[--vocab N] [--batch N] [--steps N] [--warmup N] [--f32] "
                  "[--peak-tflops X] [--max-seconds S]\n");
}

/* --tiny first, so that the other flags can change the tiny config. */
static int parse(int argc, char **argv, options *o) {
  *o = (options){.cfg = {.vocab = 50257,
                         .n_layers = 12,
                         .d_model = 768,
                         .n_heads = 12,
                         .context = 1024,
                         .mlp_ratio = 4,
                         .compute_dtype = JX_BF16},
                 .batch = 8,
                 .steps = 10,
                 .warmup = 1,
                 .peak_tflops = 989};
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--tiny")) {
      o->cfg.vocab = 256;
      o->cfg.n_layers = 2;
      o->cfg.d_model = 64;
      o->cfg.n_heads = 4;
      o->cfg.context = 32;
      o->batch = 4;
      o->steps = 5;
    }
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (!strcmp(a, "--tiny")) continue;
    if (!strcmp(a, "--f32")) {
      o->cfg.compute_dtype = 0;
      continue;
    }
    if (i + 1 >= argc) {
      usage();
      return 0;
    }
    const char *v = argv[++i];
    if (!strcmp(a, "--layers"))
      o->cfg.n_layers = atoll(v);
    else if (!strcmp(a, "--d"))
      o->cfg.d_model = atoll(v);
    else if (!strcmp(a, "--heads"))
      o->cfg.n_heads = atoll(v);
    else if (!strcmp(a, "--ctx"))
      o->cfg.context = atoll(v);
    else if (!strcmp(a, "--vocab"))
      o->cfg.vocab = atoll(v);
    else if (!strcmp(a, "--batch"))
      o->batch = atoll(v);
    else if (!strcmp(a, "--steps"))
      o->steps = atoi(v);
    else if (!strcmp(a, "--warmup"))
      o->warmup = atoi(v);
    else if (!strcmp(a, "--peak-tflops"))
      o->peak_tflops = atof(v);
    else if (!strcmp(a, "--max-seconds"))
      o->max_seconds = atof(v);
    else {
      usage();
      return 0;
    }
  }
  if (o->cfg.n_layers < 1 || o->cfg.d_model < 1 || o->cfg.n_heads < 1 ||
      o->cfg.d_model % o->cfg.n_heads || o->cfg.context < 2 || o->cfg.vocab < 2 || o->batch < 1 ||
      o->steps < 1 || o->warmup < 0 || o->peak_tflops <= 0) {
    fprintf(stderr, "bench_cuda_gpt: bad configuration (heads must divide d; steps >= 1)\n");
    return 0;
  }
  return 1;
}

/* s as a JSON string body (the status line may hold quotes or backslashes). */
static void print_json_string(const char *s) {
  putchar('"');
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') putchar('\\');
    putchar((unsigned char)*s < 0x20 ? ' ' : *s);
  }
  putchar('"');
}

static int failed(const char *what) {
  fprintf(stderr, "bench_cuda_gpt: %s: %s\n", what, jx_last_error());
  return 1;
}

int main(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  setenv("JX_PLATFORM", "cuda", 0); /* an explicit JX_PLATFORM (cpu) wins */
  const char *platform = getenv("JX_PLATFORM");
  if (!strcmp(platform, "cuda") && jx_cuda_device_count() == 0) {
    printf("{\"bench\":\"cuda_gpt_step\",\"impl\":\"jx\",\"skipped\":");
    print_json_string(jx_cuda_status());
    printf("}\n");
    return 0;
  }
  const jx_gpt_config *c = &o.cfg;
  int64_t T = c->context, B = o.batch;
  fprintf(stderr,
          "bench_cuda_gpt: JX_PLATFORM=%s, %lld layers, d %lld, %lld heads, context %lld, "
          "vocab %lld, batch %lld, %s compute\n",
          platform, (long long)c->n_layers, (long long)c->d_model, (long long)c->n_heads,
          (long long)T, (long long)c->vocab, (long long)B, c->compute_dtype ? "bf16" : "f32");
  double t_start = bench_now_s();

  jx_tree *params = jx_gpt_init(c, jx_random_key(0), JX_F32);
  if (!params) return failed("jx_gpt_init");
  int np = jx_tree_size(params);
  jx_optimizer *opt = jx_optim_adamw(3e-4, 0.9, 0.95, 1e-8, 0.1);
  jx_tree *state = jx_optim_init(opt, params);
  if (!state) return failed("jx_optim_init");
  int ns = jx_tree_size(state);
  jx_fn *loss = jx_gpt_loss_fn(c, params);
  jx_fn *step_fn = jx_train_step(loss, params, state, opt);
  int nin = np + ns + 2, nout = 1 + np + ns;
  int *donate = calloc((size_t)nin, sizeof *donate);
  jx_array **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nout, sizeof *out);
  int calls = 1 + o.warmup + o.steps;
  double *t = calloc((size_t)o.steps, sizeof *t), *losses = calloc((size_t)calls, sizeof *losses);
  if (!donate || !in || !out || !t || !losses) {
    fprintf(stderr, "bench_cuda_gpt: out of memory\n");
    return 1;
  }
  /* the step takes the parameters and optimizer state over, as JAX's
   * donate_argnums in the peer (the CUDA executor ignores it for now) */
  for (int i = 0; i < np + ns; i++) donate[i] = 1;
  jx_fn *step = jx_jit(step_fn, &(jx_jit_options){.donate = donate});

  /* one batch of random tokens, the same every step: the loss must fall */
  jx_scope_begin();
  jx_array *u =
      jx_random_uniform(jx_random_key(1), JX_F32, JX_SHAPE(B, T + 1), 0, (double)c->vocab - 0.01);
  jx_array *tokens = jx_astype(jx_floor(u), JX_I32);
  jx_array *x = jx_keep(jx_slice(tokens, JX_SHAPE(0, 0), JX_SHAPE(B, T), JX_SHAPE()));
  jx_array *y = jx_keep(jx_slice(tokens, JX_SHAPE(0, 1), JX_SHAPE(B, T + 1), JX_SHAPE()));
  jx_scope_end();
  jx_tree_flatten(params, in);
  jx_tree_flatten(state, in + np);
  for (int i = 0; i < np + ns; i++) in[i] = jx_keep(in[i]);
  in[np + ns] = x;
  in[np + ns + 1] = y;
  int64_t nparams = jx_tree_numel(params);
  fprintf(stderr, "bench_cuda_gpt: %lld parameters; first call (trace, compile, run)...\n",
          (long long)nparams);

  double first = 0, up_mb = 0, down_mb = 0;
  int timed = 0;
  int64_t heuristic_calls = 0; /* cuBLASLt's heuristic asked in the last call: 0 once cached */
  for (int k = 0; k < calls; k++) {
    jx_scope_begin();
    jx_cuda_copy_stats copied0 = jx_cuda_copy_stats_get();
    int64_t asked0 = 0, asked1 = 0, hits = 0;
    jx_cuda_blas *blas = jx_cuda_device_gemm_handle(0);
    if (blas) jx_cuda_blas_counts(blas, &asked0, &hits);
    double t0 = bench_now_s();
    if (jx_call(step, in, out)) return failed(k ? "step" : "first call");
    for (int i = 0; i < nout; i++) jx_block_until_ready(out[i]); /* the whole step, as JAX's */
    losses[k] = jx_item(out[0]);
    double dt = bench_now_s() - t0;
    /* what the step moved between host and device (arrays are host-resident
     * between calls for now: a telling share of the step's time) */
    jx_cuda_copy_stats copied1 = jx_cuda_copy_stats_get();
    up_mb = (double)(copied1.to_device_bytes - copied0.to_device_bytes) / 1e6;
    down_mb = (double)(copied1.to_host_bytes - copied0.to_host_bytes) / 1e6;
    if ((blas = jx_cuda_device_gemm_handle(0))) jx_cuda_blas_counts(blas, &asked1, &hits);
    heuristic_calls = asked1 - asked0;
    for (int i = 0; i < np + ns; i++) { /* the next step takes this one's state */
      jx_release(in[i]);
      in[i] = jx_keep(out[1 + i]);
    }
    jx_scope_end();
    if (k == 0) first = dt;
    if (k > o.warmup) t[timed++] = dt;
    fprintf(stderr, "bench_cuda_gpt: %s %d: loss %.4f, %.1f ms, copied %.0f MB up, %.0f MB down\n",
            k == 0          ? "first call"
            : k <= o.warmup ? "warmup"
                            : "step",
            k, losses[k], dt * 1e3, up_mb, down_mb);
    if (!isfinite(losses[k])) {
      fprintf(stderr, "bench_cuda_gpt: the loss is not finite at call %d\n", k);
      return 1;
    }
    if (timed && o.max_seconds > 0 && bench_now_s() - t_start > o.max_seconds) {
      fprintf(stderr, "bench_cuda_gpt: --max-seconds %.0f reached after %d timed steps\n",
              o.max_seconds, timed);
      calls = k + 1;
      break;
    }
  }
  /* the oracle: with weights of stddev 0.02 the logits start near 0, so the
   * first loss is near ln(vocab); the same batch again must lower it */
  double expected = log((double)c->vocab), first_loss = losses[0], last_loss = losses[calls - 1];
  int loss_ok = fabs(first_loss - expected) < 0.5 && (calls < 2 || last_loss < first_loss);
  if (!loss_ok)
    fprintf(stderr,
            "bench_cuda_gpt: wrong loss: first %.4f (expected about ln(%lld) = %.4f), last %.4f "
            "(expected lower)\n",
            first_loss, (long long)c->vocab, expected, last_loss);

  qsort(t, (size_t)timed, sizeof *t, bench_cmp_double);
  double med = timed ? t[timed / 2] : first;
  double tokens_per_step = (double)B * (double)T;
  double flops = 6.0 * (double)nparams * tokens_per_step +
                 12.0 * (double)(c->n_layers * c->d_model * T) * tokens_per_step;
  printf("{\"bench\":\"cuda_gpt_step\",\"impl\":\"jx\",\"platform\":\"%s\",\"median_ms\":%.3f,"
         "\"runs\":%d,\"tokens_per_s\":%.0f,\"tflop_per_s\":%.2f,\"mfu\":%.4f,"
         "\"peak_tflops\":%.0f,\"first_call_s\":%.2f,\"params\":%lld,\"flop_per_step\":%.4e,"
         "\"layers\":%lld,\"d\":%lld,\"heads\":%lld,\"ctx\":%lld,\"vocab\":%lld,\"batch\":%lld,"
         "\"compute\":\"%s\",\"loss_first\":%.4f,\"loss_last\":%.4f,\"loss_ok\":%s,"
         "\"step_copied_up_mb\":%.1f,\"step_copied_down_mb\":%.1f,"
         "\"step_gemm_heuristic_calls\":%lld,\"gemm_autotuned\":%lld}\n",
         platform, med * 1e3, timed, tokens_per_step / med, flops / med / 1e12,
         flops / med / (o.peak_tflops * 1e12), o.peak_tflops, first, (long long)nparams, flops,
         (long long)c->n_layers, (long long)c->d_model, (long long)c->n_heads, (long long)T,
         (long long)c->vocab, (long long)B, c->compute_dtype ? "bf16" : "f32", first_loss,
         last_loss, loss_ok ? "true" : "false", up_mb, down_mb, (long long)heuristic_calls,
         jx_cuda_device_gemm_handle(0)
             ? (long long)jx_cuda_blas_autotuned(jx_cuda_device_gemm_handle(0))
             : 0LL);

  for (int i = 0; i < np + ns; i++) jx_release(in[i]);
  jx_release(x);
  jx_release(y);
  free(in);
  free(out);
  free(donate);
  free(t);
  free(losses);
  jx_fn_release(step);
  jx_fn_release(step_fn);
  jx_fn_release(loss);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(opt);
  jx_shutdown();
  return loss_ok ? 0 : 1;
}
