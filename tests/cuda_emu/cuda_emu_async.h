/* The asynchronous copies the attention kernels stage their tiles with, for
 * cuda_emu.h: PTX `cp.async.cg.shared.global` (16 bytes, the bytes past the
 * source size zero-filled), `cp.async.commit_group` and
 * `cp.async.wait_group N`, as functions the kernel source calls in place of
 * its inline assembly when CUDA_EMU_MMA is defined.
 *
 * A copy is not made when it is issued: each thread keeps its copies in a
 * queue, a commit closes the thread's open group, and wait_group N makes the
 * copies of every committed group but the N latest, in order. So a kernel
 * that reads a tile before waiting for its group reads the old contents
 * here too (as it may on a GPU), and one that waits in its own thread but
 * forgets the barrier before other threads read still gets caught only as
 * cuda_emu.h says (a thread runs until its next barrier). Misaligned
 * addresses (16 bytes, as PTX requires) and a source size over 16 stop the
 * program with a message; so does a queue over CUDA_EMU_ASYNC_MAX copies
 * (a kernel that never waits). Blocks run one at a time, so the queues are
 * static storage indexed by the thread's index in its block. */
#ifndef JX_TESTS_CUDA_EMU_ASYNC_H
#define JX_TESTS_CUDA_EMU_ASYNC_H

enum { CUDA_EMU_ASYNC_MAX = 64 };

struct cuda_emu_async_copy {
  void *dst;
  const void *src;
  int bytes;
  unsigned group;
};
static cuda_emu_async_copy cuda_emu_async_queue[1024][CUDA_EMU_ASYNC_MAX];
static unsigned cuda_emu_async_pending[1024]; /* copies in the queue */
static unsigned cuda_emu_async_open[1024];    /* the number of the thread's open group */

static inline void cuda_emu_async_fail(const char *what, const void *p) {
  std::fprintf(stderr, "cuda_emu: cp.async in thread %u of block (%u, %u, %u): %s (%p)\n",
               cuda_emu_linear_tid(), blockIdx.x, blockIdx.y, blockIdx.z, what, p);
  std::abort();
}

static inline void cuda_emu_cp_async_16(void *dst, const void *src, int bytes) {
  const unsigned tid = cuda_emu_linear_tid();
  if ((unsigned long long)dst % 16) cuda_emu_async_fail("shared address not 16-byte aligned", dst);
  if (bytes && (unsigned long long)src % 16)
    cuda_emu_async_fail("global address not 16-byte aligned", src);
  if (bytes < 0 || bytes > 16) cuda_emu_async_fail("source size outside 0..16", src);
  if (cuda_emu_async_pending[tid] == CUDA_EMU_ASYNC_MAX)
    cuda_emu_async_fail("too many copies in flight (no wait_group?)", dst);
  cuda_emu_async_queue[tid][cuda_emu_async_pending[tid]++] = {dst, src, bytes,
                                                              cuda_emu_async_open[tid]};
}

static inline void cuda_emu_cp_async_commit() { cuda_emu_async_open[cuda_emu_linear_tid()]++; }

/* the copies of the committed groups older than the n latest, in order */
static inline void cuda_emu_cp_async_wait(int n) {
  const unsigned tid = cuda_emu_linear_tid(), open = cuda_emu_async_open[tid];
  cuda_emu_async_copy *q = cuda_emu_async_queue[tid];
  unsigned keep = 0;
  for (unsigned i = 0; i < cuda_emu_async_pending[tid]; i++)
    if (q[i].group + (unsigned)n < open) {
      std::memcpy(q[i].dst, q[i].src, (size_t)q[i].bytes);
      std::memset((char *)q[i].dst + q[i].bytes, 0, (size_t)(16 - q[i].bytes));
    } else {
      q[keep++] = q[i];
    }
  cuda_emu_async_pending[tid] = keep;
}

#endif
