/* The CUDA emulator's host side (cuda_emu_runner.h). */
#define _GNU_SOURCE
#include "cuda_emu_runner.h"

#include "../content_cache.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <ucontext.h>
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

/* ---- the compiled-module cache ----
 *
 * Compiling a module with the C++ compiler takes about a second, and a test
 * loads the same source many times (each jitted program loads the gather
 * module; the suite's programs share many kernels). Compiled objects are
 * kept in a directory, keyed by a hash of the source, the emulator's
 * headers and the compiler, with the source beside each so a hit is checked
 * byte for byte. Each load still dlopens its own copy of the object, so
 * every module keeps its own globals, as on a GPU. The directory is
 * $CUDA_EMU_CACHE_DIR, else the build's (JX_CUDA_EMU_CACHE_DIR, from
 * tests/CMakeLists.txt); CUDA_EMU_CACHE_DIR=off compiles every time.
 * Processes share it: entries appear by rename, whole or not at all. */

/* The hash of what a compile depends on besides the source: the compiler
 * and the emulator's headers (cuda_emu.h includes the other two). */
static uint64_t toolchain;
static pthread_once_t toolchain_once = PTHREAD_ONCE_INIT;

static void hash_toolchain(void) {
  char dir[512];
  snprintf(dir, sizeof dir, "%s", JX_CUDA_EMU_HEADER);
  char *slash = strrchr(dir, '/');
  if (slash) *slash = '\0';
  uint64_t h = content_hash(CONTENT_HASH_SEED, compiler, strlen(compiler));
  static const char *const headers[] = {"cuda_emu.h", "cuda_emu_mma.h", "cuda_emu_async.h"};
  for (size_t k = 0; k < sizeof headers / sizeof headers[0]; k++) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", slash ? dir : ".", headers[k]);
    size_t n = 0;
    char *text = content_read(path, &n);
    h = content_hash(h, headers[k], strlen(headers[k]));
    if (text) h = content_hash(h, text, n);
    free(text);
  }
  toolchain = h;
}

static const char *cache_dir(void) {
  const char *dir = getenv("CUDA_EMU_CACHE_DIR");
#ifdef JX_CUDA_EMU_CACHE_DIR
  if (!dir || !*dir) dir = JX_CUDA_EMU_CACHE_DIR;
#endif
  if (!dir || !*dir || !strcmp(dir, "off")) return NULL;
  if (mkdir(dir, 0755) && errno != EEXIST) return NULL;
  return dir;
}

/* Copies file `from` to `to` (whole or not at all): 0 on success. */
static int copy_file(const char *from, const char *to) {
  size_t n = 0;
  char *bytes = content_read(from, &n);
  int rc = bytes ? content_write(to, bytes, n) : -1;
  free(bytes);
  return rc;
}

/* 1 when the cache holds src's object (its source beside it equals src):
 * then `so` receives a private copy of it. */
static int cache_fetch(const char *dir, uint64_t key, const char *src, const char *so) {
  char path[800];
  snprintf(path, sizeof path, "%s/%016llx.cu", dir, (unsigned long long)key);
  if (!content_matches(path, src)) return 0;
  snprintf(path, sizeof path, "%s/%016llx.so", dir, (unsigned long long)key);
  return copy_file(path, so) == 0;
}

static void cache_store(const char *dir, uint64_t key, const char *src, const char *so) {
  char path[800];
  /* the object first: a reader checks the source, so an entry is whole once its source is there */
  snprintf(path, sizeof path, "%s/%016llx.so", dir, (unsigned long long)key);
  if (copy_file(so, path)) return;
  snprintf(path, sizeof path, "%s/%016llx.cu", dir, (unsigned long long)key);
  content_write(path, src, strlen(src));
}

/* Compiles path into so with the emulator's header: 0, or the compiler's
 * messages in log. */
static int compile_object(const char *path, const char *so, const char *err, const char *name,
                          char *log, size_t logcap) {
  char cmd[3000];
  /* -ffp-contract=off: no fused multiply-add, as NVRTC with --fmad=false */
  snprintf(cmd, sizeof cmd,
           "'%s' -x c++ -std=c++17 -O1 -fPIC -shared -ffp-contract=off -w -include '%s' "
           "'%s' -o '%s' -lpthread 2> '%s'",
           compiler, JX_CUDA_EMU_HEADER, path, so, err);
  if (system(cmd) == 0) return 0;
  char text[4096];
  read_log(err, text, sizeof text);
  snprintf(log, logcap, "%s: the C++ compiler failed: %s", name, text);
  return -1;
}

cuda_emu_module *cuda_emu_compile(const char *src, const char *name, char *log, size_t logcap) {
  if (logcap) log[0] = '\0';
  if (!cuda_emu_available()) {
    snprintf(log, logcap, "%s", missing);
    return NULL;
  }
  const char *tmp = getenv("TMPDIR");
  char dir[512], path[600], so[600], err[600];
  snprintf(dir, sizeof dir, "%s/cuda_emu.XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(dir)) {
    snprintf(log, logcap, "%s: cannot make a temporary directory under %s", name, dir);
    return NULL;
  }
  snprintf(path, sizeof path, "%s/kernel.cu", dir);
  snprintf(so, sizeof so, "%s/kernel.so", dir);
  snprintf(err, sizeof err, "%s/log.txt", dir);
  pthread_once(&toolchain_once, hash_toolchain);
  uint64_t key = content_hash(toolchain, src, strlen(src));
  const char *cache = cache_dir();
  cuda_emu_module *m = NULL;
  int built = cache && cache_fetch(cache, key, src, so);
  if (!built && write_file(path, src)) {
    snprintf(log, logcap, "%s: cannot write %s", name, path);
  } else if (!built && compile_object(path, so, err, name, log, logcap) == 0) {
    built = 1;
    if (cache) cache_store(cache, key, src, so);
  }
  if (built) {
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

/* ---- a launch ----
 *
 * The threads of a block run as coroutines on the calling thread, each on a
 * stack of its own, switching only at barriers: a thread runs until it
 * meets __syncthreads or a warp barrier (a shuffle, __syncwarp) or ends,
 * then the next runs. A barrier opens when every thread of the block (or of
 * the warp) waits at it. That orders the threads as real threads meeting at
 * barriers could be ordered, without an OS thread per CUDA thread (on a
 * shared machine, a barrier of 256 OS threads waits for 256 wake-ups). A
 * block whose threads all wait but whose barriers cannot open (some at a
 * warp barrier, some at the block's, or a barrier some threads never reach)
 * is the deadlock CUDA leaves undefined: the launch fails saying so. */

enum { RUNNING, AT_BLOCK, AT_WARP, DONE };

typedef struct fiber {
  ucontext_t context;
  cuda_emu_thread self;
  int state;
} fiber;

typedef struct {
  const cuda_emu_module *m;
  void *kernel;
  cuda_emu_call call;
  void *args;
  ucontext_t scheduler;
  fiber *fibers;
  fiber *current;
  const void *scheduler_stack; /* AddressSanitizer's view of the calling thread's stack */
  size_t scheduler_stack_size;
} launch;

/* Under AddressSanitizer every switch of stacks is announced to it (its
 * fiber interface), or it takes the fibers' frames for the caller's. */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define EMU_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(EMU_ASAN)
#define EMU_ASAN 1
#endif
#ifdef EMU_ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define ANNOUNCE_SWITCH(save, bottom, size) __sanitizer_start_switch_fiber(save, bottom, size)
#define SWITCHED(saved, bottom, size)       __sanitizer_finish_switch_fiber(saved, bottom, size)
#else
#define ANNOUNCE_SWITCH(save, bottom, size) ((void)(save), (void)(bottom), (void)(size))
#define SWITCHED(saved, bottom, size)       ((void)(saved), (void)(bottom), (void)(size))
#endif

/* A fiber's stack: the kernels' locals are small arrays at most. */
enum { STACK_BYTES = 256 << 10, GUARD_BYTES = 4096 };

static void yield(launch *l, int state) {
  fiber *f = l->current;
  f->state = state;
  void *fake_stack = NULL;
  ANNOUNCE_SWITCH(&fake_stack, l->scheduler_stack, l->scheduler_stack_size);
  swapcontext(&f->context, &l->scheduler);
  SWITCHED(fake_stack, &l->scheduler_stack, &l->scheduler_stack_size);
}

static void sync_block(void *ctx) { yield(ctx, AT_BLOCK); }
static void sync_warp(void *ctx, unsigned warp) {
  (void)warp; /* the fiber's own warp: its thread index says which */
  yield(ctx, AT_WARP);
}

/* makecontext passes int arguments: the launch's address in two halves */
static void fiber_main(unsigned hi, unsigned lo) {
  launch *l = (launch *)(((uintptr_t)hi << 32) | lo);
  SWITCHED(NULL, &l->scheduler_stack, &l->scheduler_stack_size);
  l->call(l->kernel, l->args);
  l->current->state = DONE;
  /* uc_link returns to the scheduler, and this stack is done with */
  ANNOUNCE_SWITCH(NULL, l->scheduler_stack, l->scheduler_stack_size);
}

/* Opens what can open among n fibers in warps of 32: 1 if some barrier
 * opened, 0 if none can (every fiber done, or a deadlock). */
static int open_barriers(fiber *fibers, unsigned long long n, int *deadlock) {
  unsigned long long waiting_block = 0, done = 0;
  int opened = 0;
  for (unsigned long long w = 0; w < n; w += 32) {
    unsigned long long end = w + 32 < n ? w + 32 : n, at_warp = 0;
    for (unsigned long long i = w; i < end; i++) {
      at_warp += fibers[i].state == AT_WARP;
      waiting_block += fibers[i].state == AT_BLOCK;
      done += fibers[i].state == DONE;
    }
    if (at_warp == end - w) {
      for (unsigned long long i = w; i < end; i++) fibers[i].state = RUNNING;
      opened = 1;
    }
  }
  if (opened) return 1;
  if (waiting_block == n) {
    for (unsigned long long i = 0; i < n; i++) fibers[i].state = RUNNING;
    return 1;
  }
  *deadlock = done != n;
  return 0;
}

/* Runs one block: 0, or -1 on a deadlock. */
static int run_block(launch *l, unsigned long long n, char *stacks, cuda_emu_dim3 block,
                     cuda_emu_dim3 block_dim, cuda_emu_dim3 grid, unsigned long long *scratch) {
  uintptr_t self = (uintptr_t)l;
  for (unsigned long long i = 0; i < n; i++) {
    fiber *f = &l->fibers[i];
    f->self =
        (cuda_emu_thread){{(unsigned)(i % block_dim.x), (unsigned)(i / block_dim.x % block_dim.y),
                           (unsigned)(i / block_dim.x / block_dim.y)},
                          block,
                          block_dim,
                          grid,
                          sync_block,
                          sync_warp,
                          scratch,
                          l};
    f->state = RUNNING;
    getcontext(&f->context);
    f->context.uc_stack.ss_sp = stacks + i * (STACK_BYTES + GUARD_BYTES) + GUARD_BYTES;
    f->context.uc_stack.ss_size = STACK_BYTES;
    f->context.uc_link = &l->scheduler;
    makecontext(&f->context, (void (*)(void))fiber_main, 2, (unsigned)(self >> 32),
                (unsigned)(self & 0xffffffffu));
  }
  for (;;) {
    for (unsigned long long i = 0; i < n; i++) {
      fiber *f = &l->fibers[i];
      if (f->state != RUNNING) continue;
      l->current = f;
      l->m->bind(&f->self); /* the kernel's thread-locals are this fiber's */
      void *fake_stack = NULL;
      ANNOUNCE_SWITCH(&fake_stack, f->context.uc_stack.ss_sp, f->context.uc_stack.ss_size);
      swapcontext(&l->scheduler, &f->context);
      SWITCHED(fake_stack, NULL, NULL);
    }
    int deadlock = 0;
    if (!open_barriers(l->fibers, n, &deadlock)) {
      if (deadlock)
        fprintf(stderr,
                "cuda_emu: block (%u,%u,%u) deadlocks: its threads wait at barriers "
                "that cannot open (some at __syncthreads, some at a warp barrier, or "
                "some never reach it)\n",
                block.x, block.y, block.z);
      return deadlock ? -1 : 0;
    }
  }
}

int cuda_emu_launch(cuda_emu_module *m, void *kernel, cuda_emu_dim3 grid, cuda_emu_dim3 block,
                    cuda_emu_call call, void *args) {
  unsigned long long n = (unsigned long long)block.x * block.y * block.z;
  if (!m || !kernel || n == 0 || n > 1024 || !grid.x || !grid.y || !grid.z) return -1;
  size_t span = (size_t)n * (STACK_BYTES + GUARD_BYTES);
  char *stacks = mmap(NULL, span, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  launch l = {m, kernel, call, args, {0}, calloc(n, sizeof(fiber)), NULL, NULL, 0};
  unsigned long long *scratch = calloc((size_t)(n + 31) / 32 * 32, sizeof *scratch);
  int rc = stacks == MAP_FAILED || !l.fibers || !scratch ? -1 : 0;
  /* a guard page under each stack: an overflow faults instead of writing a neighbour's */
  for (unsigned long long i = 0; i < n && !rc; i++)
    rc = mprotect(stacks + i * (STACK_BYTES + GUARD_BYTES), GUARD_BYTES, PROT_NONE);
  if (rc) fprintf(stderr, "cuda_emu: cannot make the stacks of %llu threads\n", n);
  for (unsigned z = 0; z < grid.z && !rc; z++)
    for (unsigned y = 0; y < grid.y && !rc; y++)
      for (unsigned x = 0; x < grid.x && !rc; x++)
        rc = run_block(&l, n, stacks, (cuda_emu_dim3){x, y, z}, block, grid, scratch);
#ifdef EMU_ASAN
  /* frames a deadlocked block left poisoned must not outlive the stacks */
  if (stacks != MAP_FAILED) ASAN_UNPOISON_MEMORY_REGION(stacks, span);
#endif
  if (stacks != MAP_FAILED) munmap(stacks, span);
  free(l.fibers);
  free(scratch);
  return rc;
}
