/* Switches read from the environment. */
#ifndef JX_SRC_BASE_ENV_H
#define JX_SRC_BASE_ENV_H

#include <stdlib.h>
#include <string.h>

/* 1 when the variable is set to something other than "" or "0"
 * (JX_LOG_COMPILES=1); read at each call, so a program may change it. */
static inline int jx_env_flag(const char *name) {
  const char *v = getenv(name);
  return v && *v && strcmp(v, "0") != 0;
}

#endif
