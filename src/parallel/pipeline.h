/* What jx_pipeline and jx_pipeline_value_and_grad share: checking their
 * arguments and the batch's layout. */
#ifndef JX_SRC_PARALLEL_PIPELINE_H
#define JX_SRC_PARALLEL_PIPELINE_H

#include <jx/parallel.h>

/* "data=2, model=2": m's axes for messages. */
void jx_pipeline_describe_axes(const jx_mesh *m, char *buf, size_t cap);

/* The sharding of the batch spec on m, checked not to split over the stage
 * axis; *shards: the number of blocks of the batch's dim 0. */
jx_sharding *jx_pipeline_batch_sharding(jx_mesh *m, const char *spec, const char *stage_axis,
                                        int64_t *shards);

/* The stage axis's size, or -1 with an error naming m's axes. */
int64_t jx_pipeline_stage_count(jx_mesh *m, const char *stage_axis);

#endif
