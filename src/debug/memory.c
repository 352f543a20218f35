/* jx_memory_stats: the accounting of base/memstats.c, per device. */
#include <jx/jx.h>

#include "../base/error.h"
#include "../base/memstats.h"

jx_status jx_memory_stats_get(int device, jx_memory_stats *out) {
  int n = jx_device_count();
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "jx_memory_stats: out is NULL");
  if (device < 0 || device >= (n > 0 ? n : 1) || device >= JX_MEMSTATS_DEVICES)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                        "jx_memory_stats: device %d is out of range (%d devices)", device, n);
  out->live_bytes = jx_memstats_live(device);
  out->peak_bytes = jx_memstats_peak(device);
  out->live_buffers = jx_memstats_buffers(device);
  return JX_OK;
}

void jx_memory_reset_peak(int device) { jx_memstats_reset_peak(device); }
