/* Opening a plugin of jx's (a library of its own, loaded at run time so
 * that libjx links none of what the plugin needs: MPI, Gloo). */
#ifndef JX_SRC_PARALLEL_PLUGIN_OPEN_H
#define JX_SRC_PARALLEL_PLUGIN_OPEN_H

#include <stddef.h>

/* dlopen of the plugin: the path in environment variable env when set, else
 * file (e.g. "libjx_mpi.so") next to the library (or executable) holding
 * libjx, else file on the library search path. NULL with why (naming what
 * was tried, then how_to_get) when none opens. */
void *jx_plugin_open(const char *file, const char *env, const char *how_to_get, char *why,
                     size_t cap);

#endif
