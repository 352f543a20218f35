/* jx/debug.h: checking derivatives, printing inside transformed code,
 * profiling. */
#ifndef JX_DEBUG_H
#define JX_DEBUG_H

#include "transform.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Checks f's derivatives at in as JAX's check_grads does, in forward mode
 * (JVPs against central differences along random directions) and reverse mode
 * (VJPs against those JVPs through inner products), recursively up to order.
 * Only floating inputs and outputs take part. Returns JX_OK, or an error
 * (JX_ERR_INVALID_ARGUMENT) whose message names the mode, order, output and
 * the largest mismatch. atol/rtol <= 0 pick defaults for the dtype. */
jx_status jx_check_grads(jx_fn *f, jx_array *const *in, int order, double atol, double rtol);

#ifndef JX_NO_LOCATION_MACROS
#define jx_check_grads(...) JX_LOCATED_STATUS(jx_check_grads, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
