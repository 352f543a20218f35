/* Collectives an executable starts on a device and finishes later, so that
 * the steps between overlap them. The parallel layer, which runs
 * collectives, installs these at load (parallel/install.c); until then
 * every collective step runs synchronously, as its primitive. */
#ifndef JX_SRC_COMPILE_ASYNC_COLLECTIVE_H
#define JX_SRC_COMPILE_ASYNC_COLLECTIVE_H

#include "../prims/prim.h"

typedef struct jx_collective_pending jx_collective_pending;

typedef struct {
  /* 1 when it started prim on in (*out allocated, to be read only after
   * finish(*pending)), 0 when this collective runs synchronously instead
   * (nothing done), -1 with an error recorded. */
  int (*start)(const jx_prim *prim, const jx_params *p, jx_array *in, jx_array **out,
               jx_collective_pending **pending);
  /* Waits for it (with the device's deadline), records a failure, and
   * frees it. */
  jx_status (*finish)(jx_collective_pending *h);
} jx_async_collectives;

/* Never NULL: the synchronous default until the parallel layer installs its
 * own. */
extern const jx_async_collectives *jx_async_collective;
void jx_async_collectives_install(const jx_async_collectives *c);

#endif
