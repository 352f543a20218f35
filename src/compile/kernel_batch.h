/* Translation units of kernels: a dialect's prelude and the fused kernels
 * of one or more programs. A kernel's symbol is a prefix and a hash of its
 * text (rendered under a placeholder name): the text names the members'
 * values by their place in the group, not by their program variables
 * (render.h), so identical groups (same expression, dtypes, rank, load
 * strides and constants: a layer's kernels in every layer of a model) get
 * one symbol and one kernel in a unit. One symbol means one kernel in every
 * unit: a program's build can take its kernels from a unit compiled for
 * several programs at once (toolchain.h's jx_kernel_preload), and a kernel
 * two programs share is compiled once. */
#ifndef JX_SRC_COMPILE_KERNEL_BATCH_H
#define JX_SRC_COMPILE_KERNEL_BATCH_H

#include "../base/strbuf.h"
#include "fusion.h"
#include "render.h"

#define JX_KERNEL_NAME_CAP 32

typedef struct {
  const jx_dialect *dialect;
  const char *prefix; /* of the symbols: prefix and 16 hex digits of the hash */
  jx_strbuf src;      /* the prelude, then every kernel added */
  const char *text;   /* src's text, for readers; current after init and add */
  uint64_t *hashes;   /* the kernels in text, once each, in order */
  size_t *starts;     /* where each kernel's text starts in text */
  size_t prelude;     /* the prelude's length */
  int n, hcap;
} jx_kernel_tu;

/* Starts t with the C prelude, kernels named "jx_kernel_" and the hash;
 * JX_OK, or an error recorded. */
jx_status jx_kernel_tu_init(jx_kernel_tu *t);
/* The same in dialect d with symbols named prefix and the hash (prefix is
 * kept, not copied; at most JX_KERNEL_NAME_CAP - 17 characters). */
jx_status jx_kernel_tu_init_dialect(jx_kernel_tu *t, const jx_dialect *d, const char *prefix);
/* Renders the kernels of groups[0, ng) of p into t (a kernel already there
 * is not added again) and writes each kernel's symbol into names[k] (""
 * for a group that is not a kernel; names may be NULL) and its place among
 * t's kernels into index[k] (-1 for a group that is not a kernel; index may
 * be NULL). Returns how many groups are kernels, or -1 with an error
 * recorded. t->n is then the number of distinct kernels in t. */
int jx_kernel_tu_add(jx_kernel_tu *t, const jx_program *p, const jx_fusion_group *groups, int ng,
                     char (*names)[JX_KERNEL_NAME_CAP], int *index);
/* The symbol of t's kernel k (0 <= k < t->n) into name. */
void jx_kernel_tu_name(const jx_kernel_tu *t, int k, char name[JX_KERNEL_NAME_CAP]);
/* malloc'ed source of part `part` of nparts of t: the prelude and the
 * kernels k with k % nparts == part (a unit of its own, for compiling
 * several at once); NULL with an error recorded. */
char *jx_kernel_tu_part(const jx_kernel_tu *t, int part, int nparts);
void jx_kernel_tu_free(jx_kernel_tu *t);

#endif
