/* A CPU stand-in for the CUDA device side, so that CUDA C++ kernel sources
 * (the ones NVRTC compiles) can be run and checked on a machine without a
 * GPU. The runner (cuda_emu_runner.h) compiles a kernel source with the
 * system C++ compiler, with this header included first, into a shared
 * object, and launches a grid: blocks one after another, the threads of a
 * block as coroutines of one OS thread that switch at barriers.
 *
 * What it models:
 *  - threadIdx, blockIdx, blockDim, gridDim (thread-local, set per block);
 *  - __syncthreads (a barrier of the block's threads) and __syncwarp;
 *  - __shared__ variables: function-static storage, which the threads of a
 *    block share; blocks run one at a time, so each block sees its own;
 *  - warp shuffles (__shfl_sync, __shfl_xor_sync, __shfl_down_sync,
 *    __shfl_up_sync): each lane writes its value to a per-warp scratch slot,
 *    a barrier of the warp, each lane reads its source lane, a barrier;
 *  - atomicAdd (f32, i32, u32: real atomics), __int_as_float and friends;
 *  - the math functions NVRTC provides as builtins, from the C++ library
 *    (glibc's expf, powf, sin, ...).
 *
 * What it does not model, so what a passing emulation does not show:
 *  - CUDA's memory model and its caches: a thread runs until it meets a
 *    barrier, then the next, so a missing __syncthreads may go unnoticed,
 *    and a thread that spins waiting for another's write without a barrier
 *    never ends;
 *  - warp-synchronous execution and divergence: a lane runs ahead of its
 *    warp until it meets a barrier; a shuffle or __syncthreads that only
 *    some threads reach fails the launch, naming the block (CUDA calls it
 *    undefined); the shuffles' member mask is ignored (every lane of the
 *    warp must call);
 *  - timing, occupancy, register and shared-memory limits (the kernels'
 *    static __shared__ sizes are checked by NVRTC, not here);
 *  - CUDA's own math library: expf, powf, sin, ... and the double
 *    functions are glibc's here, libdevice's on a GPU (a few ulp apart);
 *    jx's kernels use fastmath.h's f32 functions (plain arithmetic), which
 *    give the same bits on both when nothing contracts a multiply-add:
 *    NVRTC is called with --fmad=false and this code is compiled with
 *    -ffp-contract=off;
 *  - tensor cores beyond cuda_emu_mma.h's mma.sync m16n8k16 (bf16 or f16
 *    in, f32 out) and ldmatrix x4, whose fragment layouts it follows;
 *  - asynchronous copies beyond cuda_emu_async.h's cp.async (16 bytes)
 *    with commit and wait groups: a copy lands when its thread waits for
 *    its group, not earlier;
 *  - bf16 hardware types (__nv_bfloat16): the kernels here keep bf16 as
 *    uint16_t bits and convert with integer arithmetic, as on the CPU. */
#ifndef JX_TESTS_CUDA_EMU_H
#define JX_TESTS_CUDA_EMU_H

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>

/* NVRTC has no system headers: kernel sources declare their own
 * fixed-width types (`typedef long long int64_t;`), which would clash with
 * the C library's; they get names of their own here. */
#define int8_t   cuda_emu_int8_t
#define uint8_t  cuda_emu_uint8_t
#define int16_t  cuda_emu_int16_t
#define uint16_t cuda_emu_uint16_t
#define int32_t  cuda_emu_int32_t
#define uint32_t cuda_emu_uint32_t
#define int64_t  cuda_emu_int64_t
#define uint64_t cuda_emu_uint64_t
/* and their own INFINITY and NAN */
#undef INFINITY
#undef NAN

using std::signbit;

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __noinline__
#define __shared__   static
#define __constant__ static
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))

struct uint3 {
  unsigned int x, y, z;
};
typedef uint3 dim3;

/* The state the runner gives each thread before it runs a block (the same
 * layout as cuda_emu_thread in cuda_emu_runner.h). */
struct cuda_emu_thread {
  uint3 thread, block, block_dim, grid_dim;
  void (*sync_block)(void *ctx);
  void (*sync_warp)(void *ctx, unsigned warp);
  unsigned long long *warp_scratch; /* 32 slots per warp, the block's warps one after another */
  void *ctx;
};

static thread_local cuda_emu_thread cuda_emu_self;
static thread_local uint3 threadIdx, blockIdx, blockDim, gridDim;
static const int warpSize = 32;

extern "C" void cuda_emu_bind(const cuda_emu_thread *t) {
  cuda_emu_self = *t;
  threadIdx = t->thread;
  blockIdx = t->block;
  blockDim = t->block_dim;
  gridDim = t->grid_dim;
}

static inline unsigned cuda_emu_linear_tid() {
  return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
}

static inline void __syncthreads() { cuda_emu_self.sync_block(cuda_emu_self.ctx); }
static inline void __syncwarp(unsigned mask = 0xffffffffu) {
  (void)mask;
  cuda_emu_self.sync_warp(cuda_emu_self.ctx, cuda_emu_linear_tid() / 32);
}

/* Lane `lane` of this warp's value v, every lane asking at once. */
template <class T> static inline T cuda_emu_exchange(T v, int lane) {
  static_assert(sizeof(T) <= 8, "shuffle of a value over 8 bytes");
  unsigned tid = cuda_emu_linear_tid(), warp = tid / 32;
  unsigned long long *slots = cuda_emu_self.warp_scratch + 32 * warp, bits = 0;
  std::memcpy(&bits, &v, sizeof v);
  slots[tid % 32] = bits;
  __syncwarp();
  bits = slots[lane & 31];
  __syncwarp();
  T r;
  std::memcpy(&r, &bits, sizeof r);
  return r;
}
static inline int cuda_emu_lane() { return (int)(cuda_emu_linear_tid() % 32); }

template <class T> static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  (void)mask;
  int lane = cuda_emu_lane();
  return cuda_emu_exchange(v, (lane & ~(width - 1)) + (src % width));
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32) {
  (void)mask;
  int lane = cuda_emu_lane(), src = lane ^ lane_mask;
  /* a source outside the lane's segment of `width` lanes: its own value */
  return cuda_emu_exchange(v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask;
  int lane = cuda_emu_lane(), src = lane + (int)delta;
  return cuda_emu_exchange(v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned delta, int width = 32) {
  (void)mask;
  int lane = cuda_emu_lane(), src = lane - (int)delta;
  return cuda_emu_exchange(v, src >= (lane & ~(width - 1)) ? src : lane);
}

static inline float atomicAdd(float *p, float v) {
  unsigned *u = reinterpret_cast<unsigned *>(p);
  unsigned expected = __atomic_load_n(u, __ATOMIC_SEQ_CST);
  for (;;) {
    float old, sum;
    std::memcpy(&old, &expected, 4);
    sum = old + v;
    unsigned desired;
    std::memcpy(&desired, &sum, 4);
    if (__atomic_compare_exchange_n(u, &expected, desired, false, __ATOMIC_SEQ_CST,
                                    __ATOMIC_SEQ_CST))
      return old;
  }
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline unsigned atomicAdd(unsigned *p, unsigned v) {
  return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}

static inline float __int_as_float(int i) {
  float f;
  std::memcpy(&f, &i, 4);
  return f;
}
static inline int __float_as_int(float f) {
  int i;
  std::memcpy(&i, &f, 4);
  return i;
}
static inline float __uint_as_float(unsigned i) { return __int_as_float((int)i); }
static inline unsigned __float_as_uint(float f) { return (unsigned)__float_as_int(f); }

/* NVRTC's fast division, as the full-precision one (__expf is glibc's) */
static inline float __fdividef(float a, float b) { return a / b; }

/* the tensor-core instructions (mma.sync, ldmatrix) over the warp */
#include "cuda_emu_mma.h"
/* cp.async's copies to shared memory, made when the thread waits for them */
#include "cuda_emu_async.h"

#endif
