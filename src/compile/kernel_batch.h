/* Translation units of kernels: the C prelude and the fused kernels of one
 * or more programs. A kernel's symbol is "jx_kernel_" and a hash of its text
 * (rendered under a placeholder name), so one symbol means one kernel in
 * every unit: a program's build can take its kernels from a unit compiled
 * for several programs at once (toolchain.h's jx_kernel_preload), and a
 * kernel two programs share is compiled once. */
#ifndef JX_SRC_COMPILE_KERNEL_BATCH_H
#define JX_SRC_COMPILE_KERNEL_BATCH_H

#include "../base/strbuf.h"
#include "fusion.h"

#define JX_KERNEL_NAME_CAP 32

typedef struct {
  jx_strbuf src;    /* the prelude, then every kernel added */
  const char *text; /* src's text, for readers; current after init and add */
  uint64_t *hashes; /* the kernels in text, once each */
  int n, hcap;
} jx_kernel_tu;

/* Starts t with the C prelude; JX_OK, or an error recorded. */
jx_status jx_kernel_tu_init(jx_kernel_tu *t);
/* Renders the kernels of groups[0, ng) of p into t (a kernel already there
 * is not added again) and writes each kernel's symbol into names[k] (""
 * for a group that is not a kernel; names may be NULL). Returns how many
 * groups are kernels, or -1 with an error recorded. */
int jx_kernel_tu_add(jx_kernel_tu *t, const jx_program *p, const jx_fusion_group *groups, int ng,
                     char (*names)[JX_KERNEL_NAME_CAP]);
void jx_kernel_tu_free(jx_kernel_tu *t);

#endif
