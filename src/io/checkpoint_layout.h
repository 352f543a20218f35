/* Which block of an array each device of a sharding holds, and which
 * process writes each distinct block to a checkpoint. Worked out from the
 * public API only: the sharding's normalized spec, its mesh's axes, and the
 * device (and its process) at each mesh position. */
#ifndef JX_SRC_IO_CHECKPOINT_LAYOUT_H
#define JX_SRC_IO_CHECKPOINT_LAYOUT_H

#include <jx/jx.h>

/* A box of a global array: start and size along each dim. */
typedef struct {
  int rank;
  int64_t start[JX_MAX_RANK], size[JX_MAX_RANK];
} ckpt_box;

typedef struct {
  int n;         /* mesh positions */
  int *device;   /* device id at position p */
  int *process;  /* the process owning that device */
  ckpt_box *box; /* the block held at position p */
  int *writer;   /* 1 at the lowest device holding each distinct block */
  int whole_by;  /* the lowest process holding every block (it writes the array whole), or -1 */
} ckpt_layout;

/* The layout of an array of global shape g under s; s NULL: one block, the
 * whole array, written by process 0. Errors name op. */
jx_status ckpt_layout_of(jx_sharding *s, jx_shape g, ckpt_layout *out, const char *op);
void ckpt_layout_free(ckpt_layout *l);

/* The box covering the whole of g. */
ckpt_box ckpt_box_whole(jx_shape g);
int ckpt_box_equal(const ckpt_box *a, const ckpt_box *b);
/* Its element count (0 when any size is 0, whatever the others are; the
 * caller knows the product of the others fits). */
int64_t ckpt_box_numel(const ckpt_box *b);
/* The overlap of a and b in *out; 0 when they do not overlap. */
int ckpt_box_intersect(const ckpt_box *a, const ckpt_box *b, ckpt_box *out);
/* The smallest box holding every box of this process's positions; 0 when
 * it has none. */
int ckpt_layout_local_box(const ckpt_layout *l, int process, ckpt_box *out);

/* A block's tensor name: "name@r0:r1,c0:c1" (half-open ranges per dim),
 * of any length; the caller frees it (NULL when out of memory). */
char *ckpt_block_name(const char *array, const ckpt_box *b);

/* Copies the box `part` (global coordinates) between two row-major buffers
 * holding the boxes src_box and dst_box (element size es). */
void ckpt_copy_box(const void *src, const ckpt_box *src_box, void *dst, const ckpt_box *dst_box,
                   const ckpt_box *part, size_t es);

#endif
