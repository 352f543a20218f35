/* jx/parallel.h: devices, meshes, shardings, shard_map, pmap and the
 * collectives used inside them.
 *
 * Devices. The CPU backend exposes JX_NUM_CPU_DEVICES virtual devices
 * (default 1; or jx_set_cpu_device_count before first use), each with its
 * own memory and its own thread, so every parallel feature runs on one
 * machine, as JAX's forced host device count does.
 *
 * Meshes and shardings. A mesh arranges devices in a named grid
 * (jx_mesh_create(JX_SHAPE(4, 2), (const char *[]){"data", "model"})). A
 * sharding is a mesh plus a partition spec with one entry per leading array
 * dim, comma separated: a mesh axis name, "None" or "_" (not split), or
 * "(a,b)" (split over several axes, a major). Missing trailing entries are
 * "None"; "" is fully replicated. Mesh axes a spec does not name replicate
 * the array. Every split dim must be divisible by the product of its axes'
 * sizes (jx rejects others, naming the dim, its size and the axes' size).
 *
 * Arrays. An array is a global shape plus one shard per device of its
 * sharding's mesh. jx_read and jx_print see the global value (gathered on
 * first use). Computation follows data, as in JAX: jitted functions (with
 * or without shardings), eager ops, shard_map and pmap work on the shards
 * where they are; a jx_jit without shardings called on sharded arguments
 * runs on their mesh, partitioned by their layouts, and its outputs (like
 * an eager op's) are sharded arrays laid out as propagation chose.
 *
 * Collectives (jx_psum, ...) are called inside jx_shard_map, jx_pmap or a
 * jx_vmap_axis body with the axis name; each is differentiable and batchable. */
#ifndef JX_PARALLEL_H
#define JX_PARALLEL_H

#include "array.h"
#include "transform.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct jx_device jx_device;
typedef struct jx_mesh jx_mesh;

/* ---- devices ---- */
/* Sets the number of CPU devices; only before the first use of devices
 * (an error afterwards, unless n equals the count already in use). */
JX_API jx_status jx_set_cpu_device_count(int n);
JX_API int jx_device_count(void); /* global, all processes */
JX_API int jx_local_device_count(void);
JX_API jx_device *jx_device_get(int i);                /* NULL and an error when out of range */
JX_API const char *jx_device_kind(const jx_device *d); /* "cpu", "cuda" */
JX_API int jx_device_id(const jx_device *d);
JX_API int jx_device_process_index(const jx_device *d);

/* ---- meshes ---- */
/* A mesh over devices 0 .. prod(axis_sizes)-1 in row-major order. Names must
 * be distinct, non-empty identifiers; the caller releases the mesh. */
JX_API jx_mesh *jx_mesh_create(jx_shape axis_sizes, const char *const *axis_names);
/* The same over the given devices (global ids, each once). */
JX_API jx_mesh *jx_mesh_create_on(jx_shape axis_sizes, const char *const *axis_names,
                                  const int *device_ids);
JX_API jx_mesh *jx_mesh_retain(jx_mesh *m);
JX_API void jx_mesh_release(jx_mesh *m);
JX_API int jx_mesh_ndim(const jx_mesh *m);
JX_API const char *jx_mesh_axis_name(const jx_mesh *m, int i);
JX_API int64_t jx_mesh_axis_size(const jx_mesh *m, const char *name); /* -1: no such axis */
JX_API int jx_mesh_device_count(const jx_mesh *m);
/* The global device id at a position of the mesh (row-major over its axes,
 * 0 .. device_count-1); -1 and an error when out of range. With
 * jx_device_process_index(jx_device_get(id)): the process that holds it. */
JX_API int jx_mesh_device_at(const jx_mesh *m, int position);
/* A text view of m: its axes, and the device (and its process) at each
 * position, one row per position of the leading axes:
 *   mesh data=2 x model=2 (4 devices, 1 process)
 *            model=0         model=1
 *   data=0  dev 0 (p0)      dev 1 (p0)
 *   data=1  dev 2 (p0)      dev 3 (p0)                                     */
JX_API void jx_mesh_print(const jx_mesh *m, FILE *f);

/* ---- shardings ---- */
JX_API jx_sharding *jx_sharding_create(jx_mesh *m, const char *spec); /* caller releases */
JX_API jx_sharding *jx_sharding_retain(jx_sharding *s);
JX_API void jx_sharding_release(jx_sharding *s);
JX_API jx_mesh *jx_sharding_mesh(const jx_sharding *s); /* borrowed */
/* The spec in normalized form: its entries comma separated without spaces,
 * each a mesh axis name, "None" (also for "_"), or "(a,b)" for several axes
 * ("data,None", "None,model", "(data,model)"); the empty string for a
 * replicated sharding, which messages and jx_visualize_sharding print as
 * JAX does, "PartitionSpec()". Borrowed, valid as long as s. */
JX_API const char *jx_sharding_spec(const jx_sharding *s);
/* The shape of each shard of an array of global shape g under s. */
JX_API jx_status jx_sharding_shard_shape(const jx_sharding *s, jx_shape g, jx_shape *out);

/* The array laid out as s says: shards on s's devices (a copy; a is
 * unchanged). A tracer gets a sharding constraint instead. */
JX_API jx_array *jx_device_put(jx_array *a, jx_sharding *s);
JX_API jx_array *jx_with_sharding_constraint(jx_array *a, jx_sharding *s);
/* a's sharding (borrowed), or NULL for an array on one device. */
JX_API jx_sharding *jx_sharding_of(const jx_array *a);
/* The shard held by the i-th device of a's mesh (device i for an array on
 * one device), as a new array owned by the innermost scope. */
JX_API jx_array *jx_array_shard(const jx_array *a, int i);
/* A text grid of which devices hold which block, like JAX's. */
JX_API void jx_visualize_sharding(const jx_array *a, FILE *f);

/* ---- per-device programs ---- */
/* f's inputs are split by in_specs (one spec per input, over m's axes) and
 * f runs once per device on its blocks, with m's axis names bound for the
 * collectives; its outputs are blocks of the global outputs laid out by
 * out_specs. An axis an out spec does not name must be one over which the
 * output is the same on every device.
 *
 * As JAX's default (check_vma=True), each value in f knows the mesh axes it
 * varies over: an input those its spec names, jx_axis_index its axis, a
 * result those of its operands; jx_psum over an axis makes a value the same
 * on every device along it. That is what makes gradients right: jx_grad
 * taken inside f, or of the whole shard_map from outside, is the gradient of
 * the global function. (An invariant value used where values vary is summed
 * over the axis in reverse mode, and psum's cotangent goes back unsummed.) */
JX_API jx_fn *jx_shard_map(jx_fn *f, jx_mesh *m, const char *const *in_specs,
                           const char *const *out_specs);
typedef struct {
  /* 1: JAX's check_vma=False: no axes tracked. psum's transpose is then psum
   * and a gradient taken inside f over a psum is the axis size times the
   * global one (each device's copy of a replicated value counts as its own,
   * pmap's rule). Gradients of the shard_map from outside stay right. */
  int no_check_vma;
} jx_shard_map_options;
/* jx_shard_map with options (NULL: the defaults, as jx_shard_map). */
JX_API jx_fn *jx_shard_map_ex(jx_fn *f, jx_mesh *m, const char *const *in_specs,
                              const char *const *out_specs, const jx_shard_map_options *opts);
/* shard_map over a one-axis mesh of all devices: in_axes entries are the
 * mapped axis of each input (JX_NONE: replicated), whose size must equal the
 * device count; the body sees inputs without that axis. */
JX_API jx_fn *jx_pmap(jx_fn *f, const char *axis_name, jx_axes in_axes, jx_axes out_axes);
/* The same with axis lists of any length (jx_axes holds at most 8): one
 * entry per input and output, or a single entry for all. */
JX_API jx_fn *jx_pmap_n(jx_fn *f, const char *axis_name, int nin_axes, const int *in_axes,
                        int nout_axes, const int *out_axes);

/* ---- pipeline parallelism ----
 * jx_pipeline runs `stage` as a pipeline over the mesh axis stage_axis, one
 * stage per position along it. stage takes (params..., activations) and
 * gives activations of the same shape and dtype; the result takes
 * (stacked params..., batch) and gives stage_{S-1}(... stage_0(batch)),
 * where each stacked parameter has a leading axis of size S (the axis's
 * size), entry s being stage s's own, and is split over stage_axis. The
 * batch's leading dim is split into `microbatches` equal microbatches that
 * flow through the stages, moved between neighbours with jx_ppermute; the
 * result is the same on every device. Built on jx_shard_map, it is
 * differentiable (reverse mode transposes the forward schedule) and
 * composes with jx_jit. Errors name the numbers: a batch not divisible into
 * the microbatches, a parameter whose leading dim is not the stage count, a
 * mesh without stage_axis. The schedule is GPIPE (every microbatch forward,
 * then every microbatch backward); 1F1B and INTERLEAVED run a microbatch's
 * backward as soon as its forward ends, which needs the loss inside the
 * pipeline: jx_pipeline_value_and_grad below. Other mesh axes see the
 * parameters and the batch replicated (jx_pipeline_ex can split the batch
 * over them). */
typedef enum {
  JX_PIPELINE_GPIPE,
  JX_PIPELINE_1F1B,
  JX_PIPELINE_INTERLEAVED,
} jx_pipeline_schedule;
JX_API jx_fn *jx_pipeline(jx_fn *stage, jx_mesh *m, const char *stage_axis, int microbatches,
                          jx_pipeline_schedule schedule);
typedef struct {
  /* The batch's (and the result's) partition spec over the mesh's other
   * axes, as jx_shard_map's ("data": data parallelism, each device of a
   * stage taking its rows of every microbatch); NULL or "": replicated. It
   * may not name the stage axis; its dim 0 must be divisible by the number
   * of its shards times the microbatches. */
  const char *batch_spec;
} jx_pipeline_options;
/* jx_pipeline with options (NULL: the defaults, as jx_pipeline). */
JX_API jx_fn *jx_pipeline_ex(jx_fn *stage, jx_mesh *m, const char *stage_axis, int microbatches,
                             jx_pipeline_schedule schedule, const jx_pipeline_options *opts);

/* Training through a pipeline with the loss inside it, as PyTorch's
 * pipeline schedules (a stage and a loss function; the schedule gives the
 * loss and the parameters' gradients). The result takes (stacked params...,
 * batch, targets) as jx_pipeline's plus the targets, whose leading dim is
 * the batch's, and gives (loss, the gradient of each stacked parameter...):
 * loss is the mean over the microbatches of loss_fn(the last stage's output
 * for the microbatch, its targets), a float scalar (with a mean over rows
 * in loss_fn, that is the loss of the whole batch), so the result equals
 * jx_value_and_grad of loss_fn after the stages in sequence.
 *
 * It runs the schedule's table (computed on the host) as one program per
 * device of stage_axis, built on jx_shard_map: at each tick a stage runs
 * the forward of a microbatch (keeping the residuals its backward needs),
 * the backward of one (from those residuals and the cotangent its right
 * neighbour sent), or nothing; the last stage runs forward, loss and
 * backward of a microbatch at once. Activations move right and cotangents
 * left with one jx_ppermute each per tick; the gradients accumulate on
 * each stage. GPIPE holds every microbatch's residuals on a stage; 1F1B
 * (PyTorch's Schedule1F1B: S - s forwards on stage s, then a backward and a
 * forward in turn) holds at most S, and needs microbatches >= S, as PyTorch
 * does. INTERLEAVED (Megatron's interleaved 1F1B) gives each device V
 * virtual stages (options.virtual_stages >= 2): global stage g = v S + s is
 * chunk v on device s, the stacked parameters have S V entries in global
 * stage order, activations go round the devices V times, and the bubble
 * shrinks to (S - 1) / (V M + S - 1); it needs microbatches a multiple of
 * S, as Megatron and PyTorch's ScheduleInterleaved1F1B. The result is
 * jittable; it is not itself differentiable (it is a gradient). */
typedef struct {
  /* As jx_pipeline_options's: the batch and the targets split over other
   * mesh axes (data parallelism); the loss and the gradients are then
   * averaged over those axes. */
  const char *batch_spec;
  /* 1: each stage keeps only its input between a microbatch's forward and
   * backward and recomputes the forward in the backward (jx_checkpoint per
   * stage): less memory, a forward more of compute. */
  int remat;
  /* Optional: the layer before the first stage (an embedding), taking
   * (outer params..., the batch's microbatch) and giving the first stage's
   * activations, run on the first stage only. The outer params are the
   * inputs of loss_fn before its last two (the head's, say): the loss is
   * loss_fn(outer params..., the last stage's output, targets), and the
   * result takes (stacked params..., outer params..., batch, targets) and
   * gives (loss, gradients of the stacked params..., of the outer params...).
   * Outer params are whole on every device; their gradient sums what the
   * first and the last stage give (a head tied to the embedding gets
   * both). */
  jx_fn *first;
  /* JX_PIPELINE_INTERLEAVED: stages per device (>= 2); others: 0 or 1. */
  int virtual_stages;
  /* Optional, one per stacked parameter: how the stage's own parameter
   * (without the stage dim) is split over the mesh's other axes, a
   * partition spec ("None,model"; NULL or "" whole). A dim split over an
   * axis of batch_spec is stored sharded (FSDP): the pipeline gathers it
   * before the ticks and reduce-scatters its gradient. A dim split over
   * another axis (tensor parallelism, Megatron's) reaches the stage as its
   * shard: the stage runs its own collectives over that axis (a psum after
   * a row-parallel product). The gradients come back split as the
   * parameters. */
  const char *const *param_specs;
  /* 1: overlap communication with compute. A value sent at the end of
   * tick t is first used at t + 2, so the ppermutes of what tick t sent
   * run while tick t + 1 computes; the fill and drain take a tick more per
   * hop, 1F1B runs more forwards ahead (jx_pipeline_schedule_stats gives
   * the tables without overlap). */
  int overlap;
} jx_pipeline_train_options;
JX_API jx_fn *jx_pipeline_value_and_grad(jx_fn *stage, jx_fn *loss_fn, jx_mesh *m,
                                         const char *stage_axis, int microbatches,
                                         jx_pipeline_schedule schedule,
                                         const jx_pipeline_train_options *opts);

/* A schedule's table for `stages` devices (of virtual_stages stages each
 * for INTERLEAVED; 1 for the others) and `microbatches` microbatches, where
 * a forward and a backward of a stage each take one tick: its length, the
 * fraction of device-ticks idle (the bubble; (S - 1) / (M + S - 1) for
 * GPipe and 1F1B), and the most (stage, microbatch) residuals a device
 * holds at once. Errors as jx_pipeline_value_and_grad's for numbers it
 * refuses. */
typedef struct {
  int ticks;
  double bubble_fraction;
  int most_stashed;
} jx_pipeline_stats;
JX_API jx_status jx_pipeline_schedule_stats(jx_pipeline_schedule schedule, int stages,
                                            int virtual_stages, int microbatches,
                                            jx_pipeline_stats *out);

/* ---- collectives: inside shard_map / pmap / vmap with an axis name ----
 * axis may name several mesh axes: "a,b". */
JX_API jx_array *jx_psum(jx_array *x, const char *axis);
JX_API jx_array *jx_pmean(jx_array *x, const char *axis);
JX_API jx_array *jx_pmax(jx_array *x, const char *axis);
JX_API jx_array *jx_pmin(jx_array *x, const char *axis);
JX_API jx_array *jx_all_gather(jx_array *x, const char *axis, int dim, int tiled);
JX_API jx_array *jx_psum_scatter(jx_array *x, const char *axis, int dim, int tiled);
JX_API jx_array *jx_ppermute(jx_array *x, const char *axis, int npairs, const int (*pairs)[2]);
JX_API jx_array *jx_all_to_all(jx_array *x, const char *axis, int split_dim, int concat_dim);
/* jx_axis_index and jx_axis_size are declared in transform.h. */

/* Automatic sharding (JX_AUTO, jx/transform.h): what a jx_jit with
 * shardings runs, estimated before running it from its per-device program
 * for arguments like example_in (their shapes and dtypes; the layouts are
 * the ones its in_shardings say, JX_AUTO entries as planned, entries left
 * NULL replicated): compute (each kernel or lone equation of it priced by
 * a roofline, the larger of its flops at the mesh's measured rate and its
 * bytes at the measured memory bandwidth, plus a measured cost per step),
 * communication (its collectives by the mesh's alpha-beta figures) and
 * peak memory per device (jx_fn_cost's liveness peak). */
typedef struct {
  double compute_s, comm_s; /* per call */
  double flops;             /* per device per call */
  double peak_bytes;        /* per device */
  int collectives;          /* collective operations per call */
  /* The time the cores sit idle per call while the devices wait at
   * collectives, when the mesh has more devices than the host has cores
   * (they time-share the cores; 0 otherwise): the busy time (compute_s +
   * comm_s) over 1 - the idle share measured on the mesh, less the busy
   * time. */
  double idle_s;
  double step_s; /* per call: compute_s + comm_s + idle_s */
} jx_sharding_estimate;
JX_API jx_status jx_sharding_estimate_of(jx_fn *f, jx_array *const *example_in,
                                         jx_sharding_estimate *out);
/* Prints f's layouts (per input and per large activation), the collectives
 * they cost per call (kind, mesh axes, bytes) and the estimate, to out;
 * with compare (another jx_jit with shardings of the same function, a hand
 * recipe such as data parallel), its estimate beside, named compare_name. */
JX_API jx_status jx_sharding_plan_print(jx_fn *f, jx_array *const *example_in, jx_fn *compare,
                                        const char *compare_name, FILE *out);
/* Sets the figures plans on meshes of m's shape use in this process instead
 * of measured ones (planning for a cluster on paper): per mesh axis alpha_s
 * seconds per message and bytes_per_s per link, and flops_per_s per device. */
JX_API jx_status jx_sharding_plan_figures(jx_mesh *m, const double *alpha_s,
                                          const double *bytes_per_s, double flops_per_s);

#ifndef JX_NO_LOCATION_MACROS

#define jx_device_put(...)               JX_LOCATED(jx_device_put, __VA_ARGS__)
#define jx_with_sharding_constraint(...) JX_LOCATED(jx_with_sharding_constraint, __VA_ARGS__)
#define jx_psum(...)                     JX_LOCATED(jx_psum, __VA_ARGS__)
#define jx_pmean(...)                    JX_LOCATED(jx_pmean, __VA_ARGS__)
#define jx_pmax(...)                     JX_LOCATED(jx_pmax, __VA_ARGS__)
#define jx_pmin(...)                     JX_LOCATED(jx_pmin, __VA_ARGS__)
#define jx_all_gather(...)               JX_LOCATED(jx_all_gather, __VA_ARGS__)
#define jx_psum_scatter(...)             JX_LOCATED(jx_psum_scatter, __VA_ARGS__)
#define jx_ppermute(...)                 JX_LOCATED(jx_ppermute, __VA_ARGS__)
#define jx_all_to_all(...)               JX_LOCATED(jx_all_to_all, __VA_ARGS__)

#define jx_mesh_create(...)     JX_LOCATED_PTR(jx_mesh *, jx_mesh_create, __VA_ARGS__)
#define jx_mesh_create_on(...)  JX_LOCATED_PTR(jx_mesh *, jx_mesh_create_on, __VA_ARGS__)
#define jx_sharding_create(...) JX_LOCATED_PTR(jx_sharding *, jx_sharding_create, __VA_ARGS__)
#define jx_array_shard(...)     JX_LOCATED(jx_array_shard, __VA_ARGS__)
#define jx_shard_map(...)       JX_LOCATED_PTR(jx_fn *, jx_shard_map, __VA_ARGS__)
#define jx_pmap(...)            JX_LOCATED_PTR(jx_fn *, jx_pmap, __VA_ARGS__)
#define jx_pmap_n(...)          JX_LOCATED_PTR(jx_fn *, jx_pmap_n, __VA_ARGS__)
#define jx_pipeline(...)        JX_LOCATED_PTR(jx_fn *, jx_pipeline, __VA_ARGS__)
#define jx_pipeline_ex(...)     JX_LOCATED_PTR(jx_fn *, jx_pipeline_ex, __VA_ARGS__)
#define jx_pipeline_value_and_grad(...)                                                            \
  JX_LOCATED_PTR(jx_fn *, jx_pipeline_value_and_grad, __VA_ARGS__)
#define jx_pipeline_schedule_stats(...) JX_LOCATED_STATUS(jx_pipeline_schedule_stats, __VA_ARGS__)
#define jx_sharding_shard_shape(...)    JX_LOCATED_STATUS(jx_sharding_shard_shape, __VA_ARGS__)
#define jx_sharding_estimate_of(...)    JX_LOCATED_STATUS(jx_sharding_estimate_of, __VA_ARGS__)
#define jx_sharding_plan_print(...)     JX_LOCATED_STATUS(jx_sharding_plan_print, __VA_ARGS__)
#define jx_sharding_plan_figures(...)   JX_LOCATED_STATUS(jx_sharding_plan_figures, __VA_ARGS__)
#endif

#ifdef __cplusplus
}
#endif
#endif
