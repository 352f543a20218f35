/* The public summary of CUDA (include/jx/cuda.h). */
#include <jx/cuda.h>

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "nvrtc.h"
#include "cuda_blaslt.h"
#include "cuda_device.h"
#include "cuda_nccl.h"

static char status[4096];
static pthread_once_t status_once = PTHREAD_ONCE_INIT;

/* Appends printf-formatted text to status, truncating at its end. */
__attribute__((format(printf, 1, 2))) static void add(const char *fmt, ...) {
  size_t used = strlen(status);
  if (used + 1 >= sizeof status) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(status + used, sizeof status - used, fmt, ap);
  va_end(ap);
}

static void describe(void) {
  int n = jx_cuda_probe();
  if (n == 0) {
    const char *why = jx_cuda_probe_error();
    /* "CUDA driver not found: tried ..." reads as "CUDA: driver not found (tried ...)" */
    const char *prefix = "CUDA driver not found: ";
    if (!strncmp(why, prefix, strlen(prefix)))
      add("CUDA: driver not found (%s)", why + strlen(prefix));
    else /* "CUDA: cuInit: ..." */
      add("CUDA: no device (%s)", strncmp(why, "CUDA: ", 6) ? why : why + 6);
  } else {
    int v = jx_cuda_driver_version();
    add("CUDA %d.%d, %d device%s:", v / 1000, v % 1000 / 10, n, n == 1 ? "" : "s");
    for (int k = 0; k < n; k++) {
      const jx_cuda_device_info *d = jx_cuda_device_describe(k);
      add("%s %s (%s, %d SMs, %.0f GiB)", k ? "," : "", d->name, d->arch, d->sm_count,
          (double)d->total_memory / (1024.0 * 1024 * 1024));
    }
  }
  int major = 0, minor = 0, patch = 0;
  if (jx_nvrtc_available() && jx_nvrtc_version(&major, &minor) == JX_OK)
    add("; NVRTC %d.%d", major, minor);
  else
    add("; %s", jx_nvrtc_load_error());
  const jx_cublaslt_api *lt = jx_cublaslt();
  if (lt) {
    size_t v = lt->GetVersion(); /* major*10000 + minor*100 + patch */
    add("; cuBLASLt %zu.%zu.%zu", v / 10000, v % 10000 / 100, v % 100);
  } else {
    add("; %s", jx_cublaslt_load_error());
  }
  if (jx_nccl() && jx_nccl_version(&major, &minor, &patch) == JX_OK)
    add("; NCCL %d.%d.%d", major, minor, patch);
  else if (!jx_nccl())
    add("; %s", jx_nccl_load_error());
}

int jx_cuda_device_count(void) { return jx_cuda_probe(); }

const char *jx_cuda_status(void) {
  pthread_once(&status_once, describe);
  return status;
}
