/* The executor's step kernels (src/compile/render_cuda.h: each is
 * jx_cuda_step_*(jx_cuda_kargs, row_begin, row_end)) run in the emulator:
 * by the fake drivers' cuLaunchKernel, from the parameters the executor
 * passes, and by test_cuda_kernels, from values it fills in itself. */
#ifndef JX_TESTS_CUDA_EMU_STEP_LAUNCH_H
#define JX_TESTS_CUDA_EMU_STEP_LAUNCH_H

#include <stdint.h>
#include <string.h>

#include "compile/render_cuda.h"
#include "cuda_emu/cuda_emu_runner.h"

typedef struct {
  jx_cuda_kargs a;
  int64_t row_begin, row_end;
} cuda_emu_step_args;

/* cuLaunchKernel's kernelParams as the executor gives them: pointers to the
 * kernel arguments, in order. */
static inline cuda_emu_step_args cuda_emu_step_args_from(void **params) {
  cuda_emu_step_args s;
  memcpy(&s.a, params[0], sizeof s.a);
  memcpy(&s.row_begin, params[1], sizeof s.row_begin);
  memcpy(&s.row_end, params[2], sizeof s.row_end);
  return s;
}

static inline void cuda_emu_call_step(void *kernel, void *args) {
  const cuda_emu_step_args *s = args;
  ((void (*)(jx_cuda_kargs, int64_t, int64_t))kernel)(s->a, s->row_begin, s->row_end);
}

/* Runs step kernel `kernel` of module m over the grid; 0 when it ran. */
static inline int cuda_emu_launch_step(cuda_emu_module *m, void *kernel, cuda_emu_dim3 grid,
                                       cuda_emu_dim3 block, cuda_emu_step_args *args) {
  return cuda_emu_launch(m, kernel, grid, block, cuda_emu_call_step, args);
}

#endif
