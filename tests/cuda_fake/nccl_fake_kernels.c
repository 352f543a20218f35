/* Kernels for the fake NCCL's driver (nccl_fake_driver.c, built with
 * NCCL_FAKE_KERNELS): modules arrive as CUDA source (JX_CUDA_MODULE_SOURCE=1)
 * and run in tests/cuda_emu's emulator, as in cuda_fake.c, so that the CUDA
 * executor runs whole programs on the four fake devices while their
 * collectives go through the fake NCCL.
 *
 * A launch first waits for the work its stream waits for (a collective the
 * compute stream was told to wait for), then runs to the end: the kernels of
 * a stream are in order, and what comes after them on the stream sees their
 * results. Every device's memory is host memory, so one compiled module
 * serves every device: loads of the same source share it (the emulator's
 * C++ compile is the slow part of a test), and launches are serialized (the
 * emulator runs a block's threads as real threads; 2 cores are plenty busy). */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile/render_cuda.h"
#include "cuda/cuda_driver.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "cuda_emu/step_launch.h"
#include "nccl_fake.h"

enum { INVALID_VALUE = 1, INVALID_IMAGE = 200, NOT_FOUND = 500, LAUNCH_FAILED = 719 };
enum { NOT_SUPPORTED = 801 };

/* A compiled source, shared by the modules loaded from it. */
typedef struct compiled {
  char *source;
  cuda_emu_module *emu;
  int refs;
  struct compiled *next;
} compiled;

struct CUmod_st {
  compiled *c;
};
struct CUfunc_st {
  void *kernel;
  cuda_emu_module *emu;
  CUmodule owner;
  struct CUfunc_st *next;
};

static pthread_mutex_t modules_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_mutex_t launch_lock = PTHREAD_MUTEX_INITIALIZER;
static compiled *sources;
static struct CUfunc_st *functions; /* freed with their module */

FAKE_EXPORT CUresult cuModuleLoadData(CUmodule *m, const void *image) {
  const char *src = image;
  if (!src || !m) return INVALID_VALUE;
  if (!memcmp(src, "\177ELF", 4)) {
    fprintf(stderr, "jx fake GPU: cuModuleLoadData: a cubin cannot run here; set "
                    "JX_CUDA_MODULE_SOURCE=1 so that modules arrive as CUDA source\n");
    return NOT_SUPPORTED;
  }
  *m = malloc(sizeof **m);
  if (!*m) return JX_CUDA_ERROR_OUT_OF_MEMORY;
  pthread_mutex_lock(&modules_lock); /* held over the compile: loads are rare */
  compiled *c = sources;
  while (c && strcmp(c->source, src)) c = c->next;
  if (!c) {
    char log[4096];
    cuda_emu_module *emu = cuda_emu_compile(src, "jx fake GPU module", log, sizeof log);
    c = emu ? calloc(1, sizeof *c) : NULL;
    if (c && !(c->source = strdup(src))) {
      free(c);
      c = NULL;
    }
    if (!c) {
      if (emu) cuda_emu_unload(emu);
      pthread_mutex_unlock(&modules_lock);
      free(*m);
      fprintf(stderr, "jx fake GPU: cuModuleLoadData: %s\n", emu ? "out of memory" : log);
      return emu ? JX_CUDA_ERROR_OUT_OF_MEMORY : INVALID_IMAGE;
    }
    c->emu = emu;
    c->next = sources;
    sources = c;
  }
  c->refs++;
  (*m)->c = c;
  pthread_mutex_unlock(&modules_lock);
  return 0;
}

FAKE_EXPORT CUresult cuModuleGetFunction(CUfunction *f, CUmodule m, const char *name) {
  if (!m || !name || !f) return INVALID_VALUE;
  /* only the executor's kernels: their signature is the one launches assume */
  void *k = strncmp(name, "jx_cuda_step", 12) ? NULL : cuda_emu_kernel(m->c->emu, name);
  if (!k) return NOT_FOUND;
  struct CUfunc_st *fn = malloc(sizeof *fn);
  if (!fn) return JX_CUDA_ERROR_OUT_OF_MEMORY;
  *fn = (struct CUfunc_st){k, m->c->emu, m, NULL};
  pthread_mutex_lock(&modules_lock);
  fn->next = functions;
  functions = fn;
  pthread_mutex_unlock(&modules_lock);
  *f = fn;
  return 0;
}

FAKE_EXPORT CUresult cuModuleUnload(CUmodule m) {
  if (!m) return INVALID_VALUE;
  pthread_mutex_lock(&modules_lock);
  for (struct CUfunc_st **p = &functions; *p;) {
    struct CUfunc_st *fn = *p;
    if (fn->owner == m) {
      *p = fn->next;
      free(fn);
    } else {
      p = &fn->next;
    }
  }
  compiled *c = m->c;
  if (--c->refs == 0) {
    for (compiled **p = &sources; *p; p = &(*p)->next)
      if (*p == c) {
        *p = c->next;
        break;
      }
    cuda_emu_unload(c->emu);
    free(c->source);
    free(c);
  }
  pthread_mutex_unlock(&modules_lock);
  free(m);
  return 0;
}

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                                    CUstream s, void **params, void **extra) {
  if (!f || !s || !params || extra || shared_bytes) return INVALID_VALUE;
  cuda_emu_step_args args = cuda_emu_step_args_from(params);
  fake_stream_drain(s);
  pthread_mutex_lock(&launch_lock);
  int r = cuda_emu_launch_step(f->emu, f->kernel, (cuda_emu_dim3){gx, gy, gz},
                               (cuda_emu_dim3){bx, by, bz}, &args);
  pthread_mutex_unlock(&launch_lock);
  return r ? LAUNCH_FAILED : 0;
}
