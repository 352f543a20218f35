/* The cache directory (cache_dir.h). */
#include "cache_dir.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "env.h"

int jx_kernel_cache_dir(char *out, size_t n) {
  const char *d = jx_env_string("JX_CACHE_DIR");
  if (d && *d) {
    snprintf(out, n, "%s", d);
  } else if ((d = getenv("XDG_CACHE_HOME")) && *d) {
    snprintf(out, n, "%s/jx", d);
  } else if ((d = getenv("HOME")) && *d) {
    snprintf(out, n, "%s/.cache/jx", d);
  } else {
    snprintf(out, n, "/tmp/jx-cache-%d", (int)getuid());
  }
  /* make every missing level */
  for (char *p = out + 1; *p; p++)
    if (*p == '/') {
      *p = '\0';
      mkdir(out, 0755);
      *p = '/';
    }
  if (mkdir(out, 0755) != 0 && errno != EEXIST) return 0;
  return 1;
}
