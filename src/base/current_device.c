/* The device a thread computes for (current_device.h). */
#include "current_device.h"

static _Thread_local int current_device = -1;

int jx_current_device(void) { return current_device; }

void jx_current_device_set(int device) { current_device = device; }
