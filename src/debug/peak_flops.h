/* The machine's peak f32 FLOP/s for MFU (jx_peak_flops in jx/debug.h):
 * what the tests need beyond the public functions. */
#ifndef JX_SRC_DEBUG_PEAK_FLOPS_H
#define JX_SRC_DEBUG_PEAK_FLOPS_H

#include <stdint.h>

/* How many times this process has run the FMA loop (a cache hit or
 * JX_PEAK_FLOPS does not): the tests check the cache is reused. */
int64_t jx_peak_flops_measurements(void);

#endif
