/* Shardings: a mesh plus a partition spec, interned like meshes (equal
 * mesh and normalized spec: one object, one registry number). */
#ifndef JX_SRC_PARALLEL_SHARDING_H
#define JX_SRC_PARALLEL_SHARDING_H

#include "mesh.h"

#define JX_SPEC_CAP 512

struct jx_sharding {
  atomic_int refs;
  int id; /* 1, 2, ...: the registry's number */
  jx_mesh *mesh;
  int ndims;                          /* spec entries (dims beyond are not split) */
  int naxes[JX_MAX_RANK];             /* per dim: how many mesh axes split it */
  int axis[JX_MAX_RANK][JX_MAX_RANK]; /* per dim: those axes, major first */
  char spec[JX_SPEC_CAP];             /* normalized text */
};

/* The sharding with these entries (validated as jx_sharding_create does,
 * errors naming op); the caller releases it. */
jx_sharding *jx_sharding_make(jx_mesh *m, int ndims, const int *naxes,
                              const int (*axis)[JX_MAX_RANK], const char *op);
/* Records the error jx_sharding_create just recorded again as the
 * caller's: "<context>: <its message without 'jx_sharding_create: '>",
 * keeping its code. */
void jx_sharding_restate_error(const char *context);
/* The fully replicated sharding over m (borrowed, lives forever). */
jx_sharding *jx_sharding_replicated(jx_mesh *m);
jx_sharding *jx_sharding_from_id(int id); /* borrowed, or NULL */

/* Checks that s fits an array of global shape g: no more entries than g's
 * rank, every split dim divisible. Errors name op. */
/* The spec as messages and jx_visualize_sharding print it: the normalized
 * text, or JAX's "PartitionSpec()" for a replicated sharding (whose text
 * is empty). */
const char *jx_sharding_spec_shown(const jx_sharding *s);
/* Checks that s splits only dims of g it divides (and is not JX_AUTO); errors
 * name op. */
jx_status jx_sharding_check(const jx_sharding *s, jx_shape g, const char *op);
/* How many blocks dim d is cut into. */
int64_t jx_sharding_dim_parts(const jx_sharding *s, int d);
/* The block of an array of global shape g held at mesh position p: its
 * start along each dim and its shape. */
void jx_sharding_block(const jx_sharding *s, jx_shape g, int p, int64_t *start, jx_shape *local);
/* 1 when p is the first of the positions holding the same block (its
 * coordinate is 0 along every axis the spec does not name). */
int jx_sharding_is_first_replica(const jx_sharding *s, int p);
/* 1 when the mesh axis ax splits some dim. */
int jx_sharding_uses_axis(const jx_sharding *s, int ax);
/* 1 when a and b lay out an array of rank r the same way (trailing "None"
 * entries do not matter). */
int jx_sharding_same_layout(const jx_sharding *a, const jx_sharding *b);

#endif
