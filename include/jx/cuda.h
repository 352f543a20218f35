/* jx/cuda.h: what CUDA this process can use. jx links nothing of CUDA: the
 * driver (libcuda.so.1), NVRTC, cuBLASLt and NCCL are opened at run time
 * (docs/cuda.md says where each is looked for and which variable overrides
 * it), so the same binary runs on machines with and without GPUs.
 *
 *   printf("%s\n", jx_cuda_status());
 *   // CUDA 13.0, 1 device: NVIDIA H200 (sm_90, 132 SMs, 139 GiB); NVRTC 13.0; ...
 *   // CUDA: driver not found (...); NVRTC 13.0; cuBLASLt 13.1.0; NCCL 2.28.9 */
#ifndef JX_CUDA_H
#define JX_CUDA_H

#include "base.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The number of CUDA devices this process can use: 0 when the driver is
 * missing, cannot initialize or sees no GPU (never an error). Thread-safe;
 * the first call loads and initializes the driver. */
JX_API int jx_cuda_device_count(void);

/* One line describing the driver, the devices and the CUDA libraries found
 * (with the reason for each that is missing). The string is static and
 * computed once. Thread-safe. */
JX_API const char *jx_cuda_status(void);

#ifdef __cplusplus
}
#endif
#endif
