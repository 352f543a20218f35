/* jx train: a byte-level GPT trained on a text corpus over a mesh of
 * devices — data parallel, tensor parallel (Megatron) and FSDP by flags —
 * with AdamW, warmup + cosine schedule, clipping, checkpoints (resumable)
 * and a sample of generated text at the end. Uses only the public API.
 *
 * Under mpirun or srun every process runs the same steps on a mesh of all
 * processes' devices (--devices counts each process's); each loads only its
 * rows of the batch, and process 0 alone prints and writes the metrics. */
#define _DEFAULT_SOURCE     /* clock_gettime, fileno, flock */
#define _XOPEN_SOURCE   700 /* nftw */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jx/jx.h>

#include "cli.h"

enum { MAX_DATA = 64 };
#define DEFAULT_CORPUS "/usr/share/games/fortunes"

typedef struct {
  int devices;
  char mesh[128];
  int fsdp;
  int stages, microbatches, virtual_stages; /* --stages: pipelining over mesh axis "stage" */
  jx_pipeline_schedule schedule;
  int64_t steps, stop_at, batch, layers, width, heads, context, warmup, ckpt_every, sample, keep;
  double lr;
  const char *ckpt, *metrics, *profile;
  int resume;
  const char *data[MAX_DATA];
  int ndata;
  unsigned seed;
  jx_dtype compute_dtype; /* --dtype bf16: mixed precision; 0: f32 */
  double memory_limit;    /* --mesh auto: bytes per device, 0: the device's memory */
  int plan_only;
} options;

static void usage(FILE *f) {
  fprintf(f, "usage: jx train [options]\n"
             "  --devices N        CPU devices of each process (default: JX_NUM_CPU_DEVICES\n"
             "                     or 1); under mpirun/srun the job has processes x N\n"
             "  --mesh data=A,model=B   mesh axes over all the job's devices\n"
             "                     (default data=<devices of all processes>); auto[:data=A,...]:\n"
             "                     the step's layouts planned (--memory-limit 200MiB per device,\n"
             "                     --plan-only prints the plan and exits)\n"
             "  --fsdp             also shard parameters and optimizer state over 'data'\n"
             "  --stages N         pipeline the layers over N stages (mesh axis 'stage'; default\n"
             "                     mesh stage=N,data=<devices/N>; --mesh stage=N,data=D[,model=T]\n"
             "                     alone does the same); --microbatches M (default 2N),\n"
             "                     --schedule gpipe|1f1b|interleaved (default 1f1b),\n"
             "                     --virtual-stages V per device for interleaved (default 2)\n"
             "  --steps N          training steps (default 800)\n"
             "  --stop-at N        stop (and checkpoint) after step N, as a preempted job would\n"
             "  --batch N          sequences per step (default 32)\n"
             "  --lr X             peak learning rate (default 3e-3)\n"
             "  --warmup N         warmup steps (default steps/10)\n"
             "  --layers N --width N --heads N --context N   model (default 4, 128, 4, 64)\n"
             "  --data FILE        training text (repeatable; default: the fortunes corpus)\n"
             "  --ckpt DIR         checkpoint directory, one job's at a time (DIR/.lock);\n"
             "                     --ckpt-every N (default 100)\n"
             "  --keep N           keep the newest N checkpoints, remove older ones (default 3;\n"
             "                     0 keeps all); a crashed save's leftovers go at the next save\n"
             "  --resume           continue from the latest checkpoint in --ckpt\n"
             "  --metrics FILE     JSON lines: step, loss, tokens_per_s, mfu (of peak FLOP/s)\n"
             "  --profile FILE     Chrome/Perfetto trace of the training steps; summary on stderr\n"
             "                     (one file with every process's tracks)\n"
             "  --sample N         bytes of text to generate at the end (default 200)\n"
             "  --seed N           PRNG seed (default 0)\n"
             "  --dtype f32|bf16   compute dtype (bf16: f32 master weights and optimizer state)\n");
}

static int parse(int argc, char **argv, options *o) {
  /* the defaults: a run that ends in about two minutes on two cores and
   * writes English-like words in fortune-shaped lines (loss about 2) */
  *o = (options){.steps = 800,
                 .batch = 32,
                 .layers = 4,
                 .width = 128,
                 .heads = 4,
                 .context = 64,
                 .warmup = -1,
                 .ckpt_every = 100,
                 .keep = 3,
                 .sample = 200,
                 .schedule = JX_PIPELINE_1F1B,
                 .lr = 3e-3};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
#define INT_OPT(name, field)                                                                       \
  if (!strcmp(a, name)) {                                                                          \
    if (!v) goto missing;                                                                          \
    o->field = strtoll(v, NULL, 10);                                                               \
    i++;                                                                                           \
    continue;                                                                                      \
  }
    INT_OPT("--devices", devices)
    INT_OPT("--steps", steps)
    INT_OPT("--stop-at", stop_at)
    INT_OPT("--batch", batch)
    INT_OPT("--layers", layers)
    INT_OPT("--width", width)
    INT_OPT("--heads", heads)
    INT_OPT("--context", context)
    INT_OPT("--warmup", warmup)
    INT_OPT("--ckpt-every", ckpt_every)
    INT_OPT("--keep", keep)
    INT_OPT("--sample", sample)
    INT_OPT("--seed", seed)
    INT_OPT("--stages", stages)
    INT_OPT("--microbatches", microbatches)
    INT_OPT("--virtual-stages", virtual_stages)
#undef INT_OPT
    if (!strcmp(a, "--lr") && v) {
      o->lr = atof(v);
      i++;
    } else if (!strcmp(a, "--mesh") && v) {
      snprintf(o->mesh, sizeof o->mesh, "%s", v);
      i++;
    } else if (!strcmp(a, "--ckpt") && v) {
      o->ckpt = v;
      i++;
    } else if (!strcmp(a, "--profile") && v) {
      o->profile = v;
      i++;
    } else if (!strcmp(a, "--metrics") && v) {
      o->metrics = v;
      i++;
    } else if (!strcmp(a, "--data") && v) {
      if (o->ndata == MAX_DATA) {
        fprintf(stderr, "jx train: at most %d --data files\n", MAX_DATA);
        return 0;
      }
      o->data[o->ndata++] = v;
      i++;
    } else if (!strcmp(a, "--dtype") && v && (!strcmp(v, "f32") || !strcmp(v, "bf16"))) {
      o->compute_dtype = !strcmp(v, "bf16") ? JX_BF16 : 0;
      i++;
    } else if (!strcmp(a, "--schedule") && v &&
               (!strcmp(v, "gpipe") || !strcmp(v, "1f1b") || !strcmp(v, "interleaved"))) {
      o->schedule = !strcmp(v, "gpipe")  ? JX_PIPELINE_GPIPE
                    : !strcmp(v, "1f1b") ? JX_PIPELINE_1F1B
                                         : JX_PIPELINE_INTERLEAVED;
      i++;
    } else if (!strcmp(a, "--fsdp")) {
      o->fsdp = 1;
    } else if (!strcmp(a, "--memory-limit") && v && jx_cli_parse_size(v, &o->memory_limit)) {
      i++;
    } else if (!strcmp(a, "--plan-only")) {
      o->plan_only = 1;
    } else if (!strcmp(a, "--resume")) {
      o->resume = 1;
    } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      exit(0);
    } else {
      fprintf(stderr, "jx train: unknown or incomplete option '%s'\n", a);
      usage(stderr);
      return 0;
    }
    continue;
  missing:
    fprintf(stderr, "jx train: %s needs a value\n", a);
    return 0;
  }
  if (o->steps < 1 || o->batch < 1 || o->context < 2 || o->width < 1 || o->heads < 1 ||
      o->layers < 1 || o->width % o->heads) {
    fprintf(stderr, "jx train: steps, batch, layers and heads must be >= 1, context >= 2, and "
                    "width a multiple of heads\n");
    return 0;
  }
  if (o->stop_at <= 0 || o->stop_at > o->steps) o->stop_at = o->steps;
  if (o->warmup < 0) o->warmup = o->steps / 10;
  if (o->warmup > o->steps) o->warmup = o->steps;
  if (o->keep < 0) {
    fprintf(stderr, "jx train: --keep %lld: want 0 (keep all) or more\n", (long long)o->keep);
    return 0;
  }
  if (o->resume && !o->ckpt) {
    fprintf(stderr, "jx train: --resume needs --ckpt DIR\n");
    return 0;
  }
  return 1;
}

/* The regular files of the default corpus, sorted for a stable order. */
static int default_corpus(options *o, char names[][512]) {
  DIR *d = opendir(DEFAULT_CORPUS);
  if (!d) return 0;
  struct dirent *e;
  int n = 0;
  while ((e = readdir(d)) && n < MAX_DATA) {
    size_t len = strlen(e->d_name);
    if (e->d_name[0] == '.' || (len > 4 && (!strcmp(e->d_name + len - 4, ".dat"))) ||
        (len > 3 && !strcmp(e->d_name + len - 3, ".u8")))
      continue;
    char path[512];
    snprintf(path, sizeof path, "%s/%s", DEFAULT_CORPUS, e->d_name);
    struct stat st;
    if (stat(path, &st) || !S_ISREG(st.st_mode)) continue;
    snprintf(names[n++], 512, "%s", path);
  }
  closedir(d);
  qsort(names, (size_t)n, 512, (int (*)(const void *, const void *))strcmp);
  for (int i = 0; i < n; i++) o->data[i] = names[i];
  o->ndata = n;
  return n;
}

typedef struct {
  jx_gpt_config cfg;
  jx_optimizer *opt;
  jx_tree *params_like;
  int np, ns;
  jx_fn *loss;
} model;

/* What a checkpoint holds: "params/<name>", "opt/<name>", the data
 * position (the loader's, or 0 as a shape to load into) and the model's
 * heads "model/n_heads" (the one size its parameters' shapes do not say,
 * for jx generate). */
static jx_tree *checkpoint_tree(const jx_tree *params, const jx_tree *state, int64_t position,
                                int64_t heads) {
  jx_tree *t = jx_tree_create();
  char name[600];
  for (int i = 0; i < jx_tree_size(params); i++) {
    snprintf(name, sizeof name, "params/%s", jx_tree_name(params, i));
    jx_tree_set(t, name, jx_tree_at(params, i));
  }
  for (int i = 0; i < jx_tree_size(state); i++) {
    snprintf(name, sizeof name, "opt/%s", jx_tree_name(state, i));
    jx_tree_set(t, name, jx_tree_at(state, i));
  }
  jx_scope_begin();
  jx_tree_set(t, "data_position", jx_full(JX_I64, JX_SHAPE(), (double)position));
  jx_tree_set(t, "model/n_heads", jx_full(JX_I64, JX_SHAPE(), (double)heads));
  jx_scope_end();
  return t;
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Training flops per step: 6 per parameter per token, plus attention. */
static double step_flops(const model *m, int64_t params, int64_t batch) {
  double tokens = (double)(batch * m->cfg.context);
  return 6.0 * (double)params * tokens +
         12.0 * (double)(m->cfg.n_layers * m->cfg.d_model * m->cfg.context) * tokens;
}

/* Errors end the process without jx_distributed_shutdown: its MPI_Finalize
 * would wait for the other processes, which may be waiting for this one;
 * the launcher ends the job when a process exits without it. */
/* One job per checkpoint directory: a lock on DIR/.lock, held until the
 * process ends (the system drops it then, after a crash too); 0 with a
 * message when another running job holds it. */
static int lock_checkpoint_dir(const char *dir) {
  char path[4200];
  snprintf(path, sizeof path, "%s/.lock", dir);
  if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
    fprintf(stderr, "jx train: cannot create --ckpt %s: %s\n", dir, strerror(errno));
    return 0;
  }
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) == 0) return 1; /* fd stays open: the lock */
  if (fd >= 0 && errno == EWOULDBLOCK)
    fprintf(stderr,
            "jx train: --ckpt %s is in use by another running job (it holds %s); give each job "
            "a directory of its own\n",
            dir, path);
  else
    fprintf(stderr, "jx train: cannot lock %s: %s\n", path, strerror(errno));
  if (fd >= 0) close(fd);
  return 0;
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
  (void)st, (void)flag, (void)ftw;
  return remove(path);
}

static int newest_first(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x < y) - (x > y);
}

/* --keep: removes the step directories of dir (step_<8 digits>) but the newest
 * keep, once the newest save is complete. */
static void prune_checkpoints(const char *dir, int64_t keep) {
  DIR *d = keep > 0 ? opendir(dir) : NULL;
  if (!d) return;
  int64_t *steps = NULL;
  size_t n = 0, cap = 0;
  struct dirent *e;
  while ((e = readdir(d))) {
    char *end;
    if (strncmp(e->d_name, "step_", 5) || strlen(e->d_name) < 13) continue;
    long long step = strtoll(e->d_name + 5, &end, 10);
    if (*end || step < 0) continue;
    if (n == cap) {
      int64_t *grown = realloc(steps, sizeof *steps * (cap = cap ? 2 * cap : 16));
      if (!grown) break;
      steps = grown;
    }
    steps[n++] = step;
  }
  closedir(d);
  qsort(steps, n, sizeof *steps, newest_first);
  for (size_t i = (size_t)keep; i < n; i++) {
    char path[4200];
    snprintf(path, sizeof path, "%s/step_%08lld", dir, (long long)steps[i]);
    if (nftw(path, remove_entry, 16, FTW_DEPTH | FTW_PHYS))
      fprintf(stderr, "jx train: --keep: cannot remove %s: %s\n", path, strerror(errno));
  }
  free(steps);
}

static int fail(const char *what) {
  if (jx_process_count() > 1)
    fprintf(stderr, "jx train (process %d of %d): %s: %s\n", jx_process_index(), jx_process_count(),
            what, jx_last_error());
  else
    fprintf(stderr, "jx train: %s: %s\n", what, jx_last_error());
  return 1;
}

/* Every 20th window of the corpus is held out (so fortunes of every file),
 * at most 4 batches of them, for the validation loss; the rest trains.
 * val[0..2) receive the held-out inputs and targets (kept; NULL when the
 * corpus is too small to spare a batch). */
enum { HOLD_OUT_EVERY = 20 };
static jx_dataset *split_validation(jx_dataset *all, int64_t batch, jx_array **val) {
  int64_t n = jx_dataset_size(all), nv = n / HOLD_OUT_EVERY, nt = 0, k = 0;
  if (nv > 4 * batch) nv = 4 * batch;
  nv = nv / batch * batch;
  int32_t *ti = malloc(sizeof *ti * (size_t)n), *vi = malloc(sizeof *vi * (size_t)(nv + 1));
  if (!ti || !vi) {
    free(ti);
    free(vi);
    jx_report_error(JX_ERR_OUT_OF_MEMORY, "out of memory splitting off the validation windows");
    return NULL;
  }
  for (int64_t i = 0; i < n; i++)
    if (i % HOLD_OUT_EVERY == HOLD_OUT_EVERY - 1 && k < nv)
      vi[k++] = (int32_t)i;
    else
      ti[nt++] = (int32_t)i;
  jx_scope_begin();
  jx_array *train_idx = jx_array_from(JX_I32, JX_SHAPE(nt), ti), *parts[2];
  jx_array *val_idx = jx_array_from(JX_I32, JX_SHAPE(nv), vi);
  for (int a = 0; a < 2; a++) {
    parts[a] = jx_take(jx_dataset_array(all, a), train_idx, 0);
    val[a] = nv ? jx_keep(jx_take(jx_dataset_array(all, a), val_idx, 0)) : NULL;
  }
  jx_dataset *train = jx_dataset_from_arrays(2, parts);
  jx_scope_end();
  free(ti);
  free(vi);
  return train;
}

/* The mean loss of the held-out windows (NAN when there are none). */
static double validation_loss(jx_fn *eval, const jx_tree *params, int np, jx_array *const *val) {
  if (!eval || !val[0]) return NAN;
  jx_scope_begin();
  jx_array **in = calloc((size_t)np + 2, sizeof *in), *loss = NULL;
  double v = NAN;
  if (in) {
    jx_tree_flatten(params, in);
    in[np] = val[0];
    in[np + 1] = val[1];
    if (!jx_call(eval, in, &loss)) v = jx_item(loss);
  }
  free(in);
  jx_scope_end();
  return v;
}

int jx_cmd_train(int argc, char **argv) {
  options o;
  if (!parse(argc, argv, &o)) return 2;
  if (o.devices > 0 && jx_set_cpu_device_count(o.devices)) return fail("--devices");
  if (jx_cli_join_job("train")) return 1;
  int lead = jx_process_index() == 0; /* prints, writes metrics, samples */
  if (lead && o.ckpt && !lock_checkpoint_dir(o.ckpt)) return 2;
  int devices = jx_device_count();
  static char corpus[MAX_DATA][512];
  if (!o.ndata && !default_corpus(&o, corpus)) {
    fprintf(stderr,
            "jx train: no --data given and no corpus at %s (Debian: apt-get install "
            "fortunes)\n",
            DEFAULT_CORPUS);
    return 2;
  }
  if (o.stages > 1 && !*o.mesh)
    snprintf(o.mesh, sizeof o.mesh, "stage=%d,data=%d", o.stages, devices / o.stages);
  const char *mesh_spec = o.mesh;
  int planned = jx_cli_mesh_auto(&mesh_spec);
  jx_mesh *mesh = jx_cli_mesh(mesh_spec, devices);
  if (!mesh) return fail("--mesh");
  if (o.stages < 1) o.stages = (int)jx_mesh_axis_size(mesh, "stage"); /* --mesh stage=N,... */
  if (o.stages > 1 && jx_mesh_axis_size(mesh, "stage") != o.stages) {
    fprintf(stderr, "jx train: --stages %d needs a mesh axis stage=%d (the mesh is %s)\n", o.stages,
            o.stages, o.mesh);
    return 2;
  }
  if (o.microbatches < 1) o.microbatches = 2 * (o.stages > 1 ? o.stages : 1);
  int virt = o.schedule != JX_PIPELINE_INTERLEAVED ? 1
             : o.virtual_stages > 0                ? o.virtual_stages
                                                   : 2;
  int has_data = jx_mesh_axis_size(mesh, "data") > 0;

  model m = {.cfg = {.vocab = 256,
                     .n_layers = o.layers,
                     .d_model = o.width,
                     .n_heads = o.heads,
                     .context = o.context,
                     .mlp_ratio = 4,
                     .compute_dtype = o.compute_dtype}};
  jx_dataset *corpus_windows = jx_dataset_text(o.ndata, o.data, o.context);
  if (!corpus_windows) return fail("data");
  /* every process holds out the same windows, so a job trains on the same
   * data at any process count; the validation loss needs the whole held-out
   * set on one process, so only a job of one computes it */
  jx_array *val[2] = {NULL, NULL};
  jx_dataset *data = split_validation(corpus_windows, o.batch, val);
  if (!data) return fail("data");
  for (int a = 0; a < 2 && jx_process_count() > 1; a++) {
    jx_release(val[a]);
    val[a] = NULL;
  }
  jx_sharding *rows = jx_sharding_create(mesh, has_data ? "data" : "");
  for (int a = 0; a < 2 && val[a]; a++) {
    jx_array *placed = jx_keep(jx_device_put(val[a], rows));
    jx_release(val[a]);
    val[a] = placed;
  }
  jx_loader_options lo = {.batch = o.batch, .seed = o.seed, .shuffle = 1, .sharding = rows};
  jx_loader *loader = jx_loader_create(data, &lo);
  if (!loader) return fail("the data loader");

  jx_tree *params = jx_gpt_init(&m.cfg, jx_random_key(o.seed), JX_F32);
  if (!params) return fail("the model");
  m.np = jx_tree_size(params);
  char(*specs)[64] = calloc((size_t)m.np, sizeof *specs);
  if (jx_gpt_param_specs(&m.cfg, params, mesh, o.fsdp, specs)) return fail("parameter shardings");
  jx_sharding **psh = calloc((size_t)m.np, sizeof *psh);
  for (int i = 0; i < m.np; i++) {
    psh[i] = jx_sharding_create(mesh, specs[i]);
    jx_tree_set(params, jx_tree_name(params, i), jx_device_put(jx_tree_at(params, i), psh[i]));
  }
  m.opt = jx_optim_chain_clip(
      jx_optim_with_schedule(jx_optim_adamw(o.lr, 0.9, 0.95, 1e-8, 0.1),
                             jx_schedule_warmup_cosine(0, o.lr, o.warmup, o.steps, o.lr * 0.1)),
      1.0);
  jx_tree *state = jx_optim_init(m.opt, params);
  m.ns = jx_tree_size(state);
  m.params_like = params;

  /* shardings of the step's inputs and outputs: parameters as specified,
   * moments like their parameters, the batch over "data" */
  int nin = m.np + m.ns + 2, nout = 1 + m.np + m.ns;
  jx_sharding **in_sh = calloc((size_t)nin, sizeof *in_sh),
              **out_sh = calloc((size_t)nout, sizeof *out_sh);
  jx_sharding *replicated = jx_sharding_create(mesh, "");
  for (int i = 0; i < m.np; i++) in_sh[i] = out_sh[1 + i] = psh[i];
  for (int i = 0; i < m.ns; i++) {
    const char *name = jx_tree_name(state, i), *slash = strchr(name, '/');
    jx_sharding *s = replicated;
    for (int k = 0; slash && k < m.np; k++)
      if (!strcmp(slash + 1, jx_tree_name(params, k))) s = psh[k];
    in_sh[m.np + i] = out_sh[1 + m.np + i] = s;
  }
  in_sh[m.np + m.ns] = in_sh[m.np + m.ns + 1] = rows;
  out_sh[0] = replicated;
  m.loss = o.stages > 1 ? jx_gpt_pipeline_loss_fn(&m.cfg, params, mesh, "stage", o.microbatches,
                                                  o.schedule, virt, has_data ? "data" : NULL)
                        : jx_gpt_loss_fn(&m.cfg, params);
  if (!m.loss) return fail("the model's loss");
  jx_fn *step_fn = jx_train_step(m.loss, params, state, m.opt);
  jx_jit_options jo = {.in_shardings = in_sh, .out_shardings = out_sh};
  int *donate = calloc((size_t)nin, sizeof *donate);
  if (!donate) return fail("out of memory");
  if (planned) { /* every layout but the loss's planned */
    jx_cli_auto_layouts(nin, in_sh, nout, out_sh, donate);
    jo.donate = donate;
    jo.mesh = mesh;
    jo.memory_limit = (int64_t)o.memory_limit;
  }
  jx_fn *step = jx_jit(step_fn, &jo);
  if (!step) return fail("jit");
  /* the loss of the held-out windows, laid out as the train step's inputs */
  jx_sharding **eval_sh = calloc((size_t)m.np + 2, sizeof *eval_sh);
  for (int i = 0; i < m.np; i++) eval_sh[i] = psh[i];
  eval_sh[m.np] = eval_sh[m.np + 1] = rows;
  jx_fn *eval =
      val[0]
          ? jx_jit(m.loss, &(jx_jit_options){.in_shardings = eval_sh, .out_shardings = &replicated})
          : NULL;
  int64_t val_every = o.steps / 10 > 0 ? o.steps / 10 : 1;
  double val_loss = NAN;

  int64_t first = 0;
  if (o.resume) {
    int64_t latest = jx_checkpoint_latest(o.ckpt);
    if (latest >= 0) {
      jx_tree *like = checkpoint_tree(params, state, 0, o.heads);
      jx_tree *got = jx_checkpoint_load(o.ckpt, latest, like);
      if (!got) return fail("--resume");
      for (int i = 0; i < m.np; i++)
        jx_tree_set(params, jx_tree_name(params, i), jx_tree_at(got, i));
      for (int i = 0; i < m.ns; i++)
        jx_tree_set(state, jx_tree_name(state, i), jx_tree_at(got, m.np + i));
      jx_loader_seek(loader, (int64_t)jx_item(jx_tree_get(got, "data_position")));
      jx_tree_release(got);
      jx_tree_release(like);
      first = latest;
      if (lead) printf("resumed from step %lld in %s\n", (long long)latest, o.ckpt);
    }
  }

  int64_t nparams = jx_tree_numel(params);
  /* MFU against the hardware's peak f32 FLOP/s (jx_peak_flops: JX_PEAK_FLOPS or
   * measured once per machine); the job's: one process's, times the processes
   * (one per host) */
  double peak = jx_peak_flops() * jx_process_count(), flops = step_flops(&m, nparams, o.batch);
  if (lead) {
    printf("jx train: GPT %lld layers, d %lld, %lld heads, context %lld: %.2fM parameters\n",
           (long long)o.layers, (long long)o.width, (long long)o.heads, (long long)o.context,
           (double)nparams / 1e6);
    printf("  %d device(s)", devices);
    if (jx_process_count() > 1)
      printf(" (%d processes x %d)", jx_process_count(), jx_local_device_count());
    printf(", mesh %s%s, batch %lld, %lld steps, corpus %lld windows (%d files)\n",
           *o.mesh ? o.mesh : "data=all", o.fsdp ? " + fsdp" : "", (long long)o.batch,
           (long long)o.steps, (long long)jx_dataset_size(data), o.ndata);
    jx_pipeline_stats ps;
    if (o.stages > 1 &&
        !jx_pipeline_schedule_stats(o.schedule, o.stages, virt, o.microbatches, &ps))
      printf("  pipeline: %d stages, %d microbatches, %s: %d ticks, the schedule idle %.1f%% "
             "of stage time\n",
             o.stages, o.microbatches,
             o.schedule == JX_PIPELINE_GPIPE  ? "GPipe"
             : o.schedule == JX_PIPELINE_1F1B ? "1F1B"
                                              : "interleaved 1F1B",
             ps.ticks, 100 * ps.bubble_fraction);
    fflush(stdout);
  }
  FILE *metrics = lead && o.metrics ? fopen(o.metrics, o.resume ? "a" : "w") : NULL;
  if (lead && o.metrics && !metrics) {
    fprintf(stderr, "jx train: cannot write '%s'\n", o.metrics);
    return 2;
  }
  if (metrics)
    setvbuf(metrics, NULL, _IOLBF, 0); /* each line on disk as written: a kill keeps them */
  int tty = lead && isatty(fileno(stderr));
  jx_checkpoint_job *pending = NULL;
  double t_start = now_s(), t_last = t_start, first_loss = NAN, loss = NAN;
  jx_array **in = calloc((size_t)nin, sizeof *in), **out = calloc((size_t)nout, sizeof *out);
  /* over several processes start and stop are collectives: process 0
   * writes one trace of every process */
  if (o.plan_only) {
    jx_tree_flatten(params, in);
    jx_tree_flatten(state, in + m.np);
    if (jx_loader_next(loader, in + m.np + m.ns) ||
        jx_sharding_plan_print(step, in, NULL, NULL, stdout))
      return fail("--plan-only");
    goto release; /* no training */
  }
  if (o.profile && jx_profiler_start(o.profile)) return fail("--profile");
  for (int64_t s = first; s < o.stop_at; s++) {
    jx_scope_begin();
    jx_profiler_step(s);
    jx_tree_flatten(params, in);
    jx_tree_flatten(state, in + m.np);
    if (jx_loader_next(loader, in + m.np + m.ns) || jx_call(step, in, out)) {
      jx_scope_end();
      return fail("train step");
    }
    loss = jx_item(out[0]);
    for (int i = 0; i < m.np; i++) jx_tree_set(params, jx_tree_name(params, i), out[1 + i]);
    for (int i = 0; i < m.ns; i++) jx_tree_set(state, jx_tree_name(state, i), out[1 + m.np + i]);
    jx_scope_end();
    double t = now_s(), dt = t - t_last;
    t_last = t;
    if (s == first) first_loss = loss;
    if ((s + 1) % val_every == 0 || s + 1 == o.stop_at) {
      val_loss = validation_loss(eval, params, m.np, val);
      t_last = now_s(); /* the step's rate without the validation */
    }
    double tok_s = (double)(o.batch * o.context) / dt, mfu = flops / dt / peak;
    double eta = (t - t_start) / (double)(s + 1 - first) * (double)(o.steps - s - 1);
    if (lead && (tty || (s + 1) % 10 == 0 || s + 1 == o.steps)) {
      int done = (int)(30 * (s + 1) / o.steps);
      char val_txt[32] = ""; /* once there is one */
      if (!isnan(val_loss)) snprintf(val_txt, sizeof val_txt, " val %.4f", val_loss);
      fprintf(stderr, "%s[%.*s%*s] step %lld/%lld loss %.4f%s %.0f tok/s MFU %.1f%% ETA %.0fs%s",
              tty ? "\r" : "", done, "==============================", 30 - done, "",
              (long long)(s + 1), (long long)o.steps, loss, val_txt, tok_s, 100 * mfu, eta,
              tty ? "" : "\n");
    }
    if (metrics)
      fprintf(metrics, "{\"step\": %lld, \"loss\": %.6f, \"tokens_per_s\": %.1f, \"mfu\": %.4f}\n",
              (long long)(s + 1), loss, tok_s, mfu);
    if (o.ckpt && ((s + 1) % o.ckpt_every == 0 || s + 1 == o.stop_at)) {
      if (pending && jx_checkpoint_wait(pending)) return fail("checkpoint");
      if (pending && lead) prune_checkpoints(o.ckpt, o.keep);
      jx_tree *ck = checkpoint_tree(params, state, jx_loader_position(loader), o.heads);
      pending = jx_checkpoint_save_async(o.ckpt, s + 1, ck); /* training goes on meanwhile */
      jx_tree_release(ck);
      if (!pending) return fail("checkpoint");
    }
  }
  if (tty) fprintf(stderr, "\n");
  if (o.profile && jx_profiler_stop()) return fail("--profile");
  if (pending && jx_checkpoint_wait(pending)) return fail("checkpoint");
  if (pending && lead) prune_checkpoints(o.ckpt, o.keep);
  if (metrics) fclose(metrics);
  if (lead)
    printf("loss %.4f -> %.4f (validation %.4f) in %.1f s\n", first_loss, loss, val_loss,
           now_s() - t_start);
  if (o.sample > 0) {
    jx_array **p = calloc((size_t)m.np, sizeof *p);
    jx_tree_flatten(params, p);
    jx_scope_begin();
    /* parameters split over processes are gathered (by every process) so
     * that process 0 can run the model on its own */
    for (int i = 0; i < m.np && jx_process_count() > 1; i++) p[i] = jx_process_allgather(p[i]);
    int rc = 0;
    if (lead) {
      jx_tree *trained = jx_tree_unflatten(params, p);
      jx_cli_generate_options go = {.prompt = "The ",
                                    .batch = 1,
                                    .sampling = {.temperature = 0.8},
                                    .max_tokens = o.sample,
                                    .seed = o.seed + 1};
      printf("\nsample:\n");
      /* a job of several processes samples on process 0 alone, so on one device */
      rc = jx_cli_generate("train", &m.cfg, trained, jx_process_count() > 1 ? NULL : mesh, &go);
      jx_tree_release(trained);
    }
    jx_scope_end();
    free(p);
    if (rc) return 1;
  }
release:
  free(in);
  free(out);
  jx_fn_release(step);
  jx_fn_release(step_fn);
  jx_fn_release(m.loss);
  jx_tree_release(state);
  jx_tree_release(params);
  jx_optim_release(m.opt);
  jx_loader_release(loader);
  if (data != corpus_windows) jx_dataset_release(data);
  jx_dataset_release(corpus_windows);
  jx_release(val[0]);
  jx_release(val[1]);
  jx_fn_release(eval);
  free(eval_sh);
  for (int i = 0; i < m.np; i++) jx_sharding_release(psh[i]);
  free(psh);
  free(specs);
  free(in_sh);
  free(out_sh);
  free(donate);
  jx_sharding_release(replicated);
  jx_sharding_release(rows);
  jx_mesh_release(mesh);
  fflush(stdout);
  if (jx_distributed_shutdown()) return fail("leaving the job");
  jx_shutdown();
  return 0;
}
