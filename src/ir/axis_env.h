/* Named axes bound by the enclosing transformations (jx_vmap with an axis
 * name, shard_map, pmap), per thread. A function traced inside such a scope
 * can ask for the axis size, so the scope is part of the trace cache's key;
 * the verifier binds a nested program's axes (jx_prim.bind_sub_axes) while
 * it walks into it, so the environment sits with the programs. */
#ifndef JX_SRC_IR_AXIS_ENV_H
#define JX_SRC_IR_AXIS_ENV_H

#include <stddef.h>
#include <stdint.h>

#include <jx/base.h>

/* Binds name (NULL: an anonymous axis) of the given size, innermost. */
jx_status jx_axis_push(const char *name, int64_t size);
/* The same for a mesh axis of a shard_map that tracks which values vary
 * over it (check_vma, trace/vma.h). */
jx_status jx_axis_push_manual(const char *name, int64_t size);
void jx_axis_pop(void);
/* 1 when the innermost binding of axis id is a manual (tracked) one. */
int jx_axis_is_manual(int id);
/* The size of the innermost axis called name, or -1. */
int64_t jx_axis_env_size(const char *name);
/* A small integer standing for name in primitive parameters (0 for NULL). */
int jx_axis_id(const char *name);
const char *jx_axis_name(int id);
/* The id of the innermost bound axis (0 if anonymous or none). */
int jx_axis_innermost_id(void);
/* The names of the bound axes, outermost first, as "data, model" into
 * buf[0..cap) (anonymous axes left out; "" when none). For error messages. */
void jx_axis_env_names(char *buf, size_t cap);
/* A hash of the bound axes, for cache keys. */
uint64_t jx_axis_env_hash(void);

/* The mesh axes of the device this thread runs for, inside a per-device run
 * (shard_map, pmap, a sharded jit: parallel/spmd.c sets them as a device's
 * job starts and clears them as it ends); none on any other thread. names
 * must outlive the job. */
void jx_device_axes_set(int n, const char *const *names, const int64_t *sizes,
                        const int64_t *coords);
void jx_device_axes_clear(void);
/* The device mesh's axis called name: its size and this device's
 * coordinate along it; -1 when there is none. */
int64_t jx_device_axis_size(const char *name);
int64_t jx_device_axis_coord(const char *name);

#endif
