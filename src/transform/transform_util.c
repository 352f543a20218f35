#include "transform_util.h"

#include <stdlib.h>
#include <string.h>

#include "../base/error.h"

static jx_array **slot(jx_eqn_io *io, int k, int n) {
  if (n <= 16) {
    memset(io->small[k], 0, sizeof io->small[k]);
    return io->small[k];
  }
  return calloc((size_t)n, sizeof(jx_array *));
}

jx_status jx_eqn_io_open(jx_eqn_io *io, const jx_eqn *e) {
  io->in = slot(io, 0, e->nin);
  io->in2 = slot(io, 1, e->nin);
  io->out = slot(io, 2, e->nout);
  io->out2 = slot(io, 3, e->nout);
  if (!io->in || !io->in2 || !io->out || !io->out2) {
    jx_eqn_io_close(io);
    return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", e->prim->name);
  }
  return JX_OK;
}

void jx_eqn_io_close(jx_eqn_io *io) {
  jx_array **all[4] = {io->in, io->in2, io->out, io->out2};
  for (int k = 0; k < 4; k++)
    if (all[k] && all[k] != io->small[k]) free(all[k]);
  io->in = io->in2 = io->out = io->out2 = NULL;
}

jx_status jx_argnums_normalize(const char *op, const char *fname, int nin, int n, const int *args,
                               int *out) {
  for (int k = 0; k < n; k++) {
    int a = args[k] < 0 ? args[k] + nin : args[k];
    if (a < 0 || a >= nin)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: argnum %d is out of range for '%s' with %d inputs", op, args[k],
                          fname, nin);
    for (int j = 0; j < k; j++)
      if (out[j] == a)
        return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: argnum %d appears twice", op, a);
    out[k] = a;
  }
  return JX_OK;
}
