/* Host<->device copies of pageable host memory (jx arrays live in ordinary
 * malloc'ed buffers). The driver copies pageable memory synchronously through
 * its own small bounce buffer; jx stages through two pinned buffers per
 * device instead, in chunks, so that filling one buffer on the CPU overlaps
 * the DMA out of the other. */
#ifndef JX_SRC_CUDA_CUDA_COPY_H
#define JX_SRC_CUDA_CUDA_COPY_H

#include "cuda_device.h"

/* The size of each of a device's two pinned staging buffers (8 MiB). */
#define JX_CUDA_STAGING_BYTES ((size_t)8 << 20)

/* Copies `bytes` from host `src` to device `dst` in order on `stream`;
 * returns once src may be reused (every chunk staged), while the last chunks
 * may still be in flight: work queued on `stream` afterwards sees the data. */
jx_status jx_cuda_copy_to_device(jx_cuda_device *d, CUdeviceptr dst, const void *src, size_t bytes,
                                 CUstream stream);

/* Copies `bytes` from device `src` to host `dst` after the work queued on
 * `stream`; returns once dst holds them. */
jx_status jx_cuda_copy_to_host(jx_cuda_device *d, void *dst, CUdeviceptr src, size_t bytes,
                               CUstream stream);

/* What the copies above moved since the process started, over all devices
 * (statistics, for tests and reports: a training step that keeps its state
 * on the device copies only its batch up and what is read down). */
typedef struct {
  uint64_t to_device_bytes, to_host_bytes;
  int64_t to_device_copies, to_host_copies; /* calls */
} jx_cuda_copy_stats;
jx_cuda_copy_stats jx_cuda_copy_stats_get(void);

#endif
