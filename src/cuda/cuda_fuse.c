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
#include "kernels_io.h"
#include "kernels_softmax.h"

/* The adapters' kernels, in the module's function table. */
enum { FN_SOFTMAX_F32, FN_SOFTMAX_BF16, FN_ATTN_D32, FN_ATTN_D64, FN_ATTN_D128, FN_BTHD, FN_COUNT };
static const char *const fn_names[FN_COUNT] = {
    "jx_cuda_step_fused_softmax_f32",    "jx_cuda_step_fused_softmax_bf16",
    "jx_cuda_step_fused_attention_d32",  "jx_cuda_step_fused_attention_d64",
    "jx_cuda_step_fused_attention_d128", "jx_cuda_step_fused_bthd_to_bhtd"};

struct jx_cuda_fused {
  jx_cuda_device *device;
  jx_cuda_blas *blas;
  int nops;
  jx_cuda_fused_op *ops;
  int ngroups;
  int *op_at; /* per group: the op it runs, or -1 */
  jx_cuda_fused_counts counts;
  atomic_llong launches[3]; /* per jx_cuda_fused_kind */
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

/* The adapters take render_cuda.h's jx_cuda_kargs (declared again here:
 * the kernels' sources are their own translation unit): buf holds the
 * pointers, dims the sizes; attention's scale and causal flag ride in
 * strides[0] (the float's bits) and strides[1]. */
static void append_adapters(jx_strbuf *s, const uint8_t *want) {
  char text[1024];
  snprintf(text, sizeof text,
           "typedef struct {\n  char *buf[%d];\n  long long dims[%d];\n  long long strides[%d];\n"
           "} jx_cuda_fused_kargs;\n",
           JX_FUSION_MAX_LOADS + JX_FUSION_MAX_STORES, JX_MAX_RANK,
           JX_FUSION_MAX_LOADS * JX_MAX_RANK);
  jx_strbuf_append(s, text, strlen(text));
  static const char sig[] = "(const jx_cuda_fused_kargs a, long long row_begin, long long row_end)";
  static const char *const types[2] = {"float", "unsigned short"};
  for (int k = FN_SOFTMAX_F32; k <= FN_SOFTMAX_BF16; k++) {
    if (!want[k]) continue;
    snprintf(text, sizeof text,
             "extern \"C\" __global__ void %s%s {\n"
             "  jx_cuda_softmax_args s;\n  s.x = a.buf[0];\n  s.y = a.buf[1];\n"
             "  s.rows = a.dims[0];\n  s.cols = a.dims[1];\n  jx_sm_rows<%s>(s);\n}\n",
             fn_names[k], sig, types[k - FN_SOFTMAX_F32]);
    jx_strbuf_append(s, text, strlen(text));
  }
  for (int k = FN_ATTN_D32; k <= FN_ATTN_D128; k++) {
    if (!want[k]) continue;
    int d = 32 << (k - FN_ATTN_D32);
    snprintf(text, sizeof text,
             "extern \"C\" __global__ void __launch_bounds__(128) %s%s {\n"
             "  jx_cuda_attention_args s;\n  s.q = a.buf[0];\n  s.k = a.buf[1];\n"
             "  s.v = a.buf[2];\n  s.o = a.buf[3];\n  s.lse = 0;\n  s.batch = a.dims[0];\n"
             "  s.heads = a.dims[1];\n  s.t = a.dims[2];\n"
             "  s.scale = __int_as_float((int)a.strides[0]);\n  s.causal = (int)a.strides[1];\n"
             "  jx_at_forward<%d, float>(s);\n}\n",
             fn_names[k], sig, d);
    jx_strbuf_append(s, text, strlen(text));
  }
  /* q, k, v as nn makes them, [n, T, H, dh], to the kernel's [n, H, T, dh] */
  static const char bthd[] =
      "extern \"C\" __global__ void jx_cuda_step_fused_bthd_to_bhtd(const jx_cuda_fused_kargs "
      "a, long long row_begin, long long row_end) {\n"
      "  const float *x = (const float *)a.buf[0];\n"
      "  float *y = (float *)a.buf[1];\n"
      "  const long long t = a.dims[1], h = a.dims[2], d = a.dims[3];\n"
      "  const long long total = a.dims[0] * t * h * d;\n"
      "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < total;\n"
      "       i += (long long)gridDim.x * blockDim.x) {\n"
      "    const long long dd = i % d, tt = i / d % t, hh = i / (d * t) % h, b = i / (d * t * "
      "h);\n"
      "    y[i] = x[((b * t + tt) * h + hh) * d + dd];\n"
      "  }\n"
      "}\n";
  if (want[FN_BTHD]) jx_strbuf_append(s, bthd, strlen(bthd));
}

/* One translation unit: the softmax source, the attention source without
 * the loads and stores both define (once is enough) and without its own
 * kernels (the adapters instantiate the head_dims used: NVRTC, and the
 * tests' emulator, then compile one instead of six), and the adapters. */
static jx_status load_module(jx_cuda_fused *f, const uint8_t *want) {
  jx_strbuf tu = JX_STRBUF_INIT;
  int softmax = want[FN_SOFTMAX_F32] || want[FN_SOFTMAX_BF16];
  if (softmax) jx_strbuf_append(&tu, jx_cuda_softmax_src, strlen(jx_cuda_softmax_src));
  if (want[FN_ATTN_D32] || want[FN_ATTN_D64] || want[FN_ATTN_D128]) {
    const char *src = jx_cuda_attention_src, *io = softmax ? strstr(src, JX_CUDA_IO_SRC) : NULL;
    const char *kernels = strstr(src, "#define JX_AT_KERNEL");
    size_t len = kernels ? (size_t)(kernels - src) : strlen(src);
    if (io && io + strlen(JX_CUDA_IO_SRC) <= src + len) {
      jx_strbuf_append(&tu, src, (size_t)(io - src));
      len -= (size_t)(io - src) + strlen(JX_CUDA_IO_SRC);
      src = io + strlen(JX_CUDA_IO_SRC);
    }
    jx_strbuf_append(&tu, src, len);
  }
  append_adapters(&tu, want);
  const char *names[FN_COUNT];
  int n = 0;
  for (int k = 0; k < FN_COUNT; k++) {
    f->fn[k] = want[k] ? n : -1;
    if (want[k]) names[n++] = fn_names[k];
  }
  jx_status st = jx_strbuf_status(&tu, "CUDA executor");
  if (!st) {
    pthread_once(&cubins_once, create_cubins);
    st = cubins ? jx_cuda_module_load(f->device, cubins, tu.text, "jx_fused_kernels", names, n,
                                      &f->module)
                : out_of_memory();
  }
  jx_strbuf_free(&tu);
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
  a->nstores = 1;
  a->stores[0] = op->out;
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
  /* attention first (it holds a softmax), then softmax, then epilogues */
  for (int pass = 0; pass < 3 && !st; pass++)
    for (int e = 0; e < p->neqns && !st; e++) {
      if (taken[e]) continue;
      jx_cuda_fused_op op;
      memset(member, 0, (size_t)p->neqns);
      int hit = pass == 0   ? jx_cuda_match_attention(p, &ix, e, &op, member)
                : pass == 1 ? jx_cuda_match_softmax(p, &ix, e, &op, member)
                            : jx_cuda_match_epilogue(p, &ix, e, &op, member);
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
      if (op.kind == JX_CUDA_FUSED_SOFTMAX)
        want[op.dtype == JX_BF16 ? FN_SOFTMAX_BF16 : FN_SOFTMAX_F32] = 1;
      if (op.kind == JX_CUDA_FUSED_ATTENTION)
        want[FN_BTHD] = want[op.head_dim == 32   ? FN_ATTN_D32
                             : op.head_dim == 64 ? FN_ATTN_D64
                                                 : FN_ATTN_D128] = 1;
      kernels |= op.kind != JX_CUDA_FUSED_EPILOGUE;
    }
  if (!st && kernels) st = load_module(f, want);
  if (!st && jx_env_flag("JX_LOG_COMPILES") && f && (f->nops || f->counts.epilogues_matched))
    fprintf(stderr,
            "jx: CUDA '%s': fused %d GEMM epilogues (%d found), %d softmaxes, %d attentions\n",
            p->name, f->counts.epilogues, f->counts.epilogues_matched, f->counts.softmaxes,
            f->counts.attentions);
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

static jx_status launch(jx_cuda_fused *f, int fn, const jx_cuda_launch_dims *g, jx_cuda_kargs *a) {
  if (f->fn[fn] < 0)
    return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: fused kernel %s was not loaded",
                        fn_names[fn]);
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
  return launch(f, op->dtype == JX_BF16 ? FN_SOFTMAX_BF16 : FN_SOFTMAX_F32, &g, &a);
}

/* q, k, v transposed into blocks of the allocator (returned behind the
 * kernel: every launch is on the compute stream), then the flash kernel. */
static jx_status run_attention(jx_cuda_fused *f, const jx_cuda_fused_op *op, const CUdeviceptr *in,
                               CUdeviceptr o) {
  jx_cuda_launch_dims g;
  jx_status st = jx_cuda_attention_geometry(op->batch, op->heads, op->t, op->head_dim, &g);
  if (st || g.grid[0] == 0) return st;
  int64_t numel = op->batch * op->heads * op->t * op->head_dim;
  size_t bytes = (size_t)numel * sizeof(float);
  uint64_t tmp[3] = {0, 0, 0};
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  int64_t blocks = (numel + 255) / 256,
          cap = 8 * (int64_t)(f->device->info.sm_count > 0 ? f->device->info.sm_count : 1);
  jx_cuda_launch_dims tg = {{(unsigned)(blocks < cap ? blocks : cap), 1, 1}, {256, 1, 1}, 0};
  for (int i = 0; i < 3 && !st; i++) {
    st = jx_cuda_allocator_alloc(f->device->memory, bytes, &tmp[i]);
    if (st) break;
    a.buf[0] = (char *)(uintptr_t)in[i];
    a.buf[1] = (char *)(uintptr_t)tmp[i];
    a.dims[0] = op->batch;
    a.dims[1] = op->t;
    a.dims[2] = op->heads;
    a.dims[3] = op->head_dim;
    st = launch(f, FN_BTHD, &tg, &a);
  }
  if (!st) {
    memset(&a, 0, sizeof a);
    for (int i = 0; i < 3; i++) a.buf[i] = (char *)(uintptr_t)tmp[i];
    a.buf[3] = (char *)(uintptr_t)o;
    a.dims[0] = op->batch;
    a.dims[1] = op->heads;
    a.dims[2] = op->t;
    float scale = op->scale;
    int32_t bits;
    memcpy(&bits, &scale, sizeof bits);
    a.strides[0] = bits;
    a.strides[1] = op->causal;
    int fn = op->head_dim == 32 ? FN_ATTN_D32 : op->head_dim == 64 ? FN_ATTN_D64 : FN_ATTN_D128;
    st = launch(f, fn, &g, &a);
  }
  for (int i = 0; i < 3; i++)
    if (tmp[i]) jx_cuda_allocator_free(f->device->memory, tmp[i]);
  return st;
}

jx_status jx_cuda_fused_run(jx_cuda_fused *f, int k, const jx_cuda_fused_io *io) {
  const jx_cuda_fused_op *op = &f->ops[f->op_at[k]];
  CUdeviceptr in[3] = {0, 0, 0}, out = 0;
  jx_status st = JX_OK;
  for (int r = 0; r < op->nreads && !st; r++) st = io->input(io->ctx, op->reads[r], &in[r]);
  if (!st) st = io->output(io->ctx, op->out, &out);
  if (st) return st;
  if (op->kind == JX_CUDA_FUSED_EPILOGUE)
    st = jx_cuda_gemm(f->blas, &op->gemm, in[0], in[1], out, in[2], f->device->compute);
  else if (op->kind == JX_CUDA_FUSED_SOFTMAX)
    st = run_softmax(f, op, in[0], out);
  else
    st = run_attention(f, op, in, out);
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
  return c;
}

void jx_cuda_fused_free(jx_cuda_fused *f) {
  if (!f) return;
  jx_cuda_module_unload(f->module);
  free(f->ops);
  free(f->op_at);
  free(f);
}
