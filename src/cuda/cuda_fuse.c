/* Planning and running the fused patterns of cuda_fuse.h. */
#include "cuda_fuse.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../base/env.h"
#include "../base/error.h"
#include "../base/strbuf.h"
#include "../compile/render_cuda.h"
#include "../prims/prims.h"
#include "cuda_module.h"
#include "kernels_attention.h"
#include "kernels_attention_tc.h"
#include "kernels_attention_bwd.h"
#include "kernels_io.h"
#include "kernels_softmax.h"

/* The adapters' kernels, in the module's function table: softmax per
 * dtype (f32, bf16); the attention forward per dtype (f32, bf16, f16) and
 * head_dim; the [a, b, c, d] -> [a, c, b, d] transpose per element size (4
 * or 2 bytes: q, k, v into the kernels' layout, the gradients back); the
 * backward's three kernels per dtype and head_dim. */
enum {
  FN_SOFTMAX = 0,          /* + (dtype is bf16) */
  FN_ATTN = 2,             /* + 3 dtype + head_dim */
  FN_SWAP12 = FN_ATTN + 9, /* + (element size is 2) */
  FN_ABWD = FN_SWAP12 + 2, /* + 9 part + 3 dtype + head_dim */
  FN_XENT = FN_ABWD + 27,  /* + 2 jx_cuda_xent_part + (dtype is bf16) */
  FN_COUNT = FN_XENT + 6
};
static const char *const bwd_parts[3] = {"delta", "dq", "dkdv"};
static const jx_dtype fn_dtypes[3] = {JX_F32, JX_BF16, JX_F16};
static const char *const dtype_names[3] = {"f32", "bf16", "f16"};

static int dtype_index(jx_dtype dt) { return dt == JX_BF16 ? 1 : dt == JX_F16 ? 2 : 0; }
static int dim_index(int64_t head_dim) { return head_dim == 32 ? 0 : head_dim == 64 ? 1 : 2; }
static int fn_attention(jx_dtype dt, int64_t d) {
  return FN_ATTN + 3 * dtype_index(dt) + dim_index(d);
}
static int fn_backward(int part, jx_dtype dt, int64_t d) {
  return FN_ABWD + 9 * part + 3 * dtype_index(dt) + dim_index(d);
}
static int fn_swap12(jx_dtype dt) { return FN_SWAP12 + (dt != JX_F32); }
static const char *const xent_parts[3] = {"forward", "pick", "backward"};
static int fn_xent(jx_cuda_fused_kind kind, jx_dtype dt) {
  int part = kind == JX_CUDA_FUSED_XENT        ? JX_CUDA_XENT_FORWARD
             : kind == JX_CUDA_FUSED_XENT_PICK ? JX_CUDA_XENT_PICK
                                               : JX_CUDA_XENT_BACKWARD;
  return FN_XENT + 2 * part + (dt == JX_BF16);
}

/* Adapter k's name into buf (size 64). */
static const char *fn_name(int k, char *buf) {
  if (k < FN_ATTN)
    snprintf(buf, 64, "jx_cuda_step_fused_softmax_%s", dtype_names[k - FN_SOFTMAX]);
  else if (k < FN_SWAP12)
    snprintf(buf, 64, "jx_cuda_step_fused_attention_%s_d%d", dtype_names[(k - FN_ATTN) / 3],
             32 << ((k - FN_ATTN) % 3));
  else if (k < FN_ABWD)
    snprintf(buf, 64, "jx_cuda_step_fused_swap12_b%d", k - FN_SWAP12 ? 2 : 4);
  else if (k < FN_XENT)
    snprintf(buf, 64, "jx_cuda_step_fused_attention_bwd_%s_%s_d%d", bwd_parts[(k - FN_ABWD) / 9],
             dtype_names[(k - FN_ABWD) % 9 / 3], 32 << ((k - FN_ABWD) % 3));
  else
    snprintf(buf, 64, "jx_cuda_step_fused_xent_%s_%s", xent_parts[(k - FN_XENT) / 2],
             dtype_names[(k - FN_XENT) % 2]);
  return buf;
}

struct jx_cuda_fused {
  jx_cuda_device *device;
  jx_cuda_blas *blas;
  int nops;
  jx_cuda_fused_op *ops;
  int ngroups;
  int *op_at; /* per group: the op it runs, or -1 */
  jx_cuda_fused_counts counts;
  atomic_llong launches[7]; /* per jx_cuda_fused_kind */
  jx_cuda_module *module;
  int fn[FN_COUNT]; /* index into module->functions, or -1 */
};

static jx_status out_of_memory(void) {
  return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA executor: out of host memory");
}

/* ---- the module: the kernels' sources behind adapters of the executor's signature ---- */

static jx_cubin_cache *cubins;
static pthread_once_t cubins_once = PTHREAD_ONCE_INIT;
static void create_cubins(void) { cubins = jx_cubin_cache_create(); }

/* 1 when the attention forward and backward for dt and head_dim d run on
 * tensor cores (kernels_attention_tc.h: bf16 or f16, head_dim 64 or 128,
 * sm_80 and later; f16 runs nowhere else). */
static int on_tensor_cores(const jx_cuda_fused *f, jx_dtype dt, int64_t d) {
  return f->device->info.cc_major >= 8 && jx_cuda_attention_tc_kernel(dt, d) != NULL;
}

/* The forward kernel's call in adapter k (an attention forward). */
static const char *attention_body(const jx_cuda_fused *f, int k, char *buf) {
  const jx_dtype dt = fn_dtypes[(k - FN_ATTN) / 3];
  const int d = 32 << ((k - FN_ATTN) % 3);
  if (on_tensor_cores(f, dt, d))
    snprintf(buf, 64, "jx_tc_forward<%d, %d>(s)", d, dt == JX_F16);
  else
    snprintf(buf, 64, "jx_at_forward<%d, %s>(s)", d, dt == JX_BF16 ? "unsigned short" : "float");
  return buf;
}

/* The adapters take render_cuda.h's jx_cuda_kargs (declared again here:
 * the kernels' sources are their own translation unit): buf holds the
 * pointers, dims the sizes; attention's scale and causal flag ride in
 * strides[0] (the float's bits) and strides[1]. */
static void append_adapters(const jx_cuda_fused *f, jx_strbuf *s, const uint8_t *want) {
  char text[2048], name[64], body[64];
  snprintf(text, sizeof text,
           "typedef struct {\n  char *buf[%d];\n  long long dims[%d];\n  long long strides[%d];\n"
           "  long long pieces, part, piece[%d];\n} jx_cuda_fused_kargs;\n",
           JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES, JX_MAX_RANK,
           JX_FUSION_MAX_LOADS * JX_MAX_RANK, JX_CUDA_MAX_PIECES + 1);
  jx_strbuf_append(s, text, strlen(text));
  static const char sig[] = "(const jx_cuda_fused_kargs a, long long row_begin, long long row_end)";
  static const char *const types[2] = {"float", "unsigned short"};
  for (int k = 0; k < FN_COUNT; k++) {
    if (!want[k]) continue;
    fn_name(k, name);
    if (k < FN_ATTN) {
      snprintf(text, sizeof text,
               "extern \"C\" __global__ void %s%s {\n"
               "  jx_cuda_softmax_args s;\n  s.x = a.buf[0];\n  s.y = a.buf[1];\n"
               "  s.rows = a.dims[0];\n  s.cols = a.dims[1];\n  jx_sm_rows<%s>(s);\n}\n",
               name, sig, types[k - FN_SOFTMAX]); /* f32, bf16 */
    } else if (k < FN_SWAP12) {
      snprintf(text, sizeof text,
               "extern \"C\" __global__ void __launch_bounds__(128) %s%s {\n"
               "  jx_cuda_attention_args s;\n  s.q = a.buf[0];\n  s.k = a.buf[1];\n"
               "  s.v = a.buf[2];\n  s.o = a.buf[3];\n  s.lse = (float *)a.buf[4];\n"
               "  s.batch = a.dims[0];\n  s.heads = a.dims[1];\n  s.t = a.dims[2];\n"
               "  s.scale = __int_as_float((int)a.strides[0]);\n  s.causal = (int)a.strides[1];\n"
               "  %s;\n}\n",
               name, sig, attention_body(f, k, body));
    } else if (k < FN_ABWD) {
      /* y[a][c][b][d] = x[a][b][c][d] for dims (a, b, c, d): q, k, v as nn
       * makes them, [n, T, H, dh], to the kernels' [n, H, T, dh], and the
       * gradients back */
      snprintf(text, sizeof text,
               "extern \"C\" __global__ void %s%s {\n"
               "  const %s *x = (const %s *)a.buf[0];\n  %s *y = (%s *)a.buf[1];\n"
               "  const long long nb = a.dims[1], nc = a.dims[2], nd = a.dims[3];\n"
               "  const long long total = a.dims[0] * nb * nc * nd;\n"
               "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;\n"
               "       i += (long long)gridDim.x * blockDim.x) {\n"
               "    const long long d = i %% nd, b = i / nd %% nb, c = i / (nd * nb) %% nc,\n"
               "                    n = i / (nd * nb * nc);\n"
               "    y[i] = x[((n * nb + b) * nc + c) * nd + d];\n"
               "  }\n}\n",
               name, sig, types[k - FN_SWAP12], types[k - FN_SWAP12], types[k - FN_SWAP12],
               types[k - FN_SWAP12]);
    } else if (k >= FN_XENT) {
      snprintf(text, sizeof text,
               "extern \"C\" __global__ void %s%s {\n"
               "  jx_cuda_xent_args s;\n  s.x = a.buf[0];\n  s.label = (const float *)a.buf[1];\n"
               "  s.picked = (float *)a.buf[2];\n  s.max = (float *)a.buf[3];\n"
               "  s.sum = (float *)a.buf[4];\n  s.scale = (const float *)a.buf[5];\n"
               "  s.at_label = (const float *)a.buf[6];\n  s.grad = a.buf[7];\n"
               "  s.rows = a.dims[0];\n  s.cols = a.dims[1];\n  jx_xe_%s<%s>(s);\n}\n",
               name, sig, (const char *[]){"forward", "pick", "backward"}[(k - FN_XENT) / 2],
               types[(k - FN_XENT) % 2]);
    } else {
      const int part = (k - FN_ABWD) / 9, d = 32 << ((k - FN_ABWD) % 3);
      const jx_dtype dt = fn_dtypes[(k - FN_ABWD) % 9 / 3];
      if (on_tensor_cores(f, dt, d))
        snprintf(body, sizeof body, "jx_tc_%s<%d, %d>(s)", bwd_parts[part], d, dt == JX_F16);
      else
        snprintf(body, sizeof body, "jx_ab_%s<%d, %s>(s)", bwd_parts[part], d,
                 types[dt == JX_BF16]);
      snprintf(text, sizeof text,
               "extern \"C\" __global__ void __launch_bounds__(128) %s%s {\n"
               "  jx_cuda_attention_bwd_args s;\n  s.q = a.buf[0];\n  s.k = a.buf[1];\n"
               "  s.v = a.buf[2];\n  s.o = a.buf[3];\n  s.dout = a.buf[4];\n"
               "  s.lse = (const float *)a.buf[5];\n  s.delta = (float *)a.buf[6];\n"
               "  s.dq = a.buf[7];\n  s.dk = a.buf[8];\n  s.dv = a.buf[9];\n"
               "  s.batch = a.dims[0];\n  s.heads = a.dims[1];\n  s.t = a.dims[2];\n"
               "  s.scale = __int_as_float((int)a.strides[0]);\n  s.causal = (int)a.strides[1];\n"
               "  %s;\n}\n",
               name, sig, body);
    }
    jx_strbuf_append(s, text, strlen(text));
  }
}

/* Appends a kernel source up to `cut` (where its own kernels begin: the
 * adapters instantiate the ones used, so NVRTC, and the tests' emulator,
 * compile those alone), without the loads and stores every source defines
 * when they are in the unit already. */
static void append_source(jx_strbuf *tu, const char *src, const char *cut, int *have_io) {
  const char *end = cut ? strstr(src, cut) : NULL;
  size_t len = end ? (size_t)(end - src) : strlen(src);
  const char *io = strstr(src, JX_CUDA_IO_SRC);
  if (io && io + strlen(JX_CUDA_IO_SRC) <= src + len) {
    if (*have_io) {
      jx_strbuf_append(tu, src, (size_t)(io - src));
      len -= (size_t)(io - src) + strlen(JX_CUDA_IO_SRC);
      src = io + strlen(JX_CUDA_IO_SRC);
    }
    *have_io = 1;
  }
  jx_strbuf_append(tu, src, len);
}

/* One translation unit: the sources the wanted adapters need, then the
 * adapters. */
static jx_status load_module(jx_cuda_fused *f, const uint8_t *want) {
  jx_strbuf tu = JX_STRBUF_INIT;
  int any[4] = {0, 0, 0, 0}, have_io = 0; /* softmax, attention, transpose, backward */
  for (int k = 0; k < FN_COUNT; k++)      /* the cross-entropy's kernels are the softmax's source */
    any[k < FN_ATTN || k >= FN_XENT ? 0 : k < FN_SWAP12 ? 1 : k < FN_ABWD ? 2 : 3] |= want[k];
  if (any[0]) append_source(&tu, jx_cuda_softmax_src, NULL, &have_io);
  if (any[1]) append_source(&tu, jx_cuda_attention_src, "#define JX_AT_KERNEL", &have_io);
  /* bf16 and f16 with head_dim 64 or 128: the forward and backward on tensor cores */
  int tc = 0;
  for (int i = 1; i < 3; i++)
    for (int d = 64; d <= 128; d *= 2)
      if (on_tensor_cores(f, fn_dtypes[i], d)) {
        tc |= want[fn_attention(fn_dtypes[i], d)];
        for (int part = 0; part < 3; part++) tc |= want[fn_backward(part, fn_dtypes[i], d)];
      }
  if (tc) append_source(&tu, jx_cuda_attention_tc_src, "#define JX_TC_KERNELS", &have_io);
  if (any[3]) append_source(&tu, jx_cuda_attention_bwd_src, "#define JX_AB_KERNELS", &have_io);
  append_adapters(f, &tu, want);
  char(*names)[64] = calloc(FN_COUNT, sizeof *names);
  const char *list[FN_COUNT];
  int n = 0;
  jx_status st = names ? jx_strbuf_status(&tu, "CUDA executor") : out_of_memory();
  for (int k = 0; k < FN_COUNT && !st; k++) {
    f->fn[k] = want[k] ? n : -1;
    if (want[k]) list[n++] = fn_name(k, names[k]);
  }
  if (!st) {
    pthread_once(&cubins_once, create_cubins);
    st = cubins ? jx_cuda_module_load(f->device, cubins, tu.text, "jx_fused_kernels", list, n,
                                      &f->module)
                : out_of_memory();
  }
  jx_strbuf_free(&tu);
  free(names);
  return st;
}

/* ---- planning ---- */

/* How much of group g a match owns: 0 none, 1 all of it, 2 a tail of a
 * kernel whose head only computes what the match reads (a prologue fused
 * with the softmax's first reduction, say), -1 anything else. */
static int share(const jx_program *p, const jx_fusion_group *g, const uint8_t *member,
                 const jx_cuda_fused_op *op) {
  int in = 0, head = g->count;
  for (int e = g->first; e < g->first + g->count; e++) {
    in += member[e];
    if (member[e] && head == g->count) head = e - g->first;
  }
  if (in == 0 || in == g->count) return in ? 1 : 0;
  if (in != g->count - head || !jx_fusion_group_is_kernel(g) || g->lead > 0) return -1;
  /* what the head makes and the tail reads must be the match's input */
  for (int e = g->first + head; e < g->first + g->count; e++)
    for (int i = 0; i < p->eqns[e].nin; i++) {
      int v = p->eqns[e].in[i], read = 0, made = 0;
      for (int h = g->first; h < g->first + head; h++) made |= p->eqns[h].out[0] == v;
      for (int r = 0; r < op->nreads; r++) read |= op->reads[r] == v;
      if (made && !read) return -1;
    }
  return 2;
}

/* The groups' equations the match owns: its members, and the
 * broadcast_in_dims sharing a group with them that nothing needs as an
 * array any more: every reader is a member, gone with an earlier match, or
 * a kernel of another group (which reads the broadcast's operand through
 * it). Such broadcasts are the scalar constants and the causal mask that
 * common-subexpression elimination shares between a model's layers. */
static void own_groups(const jx_program *p, const jx_cuda_fuse_index *ix,
                       const jx_fusion_group *groups, int ng, const int *group_of,
                       const uint8_t *member, const uint8_t *taken, uint8_t *owned) {
  memcpy(owned, member, (size_t)p->neqns);
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &groups[k];
    int touched = 0;
    for (int e = g->first; e < g->first + g->count; e++) touched |= member[e];
    for (int e = g->first; touched && e < g->first + g->count; e++) {
      const jx_eqn *b = &p->eqns[e];
      if (member[e] || b->prim != &jx_prim_broadcast_in_dim) continue;
      int v = b->out[0], reads = 0, fine = 1;
      for (int r = e + 1; r < p->neqns && fine; r++)
        for (int i = 0; i < p->eqns[r].nin && fine; i++) {
          if (p->eqns[r].in[i] != v) continue;
          reads++;
          int h = group_of[r];
          fine =
              member[r] || taken[r] || (h >= 0 && h != k && jx_fusion_group_is_kernel(&groups[h]));
        }
      owned[e] = fine && reads == ix->readers[v]; /* not an output of the program */
    }
  }
}

/* The last group the match touches (where it runs), or -1 when a group is
 * shared in a way share() refuses, or the last one is shared at all. */
static int anchor_group(const jx_program *p, const jx_fusion_group *groups, int ng,
                        const uint8_t *member, const jx_cuda_fused_op *op) {
  int anchor = -1, last_share = 0;
  for (int k = 0; k < ng; k++) {
    int s = share(p, &groups[k], member, op);
    if (s < 0) return -1;
    if (s > 0) {
      anchor = k;
      last_share = s;
    }
  }
  return last_share == 1 ? anchor : -1;
}

/* For a match that reads only its inputs (the cross-entropy's): the
 * first group it owns whole that comes after its inputs are made and
 * before any other reader of its outputs, or -1 (also when anchor_group
 * refuses it). Its outputs are then ready for what reads them between its
 * groups (the loss's rows between the logits' passes). */
static int early_anchor(const jx_program *p, const jx_cuda_fuse_index *ix,
                        const jx_fusion_group *groups, int ng, const uint8_t *member,
                        const jx_cuda_fused_op *op) {
  if (anchor_group(p, groups, ng, member, op) < 0) return -1;
  int ready = 0, first_read = p->neqns; /* equations: inputs made before, outputs read after */
  for (int r = 0; r < op->nreads; r++)
    if (ix->def[op->reads[r]] + 1 > ready) ready = ix->def[op->reads[r]] + 1;
  for (int e = 0; e < p->neqns; e++)
    for (int i = 0; !member[e] && i < p->eqns[e].nin; i++)
      for (int o = 0; o < op->nouts; o++)
        if (p->eqns[e].in[i] == op->outs[o] && e < first_read) first_read = e;
  for (int k = 0; k < ng; k++)
    if (share(p, &groups[k], member, op) == 1 && groups[k].first >= ready)
      return groups[k].first + groups[k].count <= first_read ? k : -1;
  return -1;
}

/* Cuts group g to its head (share() == 2): an elementwise kernel storing
 * what it stored before, less the tail's values, plus the match's inputs. */
static void cut_to_head(const jx_program *p, jx_fusion_group *g, const uint8_t *member,
                        const jx_cuda_fused_op *op) {
  int head = 0;
  while (!member[g->first + head]) head++;
  g->count = head;
  g->reduces = g->lead = g->single = 0;
  g->compute = 0;
  for (int e = g->first; e < g->first + head; e++)
    g->compute += p->eqns[e].prim != &jx_prim_broadcast_in_dim;
  int n = 0;
  for (int o = 0; o < g->nstores; o++) {
    int made = 0;
    for (int e = g->first; e < g->first + head; e++) made |= p->eqns[e].out[0] == g->stores[o];
    if (made) g->stores[n++] = g->stores[o];
  }
  g->nstores = n;
  for (int r = 0; r < op->nreads; r++)
    for (int e = g->first; e < g->first + head; e++) {
      int have = 0;
      for (int o = 0; o < g->nstores; o++) have |= g->stores[o] == op->reads[r];
      if (p->eqns[e].out[0] == op->reads[r] && !have && g->nstores < JX_FUSION_MAX_STORES)
        g->stores[g->nstores++] = op->reads[r];
    }
}

static void rewrite_groups(const jx_program *p, const jx_cuda_fused_op *op, jx_fusion_group *groups,
                           int ng, const uint8_t *member, int anchor) {
  for (int k = 0; k < ng; k++) {
    jx_fusion_group *g = &groups[k];
    int s = share(p, g, member, op);
    if (s == 2)
      cut_to_head(p, g, member, op);
    else if (s == 1 && k != anchor)
      g->skip = 1;
  }
  /* the fused step: no equations of its own (nothing runs on the host);
   * its reads and write, as a kernel's, for the executor's lifetimes */
  jx_fusion_group *a = &groups[anchor];
  int first = a->first;
  memset(a, 0, sizeof *a);
  a->first = first;
  a->nloads = op->nreads;
  for (int r = 0; r < op->nreads; r++) a->loads[r].var = op->reads[r];
  a->nstores = op->nouts;
  for (int o = 0; o < op->nouts; o++) a->stores[o] = op->outs[o];
}

static jx_status add_op(jx_cuda_fused *f, const jx_cuda_fused_op *op, int anchor) {
  jx_cuda_fused_op *ops = realloc(f->ops, sizeof *ops * (size_t)(f->nops + 1));
  if (!ops) return out_of_memory();
  f->ops = ops;
  f->op_at[anchor] = f->nops;
  f->ops[f->nops++] = *op;
  return JX_OK;
}

jx_status jx_cuda_fused_plan(jx_cuda_device *d, const jx_program *p, jx_fusion_group *groups,
                             int ngroups, jx_cuda_blas *(*blas)(jx_cuda_device *d),
                             jx_cuda_fused **out) {
  *out = NULL;
  if (ngroups <= 0 || p->neqns == 0 || jx_env_flag("JX_CUDA_NO_FUSE")) return JX_OK;
  jx_cuda_fuse_index ix = {NULL, NULL};
  jx_status st = jx_cuda_fuse_index_build(p, &ix);
  if (st) return st;
  jx_cuda_fused *f = calloc(1, sizeof *f);
  uint8_t *member = calloc((size_t)p->neqns, 1), *taken = calloc((size_t)p->neqns, 1);
  uint8_t *owned = calloc((size_t)p->neqns, 1);
  int *group_of = malloc(sizeof *group_of * (size_t)p->neqns);
  if (f) f->op_at = malloc(sizeof *f->op_at * (size_t)ngroups);
  if (!f || !member || !taken || !owned || !group_of || !f->op_at) st = out_of_memory();
  if (!st) {
    f->device = d;
    f->ngroups = ngroups;
    for (int k = 0; k < ngroups; k++) f->op_at[k] = -1;
    for (int e = 0; e < p->neqns; e++) group_of[e] = -1;
    for (int k = 0; k < ngroups; k++)
      for (int e = groups[k].first; e < groups[k].first + groups[k].count; e++) group_of[e] = k;
  }
  uint8_t want[FN_COUNT] = {0}; /* the adapters the module needs */
  int kernels = 0;
  /* the cross-entropy (its forward and backward planned together), then
   * attention's calls, attention as equations (it holds a softmax),
   * softmax, epilogues */
  uint8_t *xm[3] = {member, NULL, NULL}, *xo[3] = {owned, NULL, NULL};
  for (int k = 1; k < 3; k++) {
    xm[k] = calloc((size_t)p->neqns, 1);
    xo[k] = calloc((size_t)p->neqns, 1);
    if (!st && (!xm[k] || !xo[k])) st = out_of_memory();
  }
  for (int e = 0; e < p->neqns && !st; e++) {
    jx_cuda_fused_op xops[3]; /* a match writes every entry of xm[0..n) */
    int n = taken[e] ? 0 : jx_cuda_match_xent(p, &ix, e, xops, xm), at[3] = {-1, -1, -1};
    int clash = 0;
    for (int k = 0; k < n; k++)
      for (int q = 0; q < p->neqns; q++) clash |= xm[k][q] && taken[q];
    if (!n || clash) continue;
    /* each op's groups with the earlier ops' equations as gone */
    int k = 0;
    for (; k < n; k++) {
      own_groups(p, &ix, groups, ngroups, group_of, xm[k], taken, xo[k]);
      if ((at[k] = early_anchor(p, &ix, groups, ngroups, xo[k], &xops[k])) < 0) break;
      for (int q = 0; q < p->neqns; q++) taken[q] |= xm[k][q];
    }
    if (k < n) { /* one of them cannot be placed: none is */
      for (int j = 0; j < k; j++)
        for (int q = 0; q < p->neqns; q++) taken[q] &= (uint8_t)!xm[j][q];
      continue;
    }
    for (k = 0; k < n && !st; k++) {
      st = add_op(f, &xops[k], at[k]);
      if (!st) rewrite_groups(p, &xops[k], groups, ngroups, xo[k], at[k]);
      want[fn_xent(xops[k].kind, xops[k].dtype)] = 1;
    }
    f->counts.xents++;
    f->counts.xent_backwards += n == 3;
    kernels = 1;
  }
  for (int k = 1; k < 3; k++) {
    free(xm[k]);
    free(xo[k]);
  }
  for (int pass = 0; pass < 4 && !st; pass++)
    for (int e = 0; e < p->neqns && !st; e++) {
      if (taken[e]) continue;
      jx_cuda_fused_op op;
      memset(member, 0, (size_t)p->neqns);
      int hit = pass == 0   ? jx_cuda_match_attention_call(p, &ix, e, &op, member)
                : pass == 1 ? jx_cuda_match_attention(p, &ix, e, &op, member)
                : pass == 2 ? jx_cuda_match_softmax(p, &ix, e, &op, member)
                            : jx_cuda_match_epilogue(p, &ix, e, &op, member);
      /* f16 attention has only the tensor-core kernels: elsewhere its calls
       * run their programs */
      if (hit && op.dtype == JX_F16 &&
          (op.kind == JX_CUDA_FUSED_ATTENTION || op.kind == JX_CUDA_FUSED_ATTENTION_BWD) &&
          !on_tensor_cores(f, op.dtype, op.head_dim))
        hit = 0;
      int clash = 0;
      for (int q = 0; q < p->neqns && hit; q++) clash |= member[q] && taken[q];
      if (hit && !clash) own_groups(p, &ix, groups, ngroups, group_of, member, taken, owned);
      int anchor = hit && !clash ? anchor_group(p, groups, ngroups, owned, &op) : -1;
      if (anchor < 0) continue;
      if (op.kind == JX_CUDA_FUSED_EPILOGUE) {
        f->counts.epilogues_matched++;
        if (!f->blas && !(f->blas = blas(d))) continue; /* no cuBLASLt: counted, unfused */
      }
      for (int q = 0; q < p->neqns; q++) taken[q] |= member[q];
      st = add_op(f, &op, anchor);
      if (!st) rewrite_groups(p, &op, groups, ngroups, owned, anchor);
      f->counts.epilogues += op.kind == JX_CUDA_FUSED_EPILOGUE;
      f->counts.softmaxes += op.kind == JX_CUDA_FUSED_SOFTMAX;
      f->counts.attentions += op.kind == JX_CUDA_FUSED_ATTENTION;
      f->counts.attention_backwards += op.kind == JX_CUDA_FUSED_ATTENTION_BWD;
      if (op.kind == JX_CUDA_FUSED_SOFTMAX) want[FN_SOFTMAX + (op.dtype == JX_BF16)] = 1;
      if (op.kind == JX_CUDA_FUSED_ATTENTION)
        want[fn_swap12(op.dtype)] = want[fn_attention(op.dtype, op.head_dim)] = 1;
      for (int part = 0; part < 3 && op.kind == JX_CUDA_FUSED_ATTENTION_BWD; part++)
        want[fn_swap12(op.dtype)] = want[fn_backward(part, op.dtype, op.head_dim)] = 1;
      kernels |= op.kind != JX_CUDA_FUSED_EPILOGUE;
    }
  if (!st && kernels) st = load_module(f, want);
  if (!st && jx_env_flag("JX_LOG_COMPILES") && f && (f->nops || f->counts.epilogues_matched))
    fprintf(stderr,
            "jx: CUDA '%s': fused %d GEMM epilogues (%d found), %d softmaxes, %d attentions, "
            "%d attention backwards, %d cross-entropies, %d cross-entropy backwards\n",
            p->name, f->counts.epilogues, f->counts.epilogues_matched, f->counts.softmaxes,
            f->counts.attentions, f->counts.attention_backwards, f->counts.xents,
            f->counts.xent_backwards);
  jx_cuda_fuse_index_free(&ix);
  free(member);
  free(taken);
  free(owned);
  free(group_of);
  if (st || (!f->nops && !f->counts.epilogues_matched)) {
    jx_cuda_fused_free(f);
    return st;
  }
  *out = f;
  return JX_OK;
}

/* ---- running ---- */

int jx_cuda_fused_at(const jx_cuda_fused *f, int k) {
  return f && k >= 0 && k < f->ngroups && f->op_at[k] >= 0;
}

const jx_cuda_fused_op *jx_cuda_fused_op_at(const jx_cuda_fused *f, int k) {
  return jx_cuda_fused_at(f, k) ? &f->ops[f->op_at[k]] : NULL;
}

static jx_status launch(jx_cuda_fused *f, int fn, const jx_cuda_launch_dims *g, jx_cuda_kargs *a) {
  char name[64];
  if (f->fn[fn] < 0)
    return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: fused kernel %s was not loaded",
                        fn_name(fn, name));
  int64_t row_begin = 0, row_end = 0;
  void *params[] = {a, &row_begin, &row_end};
  jx_cuda_device *d = f->device;
  return jx_cuda_check(jx_cuda_driver()->LaunchKernel(
                           f->module->functions[f->fn[fn]], g->grid[0], g->grid[1], g->grid[2],
                           g->block[0], g->block[1], g->block[2], 0, d->compute, params, NULL),
                       "cuLaunchKernel", d->info.ordinal);
}

static jx_status run_softmax(jx_cuda_fused *f, const jx_cuda_fused_op *op, CUdeviceptr x,
                             CUdeviceptr y) {
  jx_cuda_launch_dims g;
  jx_status st = jx_cuda_softmax_geometry(op->rows, op->cols, &g);
  if (st || g.grid[0] == 0) return st;
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  a.buf[0] = (char *)(uintptr_t)x;
  a.buf[1] = (char *)(uintptr_t)y;
  a.dims[0] = op->rows;
  a.dims[1] = op->cols;
  return launch(f, FN_SOFTMAX + (op->dtype == JX_BF16), &g, &a);
}

/* The cross-entropy's forward (in: logits; out: max, sum), its label's
 * logit (in: logits, label; out: picked) or its backward (in: logits,
 * label, max, scale, at_label; out: the gradient): a block per row, as the
 * softmax, or a thread per row for the label's logit. */
static jx_status run_xent(jx_cuda_fused *f, const jx_cuda_fused_op *op, const CUdeviceptr *in,
                          const CUdeviceptr *out) {
  jx_cuda_launch_dims g;
  const int pick = op->kind == JX_CUDA_FUSED_XENT_PICK, bwd = op->kind == JX_CUDA_FUSED_XENT_BWD;
  jx_status st = pick ? jx_cuda_xent_pick_geometry(op->rows, &g)
                      : jx_cuda_softmax_geometry(op->rows, op->cols, &g);
  if (st || g.grid[0] == 0) return st;
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  /* x, label, picked, max, sum, scale, at_label, grad */
  const CUdeviceptr ptrs[8] = {in[0],
                               pick || bwd ? in[1] : 0,
                               pick ? out[0] : 0,
                               bwd    ? in[2]
                               : pick ? 0
                                      : out[0],
                               pick || bwd ? 0 : out[1],
                               bwd ? in[3] : 0,
                               bwd ? in[4] : 0,
                               bwd ? out[0] : 0};
  for (int i = 0; i < 8; i++) a.buf[i] = (char *)(uintptr_t)ptrs[i];
  a.dims[0] = op->rows;
  a.dims[1] = op->cols;
  return launch(f, fn_xent(op->kind, op->dtype), &g, &a);
}

/* Blocks of the allocator for a fused step's intermediates. They go back
 * right behind the launches that use them: every launch is on the compute
 * stream, and the allocator hands a block out again only behind it. */
typedef struct {
  jx_cuda_fused *f;
  int n;
  uint64_t blocks[8];
} scratch;

static jx_status scratch_alloc(scratch *s, size_t bytes, CUdeviceptr *ptr) {
  uint64_t b = 0;
  jx_status st = jx_cuda_allocator_alloc(s->f->device->memory, bytes ? bytes : 1, &b);
  if (!st) s->blocks[s->n++] = b;
  *ptr = (CUdeviceptr)b;
  return st;
}

static void scratch_free(scratch *s) {
  for (int i = 0; i < s->n; i++) jx_cuda_allocator_free(s->f->device->memory, s->blocks[i]);
  s->n = 0;
}

/* y[a][c][b][d] = x[a][b][c][d] for x of dims (a, b, c, d), op's dtype. */
static jx_status swap12(jx_cuda_fused *f, const jx_cuda_fused_op *op, CUdeviceptr x, CUdeviceptr y,
                        int64_t a, int64_t b, int64_t c, int64_t d) {
  int64_t numel = a * b * c * d, blocks = (numel + 255) / 256,
          cap = 8 * (int64_t)(f->device->info.sm_count > 0 ? f->device->info.sm_count : 1);
  if (numel == 0) return JX_OK;
  jx_cuda_launch_dims g = {{(unsigned)(blocks < cap ? blocks : cap), 1, 1}, {256, 1, 1}, 0};
  jx_cuda_kargs k;
  memset(&k, 0, sizeof k);
  k.buf[0] = (char *)(uintptr_t)x;
  k.buf[1] = (char *)(uintptr_t)y;
  k.dims[0] = a;
  k.dims[1] = b;
  k.dims[2] = c;
  k.dims[3] = d;
  return launch(f, fn_swap12(op->dtype), &g, &k);
}

/* The sizes, scale and causal flag every attention kernel takes. */
static void attention_kargs(const jx_cuda_fused_op *op, jx_cuda_kargs *a) {
  a->dims[0] = op->batch;
  a->dims[1] = op->heads;
  a->dims[2] = op->t;
  float scale = op->scale;
  int32_t bits;
  memcpy(&bits, &scale, sizeof bits);
  a->strides[0] = bits;
  a->strides[1] = op->causal;
}

/* q, k, v [n, T, H, dh] transposed into blocks of the allocator, then the
 * flash kernel: o [n, H, T, dh] and, for the forward call, lse. */
static jx_status run_attention(jx_cuda_fused *f, const jx_cuda_fused_op *op, const CUdeviceptr *in,
                               const CUdeviceptr *out) {
  jx_cuda_launch_dims g;
  jx_status st = on_tensor_cores(f, op->dtype, op->head_dim)
                     ? jx_cuda_attention_tc_geometry(op->batch, op->heads, op->t, op->head_dim, &g)
                     : jx_cuda_attention_geometry(op->batch, op->heads, op->t, op->head_dim, &g);
  if (st || g.grid[0] == 0) return st;
  size_t bytes = (size_t)(op->batch * op->heads * op->t * op->head_dim) * jx_dtype_size(op->dtype);
  scratch s = {f, 0, {0}};
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  for (int i = 0; i < 3 && !st; i++) {
    CUdeviceptr tmp = 0;
    st = scratch_alloc(&s, bytes, &tmp);
    if (!st) st = swap12(f, op, in[i], tmp, op->batch, op->t, op->heads, op->head_dim);
    a.buf[i] = (char *)(uintptr_t)tmp;
  }
  if (!st) {
    a.buf[3] = (char *)(uintptr_t)out[0];
    a.buf[4] = op->nouts > 1 ? (char *)(uintptr_t)out[1] : NULL;
    attention_kargs(op, &a);
    st = launch(f, fn_attention(op->dtype, op->head_dim), &g, &a);
  }
  scratch_free(&s);
  return st;
}

/* The backward call (q, k, v, o, lse, do) -> (dq, dk, dv): q, k, v into
 * the kernels' layout, delta, dq, dk and dv (kernels_attention_bwd.h) into
 * blocks of the allocator, the gradients transposed back to [n, T, H, dh]. */
static jx_status run_attention_backward(jx_cuda_fused *f, const jx_cuda_fused_op *op,
                                        const CUdeviceptr *in, const CUdeviceptr *out) {
  jx_cuda_launch_dims g[3];
  jx_status st =
      on_tensor_cores(f, op->dtype, op->head_dim)
          ? jx_cuda_attention_tc_bwd_geometry(op->batch, op->heads, op->t, op->head_dim, g)
          : jx_cuda_attention_bwd_geometry(op->batch, op->heads, op->t, op->head_dim, g);
  if (st || g[0].grid[0] == 0) return st;
  int64_t rows = op->batch * op->heads * op->t;
  size_t bytes = (size_t)(rows * op->head_dim) * jx_dtype_size(op->dtype);
  scratch s = {f, 0, {0}};
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  CUdeviceptr tmp[7] = {0}; /* q, k, v, delta, dq, dk, dv */
  for (int i = 0; i < 7 && !st; i++)
    st = scratch_alloc(&s, i == 3 ? (size_t)rows * sizeof(float) : bytes, &tmp[i]);
  for (int i = 0; i < 3 && !st; i++)
    st = swap12(f, op, in[i], tmp[i], op->batch, op->t, op->heads, op->head_dim);
  if (!st) {
    CUdeviceptr ptrs[10] = {tmp[0], tmp[1], tmp[2], in[3],  in[5],
                            in[4],  tmp[3], tmp[4], tmp[5], tmp[6]};
    for (int i = 0; i < 10; i++) a.buf[i] = (char *)(uintptr_t)ptrs[i];
    attention_kargs(op, &a);
  }
  for (int part = 0; part < 3 && !st; part++)
    st = launch(f, fn_backward(part, op->dtype, op->head_dim), &g[part], &a);
  for (int i = 0; i < 3 && !st; i++)
    st = swap12(f, op, tmp[4 + i], out[i], op->batch, op->heads, op->t, op->head_dim);
  scratch_free(&s);
  return st;
}

jx_status jx_cuda_fused_run(jx_cuda_fused *f, int k, const jx_cuda_fused_io *io) {
  const jx_cuda_fused_op *op = &f->ops[f->op_at[k]];
  CUdeviceptr in[6] = {0}, out[3] = {0};
  jx_status st = JX_OK;
  for (int r = 0; r < op->nreads && !st; r++) st = io->input(io->ctx, op->reads[r], &in[r]);
  for (int o = 0; o < op->nouts && !st; o++) st = io->output(io->ctx, op->outs[o], &out[o]);
  if (st) return st;
  if (op->kind == JX_CUDA_FUSED_EPILOGUE)
    st = jx_cuda_gemm(f->blas, &op->gemm, in[0], in[1], out[0], in[2], f->device->compute);
  else if (op->kind == JX_CUDA_FUSED_SOFTMAX)
    st = run_softmax(f, op, in[0], out[0]);
  else if (op->kind == JX_CUDA_FUSED_ATTENTION)
    st = run_attention(f, op, in, out);
  else if (op->kind == JX_CUDA_FUSED_ATTENTION_BWD)
    st = run_attention_backward(f, op, in, out);
  else
    st = run_xent(f, op, in, out);
  if (!st) atomic_fetch_add(&f->launches[op->kind], 1);
  return st;
}

jx_cuda_fused_counts jx_cuda_fused_counts_of(const jx_cuda_fused *f) {
  jx_cuda_fused_counts c;
  memset(&c, 0, sizeof c);
  if (!f) return c;
  c = f->counts;
  c.epilogue_launches = atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_EPILOGUE]);
  c.softmax_launches = atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_SOFTMAX]);
  c.attention_launches = atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_ATTENTION]);
  c.attention_backward_launches =
      atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_ATTENTION_BWD]);
  c.xent_launches = atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_XENT]);
  c.xent_backward_launches = atomic_load((atomic_llong *)&f->launches[JX_CUDA_FUSED_XENT_BWD]);
  return c;
}

void jx_cuda_fused_free(jx_cuda_fused *f) {
  if (!f) return;
  jx_cuda_module_unload(f->module);
  free(f->ops);
  free(f->op_at);
  free(f);
}
