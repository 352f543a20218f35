/* NVRTC through a function table filled by dlsym: the few entry points jx
 * uses, declared here with NVRTC's C ABI (int results, an opaque program
 * handle) so that no CUDA header is needed to build jx. */
#include "nvrtc.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"

typedef struct nvrtc_prog_ *nvrtc_prog;

static struct {
  void *lib;
  int (*create)(nvrtc_prog *prog, const char *src, const char *name, int nheaders,
                const char *const *headers, const char *const *include_names);
  int (*compile)(nvrtc_prog prog, int nopts, const char *const *opts);
  int (*log_size)(nvrtc_prog prog, size_t *size);
  int (*log)(nvrtc_prog prog, char *log);
  int (*ptx_size)(nvrtc_prog prog, size_t *size);
  int (*ptx)(nvrtc_prog prog, char *ptx);
  int (*cubin_size)(nvrtc_prog prog, size_t *size);
  int (*cubin)(nvrtc_prog prog, char *cubin);
  int (*destroy)(nvrtc_prog *prog);
  int (*version)(int *major, int *minor);
  const char *(*error_string)(int result);
  char load_error[1024];
} nv;

static pthread_once_t load_once = PTHREAD_ONCE_INIT;

static const char *const sonames[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                                      "libnvrtc.so.11"};
#define NSONAMES ((int)(sizeof sonames / sizeof sonames[0]))

static void *open_in(const char *dir) {
  for (int k = 0; k < NSONAMES; k++) {
    char path[1024];
    if (dir)
      snprintf(path, sizeof path, "%s/lib64/%s", dir, sonames[k]);
    else
      snprintf(path, sizeof path, "%s", sonames[k]);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
  }
  return NULL;
}

static void *open_library(void) {
  const char *exact = jx_env_string("JX_NVRTC_PATH");
  if (exact && *exact) return dlopen(exact, RTLD_NOW | RTLD_LOCAL);
  void *h = open_in(NULL);
  const char *const dirs[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
  for (int d = 0; d < 3 && !h; d++)
    if (dirs[d] && *dirs[d]) h = open_in(dirs[d]);
  return h;
}

static void load(void) {
  void *h = open_library();
  if (!h) {
    const char *exact = jx_env_string("JX_NVRTC_PATH");
    if (exact && *exact)
      snprintf(nv.load_error, sizeof nv.load_error,
               "NVRTC not found: cannot open JX_NVRTC_PATH=%s (%s)", exact, dlerror());
    else
      snprintf(nv.load_error, sizeof nv.load_error,
               "NVRTC not found: tried libnvrtc.so, .so.13, .so.12, .so.11 on the loader's path "
               "and under $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64 (install "
               "the CUDA toolkit's nvrtc, or set JX_NVRTC_PATH)");
    return;
  }
  /* one table of (slot, symbol) pairs: a library missing any of them is unusable */
  struct {
    void **slot;
    const char *sym;
  } syms[] = {{(void **)&nv.create, "nvrtcCreateProgram"},
              {(void **)&nv.compile, "nvrtcCompileProgram"},
              {(void **)&nv.log_size, "nvrtcGetProgramLogSize"},
              {(void **)&nv.log, "nvrtcGetProgramLog"},
              {(void **)&nv.ptx_size, "nvrtcGetPTXSize"},
              {(void **)&nv.ptx, "nvrtcGetPTX"},
              {(void **)&nv.cubin_size, "nvrtcGetCUBINSize"},
              {(void **)&nv.cubin, "nvrtcGetCUBIN"},
              {(void **)&nv.destroy, "nvrtcDestroyProgram"},
              {(void **)&nv.version, "nvrtcVersion"},
              {(void **)&nv.error_string, "nvrtcGetErrorString"}};
  for (size_t k = 0; k < sizeof syms / sizeof syms[0]; k++) {
    void *f = dlsym(h, syms[k].sym);
    if (!f) {
      snprintf(nv.load_error, sizeof nv.load_error,
               "NVRTC not found: the loaded libnvrtc lacks %s (older than CUDA 11.1?)",
               syms[k].sym);
      dlclose(h);
      return;
    }
    *syms[k].slot = f;
  }
  nv.lib = h;
}

int jx_nvrtc_available(void) {
  pthread_once(&load_once, load);
  return nv.lib != NULL;
}

const char *jx_nvrtc_load_error(void) {
  pthread_once(&load_once, load);
  return nv.load_error;
}

jx_status jx_nvrtc_version(int *major, int *minor) {
  if (!jx_nvrtc_available()) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", nv.load_error);
  int r = nv.version(major, minor);
  if (r) return jx_error_set(JX_ERR_INTERNAL, "nvrtcVersion: %s", nv.error_string(r));
  return JX_OK;
}

/* The first line of the log that reports an error (NVRTC writes
 * "name(12): error: identifier \"x\" is undefined"), else its first line. */
static void first_error(const char *log, char *out, size_t cap) {
  const char *pick = log;
  for (const char *s = log; *s;) {
    const char *end = strchr(s, '\n');
    size_t n = end ? (size_t)(end - s) : strlen(s);
    if (memmem(s, n, "error", 5)) {
      pick = s;
      break;
    }
    s += n + (end != NULL);
  }
  const char *end = strchr(pick, '\n');
  size_t n = end ? (size_t)(end - pick) : strlen(pick);
  if (n >= cap) n = cap - 1;
  memcpy(out, pick, n);
  out[n] = 0;
}

static jx_status fail(nvrtc_prog *prog, jx_status code, const char *name, const char *what, int r) {
  if (*prog) nv.destroy(prog);
  return jx_error_set(code, "nvrtc: %s: %s: %s", name, what, nv.error_string(r));
}

jx_status jx_nvrtc_compile(const char *src, const char *name, const jx_nvrtc_options *opt,
                           char **image, size_t *size) {
  *image = NULL;
  *size = 0;
  if (!jx_nvrtc_available()) return jx_error_set(JX_ERR_UNIMPLEMENTED, "%s", nv.load_error);
  if (!name) name = "jx_kernels.cu";
  const char *arch = opt && opt->arch ? opt->arch : "sm_90";
  jx_nvrtc_output output = opt ? opt->output : JX_NVRTC_CUBIN;
  if (strncmp(arch, "sm_", 3) != 0 || !arch[3] || strlen(arch) > 16)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "nvrtc: %s: architecture '%s' is not of the form sm_XX", name, arch);
  /* a cubin for exactly sm_XX; PTX for the matching virtual architecture,
   * which the driver compiles for the device it finds */
  char arch_opt[48];
  snprintf(arch_opt, sizeof arch_opt, "--gpu-architecture=%s%s",
           output == JX_NVRTC_PTX ? "compute_" : "sm_", arch + 3);
  int nextra = opt && opt->extra ? opt->nextra : 0;
  const char **opts = malloc(sizeof *opts * (size_t)(3 + nextra));
  if (!opts) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "nvrtc: out of memory");
  int nopts = 0;
  opts[nopts++] = "-std=c++17";
  opts[nopts++] = arch_opt;
  opts[nopts++] = "--fmad=false";
  for (int k = 0; k < nextra; k++) opts[nopts++] = opt->extra[k];

  nvrtc_prog prog = NULL;
  int r = nv.create(&prog, src, name, 0, NULL, NULL);
  if (r) {
    free(opts);
    return fail(&prog, JX_ERR_INTERNAL, name, "nvrtcCreateProgram", r);
  }
  r = nv.compile(prog, nopts, opts);
  free(opts);
  if (r) {
    size_t n = 0;
    char *log = NULL;
    if (nv.log_size(prog, &n) == 0 && n > 0 && (log = malloc(n + 1)) != NULL) {
      if (nv.log(prog, log) != 0) log[0] = 0;
      log[n] = 0;
    }
    char line[512] = "";
    if (log && log[0]) first_error(log, line, sizeof line);
    free(log);
    nv.destroy(&prog);
    if (line[0]) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "nvrtc: %s: %s", name, line);
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "nvrtc: %s: %s", name, nv.error_string(r));
  }
  size_t n = 0;
  r = output == JX_NVRTC_PTX ? nv.ptx_size(prog, &n) : nv.cubin_size(prog, &n);
  if (r) return fail(&prog, JX_ERR_INTERNAL, name, "reading the image's size", r);
  char *buf = malloc(n + 1);
  if (!buf) {
    nv.destroy(&prog);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "nvrtc: out of memory");
  }
  r = output == JX_NVRTC_PTX ? nv.ptx(prog, buf) : nv.cubin(prog, buf);
  if (r) {
    free(buf);
    return fail(&prog, JX_ERR_INTERNAL, name, "reading the image", r);
  }
  buf[n] = 0;
  nv.destroy(&prog);
  *image = buf;
  *size = n;
  return JX_OK;
}
