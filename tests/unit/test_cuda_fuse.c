/* Fused GEMM epilogues, softmax and attention in the CUDA executor
 * (src/cuda/cuda_fuse.h), against the CPU jit. Without a GPU it runs under
 * tests/cuda_fake's driver, whose emulator runs the hand-written softmax
 * and flash-attention kernels; there is no cuBLASLt there, so an epilogue
 * is matched and counted but runs unfused (bit for bit the CPU's). With
 * --real (scripts/gpu-check.sh) the epilogues run through cuBLASLt.
 *
 * Oracles: the CPU jit's outputs (bits where nothing fused runs; within
 * f32 tolerance where a fused kernel sums in its own order), the
 * activation the matcher must find in programs written to hold it, and
 * the executor's counters (matched, planned, launched). */
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

#include "compile/lower.h"
#include "cuda/cuda_device.h"
#include "cuda/cuda_exec.h"
#include "cuda/cuda_fuse.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "ir/program.h"
#include "prims/prims.h"
#include "cuda_test_driver.h"
#include "test_util.h"
#include "trace/fn.h"

static int real_driver;

/* The largest |got - want| / (1 + |want|) over the outputs' elements. */
static double max_error(jx_array *want, jx_array *got) {
  assert_true(jx_shape_equal(jx_shape_of(want), jx_shape_of(got)));
  int64_t n = jx_shape_numel(jx_shape_of(want));
  float *a = malloc(sizeof *a * (size_t)(n + 1)), *b = malloc(sizeof *b * (size_t)(n + 1));
  assert_non_null(a);
  assert_non_null(b);
  check_ok(jx_read(want, a, sizeof *a * (size_t)n));
  check_ok(jx_read(got, b, sizeof *b * (size_t)n));
  double worst = memcmp(a, b, sizeof *a * (size_t)n) ? 0 : -1; /* -1: the same bits */
  for (int64_t i = 0; i < n; i++) {
    double e = fabs((double)a[i] - b[i]) / (1 + fabs((double)a[i]));
    if (!(e <= worst) && worst >= 0) worst = isnan(e) ? INFINITY : e;
  }
  free(a);
  free(b);
  return worst;
}

typedef struct {
  double worst; /* max_error over the outputs; -1 when every bit is the CPU's */
  jx_cuda_fused_counts counts;
} case_result;

/* Runs body jitted on the CPU and on CUDA (twice: the second call's fused
 * kernels run again), compares, reads the executable's counters, and
 * checks that every device block went back once everything is freed. */
static case_result run_case_typed(const char *what, int nin, jx_body body, void *ctx,
                                  jx_array *const *in, jx_dtype dt) {
  jx_array *want[2], *got[2];
  jx_aval av[4];
  for (int i = 0; i < nin; i++) av[i] = (jx_aval){dt, 0, jx_shape_of(in[i]), 0};
  jx_fn *f = jx_fn_create(what, nin, 1, body, ctx);
  setenv("JX_PLATFORM", "cpu", 1);
  jx_fn *cpu = jx_jit(f, NULL);
  check_ok(jx_call(cpu, in, want));
  setenv("JX_PLATFORM", "cuda", 1);
  jx_fn *gpu = jx_jit(f, NULL);
  check_ok(jx_call(gpu, in, got));
  case_result r = {max_error(want[0], got[0]), {0}};
  jx_scope_begin();
  check_ok(jx_call(gpu, in, got + 1));
  double again = max_error(want[0], got[1]);
  jx_scope_end();
  setenv("JX_PLATFORM", "cpu", 1);
  jx_program *p = jx_fn_program(gpu, av);
  assert_non_null(p);
  assert_non_null(jx_program_executable(p));
  r.counts = jx_cuda_fused_counts_of(jx_cuda_executable_fused(jx_program_executable(p)));
  fprintf(stderr,
          "%s: epilogues %d found, %d fused (%lld launches); softmax %d (%lld launches); "
          "attention %d (%lld launches); max error %.3g (-1: the same bits; second call "
          "%.3g)\n",
          what, r.counts.epilogues_matched, r.counts.epilogues,
          (long long)r.counts.epilogue_launches, r.counts.softmaxes,
          (long long)r.counts.softmax_launches, r.counts.attentions,
          (long long)r.counts.attention_launches, r.worst, again);
  assert_true(again == r.worst || (again <= 2e-5 && r.worst <= 2e-5));
  jx_program_release(p);
  jx_fn_release(gpu);
  jx_fn_release(cpu);
  jx_fn_release(f);
  return r;
}

static case_result run_case(const char *what, int nin, jx_body body, void *ctx,
                            jx_array *const *in) {
  return run_case_typed(what, nin, body, ctx, in, JX_F32);
}

/* ---- GEMM epilogues ---- */

typedef enum { ACT_RELU, ACT_GELU, ACT_NONE } act_kind;
typedef struct {
  act_kind act;
  int dot_read_twice;  /* the GEMM's own result is also an output: no epilogue */
  int bias_read_twice; /* the biased result is also read by a second add: bias only */
} mlp_case;

static void mlp_body(void *ctx, jx_array *const *in, jx_array **out) {
  const mlp_case *c = ctx;
  jx_array *h = jx_matmul(in[0], in[1]);
  jx_array *z = jx_add(h, in[2]);
  jx_array *y = c->act == ACT_RELU ? jx_relu(z) : c->act == ACT_GELU ? jx_gelu(z) : z;
  if (c->dot_read_twice) y = jx_add(y, jx_mul(h, jx_scalar(JX_F32, 0.5)));
  if (c->bias_read_twice) y = jx_add(y, jx_mul(z, jx_scalar(JX_F32, 0.25)));
  out[0] = y;
}

/* The activation jx_cuda_match_epilogue finds in c's program (-1: no match). */
static int matched_activation(mlp_case *c, jx_array *const *in) {
  jx_aval av[3];
  for (int i = 0; i < 3; i++) av[i] = (jx_aval){JX_F32, 0, jx_shape_of(in[i]), 0};
  jx_fn *f = jx_fn_create("mlp_match", 3, 1, mlp_body, c);
  jx_fn *j = jx_jit(f, NULL);
  jx_program *p = jx_fn_program(j, av);
  assert_non_null(p);
  jx_program *l = jx_lower_custom_calls(p);
  assert_non_null(l);
  jx_cuda_fuse_index ix;
  check_ok(jx_cuda_fuse_index_build(l, &ix));
  uint8_t *member = calloc((size_t)l->neqns, 1);
  assert_non_null(member);
  int act = -1, n = 0;
  for (int e = 0; e < l->neqns; e++) {
    jx_cuda_fused_op op;
    if (!jx_cuda_match_epilogue(l, &ix, e, &op, member)) continue;
    n++;
    act = op.gemm.act;
    assert_int_equal(op.gemm.has_bias, 1);
    for (int i = 0; i < 3; i++) assert_int_equal(op.reads[i], l->in[i]); /* x, w, b */
  }
  assert_true(n <= 1);
  free(member);
  jx_cuda_fuse_index_free(&ix);
  jx_program_release(l);
  jx_program_release(p);
  jx_fn_release(j);
  jx_fn_release(f);
  return act;
}

/* want_act: what the matcher finds in the program (-1: nothing); planned:
 * whether the executor takes it (it cannot where fusion put the add in a
 * kernel with other readers' work). */
static void check_epilogue(mlp_case c, int want_act, int planned, const char *what) {
  jx_scope_begin(); /* the case's arrays */
  jx_array *in[3] = {test_wave((jx_shape){2, {32, 64}}, 1, 1),
                     test_wave((jx_shape){2, {64, 48}}, 2, 0.3),
                     test_wave((jx_shape){1, {48}}, 3, 1)};
  assert_int_equal(matched_activation(&c, in), want_act);
  case_result r = run_case(what, 3, mlp_body, &c, in);
  int found = planned;
  assert_int_equal(r.counts.epilogues_matched, found);
  if (real_driver) { /* cuBLASLt sums in its own order */
    assert_int_equal(r.counts.epilogues, found);
    assert_int_equal(r.counts.epilogue_launches, 2 * found);
    assert_true(r.worst <= 1e-5);
  } else { /* no cuBLASLt: the plan stays unused, the steps run as before */
    assert_int_equal(r.counts.epilogues, 0);
    assert_int_equal(r.counts.epilogue_launches, 0);
    assert_true(r.worst < 0);
  }
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

static void test_epilogue_relu(void **state) {
  (void)state;
  check_epilogue((mlp_case){ACT_RELU, 0, 0}, JX_CUDA_ACT_RELU, 1, "x @ w + b, relu");
}

static void test_epilogue_gelu(void **state) {
  (void)state;
  check_epilogue((mlp_case){ACT_GELU, 0, 0}, JX_CUDA_ACT_GELU, 1, "x @ w + b, gelu");
}

static void test_epilogue_bias_only(void **state) {
  (void)state;
  check_epilogue((mlp_case){ACT_NONE, 0, 0}, JX_CUDA_ACT_NONE, 1, "x @ w + b");
  /* relu's input is read again: the matcher leaves the activation out;
   * the executor cannot take the bias alone, since the add shares its
   * kernel with relu and the second reader */
  check_epilogue((mlp_case){ACT_RELU, 0, 1}, JX_CUDA_ACT_NONE, 0,
                 "relu(x @ w + b) + 0.25 (x @ w + b)");
}

static void test_epilogue_not_matched(void **state) {
  (void)state;
  /* the GEMM's result read twice: no epilogue can take it */
  check_epilogue((mlp_case){ACT_RELU, 1, 0}, -1, 0, "relu(x @ w + b) + 0.5 x @ w");
}

/* ---- softmax ---- */

static void softmax_body(void *ctx, jx_array *const *in, jx_array **out) {
  const int *axis = ctx;
  out[0] = jx_softmax(jx_mul(in[0], jx_scalar(JX_F32, 3)), *axis);
}

static void test_softmax(void **state) {
  (void)state;
  jx_scope_begin();
  jx_array *x = test_wave((jx_shape){3, {6, 37, 50}}, 4, 2);
  int last = 2, first = 0;
  case_result r = run_case("softmax over the last axis", 1, softmax_body, &last, &x);
  assert_int_equal(r.counts.softmaxes, 1);
  assert_int_equal(r.counts.softmax_launches, 2);
  /* exp and the row's sum in another order than the CPU kernel's */
  assert_true(r.worst <= 1e-6);
  r = run_case("softmax over axis 0", 1, softmax_body, &first, &x);
  assert_int_equal(r.counts.softmaxes, 0);
  assert_int_equal(r.counts.softmax_launches, 0);
  assert_true(r.worst < 0);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

/* ---- causal attention, as jx_causal_self_attention builds it ---- */

typedef struct {
  jx_tree *params;
  int heads;
  int handwritten; /* 1: the core as equations (the matcher of dot_general, mask and softmax) */
} attention_case;

/* jx_causal_self_attention with its core written out as equations, as a
 * user would (nn's own core is one call with its own derivative:
 * src/nn/attention_core.h) */
static jx_array *handwritten_attention(const jx_tree *t, jx_array *x, int heads) {
  jx_shape xs = jx_shape_of(x);
  int64_t n = xs.dims[0], T = xs.dims[1], d = xs.dims[2], dh = d / heads;
  static const char *const w[4] = {"attn.wq", "attn.wk", "attn.wv", "attn.wo"}, *const b[4] = {
                                                                                    "attn.bq",
                                                                                    "attn.bk",
                                                                                    "attn.bv",
                                                                                    "attn.bo"};
  jx_array *qkv[3];
  for (int i = 0; i < 3; i++) {
    jx_array *y =
        jx_dot_general(x, jx_tree_get(t, w[i]), JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES());
    qkv[i] = jx_reshape(jx_add(y, jx_tree_get(t, b[i])), JX_SHAPE(n, T, heads, dh));
  }
  jx_array *s =
      jx_dot_general(qkv[0], qkv[1], JX_AXES(3), JX_AXES(3), JX_AXES(0, 2), JX_AXES(0, 2));
  s = jx_mul(s, jx_scalar(JX_F32, 1 / sqrt((double)dh)));
  jx_array *causal = jx_ge(jx_iota(JX_I32, JX_SHAPE(T, T), 0), jx_iota(JX_I32, JX_SHAPE(T, T), 1));
  s = jx_where(causal, s, jx_scalar(JX_F32, -3.4028234663852886e38));
  jx_array *o = jx_dot_general(jx_softmax(s, 3), qkv[2], JX_AXES(3), JX_AXES(1), JX_AXES(0, 1),
                               JX_AXES(0, 2));
  o = jx_reshape(jx_transpose(o, JX_AXES(0, 2, 1, 3)), JX_SHAPE(n, T, d));
  o = jx_dot_general(o, jx_tree_get(t, w[3]), JX_AXES(2), JX_AXES(0), JX_AXES(), JX_AXES());
  return jx_add(o, jx_tree_get(t, b[3]));
}

static void attention_body(void *ctx, jx_array *const *in, jx_array **out) {
  const attention_case *c = ctx;
  out[0] = c->handwritten ? handwritten_attention(c->params, in[0], c->heads)
                          : jx_causal_self_attention(c->params, "attn", in[0], c->heads);
}

static void check_attention(int64_t n, int64_t t, int64_t d, int heads, int handwritten) {
  jx_scope_begin();
  attention_case c = {jx_tree_create(), heads, handwritten};
  assert_non_null(c.params);
  jx_array *key = jx_random_key(7);
  check_ok(jx_attention_init(c.params, "attn", key, d, 0.05, JX_F32));
  /* biases that are not zero, so that a wrong operand order shows */
  static const char *const b[4] = {"attn.bq", "attn.bk", "attn.bv", "attn.bo"};
  for (int i = 0; i < 4; i++)
    jx_tree_set(c.params, b[i], test_wave((jx_shape){1, {d}}, 10 + i, 0.2));
  jx_array *x = test_wave((jx_shape){3, {n, t, d}}, 5, 1);
  char what[96];
  snprintf(what, sizeof what, "causal attention [%lld, %lld, %lld], %d heads%s", (long long)n,
           (long long)t, (long long)d, heads, handwritten ? ", written out" : "");
  case_result r = run_case(what, 1, attention_body, &c, &x);
  assert_int_equal(r.counts.attentions, 1);
  assert_int_equal(r.counts.attention_launches, 2);
  assert_int_equal(r.counts.softmaxes, 0); /* the attention's softmax is inside its kernel */
  assert_true(r.worst >= 0 && r.worst <= 2e-5);
  jx_tree_release(c.params);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

static void test_attention(void **state) {
  (void)state;
  check_attention(2, 37, 64, 2, 0); /* head_dim 32; 37 queries: a partial last tile */
  check_attention(2, 37, 64, 2, 1); /* the same as equations: matched, not a call */
}

/* A 2-layer GPT forward: the layers share the causal mask and the scalar
 * constants (common subexpressions), which must not keep either attention
 * from fusing. */
typedef struct {
  jx_gpt_config config;
  jx_tree *params;
} gpt_case;

static void gpt_body(void *ctx, jx_array *const *in, jx_array **out) {
  const gpt_case *c = ctx;
  out[0] = jx_gpt_forward(&c->config, c->params, in[0]);
}

static void test_gpt_forward(void **state) {
  (void)state;
  jx_scope_begin();
  gpt_case c = {jx_gpt_config_default(), NULL};
  c.config.d_model = 64;
  c.config.n_heads = 1; /* head_dim 64 (test_attention's is 32) */
  c.params = jx_gpt_init(&c.config, jx_random_key(3), JX_F32);
  assert_non_null(c.params);
  int32_t tokens[2 * 16];
  for (int i = 0; i < 32; i++) tokens[i] = (i * 37 + 5) % 256;
  jx_array *x = jx_array_from(JX_I32, (jx_shape){2, {2, 16}}, tokens);
  case_result r = run_case_typed("gpt forward, 2 layers", 1, gpt_body, &c, &x, JX_I32);
  assert_int_equal(r.counts.attentions, 2);
  assert_int_equal(r.counts.attention_launches, 4);
  assert_true(r.worst >= 0 && r.worst <= 2e-5);
  jx_tree_release(c.params);
  jx_scope_end();
  assert_int_equal(cuda_test_bytes_in_use(), 0);
}

int main(int argc, char **argv) {
  real_driver = argc > 1 && !strcmp(argv[1], "--real");
  int rc = cuda_test_driver("test_cuda_fuse", real_driver);
  if (rc >= 0) return rc;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_epilogue_relu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_epilogue_gelu, setup, teardown),
      cmocka_unit_test_setup_teardown(test_epilogue_bias_only, setup, teardown),
      cmocka_unit_test_setup_teardown(test_epilogue_not_matched, setup, teardown),
      cmocka_unit_test_setup_teardown(test_softmax, setup, teardown),
      cmocka_unit_test_setup_teardown(test_attention, setup, teardown),
      cmocka_unit_test_setup_teardown(test_gpt_forward, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
