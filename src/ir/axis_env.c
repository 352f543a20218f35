#include "axis_env.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/error.h"
#include "../base/hash.h"

enum { MAX_DEPTH = 32, MAX_NAMES = 1024 };

typedef struct {
  int id;
  int manual; /* a shard_map's mesh axis whose varying values are tracked (trace/vma.h) */
  int64_t size;
} bound_axis;

static _Thread_local bound_axis stack[MAX_DEPTH];
static _Thread_local int depth;

/* interned names; ids never change once given */
static char *names[MAX_NAMES];
static int nnames = 1; /* id 0 is "no name" */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

int jx_axis_id(const char *name) {
  if (!name) return 0;
  pthread_mutex_lock(&names_lock);
  int id = 0;
  for (int i = 1; i < nnames && !id; i++)
    if (strcmp(names[i], name) == 0) id = i;
  if (!id && nnames < MAX_NAMES && (names[nnames] = strdup(name))) id = nnames++;
  pthread_mutex_unlock(&names_lock);
  if (!id) jx_error_set(JX_ERR_OUT_OF_MEMORY, "too many axis names (at most %d)", MAX_NAMES - 1);
  return id;
}

const char *jx_axis_name(int id) {
  pthread_mutex_lock(&names_lock);
  const char *n = id > 0 && id < nnames ? names[id] : "(unnamed)";
  pthread_mutex_unlock(&names_lock);
  return n;
}

static jx_status push(const char *name, int64_t size, int manual) {
  if (depth == MAX_DEPTH)
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "more than %d nested named axes", MAX_DEPTH);
  int id = jx_axis_id(name);
  if (name && !id) return JX_ERR_OUT_OF_MEMORY;
  stack[depth++] = (bound_axis){id, manual, size};
  return JX_OK;
}

jx_status jx_axis_push(const char *name, int64_t size) { return push(name, size, 0); }

jx_status jx_axis_push_manual(const char *name, int64_t size) { return push(name, size, 1); }

int jx_axis_is_manual(int id) {
  for (int i = depth - 1; i >= 0; i--)
    if (stack[i].id == id) return id && stack[i].manual;
  return 0;
}

void jx_axis_pop(void) {
  if (depth > 0) depth--;
}

int64_t jx_axis_env_size(const char *name) {
  if (!name) return -1;
  int id = jx_axis_id(name);
  for (int i = depth - 1; i >= 0; i--)
    if (stack[i].id == id) return stack[i].size;
  return -1;
}

void jx_axis_env_names(char *buf, size_t cap) {
  size_t len = 0;
  if (cap) buf[0] = 0;
  for (int i = 0; i < depth && len + 1 < cap; i++) {
    if (!stack[i].id) continue;
    int w = snprintf(buf + len, cap - len, "%s%s", len ? ", " : "", jx_axis_name(stack[i].id));
    if (w < 0) break;
    len += (size_t)w < cap - len ? (size_t)w : cap - len - 1;
  }
}

int jx_axis_innermost_id(void) { return depth ? stack[depth - 1].id : 0; }

uint64_t jx_axis_env_hash(void) {
  if (!depth) return 0;
  return jx_hash_bytes(JX_HASH_SEED, stack, sizeof stack[0] * (size_t)depth);
}

static _Thread_local struct {
  int n; /* -1: not a device thread of a per-device run */
  const char *names[JX_MAX_RANK];
  int64_t sizes[JX_MAX_RANK], coords[JX_MAX_RANK];
} device = {.n = -1};

void jx_device_axes_set(int n, const char *const *names, const int64_t *sizes,
                        const int64_t *coords) {
  device.n = n < JX_MAX_RANK ? n : JX_MAX_RANK;
  for (int i = 0; i < device.n; i++) {
    device.names[i] = names[i];
    device.sizes[i] = sizes[i];
    device.coords[i] = coords[i];
  }
}

void jx_device_axes_clear(void) { device.n = -1; }

static int device_axis(const char *name) {
  for (int i = 0; name && i < device.n; i++)
    if (strcmp(device.names[i], name) == 0) return i;
  return -1;
}

int64_t jx_device_axis_size(const char *name) {
  int i = device_axis(name);
  return i < 0 ? -1 : device.sizes[i];
}

int64_t jx_device_axis_coord(const char *name) {
  int i = device_axis(name);
  return i < 0 ? -1 : device.coords[i];
}
