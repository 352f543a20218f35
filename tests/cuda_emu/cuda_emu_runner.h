/* The host side of the CUDA emulator (cuda_emu.h says what it models and
 * what it does not): compiles a CUDA C++ source with the system C++
 * compiler into a shared object, with cuda_emu.h included first, and runs a
 * kernel of it over a grid, the blocks one after another, the threads of a
 * block as coroutines that switch at barriers. Compiled modules are cached
 * by source (cuda_emu_runner.c says where).
 *
 * A kernel is called through a small function of the test's, which knows
 * its signature:
 *   static void call(void *kernel, void *args) {
 *     const my_args *a = args;
 *     ((void (*)(float *, int))kernel)(a->x, a->n);
 *   }
 * Every thread of the grid calls it once per block. */
#ifndef JX_TESTS_CUDA_EMU_RUNNER_H
#define JX_TESTS_CUDA_EMU_RUNNER_H

#include <stddef.h>

typedef struct {
  unsigned x, y, z;
} cuda_emu_dim3;

/* The state each thread gets before it runs a block (cuda_emu.h's
 * cuda_emu_thread). */
typedef struct {
  cuda_emu_dim3 thread, block, block_dim, grid_dim;
  void (*sync_block)(void *ctx);
  void (*sync_warp)(void *ctx, unsigned warp);
  unsigned long long *warp_scratch;
  void *ctx;
} cuda_emu_thread;

typedef struct cuda_emu_module cuda_emu_module;
typedef void (*cuda_emu_call)(void *kernel, void *args);

/* 1 when a C++ compiler was found ($CXX, else g++, c++ or clang++ on the
 * PATH); else 0, and cuda_emu_missing() says why. */
int cuda_emu_available(void);
const char *cuda_emu_missing(void);

/* Compiles src (`name` names it in messages) into a loaded module, or NULL
 * with the compiler's first lines of errors in log. */
cuda_emu_module *cuda_emu_compile(const char *src, const char *name, char *log, size_t logcap);
/* The address of the extern "C" kernel `name`, or NULL. */
void *cuda_emu_kernel(cuda_emu_module *m, const char *name);
/* Runs kernel over grid x block (at most 1024 threads a block): 0, or -1
 * when the geometry is invalid, the threads' stacks cannot be made, or a
 * block deadlocks at its barriers. */
int cuda_emu_launch(cuda_emu_module *m, void *kernel, cuda_emu_dim3 grid, cuda_emu_dim3 block,
                    cuda_emu_call call, void *args);
void cuda_emu_unload(cuda_emu_module *m);

#endif
