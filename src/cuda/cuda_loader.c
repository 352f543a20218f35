#include "cuda_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"

static void *open_in(const jx_cuda_library *lib, const char *dir, char *first_error, size_t cap) {
  for (const char *const *s = lib->sonames; *s; s++) {
    char path[1024];
    if (dir)
      snprintf(path, sizeof path, "%s/lib64/%s", dir, *s);
    else
      snprintf(path, sizeof path, "%s", *s);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (h) return h;
    /* the loader's reason for the most preferred name says the most */
    const char *e = dlerror();
    if (!first_error[0] && e) snprintf(first_error, cap, "%s", e);
  }
  return NULL;
}

static void tried_list(const jx_cuda_library *lib, char *out, size_t cap) {
  size_t used = 0;
  out[0] = 0;
  for (const char *const *s = lib->sonames; *s && used < cap; s++)
    used += (size_t)snprintf(out + used, cap - used, "%s%s", s == lib->sonames ? "" : ", ", *s);
}

void *jx_cuda_library_open(const jx_cuda_library *lib, const jx_cuda_symbol *syms, int nsyms,
                           char *why, size_t cap) {
  char reason[512] = "";
  void *h = NULL;
  const char *exact = lib->env ? jx_env_string(lib->env) : NULL;
  if (exact && *exact) {
    h = dlopen(exact, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      const char *e = dlerror();
      snprintf(why, cap, "%s not found: cannot open %s=%s (%s)", lib->what, lib->env, exact,
               e ? e : "?");
      return NULL;
    }
  } else {
    h = open_in(lib, NULL, reason, sizeof reason);
    const char *const dirs[] = {getenv("CUDA_HOME"), getenv("CUDA_PATH"), "/usr/local/cuda"};
    for (int d = 0; d < 3 && !h && lib->search_toolkit_dirs; d++)
      if (dirs[d] && *dirs[d]) h = open_in(lib, dirs[d], reason, sizeof reason);
    if (!h) {
      char tried[256];
      tried_list(lib, tried, sizeof tried);
      snprintf(why, cap, "%s not found: tried %s on the loader's path%s (%s; %s, or set %s)",
               lib->what, tried,
               lib->search_toolkit_dirs
                   ? " and under $CUDA_HOME/lib64, $CUDA_PATH/lib64, /usr/local/cuda/lib64"
                   : "",
               reason, lib->hint, lib->env);
      return NULL;
    }
  }
  for (int k = 0; k < nsyms; k++) {
    void *f = dlsym(h, syms[k].name);
    if (!f && syms[k].older) f = dlsym(h, syms[k].older);
    if (!f && !syms[k].optional) {
      snprintf(why, cap, "%s not found: the loaded library lacks %s (too old?)", lib->what,
               syms[k].name);
      dlclose(h);
      return NULL;
    }
    *syms[k].slot = f;
  }
  why[0] = 0;
  return h;
}
