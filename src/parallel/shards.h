/* Arrays laid out over the devices of a mesh: one shard per device. */
#ifndef JX_SRC_PARALLEL_SHARDS_H
#define JX_SRC_PARALLEL_SHARDS_H

#include "../array/array.h"
#include "sharding.h"

struct jx_shards {
  jx_sharding *sharding; /* one reference */
  int n;                 /* the mesh's device count */
  jx_array *shard[];     /* shard[p]: the block at mesh position p, one reference each;
                          * NULL where the device belongs to another process */
};

/* A new array of global shape g laid out by s whose shards are shard[0..n)
 * (n = s's device count; takes a reference to each; NULL for the devices of
 * other processes), owned by the innermost scope. */
jx_array *jx_array_from_shards(jx_sharding *s, jx_dtype dt, int weak, jx_shape g,
                               jx_array *const *shard);
/* Copies the block of a row-major global array (shape g, element size es)
 * that starts at start and has shape local: to the block's own buffer when
 * to_block, back into the global one otherwise. */
void jx_copy_block(void *global, void *block, size_t es, jx_shape g, const int64_t *start,
                   jx_shape local, int to_block);
/* 1 when this process holds a replica of every block (its global value can
 * be read here). */
int jx_shards_addressable(const jx_shards *sh);
/* 1 when every process of the job holds a replica of every block (the same
 * answer on every process: it depends only on the layout). */
int jx_shards_addressable_everywhere(const jx_shards *sh);
/* a's shard at position p of s (a new reference): a's own shard when a is
 * laid out by s already, else a copy of the block out of a's global value;
 * when other processes hold some of a's blocks, the parts this process lacks
 * are exchanged first (a collective, see relayout.h). */
jx_array *jx_shard_for(jx_array *a, const jx_sharding *s, int p);

#endif
