/* Opening a plugin (plugin_open.h). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "plugin_open.h"

void *jx_plugin_open(const char *file, const char *env, const char *how_to_get, char *why,
                     size_t cap) {
  const char *path = jx_env_string(env);
  if (path && *path) {
    void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
    if (!h) snprintf(why, cap, "%s=%s cannot be opened: %s", env, path, dlerror());
    return h;
  }
  char tried[2048] = "";
  Dl_info info;
  if (dladdr((void *)&jx_plugin_open, &info) && info.dli_fname) {
    char next[1536];
    snprintf(next, sizeof next, "%s", info.dli_fname);
    char *slash = strrchr(next, '/');
    if (slash) {
      snprintf(slash + 1, sizeof next - (size_t)(slash + 1 - next), "%s", file);
      void *h = dlopen(next, RTLD_NOW | RTLD_GLOBAL);
      if (h) return h;
      snprintf(tried, sizeof tried, "%s (%s); ", next, dlerror());
    }
  }
  void *h = dlopen(file, RTLD_NOW | RTLD_GLOBAL);
  if (!h)
    snprintf(why, cap,
             "the plugin %s was not found (tried: %sthe library search path: %s); %s, and keep "
             "%s next to libjx, or set %s to its path",
             file, tried, dlerror(), how_to_get, file, env);
  return h;
}
