/* Fashion-MNIST classifiers: an MLP (default) or a small CNN (--cnn),
 * trained with AdamW inside one jitted step, on Debian's
 * dataset-fashion-mnist. Prints the test accuracy after each epoch.
 *
 *   ./build/example_fashion_mnist [--cnn] [--epochs N] [--devices N]
 *
 * With --devices N the batch is split over N CPU devices (data parallel):
 * the same step, laid out by shardings. */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <jx/jx.h>

enum { BATCH = 128, MAX_PARAMS = 16 };

typedef struct {
  int cnn;
  jx_tree *like; /* parameter names, in order */
  int np;
  jx_optimizer *opt;
  jx_tree *state_like;
  int ns;
  jx_fn *loss;
} model;

/* images u8 [B, 28, 28] -> logits [B, 10] */
static jx_array *logits_of(const model *m, const jx_tree *p, jx_array *images) {
  jx_array *x = jx_div(jx_astype(images, JX_F32), jx_scalar(JX_F32, 255));
  int64_t b = jx_shape_of(images).dims[0];
  if (!m->cnn) {
    x = jx_reshape(x, JX_SHAPE(b, 784));
    x = jx_relu(jx_dense(p, "fc1", x));
    return jx_dense(p, "out", x);
  }
  x = jx_reshape(x, JX_SHAPE(b, 28, 28, 1));
  x = jx_relu(jx_conv2d(p, "conv1", x, JX_SHAPE(), "SAME"));
  x = jx_max_pool(x, JX_SHAPE(2, 2), JX_SHAPE(2, 2), "VALID"); /* 14x14x16 */
  x = jx_relu(jx_conv2d(p, "conv2", x, JX_SHAPE(), "SAME"));
  x = jx_max_pool(x, JX_SHAPE(2, 2), JX_SHAPE(2, 2), "VALID"); /* 7x7x32 */
  x = jx_relu(jx_dense(p, "fc1", jx_reshape(x, JX_SHAPE(b, 7 * 7 * 32))));
  return jx_dense(p, "out", x);
}

/* (params..., images, labels) -> mean cross-entropy */
static void loss_body(void *ctx, jx_array *const *in, jx_array **out) {
  model *m = ctx;
  jx_tree *p = jx_tree_unflatten(m->like, in);
  jx_array *logits = logits_of(m, p, in[m->np]);
  out[0] = jx_mean(jx_softmax_cross_entropy(logits, in[m->np + 1], 0), JX_AXES(), 0);
  jx_tree_release(p);
}

/* (params..., images, labels) -> number of correct predictions */
static void eval_body(void *ctx, jx_array *const *in, jx_array **out) {
  model *m = ctx;
  jx_tree *p = jx_tree_unflatten(m->like, in);
  jx_array *logits = logits_of(m, p, in[m->np]);
  out[0] = jx_mul(jx_accuracy(logits, in[m->np + 1]), jx_scalar(JX_F32, (double)BATCH));
  jx_tree_release(p);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int fail(const char *what) {
  fprintf(stderr, "fashion_mnist: %s: %s\n", what, jx_last_error());
  return 1;
}

int main(int argc, char **argv) {
  model m = {0};
  int epochs = 3, devices = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--cnn"))
      m.cnn = 1;
    else if (!strcmp(argv[i], "--epochs") && i + 1 < argc)
      epochs = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--devices") && i + 1 < argc)
      devices = atoi(argv[++i]);
    else {
      fprintf(stderr, "usage: %s [--cnn] [--epochs N] [--devices N]\n", argv[0]);
      return 2;
    }
  }
  if (jx_set_cpu_device_count(devices)) return fail("--devices");
  jx_dataset *train = jx_dataset_fashion_mnist(NULL, 1), *test = jx_dataset_fashion_mnist(NULL, 0);
  if (!train || !test) return fail("data");

  jx_mesh *mesh = jx_mesh_create(JX_SHAPE(devices), (const char *[]){"data"});
  jx_sharding *rows = jx_sharding_create(mesh, "data"), *all = jx_sharding_create(mesh, "");
  jx_loader_options lo = {.batch = BATCH, .seed = 0, .shuffle = 1, .sharding = rows};
  jx_loader *loader = jx_loader_create(train, &lo);
  jx_loader_options eo = {.batch = BATCH, .sharding = rows};
  if (!loader) return fail("loader");

  jx_tree *params = jx_tree_create();
  jx_array *key = jx_random_key(0);
  jx_array *k[4];
  for (int i = 0; i < 4; i++) k[i] = jx_random_fold_in(key, (uint32_t)i);
  if (m.cnn) {
    jx_conv2d_init(params, "conv1", k[0], 3, 3, 1, 16, JX_F32);
    jx_conv2d_init(params, "conv2", k[1], 3, 3, 16, 32, JX_F32);
    jx_dense_init(params, "fc1", k[2], 7 * 7 * 32, 128, JX_F32);
  } else {
    jx_dense_init(params, "fc1", k[2], 784, 256, JX_F32);
  }
  jx_dense_init(params, "out", k[3], m.cnn ? 128 : 256, 10, JX_F32);
  if (jx_last_status()) return fail("init");
  m.np = jx_tree_size(params);
  m.like = params;
  m.opt = jx_optim_adamw(m.cnn ? 2e-3 : 1e-3, 0.9, 0.999, 1e-8, 1e-4);
  jx_tree *state = jx_optim_init(m.opt, params);
  m.ns = jx_tree_size(state);
  m.state_like = state;
  m.loss = jx_fn_create("loss", m.np + 2, 1, loss_body, &m);

  /* parameters and optimizer state replicated, the batch split over "data" */
  int nin = m.np + m.ns + 2, nout = 1 + m.np + m.ns;
  jx_sharding *in_sh[2 * MAX_PARAMS + 4], *out_sh[2 * MAX_PARAMS + 4];
  for (int i = 0; i < nin; i++) in_sh[i] = i < m.np + m.ns ? all : rows;
  for (int i = 0; i < nout; i++) out_sh[i] = all;
  jx_jit_options jo = {.in_shardings = in_sh, .out_shardings = out_sh};
  jx_fn *step_fn = jx_train_step(m.loss, params, state, m.opt);
  jx_fn *step = jx_jit(step_fn, &jo);
  jx_sharding *eval_sh[MAX_PARAMS + 2], *eval_out[1] = {all};
  for (int i = 0; i < m.np + 2; i++) eval_sh[i] = i < m.np ? all : rows;
  jx_jit_options ejo = {.in_shardings = eval_sh, .out_shardings = eval_out};
  jx_fn *eval_fn = jx_fn_create("eval", m.np + 2, 1, eval_body, &m);
  jx_fn *eval = jx_jit(eval_fn, &ejo);
  if (!step || !eval) return fail("jit");

  printf("Fashion-MNIST %s on %d device(s): %lld training images, batch %d\n",
         m.cnn ? "CNN" : "MLP", devices, (long long)jx_dataset_size(train), BATCH);
  double t0 = now_s();
  int64_t per_epoch = jx_loader_batches_per_epoch(loader);
  jx_array *in[2 * MAX_PARAMS + 4], *out[2 * MAX_PARAMS + 4];
  double accuracy = 0;
  for (int e = 0; e < epochs; e++) {
    double loss = 0;
    for (int64_t b = 0; b < per_epoch; b++) {
      jx_scope_begin();
      jx_tree_flatten(params, in);
      jx_tree_flatten(state, in + m.np);
      if (jx_loader_next(loader, in + m.np + m.ns) || jx_call(step, in, out)) return fail("step");
      loss += jx_item(out[0]);
      for (int i = 0; i < m.np; i++) jx_tree_set(params, jx_tree_name(params, i), out[1 + i]);
      for (int i = 0; i < m.ns; i++) jx_tree_set(state, jx_tree_name(state, i), out[1 + m.np + i]);
      jx_scope_end();
    }
    jx_loader *tl = jx_loader_create(test, &eo);
    double correct = 0;
    int64_t nb = jx_loader_batches_per_epoch(tl);
    for (int64_t b = 0; b < nb; b++) {
      jx_scope_begin();
      jx_tree_flatten(params, in);
      if (jx_loader_next(tl, in + m.np) || jx_call(eval, in, out)) return fail("eval");
      correct += jx_item(out[0]);
      jx_scope_end();
    }
    jx_loader_release(tl);
    accuracy = correct / (double)(nb * BATCH);
    printf("epoch %d: train loss %.4f, test accuracy %.2f%% (%.1f s)\n", e + 1,
           loss / (double)per_epoch, 100 * accuracy, now_s() - t0);
  }
  jx_fn_release(eval);
  jx_fn_release(eval_fn);
  jx_fn_release(step);
  jx_fn_release(step_fn);
  jx_fn_release(m.loss);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(m.opt);
  jx_loader_release(loader);
  jx_dataset_release(train);
  jx_dataset_release(test);
  jx_sharding_release(rows);
  jx_sharding_release(all);
  jx_mesh_release(mesh);
  jx_shutdown();
  return accuracy >= 0.85 ? 0 : 1;
}
