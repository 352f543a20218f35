/* Pipeline schedule tables, computed on the host: which microbatch each
 * stage works on at each tick, and which buffer slots hold the values that
 * wait between ticks. The executor (pipeline_train.c) runs such a table as
 * one program per device. */
#ifndef JX_SRC_PARALLEL_PIPELINE_SCHEDULE_H
#define JX_SRC_PARALLEL_PIPELINE_SCHEDULE_H

#include <jx/parallel.h>

typedef enum {
  PIPE_IDLE,
  PIPE_FORWARD,          /* the stage's forward; its residuals go to the stash */
  PIPE_BACKWARD,         /* the stage's backward from the stashed residuals */
  PIPE_FORWARD_BACKWARD, /* the last stage: forward, loss and backward at once */
  /* the executor's: the first stage's forward and backward with a first function */
  PIPE_FIRST_FORWARD,
  PIPE_FIRST_BACKWARD,
  PIPE_NKINDS,
} pipe_kind;

/* What one stage does at one tick. Slots index per-stage buffers; a slot
 * equal to the buffer's slot count is the spare one writes with nothing to
 * keep go to. */
typedef struct {
  int kind, microbatch;
  int chunk;         /* the device's virtual stage: global stage chunk S + device */
  int act_slot;      /* FORWARD, FORWARD_BACKWARD: the inbox slot holding its input */
  int stash_slot;    /* FORWARD: where its residuals go; BACKWARD: where they are */
  int cot_slot;      /* BACKWARD: the inbox slot holding its output's cotangent */
  int recv_act_slot; /* where the activations arriving from the left at this tick go */
  int recv_cot_slot; /* where the cotangent arriving from the right at this tick goes */
} pipe_step;

enum { PIPE_STEP_FIELDS = 8 };

typedef struct {
  int nstages, virtual_stages, microbatches, nticks;
  pipe_step *steps;                      /* steps[t * nstages + device] */
  int act_slots, cot_slots, stash_slots; /* the most any device holds at once */
  int *stashed;   /* per device: the most (chunk, microbatch) residuals stashed at once */
  int busy_ticks; /* device-ticks spent computing (FORWARD_BACKWARD: 2) */
} pipe_table;

/* The table of schedule for nstages devices of virtual_stages stages each
 * (interleaved; the others take 1) and microbatches microbatches, or an
 * error naming the numbers a schedule cannot take. */
jx_status pipe_table_build(jx_pipeline_schedule schedule, int nstages, int virtual_stages,
                           int microbatches, pipe_table *out);
/* The same with overlap: a value that arrives at tick t is first used at
 * t + 1, so the executor can run tick t's action while it is in flight (the
 * ppermute of what tick t - 1 sent overlaps tick t's compute), for a tick
 * more per hop of the pipeline's fill and drain; 1F1B then runs
 * 2 (S - s) - 1 forwards ahead on stage s. */
jx_status pipe_table_build_overlapped(jx_pipeline_schedule schedule, int nstages,
                                      int virtual_stages, int microbatches, int overlap,
                                      pipe_table *out);
void pipe_table_free(pipe_table *t);

/* What a profile needs of a pipeline's schedule to set the bubble it
 * measures beside the schedule's (debug/profiler_pipeline.c). The pipeline's
 * switches carry the tag that pipe_profile_tag gives for its table. */
typedef struct {
  jx_pipeline_schedule schedule;
  int nstages, virtual_stages, microbatches, nticks, busy_ticks;
} pipe_profile;
/* The tag of t's schedule (the same for the same schedule and numbers), >=
 * 1, or 0 when the process has run out of tags (its profile then shows the
 * actions without the schedule's figures). */
int pipe_profile_tag(jx_pipeline_schedule schedule, const pipe_table *t);
/* The schedule of a tag; non-zero when it names none. */
int pipe_profile_of(int tag, pipe_profile *out);

#endif
