/* jx generate: text from a GPT checkpoint written by jx train, decoded
 * with a key/value cache (jx_gpt_generate) and streamed to stdout, on one
 * device or on a mesh (--mesh model=2: tensor-parallel decoding). The model's
 * shape comes from the checkpoint itself. Uses only the public API. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jx/jx.h>

#include "cli.h"

enum { MAX_STOP = 16 };

typedef struct {
  const char *ckpt, *prompt;
  int64_t step, heads;
  int devices;
  char mesh[128];
  const char *stop[MAX_STOP];
  jx_cli_generate_options gen;
} options;

static void usage(FILE *f) {
  fprintf(f,
          "usage: jx generate --ckpt DIR --prompt TEXT [options]\n"
          "  --ckpt DIR           a checkpoint directory written by jx train\n"
          "  --step N             the step to load (default: the latest)\n"
          "  --prompt TEXT        the text to continue (bytes)\n"
          "  --max-tokens N       bytes to generate per sequence (default 200)\n"
          "  --temperature T      0: greedy (default 0.8)\n"
          "  --top-k K            sample among the K most likely bytes (default 0: all)\n"
          "  --top-p P            sample from the nucleus of probability P (default 1: all)\n"
          "  --repetition-penalty R   lower bytes already seen (default 1: off)\n"
          "  --stop TEXT          end a sequence once it produces TEXT (repeatable)\n"
          "  --batch B            sequences decoded at once (default 1)\n"
          "  --seed S             PRNG seed (default 0)\n"
          "  --devices N          CPU devices (default: JX_NUM_CPU_DEVICES or 1)\n"
          "  --mesh data=A,model=B    decode on a mesh: weights over 'model', batch over 'data'\n"
          "  --heads N            attention heads, for a checkpoint that does not record them\n");
}

static int parse(int argc, char **argv, options *o) {
  *o = (options){.step = -1,
                 .gen = {.batch = 1, .max_tokens = 200, .sampling = {.temperature = 0.8}}};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    }
    if (!v) {
      fprintf(stderr, "jx generate: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 0;
    }
    char *end = NULL;
    double x = strtod(v, &end);
    int number = end && end != v && !*end;
    i++;
    if (!strcmp(a, "--ckpt"))
      o->ckpt = v;
    else if (!strcmp(a, "--prompt"))
      o->prompt = v;
    else if (!strcmp(a, "--mesh"))
      snprintf(o->mesh, sizeof o->mesh, "%s", v);
    else if (!strcmp(a, "--stop") && o->gen.nstop < MAX_STOP)
      o->stop[o->gen.nstop++] = v;
    else if (!number) {
      fprintf(stderr, "jx generate: %s wants a number, got '%s'\n", a, v);
      return 0;
    } else if (!strcmp(a, "--step"))
      o->step = (int64_t)x;
    else if (!strcmp(a, "--heads"))
      o->heads = (int64_t)x;
    else if (!strcmp(a, "--max-tokens"))
      o->gen.max_tokens = (int64_t)x;
    else if (!strcmp(a, "--temperature"))
      o->gen.sampling.temperature = x;
    else if (!strcmp(a, "--top-k"))
      o->gen.sampling.top_k = (int64_t)x;
    else if (!strcmp(a, "--top-p"))
      o->gen.sampling.top_p = x;
    else if (!strcmp(a, "--repetition-penalty"))
      o->gen.sampling.repetition_penalty = x;
    else if (!strcmp(a, "--batch"))
      o->gen.batch = (int64_t)x;
    else if (!strcmp(a, "--seed"))
      o->gen.seed = (uint64_t)x;
    else if (!strcmp(a, "--devices"))
      o->devices = (int)x;
    else {
      fprintf(stderr, "jx generate: unknown option '%s'\n", a);
      usage(stderr);
      return 0;
    }
  }
  if (!o->ckpt || !o->prompt) {
    fprintf(stderr, "jx generate: --ckpt DIR and --prompt TEXT are required\n");
    usage(stderr);
    return 0;
  }
  if (o->gen.batch < 1 || o->gen.max_tokens < 0) {
    fprintf(stderr, "jx generate: --batch must be >= 1 and --max-tokens >= 0\n");
    return 0;
  }
  o->gen.prompt = o->prompt;
  o->gen.stop = o->stop;
  return 1;
}

/* ---- streaming ---- */
typedef struct {
  int64_t batch;
  char **text; /* per sequence, what it produced */
  int64_t *len, cap;
} stream;

static void put_byte(int c) { putchar(c >= 32 || c == '\n' || c == '\t' ? c : '?'); }

static void on_token(void *ctx, int64_t seq, int32_t token) {
  stream *s = ctx;
  if (seq == 0) { /* sequence 0 as it comes; the others at the end */
    put_byte(token);
    fflush(stdout);
  }
  if (s->len[seq] < s->cap) s->text[seq][s->len[seq]++] = (char)token;
}

int jx_cli_generate(const char *command, const jx_gpt_config *c, const jx_tree *params,
                    jx_mesh *mesh, const jx_cli_generate_options *o) {
  int64_t B = o->batch, n = (int64_t)strlen(o->prompt);
  int32_t *prompt = malloc(sizeof *prompt * (size_t)(n ? n : 1));
  const int32_t **prompts = calloc((size_t)B, sizeof *prompts);
  int64_t *lengths = calloc((size_t)B, sizeof *lengths);
  stream s = {.batch = B, .cap = o->max_tokens};
  s.text = calloc((size_t)B, sizeof *s.text);
  s.len = calloc((size_t)B, sizeof *s.len);
  int ok = prompt && prompts && lengths && s.text && s.len;
  for (int64_t b = 0; ok && b < B; b++) ok = (s.text[b] = malloc((size_t)o->max_tokens + 1)) != 0;
  if (!ok) {
    fprintf(stderr, "jx %s: out of memory\n", command);
    return 1;
  }
  for (int64_t i = 0; i < n; i++) prompt[i] = (unsigned char)o->prompt[i];
  for (int64_t b = 0; b < B; b++) {
    prompts[b] = prompt;
    lengths[b] = n;
  }
  jx_generate_options go = {.sampling = o->sampling,
                            .max_tokens = o->max_tokens,
                            .seed = o->seed,
                            .stop = o->stop,
                            .nstop = o->nstop,
                            .mesh = mesh,
                            .on_token = on_token,
                            .ctx = &s};
  jx_generate_stats st;
  printf("%s", o->prompt);
  fflush(stdout);
  jx_status rc = jx_gpt_generate(c, params, B, prompts, lengths, &go, &st);
  printf("\n");
  for (int64_t b = 1; !rc && b < B; b++) {
    printf("--- sequence %lld ---\n%s", (long long)b, o->prompt);
    for (int64_t i = 0; i < s.len[b]; i++) put_byte((unsigned char)s.text[b][i]);
    printf("\n");
  }
  fflush(stdout);
  if (rc)
    fprintf(stderr, "jx %s: %s\n", command, jx_last_error());
  else
    fprintf(stderr,
            "prefill: %lld tokens in %.3f s (%.0f tokens/s, tracing and compiling included); "
            "decode: %lld tokens in %.3f s (%.0f tokens/s)\n",
            (long long)st.prefill_tokens, st.prefill_s,
            st.prefill_s > 0 ? (double)st.prefill_tokens / st.prefill_s : 0.0,
            (long long)st.decode_tokens, st.decode_s,
            st.decode_s > 0 ? (double)st.decode_tokens / st.decode_s : 0.0);
  for (int64_t b = 0; b < B; b++) free(s.text[b]);
  free(s.text);
  free(s.len);
  free(prompt);
  free(prompts);
  free(lengths);
  return rc != JX_OK;
}

/* ---- the checkpoint ---- */

/* The GPT's config from its parameters' shapes (and the recorded heads):
 * wte [vocab, d], wpe [context, d], blocks.<i>.*, mlp.fc.w [d, ratio d]. */
static int config_of(const jx_tree *params, int64_t heads, jx_gpt_config *c, char *why,
                     size_t cap) {
  jx_array *wte = jx_tree_get(params, "wte"), *wpe = jx_tree_get(params, "wpe");
  jx_array *fc = jx_tree_get(params, "blocks.0.mlp.fc.w");
  if (!wte || !wpe || !fc || jx_ndim(wte) != 2 || jx_ndim(wpe) != 2 || jx_ndim(fc) != 2) {
    snprintf(why, cap,
             "it holds no GPT of jx train (params/wte, params/wpe and "
             "params/blocks.0.mlp.fc.w, all matrices)");
    return 0;
  }
  int64_t d = jx_shape_of(wte).dims[1];
  *c = (jx_gpt_config){.vocab = jx_shape_of(wte).dims[0],
                       .d_model = d,
                       .n_heads = heads,
                       .context = jx_shape_of(wpe).dims[0],
                       .mlp_ratio = jx_shape_of(fc).dims[1] / (d ? d : 1)};
  char name[64];
  for (;;) {
    snprintf(name, sizeof name, "blocks.%lld.ln1.scale", (long long)c->n_layers);
    if (!jx_tree_get(params, name)) break;
    c->n_layers++;
  }
  if (heads < 1 || d % heads) {
    snprintf(why, cap, "%lld heads do not divide its width %lld", (long long)heads, (long long)d);
    return 0;
  }
  return 1;
}

int jx_cmd_generate(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  if (o.devices > 0 && jx_set_cpu_device_count(o.devices)) {
    fprintf(stderr, "jx generate: --devices: %s\n", jx_last_error());
    return 2;
  }
  if (!*o.prompt) {
    fprintf(stderr, "jx generate: the prompt is empty (the model continues text: give it some)\n");
    return 2;
  }
  int64_t step = o.step >= 0 ? o.step : jx_checkpoint_latest(o.ckpt);
  if (step < 0) {
    fprintf(stderr, "jx generate: no checkpoint in '%s'\n", o.ckpt);
    return 1;
  }
  jx_tree *saved = jx_checkpoint_load(o.ckpt, step, NULL);
  if (!saved) {
    fprintf(stderr, "jx generate: loading step %lld of '%s': %s\n", (long long)step, o.ckpt,
            jx_last_error());
    return 1;
  }
  /* the parameters are "params/<name>"; the heads "model/n_heads" */
  jx_tree *params = jx_tree_create();
  for (int i = 0; i < jx_tree_size(saved); i++)
    if (!strncmp(jx_tree_name(saved, i), "params/", 7))
      jx_tree_set(params, jx_tree_name(saved, i) + 7, jx_tree_at(saved, i));
  jx_array *recorded = jx_tree_get(saved, "model/n_heads");
  int64_t heads = o.heads > 0 ? o.heads : recorded ? (int64_t)jx_item(recorded) : 0;
  char why[256];
  jx_gpt_config cfg;
  if (!recorded && o.heads < 1) {
    fprintf(stderr, "jx generate: the checkpoint in '%s' does not record its heads: pass --heads\n",
            o.ckpt);
    return 1;
  }
  if (!config_of(params, heads, &cfg, why, sizeof why)) {
    fprintf(stderr, "jx generate: the checkpoint in '%s' (step %lld): %s\n", o.ckpt,
            (long long)step, why);
    return 1;
  }
  if ((int64_t)strlen(o.prompt) > cfg.context) {
    fprintf(stderr,
            "jx generate: the prompt has %zu bytes, longer than the model's context of "
            "%lld\n",
            strlen(o.prompt), (long long)cfg.context);
    return 1;
  }
  jx_mesh *mesh = NULL;
  if (*o.mesh && !(mesh = jx_cli_mesh(o.mesh, jx_device_count()))) {
    fprintf(stderr, "jx generate: --mesh: %s\n", jx_last_error());
    return 2;
  }
  fprintf(stderr,
          "jx generate: step %lld of %s: GPT %lld layers, d %lld, %lld heads, context %lld\n",
          (long long)step, o.ckpt, (long long)cfg.n_layers, (long long)cfg.d_model,
          (long long)cfg.n_heads, (long long)cfg.context);
  int rc = jx_cli_generate("generate", &cfg, params, mesh, &o.gen);
  jx_mesh_release(mesh);
  jx_tree_release(params);
  jx_tree_release(saved);
  jx_shutdown();
  return rc;
}
