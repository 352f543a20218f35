/* The plan's report (jx_sharding_plan_print, JX_LOG_SHARDING=1): what a
 * sharded jit runs, estimated from its per-device program. */
#ifndef JX_SRC_PARALLEL_AUTO_REPORT_H
#define JX_SRC_PARALLEL_AUTO_REPORT_H

#include "../sharded_jit.h"
#include "comm_model.h"

/* Compute (machine_model.h's roofline of the per-device program at cm's
 * figures), communication (its collectives by cm's alpha-beta figures),
 * the cores' idle time (their sum over 1 - cm's idle share, less their sum)
 * and peak memory (jx_fn_cost's liveness peak of the per-device program). */
void jx_sharding_estimate_device(const jx_comm_model *cm, const jx_mesh *m,
                                 const jx_program *device, jx_sharding_estimate *out);

/* The figures a plan on m uses: the process's own or measured ones
 * (machine_model.h), else the fixed figures of a mesh this process cannot
 * time alone. */
void jx_plan_figures(jx_comm_model *cm, jx_mesh *m);

/* Prints v's layouts per input and per large activation, its collectives
 * and its estimate to f (name: the function's). */
void jx_sharding_report(FILE *f, const char *name, const jx_sharded_view *v,
                        const jx_comm_model *cm);

#endif
