/* Opening CUDA's libraries with dlopen: jx links nothing of CUDA, so one binary runs with or
 * without it. Each library (driver, cuBLASLt, NCCL) fills a table of function pointers once per
 * process, in the lookup order NVRTC uses (src/cuda/nvrtc.h): the file an
 * environment variable names, else the sonames on the loader's path, else
 * (for toolkit libraries only) the same names under $CUDA_HOME/lib64,
 * $CUDA_PATH/lib64 and /usr/local/cuda/lib64. */
#ifndef JX_SRC_CUDA_CUDA_LOADER_H
#define JX_SRC_CUDA_CUDA_LOADER_H

#include <stddef.h>

typedef struct {
  const char *what;           /* "CUDA driver", "cuBLASLt", "NCCL": for messages */
  const char *env;            /* the variable naming the exact file, e.g. JX_NCCL_PATH */
  const char *const *sonames; /* NULL-terminated, most preferred first */
  int search_toolkit_dirs;    /* also look under $CUDA_HOME/lib64 etc. */
  const char *hint;           /* how to install it, for the message */
} jx_cuda_library;

typedef struct {
  void **slot;       /* where the address goes */
  const char *name;  /* the symbol, e.g. "cuMemAlloc_v2" */
  const char *older; /* a name older releases export instead, or NULL */
  int optional;      /* 1: a missing symbol leaves *slot NULL */
} jx_cuda_symbol;

/* Opens lib and resolves every symbol; returns the handle, or NULL with
 * "<what> not found: ..." (or "... lacks <symbol>") in why. Records no error:
 * callers probe, and report why only when the library is really needed. */
void *jx_cuda_library_open(const jx_cuda_library *lib, const jx_cuda_symbol *syms, int nsyms,
                           char *why, size_t cap);

#endif
