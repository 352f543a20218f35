/* The CUDA emulator's host side (cuda_emu_runner.h). */
#define _GNU_SOURCE
#include "cuda_emu_runner.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef JX_CUDA_EMU_HEADER
#error "JX_CUDA_EMU_HEADER must name cuda_emu.h (tests/CMakeLists.txt defines it)"
#endif

struct cuda_emu_module {
  void *so;
  void (*bind)(const cuda_emu_thread *t);
};

static char compiler[512];
static char missing[600];

static int on_path(const char *prog, char *out, size_t cap) {
  if (strchr(prog, '/')) {
    snprintf(out, cap, "%s", prog);
    return access(prog, X_OK) == 0;
  }
  const char *path = getenv("PATH");
  if (!path) path = "/usr/bin:/bin";
  while (*path) {
    const char *end = strchr(path, ':');
    size_t n = end ? (size_t)(end - path) : strlen(path);
    snprintf(out, cap, "%.*s/%s", (int)n, path, prog);
    if (n && access(out, X_OK) == 0) return 1;
    path += n + (end ? 1 : 0);
  }
  return 0;
}

int cuda_emu_available(void) {
  static int known = -1;
  if (known >= 0) return known;
  const char *cxx = getenv("CXX");
  const char *tries[] = {cxx && *cxx ? cxx : "g++", "g++", "c++", "clang++"};
  known = 0;
  for (size_t k = 0; k < sizeof tries / sizeof tries[0] && !known; k++)
    known = on_path(tries[k], compiler, sizeof compiler);
  if (!known) snprintf(missing, sizeof missing, "no C++ compiler ($CXX, g++, c++, clang++)");
  return known;
}

const char *cuda_emu_missing(void) { return missing; }

static int write_file(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  if (!f) return -1;
  size_t n = strlen(text);
  int ok = fwrite(text, 1, n, f) == n;
  return (fclose(f) == 0 && ok) ? 0 : -1;
}

static void read_log(const char *path, char *log, size_t cap) {
  if (!cap) return;
  log[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  size_t n = fread(log, 1, cap - 1, f);
  log[n] = '\0';
  fclose(f);
}

cuda_emu_module *cuda_emu_compile(const char *src, const char *name, char *log, size_t logcap) {
  if (logcap) log[0] = '\0';
  if (!cuda_emu_available()) {
    snprintf(log, logcap, "%s", missing);
    return NULL;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600], so[600], err[600], cmd[3000];
  snprintf(dir, sizeof dir, "%s/cuda_emu.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    snprintf(log, logcap, "%s: cannot make a temporary directory under %s", name, dir);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/kernel.cu", dir);
  snprintf(so, sizeof so, "%s/kernel.so", dir);
  snprintf(err, sizeof err, "%s/log.txt", dir);
  cuda_emu_module *m = NULL;
  if (write_file(path, src)) {
    snprintf(log, logcap, "%s: cannot write %s", name, path);
  } else {
    /* -ffp-contract=off: no fused multiply-add, as NVRTC with --fmad=false */
    snprintf(cmd, sizeof cmd,
             "'%s' -x c++ -std=c++17 -O1 -fPIC -shared -ffp-contract=off -w -include '%s' "
             "'%s' -o '%s' -lpthread 2> '%s'",
             compiler, JX_CUDA_EMU_HEADER, path, so, err);
    int rc = system(cmd);
    if (rc != 0) {
      char text[4096];
      read_log(err, text, sizeof text);
      snprintf(log, logcap, "%s: the C++ compiler failed: %s", name, text);
    } else {
      m = calloc(1, sizeof *m);
      if (m) m->so = dlopen(so, RTLD_NOW | RTLD_LOCAL);
      if (m && m->so) *(void **)&m->bind = dlsym(m->so, "cuda_emu_bind");
      if (!m || !m->so || !m->bind) {
        snprintf(log, logcap, "%s: cannot load the compiled kernels: %s", name,
                 m && !m->so ? dlerror() : "no cuda_emu_bind");
        if (m && m->so) dlclose(m->so);
        free(m);
        m = NULL;
      }
    }
  }
  unlink(path);
  unlink(so);
  unlink(err);
  rmdir(dir);
  return m;
}

void *cuda_emu_kernel(cuda_emu_module *m, const char *name) { return dlsym(m->so, name); }

void cuda_emu_unload(cuda_emu_module *m) {
  if (!m) return;
  dlclose(m->so);
  free(m);
}

/* ---- a launch ---- */

typedef struct {
  pthread_barrier_t block_barrier;
  pthread_barrier_t warp_barrier[32];
  int nwarps;
  unsigned long long *scratch;
} block_sync;

static void sync_block(void *ctx) { pthread_barrier_wait(&((block_sync *)ctx)->block_barrier); }
static void sync_warp(void *ctx, unsigned warp) {
  pthread_barrier_wait(&((block_sync *)ctx)->warp_barrier[warp]);
}

typedef struct {
  const cuda_emu_module *m;
  void *kernel;
  cuda_emu_call call;
  void *args;
  cuda_emu_dim3 grid, block;
  block_sync *sync;
  /* the threads start once all exist (or leave, when one could not start) */
  pthread_mutex_t gate;
  pthread_cond_t opened;
  int state; /* 0 waiting, 1 go, -1 cancelled */
} launch;

typedef struct {
  launch *l;
  cuda_emu_dim3 tid;
} worker;

static void *run_thread(void *arg) {
  const worker *w = arg;
  launch *l = w->l;
  pthread_mutex_lock(&l->gate);
  while (l->state == 0) pthread_cond_wait(&l->opened, &l->gate);
  int go = l->state == 1;
  pthread_mutex_unlock(&l->gate);
  if (!go) return NULL;
  cuda_emu_thread t = {w->tid,     {0, 0, 0}, l->block,         l->grid,
                       sync_block, sync_warp, l->sync->scratch, l->sync};
  for (unsigned z = 0; z < l->grid.z; z++)
    for (unsigned y = 0; y < l->grid.y; y++)
      for (unsigned x = 0; x < l->grid.x; x++) {
        t.block = (cuda_emu_dim3){x, y, z};
        l->m->bind(&t);
        l->call(l->kernel, l->args);
        /* the block's __shared__ storage is the next block's: wait for all */
        pthread_barrier_wait(&l->sync->block_barrier);
      }
  return NULL;
}

int cuda_emu_launch(cuda_emu_module *m, void *kernel, cuda_emu_dim3 grid, cuda_emu_dim3 block,
                    cuda_emu_call call, void *args) {
  unsigned long long n = (unsigned long long)block.x * block.y * block.z;
  if (!m || !kernel || n == 0 || n > 1024 || !grid.x || !grid.y || !grid.z) return -1;
  block_sync sync;
  memset(&sync, 0, sizeof sync);
  sync.nwarps = (int)((n + 31) / 32);
  sync.scratch = calloc((size_t)sync.nwarps * 32, sizeof *sync.scratch);
  worker *workers = calloc(n, sizeof *workers);
  pthread_t *threads = calloc(n, sizeof *threads);
  if (!sync.scratch || !workers || !threads) {
    free(sync.scratch);
    free(workers);
    free(threads);
    return -1;
  }
  pthread_barrier_init(&sync.block_barrier, NULL, (unsigned)n);
  for (int w = 0; w < sync.nwarps; w++) {
    unsigned lanes = (unsigned)(n - 32ull * (unsigned)w < 32 ? n - 32ull * (unsigned)w : 32);
    pthread_barrier_init(&sync.warp_barrier[w], NULL, lanes);
  }
  launch l = {m,
              kernel,
              call,
              args,
              grid,
              block,
              &sync,
              PTHREAD_MUTEX_INITIALIZER,
              PTHREAD_COND_INITIALIZER,
              0};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 1 << 20);
  unsigned long long started = 0;
  int bad = 0;
  for (unsigned long long i = 0; i < n; i++) {
    workers[i].l = &l;
    workers[i].tid = (cuda_emu_dim3){(unsigned)(i % block.x), (unsigned)(i / block.x % block.y),
                                     (unsigned)(i / block.x / block.y)};
    if (pthread_create(&threads[i], &attr, run_thread, &workers[i])) {
      bad = 1;
      break;
    }
    started++;
  }
  pthread_attr_destroy(&attr);
  if (bad) fprintf(stderr, "cuda_emu: could not start %llu threads\n", n);
  pthread_mutex_lock(&l.gate);
  l.state = bad ? -1 : 1;
  pthread_cond_broadcast(&l.opened);
  pthread_mutex_unlock(&l.gate);
  for (unsigned long long i = 0; i < started; i++) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&sync.block_barrier);
  for (int w = 0; w < sync.nwarps; w++) pthread_barrier_destroy(&sync.warp_barrier[w]);
  pthread_mutex_destroy(&l.gate);
  pthread_cond_destroy(&l.opened);
  free(sync.scratch);
  free(workers);
  free(threads);
  return bad ? -1 : 0;
}
