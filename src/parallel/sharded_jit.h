/* jx_jit with in_shardings/out_shardings: the global program is partitioned
 * into one per-device program (sharding propagation + SPMD partitioner) and
 * run on the mesh's devices. */
#ifndef JX_SRC_PARALLEL_SHARDED_JIT_H
#define JX_SRC_PARALLEL_SHARDED_JIT_H

#include <jx/parallel.h>

#include "../prims/prim.h"
#include "propagate.h"

/* jx_jit when opts names shardings (installed at load: compile/jit.h). */
jx_fn *jx_jit_sharded(jx_fn *f, const jx_jit_options *opts);

struct jx_program;

/* Computation follows data: a program compiled for one device (a jx_jit
 * without shardings), run on sharded arguments, runs as the sharded jit does
 * with its arguments' own layouts (the per-device programs are made once per
 * tuple of input shardings and kept with the program). jx_follows_data says
 * whether p's run with these concrete arguments goes that way: some argument
 * is sharded, p is not a jit with shardings, the caller is not a device's
 * thread, and p's shard_maps (if any) are equations of p itself over the
 * arguments' mesh (the partitioner inlines their bodies; nested in control
 * flow or on another mesh it cannot place them, and JX_LOG_COMPILES=1
 * names the arguments such a program gathers). */
int jx_follows_data(const struct jx_program *p, jx_array *const *in);
jx_status jx_follow_data_run(const struct jx_program *p, jx_array *const *in, jx_array **out);

/* 1 when p or a program nested in it has a shard_map (or pmap) equation. */
int jx_program_holds_shard_map(const struct jx_program *p);

/* For tests: the compiled per-device program f (a jx_jit with shardings,
 * or one called with sharded arguments before) runs for these arguments (a new reference); NULL
 * with an error. */
struct jx_program *jx_sharded_jit_device_program(jx_fn *f, jx_array *const *in);

/* For tests: the layout f (a jx_jit with shardings) gives input i for
 * arguments of these avals, a JX_AUTO entry's as planned (a new reference;
 * NULL for none, or with an error). */
jx_sharding *jx_sharded_jit_in_layout(jx_fn *f, const jx_aval *in, int i);

/* What f (a jx_jit with shardings) runs for arguments of these avals laid
 * out as its in_shardings say (a JX_AUTO entry's as planned, none:
 * replicated): the global program partitioned (the planned one when f is
 * planned), the layout of each of its variables, and the per-device
 * program, simplified but not compiled. For the plan's report. */
typedef struct {
  jx_program *global; /* the program partitioned */
  jx_pspec *spec;     /* per variable of global */
  jx_program *device;
  jx_mesh *mesh; /* borrowed from f */
  int planned;   /* 1: the layouts are a plan's */
  /* a plan's search (auto/plan.h's jx_auto_plan): its distance from the
   * optimum's bound, whether the planning time limit stopped it, and the
   * limit */
  double plan_gap;
  int plan_stopped;
  double plan_time_limit_s;
} jx_sharded_view;
jx_status jx_sharded_jit_view(jx_fn *f, const jx_aval *in, jx_sharded_view *out);
void jx_sharded_view_free(jx_sharded_view *v);

#endif
