/* The device a thread computes for: set by each device's thread
 * (parallel/device.c) and read by every layer that attributes work to a
 * device, down to the memory accounting. */
#ifndef JX_SRC_BASE_CURRENT_DEVICE_H
#define JX_SRC_BASE_CURRENT_DEVICE_H

/* The device whose thread is calling, or -1 on any other thread. */
int jx_current_device(void);
/* Makes the calling thread device's (once, as the device's thread starts). */
void jx_current_device_set(int device);

#endif
