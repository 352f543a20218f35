/* NVRTC, CUDA's runtime compiler, loaded with dlopen: jx links nothing of CUDA, so one binary runs
 * with or without it and says clearly what is missing. The library is looked up once per process:
 * $JX_NVRTC_PATH when set, then libnvrtc.so, .so.13, .so.12, .so.11 on the loader's path, then the
 * same names under $CUDA_HOME/lib64, $CUDA_PATH/lib64 and /usr/local/cuda/lib64. */
#ifndef JX_SRC_CUDA_NVRTC_H
#define JX_SRC_CUDA_NVRTC_H

#include <jx/base.h>
#include <stddef.h>

/* 1 when libnvrtc is loaded (loading it on the first call), else 0; never
 * records an error, so tests and backends can probe. Thread-safe. */
int jx_nvrtc_available(void);

/* Why loading failed ("NVRTC not found: tried ..."), or "" when it loaded. */
const char *jx_nvrtc_load_error(void);

/* NVRTC's version, e.g. 13.0; records "NVRTC not found: ..." when missing. */
jx_status jx_nvrtc_version(int *major, int *minor);

typedef enum {
  JX_NVRTC_CUBIN = 0, /* machine code for exactly `arch` (an ELF image) */
  JX_NVRTC_PTX = 1    /* virtual-ISA text for compute_XX, JIT-compiled by the driver */
} jx_nvrtc_output;

typedef struct {
  const char *arch;         /* "sm_90" (the default when NULL), "sm_80", "sm_90a", ... */
  jx_nvrtc_output output;   /* CUBIN by default */
  const char *const *extra; /* more nvrtc options (nextra of them), after the defaults */
  int nextra;
} jx_nvrtc_options;

/* Compiles one CUDA C++ translation unit (`name` names it in messages) and
 * returns the image in *image (malloc'ed; PTX ends with a NUL counted in
 * *size) or an error: "NVRTC not found: ..." (JX_ERR_UNIMPLEMENTED) when
 * the library is missing, "nvrtc: NAME: <the log's first error line>"
 * (JX_ERR_INVALID_ARGUMENT) when compilation fails. opt may be NULL.
 *
 * The default options are -std=c++17 --gpu-architecture=<arch> --fmad=false:
 * no multiply-add contraction, as on the CPU (fastmath.h's polynomials then
 * give the CPU's bits). Thread-safe (NVRTC programs are independent). */
jx_status jx_nvrtc_compile(const char *src, const char *name, const jx_nvrtc_options *opt,
                           char **image, size_t *size);

#endif
