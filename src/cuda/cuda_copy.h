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

#endif
