/* Attention in training on the CUDA executor (src/cuda/cuda_fuse.h, the
 * attention calls of src/nn/attention_core.h): jx_grad of
 * jx_causal_self_attention and of a 1-layer GPT loss runs the forward as
 * the flash kernel (writing the logsumexp) and the backward as the three
 * flash-backward kernels, f32 and bf16. Under tests/cuda_fake's driver the
 * emulator runs them; with --real, a GPU.
 *
 * Oracles: the CPU jit's values and gradients of the same function (within
 * a stated tolerance: the kernels sum in their own order, and in f32 where
 * the bf16 composite rounds the scores and probabilities to bf16); on the
 * CPU, the gradients of the attention core as equations written out here
 * (jx_causal_self_attention's before it had a derivative of its own), which
 * must agree to f32 rounding; the executor's counters (matched, launched). */
#define _GNU_SOURCE
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include <jx/cuda.h>
#include <jx/jx.h>

#include "compile/async_dispatch.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_exec.h"
#include "cuda/cuda_fuse.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "ir/program.h"
#include "trace/eval.h"
#include "cuda_test_driver.h"
#include "test_util.h"
#include "trace/fn.h"

/* max |got - want| into *diff and max |want| into *scale. */
static void compare(jx_array *want, jx_array *got, double *diff, double *scale) {
  assert_true(jx_shape_equal(jx_shape_of(want), jx_shape_of(got)));
  int64_t n = jx_shape_numel(jx_shape_of(want));
  float *a = malloc(sizeof *a * (size_t)(n + 1)), *b = malloc(sizeof *b * (size_t)(n + 1));
  assert_non_null(a);
  assert_non_null(b);
  check_ok(jx_read(jx_astype(want, JX_F32), a, sizeof *a * (size_t)n));
  check_ok(jx_read(jx_astype(got, JX_F32), b, sizeof *b * (size_t)n));
  *diff = *scale = 0;
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]);
    *diff = isnan(e) ? INFINITY : e > *diff ? e : *diff;
    *scale = fabs((double)a[i]) > *scale ? fabs((double)a[i]) : *scale;
  }
  free(a);
  free(b);
}

/* The worst error over n outputs, each max |got - want| relative to its
 * largest entry, or to a hundredth of the largest of all where that is
 * more (bk's gradient is 0 in exact arithmetic: a shift of every key
 * leaves the softmax unchanged, so it is rounding noise on both sides). */
static double worst_error(int n, jx_array *const *want, jx_array *const *got) {
  double diff[40], scale[40], top = 0, worst = 0;
  assert_true(n <= 40);
  for (int o = 0; o < n; o++) {
    compare(want[o], got[o], &diff[o], &scale[o]);
    top = scale[o] > top ? scale[o] : top;
  }
  for (int o = 0; o < n; o++) {
    double s = scale[o] > 1e-2 * top ? scale[o] : 1e-2 * top;
    double e = s > 0 ? diff[o] / s : diff[o];
    worst = e > worst || isnan(e) ? e : worst;
  }
  return worst;
}

/* The fused counters of f jitted for CUDA, for inputs like in. */
static jx_cuda_fused_counts counts_of(jx_fn *gpu, int nin, jx_array *const *in) {
  jx_aval av[40];
  assert_true(nin <= 40);
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(gpu, av); /* the cached program, attached for CUDA */
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  jx_cuda_fused_counts c =
      jx_cuda_fused_counts_of(jx_cuda_executable_fused(jx_program_executable(p)));
  jx_program_release(p);
  return c;
}

/* f jitted on the CPU and on CUDA (called `calls` times there: a second
 * call runs the fused steps again, on blocks the first one returned); the
 * worst error of the last call's outputs into *worst, the counters
 * returned. */
static jx_cuda_fused_counts cpu_vs_cuda(const char *what, jx_fn *f, int nin, jx_array *const *in,
                                        int nout, int calls, double *worst) {
  jx_array *want[32], *got[32];
  assert_true(nout <= 32);
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = jx_jit(f, NULL);
  check_ok(jx_call(cpu, in, want));
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(f, NULL);
  for (int c = 0; c < calls; c++) check_ok(jx_call(gpu, in, got));
  setenv("JX_PLATFORM", "cpu", 1);
  *worst = worst_error(nout, want, got);
  jx_cuda_fused_counts c = counts_of(gpu, nin, in);
  fprintf(stderr,
          "%s: attention forward %d (%lld launches), backward %d (%lld launches), softmax %d; "
          "worst error %.3g (relative to each output's largest entry)\n",
          what, c.attentions, (long long)c.attention_launches, c.attention_backwards,
          (long long)c.attention_backward_launches, c.softmaxes, *worst);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  return c;
}

/* ---- jx_grad of causal attention ---- */

static const char *const PARAMS[8] = {"attn.wq", "attn.wk", "attn.wv", "attn.wo",
                                      "attn.bq", "attn.bk", "attn.bv", "attn.bo"};
typedef struct {
  int heads;
  int reference; /* 1: the core as plain equations (the oracle on the CPU) */
} attention_case;

/* jx_causal_self_attention's core as it was written before it had its own
 * derivative: q, k, v [n, T, H, dh] -> [n, H, T, dh]. */
static jx_array *reference_core(jx_array *q, jx_array *k, jx_array *v) {
  jx_shape qs = jx_shape_of(q);
  int64_t T = qs.dims[1];
  jx_array *s = jx_dot_general(q, k, JX_AXES(3), JX_AXES(3), JX_AXES(0, 2), JX_AXES(0, 2));
  s = jx_mul(jx_astype(s, JX_F32), jx_scalar(JX_F32, 1 / sqrt((double)qs.dims[3])));
  jx_array *causal = jx_ge(jx_iota(JX_I32, JX_SHAPE(T, T), 0), jx_iota(JX_I32, JX_SHAPE(T, T), 1));
  s = jx_where(causal, s, jx_scalar(JX_F32, -3.4028234663852886e38));
  jx_array *p = jx_astype(jx_softmax(s, 3), jx_dtype_of(q));
  return jx_dot_general(p, v, JX_AXES(3), JX_AXES(1), JX_AXES(0, 1), JX_AXES(0, 2));
}

/* jx_causal_self_attention with the reference core. */
static jx_array *reference_attention(jx_array *const *w, jx_array *x, int heads) {
  jx_shape xs = jx_shape_of(x);
  int64_t n = xs.dims[0], T = xs.dims[1], d = xs.dims[2], dh = d / heads;
  jx_array *qkv[3];
  for (int i = 0; i < 3; i++) {
    jx_array *y =
        jx_add(jx_dot_general(x, w[i], JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES()), w[4 + i]);
    qkv[i] = jx_reshape(y, JX_SHAPE(n, T, heads, dh));
  }
  jx_array *o = reference_core(qkv[0], qkv[1], qkv[2]);
  o = jx_reshape(jx_transpose(o, JX_AXES(0, 2, 1, 3)), JX_SHAPE(n, T, d));
  return jx_add(jx_dot_general(o, w[3], JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES()), w[7]);
}

/* (x, wq, wk, wv, wo, bq, bk, bv, bo, c) -> sum(attention(x) * c) in f32 */
static void attention_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const attention_case *c = ctx;
  jx_array *y;
  if (c->reference) {
    y = reference_attention(in + 1, in[0], c->heads);
  } else {
    jx_tree *t = jx_tree_create();
    for (int i = 0; i < 8; i++) jx_tree_set(t, PARAMS[i], in[1 + i]);
    y = jx_causal_self_attention(t, "attn", in[0], c->heads);
    jx_tree_release(t);
  }
  out[0] = jx_sum(jx_mul(jx_astype(y, JX_F32), in[9]), JX_AXES(), 0);
}

/* The loss and the gradients of x and the eight parameters. */
static jx_fn *attention_grad(attention_case *c) {
  jx_fn *f = jx_fn_create(c->reference ? "attention loss (reference)" : "attention loss", 10, 1,
                          attention_loss, c);
  jx_fn *g = jx_value_and_grad_first(f, 9, 0);
  jx_fn_release(f);
  return g;
}

static void attention_inputs(int64_t n, int64_t t, int64_t d, jx_dtype dt, jx_array **in) {
  in[0] = jx_astype(test_wave((jx_shape){3, {n, t, d}}, 5, 1), dt);
  for (int i = 0; i < 4; i++)
    in[1 + i] = jx_astype(test_wave((jx_shape){2, {d, d}}, 20 + i, 0.12), dt);
  /* biases that are not zero, so that a wrong operand order shows */
  for (int i = 0; i < 4; i++) in[5 + i] = jx_astype(test_wave((jx_shape){1, {d}}, 10 + i, 0.2), dt);
  in[9] = test_wave((jx_shape){3, {n, t, d}}, 30, 1); /* the output's cotangent */
}

/* n sequences of 37 (a partial last tile), d 64 in `heads` heads (2: head_dim
 * 32; 1: head_dim 64, whose bf16 forward and backward run on tensor cores,
 * kernels_attention_tc.h); `calls` calls on CUDA (the emulator takes seconds
 * a call). */
static void check_attention_grad(jx_dtype dt, int heads, int64_t n, int calls, double bound) {
  jx_scope_begin();
  jx_array *in[10];
  attention_inputs(n, 37, 64, dt, in);
  attention_case c = {heads, 0}, ref = {heads, 1};
  jx_fn *g = attention_grad(&c);
  double worst;
  char what[96];
  snprintf(what, sizeof what, "grad of causal attention [%lld, 37, 64], %d heads, %s", (long long)n,
           heads, jx_dtype_name(dt));
  jx_cuda_fused_counts k = cpu_vs_cuda(what, g, 10, in, 10, calls, &worst);
  assert_int_equal(k.attentions, 1);
  assert_int_equal(k.attention_backwards, 1);
  assert_int_equal(k.attention_launches, calls);
  assert_int_equal(k.attention_backward_launches, calls);
  assert_int_equal(k.softmaxes, 0); /* nothing of the T x T softmax is left */
  assert_true(worst <= bound);
  /* on the CPU the core's own derivative (its calls' programs: the CPU's
   * flash kernels, src/compile/attention_call.h, off) is the plain
   * equations' */
  setenv("JX_FLASH_ATTENTION", "0", 1);
  jx_fn *r = attention_grad(&ref), *jr = jx_jit(r, NULL), *jg = jx_jit(g, NULL);
  jx_array *want[10], *got[10];
  check_ok(jx_call(jr, in, want));
  check_ok(jx_call(jg, in, got));
  unsetenv("JX_FLASH_ATTENTION");
  double cpu = worst_error(10, want, got);
  fprintf(stderr, "  CPU: the core's derivative against the plain equations': %.3g\n", cpu);
  assert_true(cpu <= (dt == JX_F32 ? 1e-6 : 1e-2));
  jx_fn_release(jg);
  jx_fn_release(jr);
  jx_fn_release(r);
  jx_fn_release(g);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

static void test_attention_grad_f32(void **state) {
  (void)state;
  check_attention_grad(JX_F32, 2, 2, 2, 2e-5);
}

static void test_attention_grad_bf16(void **state) {
  (void)state;
  /* the composite rounds scores and probabilities to bf16, the kernels keep f32 */
  check_attention_grad(JX_BF16, 2, 1, 1, 3e-2);
}

static void test_attention_grad_bf16_tensor_cores(void **state) {
  (void)state;
  /* the probabilities (and the backward's ds) in bf16 as the composite's; f32 accumulators */
  check_attention_grad(JX_BF16, 1, 1, 1, 3e-2);
}

static void test_attention_grad_f16_tensor_cores(void **state) {
  (void)state;
  /* f16 has the tensor-core kernels alone: 3 more significant bits than bf16 */
  check_attention_grad(JX_F16, 1, 1, 1, 3e-2 / 8);
}

/* The executor's lowering keeps the two calls of the grad program whole;
 * should one not run fused, the host runs its program (interpreted, not
 * compiled for the host): the lowered program evaluated eagerly on the CPU
 * gives the CPU jit's values. */
static void test_lowering_keeps_calls(void **state) {
  (void)state;
  jx_scope_begin();
  jx_array *in[10];
  attention_inputs(1, 19, 64, JX_F32, in);
  attention_case c = {2, 0};
  jx_fn *g = attention_grad(&c), *jg = jx_jit(g, NULL);
  jx_aval av[10];
  for (int i = 0; i < 10; i++) av[i] = (jx_aval){jx_dtype_of(in[i]), 0, jx_shape_of(in[i]), 0};
  jx_program *p = jx_fn_program(g, av);
  assert_non_null(p);
  jx_exec_nested host_calls = {0};
  jx_program *l = jx_cuda_fused_lower(p, &host_calls);
  assert_non_null(l);
  int calls[2] = {0, 0};
  for (int e = 0; e < l->neqns; e++) {
    jx_cuda_fused_op op;
    if (!jx_cuda_attention_call(l, &l->eqns[e], &op)) continue;
    calls[op.kind == JX_CUDA_FUSED_ATTENTION_BWD]++;
    /* interpreted on the host should the plan not take it, not compiled */
    assert_non_null(jx_exec_nested_find(&host_calls, l->eqns[e].sub[0]).run);
    assert_int_equal(op.head_dim, 32);
    assert_int_equal(op.t, 19);
  }
  assert_int_equal(calls[0], 1);
  assert_int_equal(calls[1], 1);
  jx_array *want[10], *got[10];
  check_ok(jx_call(jg, in, want));
  check_ok(jx_program_eval(l, in, got));
  double e = worst_error(10, want, got);
  fprintf(stderr, "lowered grad program on the host: worst error %.3g\n", e);
  assert_true(e <= 1e-6);
  /* forward mode through a jx_custom_vjp function is an error, not a crash */
  attention_case plain = {2, 0};
  jx_fn *f = jx_fn_create("attention loss", 10, 1, attention_loss, &plain), *jf = jx_jvp(f);
  jx_array *jin[20], *jout[2];
  for (int i = 0; i < 10; i++) jin[i] = jin[10 + i] = in[i];
  assert_int_not_equal(jx_call(jf, jin, jout), JX_OK);
  assert_error_has("forward mode");
  jx_fn_release(jf);
  jx_fn_release(f);
  setenv("JX_CUDA_NO_FUSE", "1", 1); /* everything inlined */
  jx_exec_nested none = {0};
  jx_program *all = jx_cuda_fused_lower(p, &none);
  unsetenv("JX_CUDA_NO_FUSE");
  assert_non_null(all);
  for (int k = 0; k < all->neqns; k++) assert_int_equal(all->eqns[k].nsub, 0);
  assert_int_equal(none.n, 0);
  jx_exec_nested_free(&host_calls);
  jx_program_release(all);
  jx_program_release(l);
  jx_program_release(p);
  jx_fn_release(jg);
  jx_fn_release(g);
  jx_scope_end();
}

/* ---- jx_grad of a 1-layer GPT loss ---- */

static void check_gpt_grad(jx_dtype compute, double bound) {
  jx_scope_begin();
  jx_gpt_config cfg = jx_gpt_config_default();
  cfg.n_layers = 1;
  cfg.d_model = 64;
  cfg.n_heads = 2; /* head_dim 32 */
  cfg.context = 16;
  cfg.compute_dtype = compute;
  jx_tree *params = jx_gpt_init(&cfg, jx_random_key(3), JX_F32);
  assert_non_null(params);
  int np = jx_tree_size(params);
  jx_array *in[32];
  assert_true(np + 2 <= 32);
  jx_tree_flatten(params, in);
  int32_t tokens[2 * 13], targets[2 * 13];
  for (int i = 0; i < 26; i++) {
    tokens[i] = (i * 37 + 5) % 256;
    targets[i] = (i * 53 + 11) % 256;
  }
  in[np] = jx_array_from(JX_I32, (jx_shape){2, {2, 13}}, tokens);
  in[np + 1] = jx_array_from(JX_I32, (jx_shape){2, {2, 13}}, targets);
  jx_fn *loss = jx_gpt_loss_fn(&cfg, params);
  jx_fn *g = jx_value_and_grad_first(loss, np, 0);
  double worst;
  jx_cuda_fused_counts k =
      cpu_vs_cuda(compute == JX_BF16 ? "grad of a 1-layer GPT loss, bf16 compute"
                                     : "grad of a 1-layer GPT loss, f32",
                  g, np + 2, in, 1 + np, 1, &worst);
  assert_int_equal(k.attentions, 1);
  assert_int_equal(k.attention_backwards, 1);
  assert_int_equal(k.attention_launches, 1);
  assert_int_equal(k.attention_backward_launches, 1);
  assert_int_equal(k.xents, 1); /* the vocabulary's cross-entropy and its gradient */
  assert_int_equal(k.xent_backwards, 1);
  assert_true(worst <= bound);
  jx_fn_release(g);
  jx_fn_release(loss);
  jx_tree_release(params);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

static void test_gpt_grad_f32(void **state) {
  (void)state;
  check_gpt_grad(0, 2e-5);
}

static void test_gpt_grad_bf16(void **state) {
  (void)state;
  check_gpt_grad(JX_BF16, 3e-2);
}

/* ---- jx_grad of the softmax cross-entropy ---- */

typedef struct {
  jx_dtype dt; /* the logits' dtype: f32, or bf16 converted to f32 for the loss */
} xent_case;

static void xent_loss(void *ctx, jx_array *const *in, jx_array **out) {
  const xent_case *c = ctx;
  jx_array *logits = jx_matmul(jx_astype(in[0], c->dt), jx_astype(in[1], c->dt));
  out[0] = jx_mean(jx_softmax_cross_entropy(jx_astype(logits, JX_F32), in[2], 0), JX_AXES(), 0);
}

/* mean(softmax_cross_entropy(x @ w, labels)) and its gradients with
 * respect to x and w: 16 rows of 520 classes (rows longer than the block,
 * so each thread's running max grows and rescales; labels in the first
 * and last column among them), f32 and bf16 logits. The forward's row
 * statistics and the gradient are one kernel each (counted), against the
 * CPU jit within the bound; a gradient without the label's term, or a sum
 * not rescaled when the max grows, fails it (errors of 1 and 0.065). */
static void check_xent_grad(jx_dtype dt, double bound) {
  jx_scope_begin();
  enum { ROWS = 16, D = 16, V = 520 };
  jx_array *in[3];
  in[0] = test_wave((jx_shape){2, {ROWS, D}}, 7, 1);
  in[1] = test_wave((jx_shape){2, {D, V}}, 8, 0.7);
  int32_t labels[ROWS];
  for (int i = 0; i < ROWS; i++) labels[i] = i == 0 ? 0 : i == 1 ? V - 1 : (i * 389 + 17) % V;
  in[2] = jx_array_from(JX_I32, (jx_shape){1, {ROWS}}, labels);
  xent_case c = {dt};
  jx_fn *f = jx_fn_create("xent loss", 3, 1, xent_loss, &c);
  jx_fn *g = jx_value_and_grad_first(f, 2, 0);
  double worst;
  jx_cuda_fused_counts k = cpu_vs_cuda(dt == JX_BF16 ? "grad of a cross-entropy, bf16 logits"
                                                     : "grad of a cross-entropy, f32 logits",
                                       g, 3, in, 3, 2, &worst);
  /* the logits' bytes each kernel moves: the forward reads them, the
   * backward reads them and writes the gradient (plus rows of f32) */
  long long logit_bytes = (long long)ROWS * V * (long long)jx_dtype_size(dt);
  fprintf(stderr,
          "cross-entropy %d (%lld launches), backward %d (%lld launches); a call moves %lld bytes "
          "of logits in the forward, %lld in the backward\n",
          k.xents, (long long)k.xent_launches, k.xent_backwards,
          (long long)k.xent_backward_launches, logit_bytes, 2 * logit_bytes);
  assert_int_equal(k.xents, 1);
  assert_int_equal(k.xent_backwards, 1);
  assert_int_equal(k.xent_launches, 2); /* one a call */
  assert_int_equal(k.xent_backward_launches, 2);
  assert_true(worst <= bound);
  jx_fn_release(g);
  jx_fn_release(f);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

static void test_xent_grad_f32(void **state) {
  (void)state;
  check_xent_grad(JX_F32, 2e-6);
}

static void test_xent_grad_bf16(void **state) {
  (void)state;
  check_xent_grad(JX_BF16, 1e-2);
}

int main(int argc, char **argv) {
  int real_driver = argc > 1 && !strcmp(argv[1], "--real");
  int rc = cuda_test_driver("test_cuda_fuse_grad", real_driver);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_attention_grad_f32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_grad_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_grad_bf16_tensor_cores, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention_grad_f16_tensor_cores, setup, teardown),
      cmocka_unit_test_setup_teardown(test_lowering_keeps_calls, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpt_grad_f32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpt_grad_bf16, setup, teardown),
      cmocka_unit_test_setup_teardown(test_xent_grad_f32, setup, teardown),
      cmocka_unit_test_setup_teardown(test_xent_grad_bf16, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
