/* Devices of the CPU backend and the thread each one runs on. */
#ifndef JX_SRC_PARALLEL_DEVICE_H
#define JX_SRC_PARALLEL_DEVICE_H

#include <jx/parallel.h>

#include "../base/current_device.h"

struct jx_device {
  int id;      /* global number */
  int process; /* the process that owns it */
};

/* The device count, fixed on first use (JX_NUM_CPU_DEVICES, default 1). */
int jx_devices_init(void);

/* Runs fn(ctx, p) for p in [0, n), the p-th call on the thread of device
 * devices[p] (each device once), and returns when all have finished. Runs
 * are serialized: their collectives cannot interleave. An error when called
 * from a device thread (a per-device program cannot start another), or
 * when some devices[p] belongs to another process. */
typedef void (*jx_device_job)(void *ctx, int p);
jx_status jx_devices_run(int n, const int *devices, jx_device_job fn, void *ctx);
/* On a device thread, the number of devices in the run it is in (its
 * jx_devices_run's n); 0 on any other thread. */
int jx_device_run_width(void);

/* jx_distributed_initialize: count processes, this one is index, each with
 * the local device count; global device ids follow (process p owns
 * p*L .. p*L+L-1). An error once a device thread has started. */
jx_status jx_devices_set_processes(int count, int index);
int jx_devices_process_index(void);
int jx_devices_process_count(void);
/* 1 when device id belongs to this process. */
int jx_device_is_local(int id);

#endif
