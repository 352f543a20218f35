#include "cuda_exec.h"

#include <jx/cuda.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../array/array.h"
#include "../base/env.h"
#include "../base/hooks.h"
#include "../base/error.h"
#include "../base/strbuf.h"
#include "../compile/async_dispatch.h"
#include "../compile/control_compile.h"
#include "../compile/dump.h"
#include "../compile/executable.h"
#include "../compile/fusion.h"
#include "../compile/kernel_batch.h"
#include "../compile/lower.h"
#include "../compile/render_cuda.h"
#include "../prims/dot_kernels.h"
#include "../prims/pairwise_split.h"
#include "../prims/prims.h"
#include "../trace/dispatch.h"
#include "cuda_copy.h"
#include "cuda_fuse.h"
#include "cuda_module.h"
#include "cuda_profile.h"
#include "cuda_resident.h"
#include "kernels_gather.h"

_Static_assert(JX_CUDA_MAX_PIECES == JX_PAIRWISE_MAX_PIECES, "the split's piece limits differ");

typedef struct {
  jx_fusion_group group;
  int kernel;     /* the module's function index, or -1: the equations run on the host */
  int gemm;       /* 1: one dot_general run by jx_cuda_gemm as desc says */
  int collective; /* 1: one collective equation run on device buffers (collectives.run) */
  int gather;     /* 1: one gather, dynamic or static slice or reshape run by the gather kernel */
  jx_cuda_gemm_desc desc;
  jx_cuda_split split; /* a reduction's pieces across blocks (split.pieces 1: none) */
} cuda_step;

struct jx_cuda_executable {
  jx_cuda_device *device;
  jx_program *program;        /* the program the steps index: lowered, or the attached one */
  jx_program *lowered;        /* a reference to the lowered copy, or NULL when it is p itself
                               * (p owns the executable: no reference back, no cycle) */
  const jx_program *attached; /* the program it is attached to (jx_call passes that one) */
  int nsteps, nkernels, host_eqns, gemms, ncollectives, ngathers;
  int gather_fn;  /* the gather kernel's index in the module's functions */
  int nsplits;    /* reductions split across blocks */
  int combine_fn; /* their combining kernel's index in the module's functions */
  int nfunctions; /* the module's kernels: the distinct ones among the nkernels kernel steps */
  jx_cuda_collective_ops collectives; /* zero: collectives run on the host */
  jx_cuda_blas *blas;                 /* the device's, or NULL: dot_general runs on the host */
  cuda_step *steps;
  int *last_step;     /* per variable: the last step that reads it (-1: none) */
  uint8_t *temporary; /* per variable: made by a step (not an input or constant) */
  jx_cuda_module *module;
  /* jx_jit_options.donate (jx_cuda_set_donation): per input, 1 = the run may
   * take its device block; NULL when nothing is donated */
  uint8_t *donate;
  char *donor; /* the jitted function's name, for the donated arrays' errors */
  /* fused epilogues, softmax and attention (cuda_fuse.h), or NULL */
  jx_cuda_fused *fused;
  /* the host's executables of its nested programs (control flow compiled
   * for the CPU, kept attention calls interpreted), found while it runs */
  jx_exec_nested nested;
  jx_cuda_step_profile *profile; /* JX_PROFILE_STEPS=1, else NULL */
};

/* One cache of cubins for the process: executables built again for the same
 * program find their device code in memory. */
static jx_cubin_cache *cubins;
static pthread_once_t cubins_once = PTHREAD_ONCE_INIT;
static void create_cubins(void) { cubins = jx_cubin_cache_create(); }

static jx_status out_of_memory(void) {
  return jx_error_set(JX_ERR_OUT_OF_MEMORY, "CUDA executor: out of host memory");
}

/* Renders the kernel groups into one translation unit and loads it: one
 * kernel per distinct group (kernel_batch.h: identical layers share their
 * kernels), each step's `kernel` its function in the module. Symbols start
 * "jx_cuda_step" as the fused ones do (cuda_fuse.c). */
static jx_status compile_kernels(jx_cuda_executable *x, const char *dump_prefix) {
  double t0 = jx_prof_now();
  jx_kernel_tu tu;
  jx_status st = jx_kernel_tu_init_dialect(&tu, &jx_dialect_cuda, "jx_cuda_step_");
  for (int k = 0; k < x->nsteps && !st; k++)
    if (x->steps[k].kernel >= 0 &&
        jx_kernel_tu_add(&tu, x->program, &x->steps[k].group, 1, NULL, &x->steps[k].kernel) < 0)
      st = jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  char(*names)[JX_KERNEL_NAME_CAP] = st ? NULL : calloc((size_t)tu.n + 1, sizeof *names);
  const char **list = st ? NULL : calloc((size_t)tu.n + 3, sizeof *list);
  /* the fused groups' kernels, then the gather kernel where a step needs it */
  size_t ntext = st ? 0 : strlen(tu.text);
  char *text = st ? NULL
                  : malloc(ntext + (x->ngathers ? strlen(jx_cuda_gather_src) : 0) +
                           (x->nsplits ? strlen(jx_cuda_combine_src) : 0) + 1);
  if (!st && (!names || !list || !text)) st = out_of_memory();
  for (int f = 0; f < tu.n && !st; f++) {
    jx_kernel_tu_name(&tu, f, names[f]);
    list[f] = names[f];
  }
  int nfn = st ? 0 : tu.n;
  if (!st) {
    memcpy(text, tu.text, ntext + 1);
    if (x->ngathers) {
      memcpy(text + ntext, jx_cuda_gather_src, strlen(jx_cuda_gather_src) + 1);
      x->gather_fn = nfn;
      list[nfn++] = JX_CUDA_GATHER_KERNEL;
    }
    if (x->nsplits) {
      strcat(text, jx_cuda_combine_src);
      x->combine_fn = nfn;
      list[nfn++] = JX_CUDA_COMBINE_KERNEL;
    }
  }
  double t1 = jx_prof_now();
  if (!st) {
    x->nfunctions = nfn;
    jx_dump_text(dump_prefix ? dump_prefix : x->program->name, "kernels.cu", text);
    pthread_once(&cubins_once, create_cubins);
    st = cubins
             ? jx_cuda_module_load(x->device, cubins, text, x->program->name, list, nfn, &x->module)
             : out_of_memory();
  }
  if (!st && jx_env_flag("JX_LOG_COMPILES"))
    fprintf(stderr,
            "jx: CUDA kernels of '%s': %d fused groups, %d distinct kernels (%zu bytes of "
            "source); codegen %.1f ms, module %.1f ms\n",
            x->program->name, x->nkernels, tu.n, strlen(tu.text), (t1 - t0) * 1e3,
            (jx_prof_now() - t1) * 1e3);
  jx_kernel_tu_free(&tu);
  free(text);
  free(names);
  free(list);
  return st;
}

/* The step after which each variable is dead (as the CPU executable plans). */
static jx_status plan_lifetimes(jx_cuda_executable *x) {
  const jx_program *p = x->program;
  x->last_step = malloc(sizeof *x->last_step * (size_t)(p->nvars + 1));
  x->temporary = calloc((size_t)p->nvars + 1, 1);
  if (!x->last_step || !x->temporary) return out_of_memory();
  for (int v = 0; v < p->nvars; v++) x->last_step[v] = -1;
  for (int k = 0; k < x->nsteps; k++) {
    const jx_fusion_group *g = &x->steps[k].group;
    if (g->skip) continue;
    int as_kernel = x->steps[k].kernel >= 0 || jx_cuda_fused_at(x->fused, k);
    JX_FUSION_FOR_READS(p, g, as_kernel, v, x->last_step[v] = k);
    for (int e = g->first; e < g->first + g->count; e++)
      for (int o = 0; o < p->eqns[e].nout; o++) x->temporary[p->eqns[e].out[o]] = 1;
  }
  for (int o = 0; o < p->nout; o++) x->last_step[p->out[o]] = x->nsteps;
  return JX_OK;
}

/* 1 when dim d of an operand is one of its batch dims b. */
static int is_batch_dim(const jx_ilist *b, int d) {
  for (int i = 0; i < b->n; i++)
    if (b->v[i] == d) return 1;
  return 0;
}

/* An operand's matrix: its dims other than the batch dims b, in order, are
 * the contracting dims c (in c's order) then the free ones (contract_first)
 * or the reverse; each run must collapse into one dim (adjacent dims, each
 * stride the next one's extent), the inner run at stride 1. Then *ld is
 * the outer run's stride, the elements between stored rows (0: dense), and
 * the return value 1; else 0. */
static int operand_matrix(const jx_shape *s, const jx_ilist *b, const jx_ilist *c,
                          int contract_first, int64_t *ld) {
  int rd[JX_MAX_RANK], nr = 0;
  for (int d = 0; d < s->rank; d++)
    if (!is_batch_dim(b, d)) rd[nr++] = d;
  int nfree = nr - c->n, cfrom = contract_first ? 0 : nfree;
  for (int i = 0; i < c->n; i++)
    if (c->v[i] != rd[cfrom + i]) return 0;
  int64_t st[JX_MAX_RANK];
  jx_shape_strides(*s, st);
  int split = contract_first ? c->n : nfree; /* rd[0, split) the outer run, the rest inner */
  if (rd[nr - 1] != s->rank - 1) return 0;   /* the inner run ends at stride 1 */
  for (int j = 0; j + 1 < nr; j++)
    if (j + 1 != split && rd[j + 1] != rd[j] + 1) return 0;
  int64_t inner = 1;
  for (int j = split; j < nr; j++) inner *= s->dims[rd[j]];
  *ld = split > 0 && st[rd[split - 1]] != inner ? st[rd[split - 1]] : 0;
  return 1;
}

int jx_cuda_dot_as_gemm(const jx_program *p, const jx_eqn *e, jx_cuda_gemm_desc *desc) {
  if (e->prim != &jx_prim_dot_general || e->nin != 2 || e->nout != 1) return 0;
  const jx_params *q = &e->params;
  jx_aval l = p->avals[e->in[0]], r = p->avals[e->in[1]], o = p->avals[e->out[0]];
  jx_dtype dt = l.dtype;
  if ((dt != JX_F32 && dt != JX_BF16 && dt != JX_F16) || r.dtype != dt || o.dtype != dt) return 0;
  const jx_ilist *lb = &q->l[JX_DOT_LB], *rb = &q->l[JX_DOT_RB];
  const jx_ilist *lc = &q->l[JX_DOT_LC], *rc = &q->l[JX_DOT_RC];
  int nb = lb->n, nc = lc->n;
  if (nc < 1 || rc->n != nc || rb->n != nb) return 0;
  for (int i = 0; i < nc; i++)
    if (l.shape.dims[lc->v[i]] != r.shape.dims[rc->v[i]]) return 0;
  int lfree = l.shape.rank - nb - nc, rfree = r.shape.rank - nb - nc;
  /* several free or contracting dims are one GEMM dim when they lie
   * together, in order: x[n, T, d] @ w[d, e] has m = n * T rows, and
   * x[n, T, d]^T @ dy[n, T, e] sums over k = n * T. A stored with its
   * contracting dims first is [k, m] (trans_a), B with them last [n, k]. */
  jx_cuda_gemm_desc g = {.dtype = dt, .batch = 1, .act = JX_CUDA_ACT_NONE};
  g.trans_a = lfree > 0 && operand_matrix(&l.shape, lb, lc, 1, &g.ld_a);
  if (!g.trans_a && !operand_matrix(&l.shape, lb, lc, 0, &g.ld_a)) return 0;
  g.trans_b = rfree > 0 && operand_matrix(&r.shape, rb, rc, 0, &g.ld_b);
  if (!g.trans_b && !operand_matrix(&r.shape, rb, rc, 1, &g.ld_b)) return 0;
  g.k = 1;
  for (int i = 0; i < nc; i++) g.k *= l.shape.dims[lc->v[i]];
  g.m = jx_shape_numel(l.shape) / (g.k > 0 ? g.k : 1);
  g.n = jx_shape_numel(r.shape) / (g.k > 0 ? g.k : 1);
  /* the batch dims, each with its strides in A, B and C (C: the leading
   * dims of the dense output), merged where they collapse, at most two
   * levels: an outer batch of inner ones */
  int64_t sl[JX_MAX_RANK], sr[JX_MAX_RANK], so[JX_MAX_RANK];
  jx_shape_strides(l.shape, sl);
  jx_shape_strides(r.shape, sr);
  jx_shape_strides(o.shape, so);
  int64_t size[JX_MAX_RANK], sa[JX_MAX_RANK], sb[JX_MAX_RANK], sc[JX_MAX_RANK];
  int nlev = 0;
  for (int i = 0; i < nb; i++) {
    int64_t n = l.shape.dims[lb->v[i]];
    if (n != r.shape.dims[rb->v[i]]) return 0;
    g.m /= n > 0 ? n : 1;
    g.n /= n > 0 ? n : 1;
    if (n == 1) continue;
    int64_t a = sl[lb->v[i]], b = sr[rb->v[i]], c = so[i];
    if (nlev > 0 && sa[nlev - 1] == a * n && sb[nlev - 1] == b * n && sc[nlev - 1] == c * n) {
      size[nlev - 1] *= n; /* one dim with the one before */
      sa[nlev - 1] = a;
      sb[nlev - 1] = b;
      sc[nlev - 1] = c;
      continue;
    }
    if (nlev == 2) return 0;
    size[nlev] = n;
    sa[nlev] = a;
    sb[nlev] = b;
    sc[nlev++] = c;
  }
  if (g.m <= 0 || g.n <= 0 || g.k <= 0) return 0;
  if (nlev > 0) {
    int in = nlev - 1;
    g.batch = size[in];
    g.stride_a = sa[in];
    g.stride_b = sb[in];
    g.stride_c = sc[in];
  }
  if (nlev == 2) {
    g.outer = size[0];
    g.outer_a = sa[0];
    g.outer_b = sb[0];
    g.outer_c = sc[0];
  }
  *desc = g;
  return 1;
}

/* Each device's cuBLASLt handle, made on first use and kept for the life of
 * the process, as the device is; its workspace comes from the driver, not
 * from the caching allocator (whose blocks all return after every run). */
enum { MAX_GEMM_DEVICES = 64 };
#define GEMM_WORKSPACE ((size_t)32 << 20)
static struct {
  pthread_mutex_t lock;
  int tried[MAX_GEMM_DEVICES];
  jx_cuda_blas *blas[MAX_GEMM_DEVICES];
} gemm_handles = {PTHREAD_MUTEX_INITIALIZER, {0}, {NULL}};

/* d's handle, or NULL where GEMMs run on the host: cuBLASLt is missing, the
 * modules are source for tests/cuda_fake's driver (JX_CUDA_MODULE_SOURCE:
 * cuBLASLt needs a real GPU) and no cuBLASLt is named by JX_CUBLASLT_PATH
 * (tests/cuda_fake's, which computes on the fake driver's memory), or the
 * handle or workspace cannot be made (then it is said once under
 * JX_LOG_COMPILES=1; the error is not kept: the program still runs). */
static jx_cuda_blas *device_blas(jx_cuda_device *d) {
  int k = d->info.ordinal;
  const char *named = jx_env_string("JX_CUBLASLT_PATH");
  if (k < 0 || k >= MAX_GEMM_DEVICES || (jx_cuda_module_source_mode() && !(named && *named)) ||
      !jx_cublaslt())
    return NULL;
  pthread_mutex_lock(&gemm_handles.lock);
  if (!gemm_handles.tried[k]) {
    gemm_handles.tried[k] = 1;
    const jx_cuda_driver_api *cu = jx_cuda_driver();
    CUdeviceptr ws = 0;
    int clean = jx_last_status() == JX_OK;
    jx_status st = jx_cuda_check(cu->MemAlloc(&ws, GEMM_WORKSPACE), "cuMemAlloc_v2", k);
    if (!st) st = jx_cuda_blas_create(k, ws, GEMM_WORKSPACE, &gemm_handles.blas[k]);
    /* on a GPU each problem's first call times the heuristic's candidates */
    if (!st) jx_cuda_blas_set_autotune(gemm_handles.blas[k], !jx_cuda_module_source_mode());
    if (st) {
      if (jx_env_flag("JX_LOG_COMPILES"))
        fprintf(stderr, "jx: CUDA device %d: dot_general runs on the host: %s\n", k,
                jx_last_error());
      if (ws) cu->MemFree(ws);
      gemm_handles.blas[k] = NULL;
      if (clean) jx_clear_error();
    }
  }
  jx_cuda_blas *b = gemm_handles.blas[k];
  pthread_mutex_unlock(&gemm_handles.lock);
  return b;
}

jx_cuda_blas *jx_cuda_device_gemm_handle(int ordinal) {
  if (ordinal < 0 || ordinal >= MAX_GEMM_DEVICES) return NULL;
  pthread_mutex_lock(&gemm_handles.lock);
  jx_cuda_blas *b = gemm_handles.blas[ordinal];
  pthread_mutex_unlock(&gemm_handles.lock);
  return b;
}

/* A lone elementwise equation or reduction the fusion left to run eagerly
 * (too small to pay for a kernel call on the CPU) is a kernel on the device:
 * on the host it would copy its operands down and its result up, and wait
 * for both. A lone reduction's kernel loads its operand and reduces it as a
 * fused group's last member does. Makes g (one equation) such a kernel when
 * it can be one; 1 if it did. */
static int promote_lone(const jx_program *p, jx_fusion_group *g) {
  if (g->count != 1 || g->skip || jx_fusion_group_candidate(g)) return 0;
  const jx_eqn *e = &p->eqns[g->first];
  int lead = 0,
      reduces = jx_fusion_row_reduce_on(e, p, 1) || jx_fusion_col_reduce_on(e, p, 1, &lead);
  int full = !reduces && jx_fusion_full_reduce_on(e, p, 1);
  if (e->nout != 1 || jx_fusion_is_view(e, p) ||
      (!reduces && !full && !jx_fusion_renderable_on(e, p, 1)))
    return 0;
  jx_fusion_group k = *g;
  k.shape = p->avals[reduces ? e->in[0] : e->out[0]].shape;
  k.reduces = reduces || full;
  k.lead = reduces ? lead : 0;
  if (full) /* a row reduction of the flat elements */
    k.shape = (jx_shape){1, {jx_shape_numel(p->avals[e->in[0]].shape)}};
  if (jx_shape_numel(k.shape) == 0) return 0;
  k.nloads = 0;
  if (full) {
    memset(&k.loads[0], 0, sizeof k.loads[0]);
    k.loads[0].var = e->in[0];
    k.loads[0].strides[0] = k.shape.dims[0] > 1;
    k.nloads = 1;
  }
  for (int i = 0; i < e->nin && !full; i++)
    if (!jx_fusion_add_operand(p, &k, e->in[i])) return 0;
  k.nstores = 1;
  k.stores[0] = e->out[0];
  k.compute = 1;
  k.single = 1;
  *g = k;
  return 1;
}

/* The groups with every equation that runs as it is (views read as arrays,
 * a group demoted for its stores) as groups of one, so that promote_lone,
 * promote_view and the gather kernel take each; the others as they are.
 * Returns the new count, or -1 (out of memory); *groups is replaced. */
static int split_unfused(const jx_program *p, jx_fusion_group **groups, int ng) {
  int n = 0;
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &(*groups)[k];
    n += !g->skip && !jx_fusion_group_candidate(g) ? g->count : 1;
  }
  if (n == ng) return ng;
  jx_fusion_group *out = calloc((size_t)n, sizeof *out);
  if (!out) return -1;
  int m = 0;
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &(*groups)[k];
    if (g->skip || jx_fusion_group_candidate(g)) {
      out[m++] = *g;
      continue;
    }
    for (int e = g->first; e < g->first + g->count; e++) {
      jx_fusion_group *o = &out[m++];
      o->first = e;
      o->count = 1;
      if (p->eqns[e].nout) o->shape = p->avals[p->eqns[e].out[0]].shape;
    }
  }
  free(*groups);
  *groups = out;
  return n;
}

/* After skip_unread_broadcasts: a lone view that is read as an array (by
 * a GEMM, the gather kernel or a host equation) and that the gather kernel
 * does not copy (a broadcast_in_dim, a transpose, a reshape of one) is a
 * kernel that reads it through and stores it, rather than a copy down and
 * up. 1 if g became one. */
static int promote_view(const jx_program *p, jx_fusion_group *g) {
  if (g->count != 1 || g->skip || jx_fusion_group_candidate(g)) return 0;
  const jx_eqn *e = &p->eqns[g->first];
  jx_cuda_gather_args ga;
  if (!jx_fusion_is_view(e, p) || jx_cuda_gather_plan(p, e, &ga) == 0) return 0;
  jx_fusion_group k = *g;
  k.shape = p->avals[e->out[0]].shape;
  if (jx_shape_numel(k.shape) == 0) return 0;
  int var;
  int64_t off, st[JX_MAX_RANK];
  jx_fusion_operand(p, &k, e->out[0], &var, &off, st);
  if (var == e->out[0]) return 0; /* a reshape the strides cannot say */
  k.nloads = 0;
  if (!jx_fusion_add_operand(p, &k, e->out[0])) return 0;
  k.nstores = 1;
  k.stores[0] = e->out[0];
  k.compute = 1;
  k.single = 1;
  *g = k;
  return 1;
}

/* After promote_lone: a lone view (a broadcast_in_dim, a slice, ...) that
 * nothing reads as an array any more (every reader is a kernel that reads
 * through it) runs nowhere. */
static jx_status skip_unread_broadcasts(const jx_program *p, jx_fusion_group *groups, int ng) {
  uint8_t *need = calloc((size_t)p->nvars + 1, 1);
  if (!need) return out_of_memory();
  for (int o = 0; o < p->nout; o++) need[p->out[o]] = 1;
  for (int n = 0; n < ng; n++) {
    const jx_fusion_group *g = &groups[n];
    if (g->skip) continue;
    if (jx_fusion_group_is_kernel(g))
      for (int l = 0; l < g->nloads; l++) need[g->loads[l].var] = 1;
    else
      for (int e = g->first; e < g->first + g->count; e++)
        for (int i = 0; i < p->eqns[e].nin; i++) need[p->eqns[e].in[i]] = 1;
  }
  for (int n = 0; n < ng; n++) {
    jx_fusion_group *g = &groups[n];
    const jx_eqn *e = &p->eqns[g->first];
    if (!g->skip && g->count == 1 && jx_fusion_is_view(e, p) && !need[e->out[0]]) g->skip = 1;
  }
  free(need);
  return JX_OK;
}

static int64_t dims_product(const jx_shape *s, int from, int to) {
  int64_t n = 1;
  for (int d = from; d < to; d++) n *= s->dims[d];
  return n;
}

static int64_t split_least = 0, split_blocks = 0; /* jx_cuda_set_reduction_split */

void jx_cuda_set_reduction_split(int64_t least, int64_t blocks) {
  split_least = least;
  split_blocks = blocks;
}

int jx_cuda_reduction_split(const jx_program *p, const jx_fusion_group *g, int sms,
                            jx_cuda_split *s) {
  memset(s, 0, sizeof *s);
  s->pieces = 1;
  const jx_eqn *r = &p->eqns[g->first + g->count - 1];
  jx_dtype dt = p->avals[r->out[0]].dtype;
  int rank = g->shape.rank, stored = 0;
  for (int o = 0; o < g->nstores; o++) stored |= g->stores[o] == r->out[0];
  if (!g->reduces || rank < 1 || !stored || (dt != JX_F32 && dt != JX_F64 && dt != JX_BF16))
    return 1;
  int64_t inner = g->shape.dims[rank - 1], numel = jx_shape_numel(g->shape), nred, blocks;
  if (g->lead > 0) {
    int lead = 0;
    s->op = jx_fusion_col_reduce_on(r, p, 1, &lead); /* the device's rule: bf16 too */
    nred = dims_product(&g->shape, 0, g->lead);
    s->outputs = numel / (nred ? nred : 1);
    blocks = jx_fusion_kernel_rows(g) * ((inner + 31) / 32);
  } else {
    s->op = jx_fusion_row_reduce_on(r, p, 1);
    nred = inner;
    s->outputs = blocks = numel / (inner ? inner : 1);
  }
  int64_t want = split_blocks > 0 ? split_blocks : 2 * (int64_t)(sms > 0 ? sms : 1);
  if (!s->op || numel == 0 || blocks >= want) return 1;
  int depth = jx_pairwise_depth(nred, (want + blocks - 1) / blocks,
                                split_least > 0 ? split_least
                                : g->lead > 0   ? 512
                                                : 2048);
  int64_t count[JX_CUDA_MAX_PIECES];
  s->pieces = jx_pairwise_pieces(nred, depth, s->start, count);
  s->start[s->pieces] = nred;
  s->kind = dt == JX_F64    ? JX_CUDA_COMBINE_F64
            : dt == JX_BF16 ? JX_CUDA_COMBINE_BF16
                            : JX_CUDA_COMBINE_F32;
  if (s->op == 1) s->npairs = jx_pairwise_pairs(nred, depth, s->pairs);
  return s->pieces;
}

/* 1 when step k's one equation is a collective that runs on the device. */
static int collective_step(const jx_cuda_executable *x, const cuda_step *s, int k) {
  const jx_fusion_group *g = &s->group;
  return x->collectives.takes && s->kernel < 0 && !s->gemm && !g->skip && g->count == 1 &&
         !jx_cuda_fused_at(x->fused, k) &&
         x->collectives.takes(x->collectives.ctx, x->program, &x->program->eqns[g->first]);
}

/* Under JX_LOG_COMPILES=1: the equations that run on the host, each
 * primitive with its dtype and count (what still copies between host and
 * device in a call). */
static void log_host_eqns(const jx_cuda_executable *x) {
  jx_strbuf b = JX_STRBUF_INIT;
  for (int k = 0; k < x->nsteps; k++) {
    const cuda_step *s = &x->steps[k];
    if (s->kernel >= 0 || s->group.skip || s->gemm || s->collective || s->gather ||
        jx_cuda_fused_at(x->fused, k))
      continue;
    for (int e = s->group.first; e < s->group.first + s->group.count; e++) {
      const jx_eqn *q = &x->program->eqns[e];
      jx_dtype t = q->nout ? x->program->avals[q->out[0]].dtype : JX_F32;
      jx_strbuf_appendf(&b, " %s:%s", q->prim->name, jx_dtype_name(t));
    }
  }
  fprintf(stderr, "jx: CUDA '%s': %d host equations:%s\n", x->program->name, x->host_eqns,
          b.text ? b.text : "");
  jx_strbuf_free(&b);
}

/* Step k's label in the step profile: what runs it, its first equation's
 * primitive and result ("kernel mul x4 bf16[8,1024,768]", "gemm bf16
 * 8192x768x3072 x1"). */
static void profile_label(const jx_cuda_executable *x, int k, char *buf, size_t size) {
  const cuda_step *s = &x->steps[k];
  const jx_program *p = x->program;
  const jx_fusion_group *g = &s->group;
  char sh[256] = "";
  const jx_eqn *e = g->count ? &p->eqns[g->first] : NULL;
  if (e && e->nout)
    jx_aval_str(p->avals[e->out[0]].dtype, p->avals[e->out[0]].shape, sh);
  else if (g->nstores)
    jx_aval_str(p->avals[g->stores[0]].dtype, p->avals[g->stores[0]].shape, sh);
  const char *prim = e ? e->prim->name : "";
  if (s->gemm)
    snprintf(buf, size, "gemm %s %lldx%lldx%lld x%lld", jx_dtype_name(s->desc.dtype),
             (long long)s->desc.m, (long long)s->desc.n, (long long)s->desc.k,
             (long long)(s->desc.batch * (s->desc.outer > 0 ? s->desc.outer : 1)));
  else if (jx_cuda_fused_at(x->fused, k)) {
    const jx_cuda_fused_op *op = jx_cuda_fused_op_at(x->fused, k);
    static const char *const acts[] = {"", "+relu", "+gelu"};
    if (op->kind == JX_CUDA_FUSED_EPILOGUE)
      snprintf(buf, size, "gemm%s%s %s %lldx%lldx%lld", op->gemm.has_bias ? "+bias" : "",
               acts[op->gemm.act], jx_dtype_name(op->dtype), (long long)op->gemm.m,
               (long long)op->gemm.n, (long long)op->gemm.k);
    else if (op->kind == JX_CUDA_FUSED_SOFTMAX || op->kind >= JX_CUDA_FUSED_XENT)
      snprintf(buf, size, "%s %s %lldx%lld",
               op->kind == JX_CUDA_FUSED_SOFTMAX     ? "softmax"
               : op->kind == JX_CUDA_FUSED_XENT      ? "cross-entropy"
               : op->kind == JX_CUDA_FUSED_XENT_PICK ? "cross-entropy-label"
                                                     : "cross-entropy-backward",
               jx_dtype_name(op->dtype), (long long)op->rows, (long long)op->cols);
    else
      snprintf(buf, size, "attention%s %s b%lld h%lld t%lld d%lld",
               op->kind == JX_CUDA_FUSED_ATTENTION_BWD ? " backward" : "", jx_dtype_name(op->dtype),
               (long long)op->batch, (long long)op->heads, (long long)op->t,
               (long long)op->head_dim);
  } else
    snprintf(buf, size, "%s %s x%d %s",
             s->kernel >= 0  ? "kernel"
             : s->collective ? "collective"
             : s->gather     ? "gather"
                             : "host",
             prim, g->count, sh);
}

jx_cuda_executable *jx_cuda_executable_build(jx_cuda_device *d, const jx_program *p,
                                             const char *dump_prefix) {
  return jx_cuda_executable_build_collective(d, p, dump_prefix, NULL);
}

jx_cuda_executable *jx_cuda_executable_build_collective(jx_cuda_device *d, const jx_program *p,
                                                        const char *dump_prefix,
                                                        const jx_cuda_collective_ops *ops) {
  jx_cuda_executable *x = calloc(1, sizeof *x);
  if (!x) {
    out_of_memory();
    return NULL;
  }
  x->device = d;
  if (ops) x->collectives = *ops;
  x->attached = p;
  x->program = x->lowered = jx_cuda_fused_lower(p, &x->nested); /* keeps the attention calls */
  if (x->lowered == p) {
    jx_program_release(x->lowered);
    x->lowered = NULL;
  }
  /* Control flow runs on the host: its nested programs are compiled for the
   * CPU as the CPU jit compiles them, so that a loop runs its body as fused
   * kernels and keeps one carry at a time (jx_control_run), where the eager
   * impl would hold every iteration's carry until the loop ends. */
  jx_status nested = x->program ? jx_compile_nested(x->program, dump_prefix, &x->nested) : JX_OK;
  jx_fusion_group *groups = NULL;
  int ng = x->program && !nested ? jx_fuse_device(x->program, &groups) : -1;
  jx_status st = ng < 0 ? (jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL) : JX_OK;
  if (!st && (ng = split_unfused(x->program, &groups, ng)) < 0) st = out_of_memory();
  for (int k = 0; k < ng && !st; k++) promote_lone(x->program, &groups[k]);
  if (!st) st = skip_unread_broadcasts(x->program, groups, ng);
  for (int k = 0; k < ng && !st; k++) promote_view(x->program, &groups[k]);
  if (!st) st = jx_cuda_fused_plan(d, x->program, groups, ng, device_blas, &x->fused);
  if (!st && !(x->steps = calloc(ng > 0 ? (size_t)ng : 1, sizeof *x->steps))) st = out_of_memory();
  for (int k = 0; k < ng && !st; k++) {
    cuda_step *s = &x->steps[x->nsteps++];
    s->group = groups[k];
    s->kernel = jx_fusion_group_is_kernel(&groups[k]) ? x->nkernels++ : -1;
    if (s->kernel < 0 && !groups[k].skip && groups[k].count == 1 &&
        jx_cuda_dot_as_gemm(x->program, &x->program->eqns[groups[k].first], &s->desc) &&
        (x->blas || (x->blas = device_blas(d))))
      s->gemm = 1;
    s->collective = collective_step(x, s, k);
    x->ncollectives += s->collective;
    jx_cuda_gather_args ga;
    s->gather = s->kernel < 0 && !groups[k].skip && !s->gemm && !s->collective &&
                groups[k].count == 1 && !jx_cuda_fused_at(x->fused, k) &&
                jx_cuda_gather_plan(x->program, &x->program->eqns[groups[k].first], &ga) == 0;
    x->ngathers += s->gather;
    if (s->kernel < 0 && !groups[k].skip && !s->gemm && !s->collective && !s->gather)
      x->host_eqns += groups[k].count;
    x->gemms += s->gemm;
    s->split.pieces = 1;
    if (s->kernel >= 0 && groups[k].reduces)
      x->nsplits +=
          jx_cuda_reduction_split(x->program, &groups[k], d->info.sm_count, &s->split) > 1;
  }
  free(groups);
  if (!st && x->host_eqns && jx_env_flag("JX_LOG_COMPILES")) log_host_eqns(x);
  if (!st) st = plan_lifetimes(x);
  if (!st && (x->nkernels || x->ngathers)) st = compile_kernels(x, dump_prefix);
  if (!st && (x->profile = jx_cuda_step_profile_create(p->name, x->nsteps)))
    for (int k = 0; k < x->nsteps; k++) {
      char label[JX_CUDA_PROFILE_LABEL];
      profile_label(x, k, label, sizeof label);
      jx_cuda_step_profile_label(x->profile, k, label);
    }
  if (st) {
    jx_cuda_executable_free(x);
    return NULL;
  }
  return x;
}

const jx_exec_nested *jx_cuda_executable_nested(const jx_cuda_executable *x) { return &x->nested; }

void jx_cuda_executable_free(jx_cuda_executable *x) {
  if (!x) return;
  jx_cuda_step_profile_free(x->profile); /* prints its report */
  jx_cuda_module_unload(x->module);
  jx_cuda_fused_free(x->fused);
  jx_exec_nested_free(&x->nested);
  jx_program_release(x->lowered);
  free(x->steps);
  free(x->last_step);
  free(x->temporary);
  free(x->donate);
  free(x->donor);
  free(x);
}

int jx_cuda_executable_distinct_kernels(const jx_cuda_executable *x) { return x->nfunctions; }

int jx_cuda_executable_kernels(const jx_cuda_executable *x, int *host_eqns, int *gemms) {
  if (host_eqns) *host_eqns = x->host_eqns;
  if (gemms) *gemms = x->gemms;
  return x->nkernels;
}

int jx_cuda_executable_gathers(const jx_cuda_executable *x) { return x->ngathers; }

int jx_cuda_executable_splits(const jx_cuda_executable *x) { return x->nsplits; }

jx_cuda_device *jx_cuda_executable_device(const jx_cuda_executable *x) { return x->device; }

int jx_cuda_executable_collectives(const jx_cuda_executable *x) { return x->ncollectives; }

const jx_cuda_fused *jx_cuda_executable_fused(const jx_cuda_executable *x) { return x->fused; }

/* ---- a run ---- */

/* Where a variable's value is: an array, a device block, or both. */
typedef struct {
  jx_array *host; /* the caller's (inputs, constants), a host equation's, or a made output */
  CUdeviceptr dev;
  uint8_t owned; /* dev is the run's block (returned after the last reader); else
                  * it is host's device copy, which host owns */
} slot;

typedef struct {
  jx_cuda_executable *x;
  const jx_program *p;
  slot *vars;
  uint8_t *donated; /* per variable: a donated input's block, taken by this run (or NULL) */
} run_state;

static size_t var_bytes(const run_state *r, int v) {
  jx_aval a = r->p->avals[v];
  return (size_t)jx_shape_numel(a.shape) * jx_dtype_size(a.dtype);
}

/* A device buffer for variable v (at least one byte: every variable has an address). */
static jx_status device_buffer(run_state *r, int v) {
  size_t bytes = var_bytes(r, v);
  uint64_t ptr = 0;
  jx_status st = jx_cuda_allocator_alloc(r->x->device->memory, bytes ? bytes : 1, &ptr);
  r->vars[v].dev = (CUdeviceptr)ptr;
  r->vars[v].owned = ptr != 0;
  return st;
}

/* Makes v's value available on the device: read in place when its array
 * has a copy there, else copied up once and the copy kept with the array
 * (arrays are immutable), so passing it again copies nothing. */
static jx_status to_device(run_state *r, int v) {
  slot *s = &r->vars[v];
  if (s->dev) return JX_OK;
  jx_array *h = s->host;
  if (!h) return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: variable %d has no value", v);
  jx_cuda_device *d = r->x->device;
  if ((s->dev = (CUdeviceptr)jx_cuda_resident_ptr(h, d))) {
    s->owned = 0;
    return JX_OK;
  }
  jx_status st = jx_array_ready(h);
  if (!st) st = device_buffer(r, v);
  size_t bytes = var_bytes(r, v);
  if (!st && bytes) st = jx_cuda_copy_to_device(d, s->dev, jx_array_data(h), bytes, d->compute);
  if (st) return st;
  int kept = jx_cuda_resident_attach(h, d, (uint64_t)s->dev, NULL);
  if (kept < 0) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  if (kept) s->owned = 0; /* else another thread's upload won: ours goes after the run */
  return JX_OK;
}

/* Makes v's value available on the host (copying it down once). */
static jx_status to_host(run_state *r, int v) {
  slot *s = &r->vars[v];
  if (s->host) return JX_OK; /* a device-resident input comes down in the eager op */
  if (!s->dev) return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: variable %d has no value", v);
  jx_aval a = r->p->avals[v];
  jx_array *h = jx_array_alloc(a.dtype, a.shape, a.weak);
  if (h->poisoned) return jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
  s->host = h;
  size_t bytes = var_bytes(r, v);
  if (!bytes) return JX_OK;
  return jx_cuda_copy_to_host(r->x->device, jx_array_data(h), s->dev, bytes, r->x->device->compute);
}

static unsigned clamp_u(int64_t v, int64_t hi) { return (unsigned)(v < 1 ? 1 : v > hi ? hi : v); }

/* Donation: the load of step k whose block store `o` may take, in place: a
 * donated input's block that dies at this step and that the store may reuse
 * (jx_fusion_store_may_reuse: each thread then reads an element before it
 * writes it, and no thread reads another's). -1 when there is none; claimed
 * marks loads already taken. */
static int in_place_load(const run_state *r, int k, int o, const uint8_t *claimed) {
  const jx_fusion_group *g = &r->x->steps[k].group;
  if (!r->donated) return -1;
  for (int l = 0; l < g->nloads; l++) {
    int v = g->loads[l].var;
    const slot *s = &r->vars[v];
    if (claimed[l] || !r->donated[v] || !s->owned || !s->dev || r->x->last_step[v] != k) continue;
    if (jx_fusion_store_may_reuse(r->p, g, o, l)) return l;
  }
  return -1;
}

/* Launches step k's kernel on the compute stream (render_cuda.h's geometry). */
static jx_status run_kernel(run_state *r, int k) {
  const cuda_step *s = &r->x->steps[k];
  const jx_fusion_group *g = &s->group;
  jx_cuda_device *d = r->x->device;
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  uint8_t claimed[JX_FUSION_MAX_LOADS] = {0};
  jx_status st = JX_OK;
  for (int l = 0; l < g->nloads && !st; l++) {
    st = to_device(r, g->loads[l].var);
    /* from where a read-through slice starts */
    a.buf[l] = (char *)(uintptr_t)r->vars[g->loads[l].var].dev +
               g->loads[l].offset * (int64_t)jx_dtype_size(r->p->avals[g->loads[l].var].dtype);
    memcpy(a.strides + JX_MAX_RANK * l, g->loads[l].strides, sizeof g->loads[l].strides);
  }
  for (int o = 0; o < g->nstores && !st; o++) {
    int l = in_place_load(r, k, o, claimed);
    if (l >= 0) { /* the donated block becomes the store's */
      slot *from = &r->vars[g->loads[l].var], *to = &r->vars[g->stores[o]];
      claimed[l] = 1;
      to->dev = from->dev;
      to->owned = 1;
      from->dev = 0;
      from->owned = 0;
      r->donated[g->stores[o]] = 1; /* the run's own block: reusable again where it dies */
    } else {
      st = device_buffer(r, g->stores[o]);
    }
    a.buf[g->nloads + o] = (char *)(uintptr_t)r->vars[g->stores[o]].dev;
  }
  if (st) return st;
  int rank = g->shape.rank > 0 ? g->shape.rank : 1;
  a.dims[0] = 1;
  for (int i = 0; i < g->shape.rank; i++) a.dims[i] = g->shape.dims[i];
  int64_t numel = jx_shape_numel(g->shape), inner = a.dims[rank - 1];
  if (numel == 0 || inner == 0) return JX_OK; /* nothing to compute or store */
  int64_t rows = g->reduces && g->lead > 0 ? jx_fusion_kernel_rows(g) : numel / inner;
  int64_t sms = d->info.sm_count > 0 ? d->info.sm_count : 1;
  unsigned bx, gx;
  if (g->reduces && g->lead == 0) {
    /* a row (or a split row's piece) per block, shared by its threads:
     * about 12 columns a thread (a sum's leaves of 64 to 128 columns take
     * 8 threads each), 32 to 256 threads */
    int64_t len = s->split.pieces > 1 ? (inner + s->split.pieces - 1) / s->split.pieces : inner;
    int64_t want = ((len + 11) / 12 + 31) / 32 * 32;
    bx = (unsigned)(want < 32 ? 32 : want > 256 ? 256 : want);
    gx = 1;
  } else if (g->reduces) { /* tiles of 32 columns by 8 row groups */
    bx = 256;
    gx = clamp_u((inner + 31) / 32, 4 * sms);
  } else { /* blocks of at most 256 threads along the columns, each thread about 4
            * columns of a row (a row's setup, its index and pointers, is paid once for
            * them) */
    int64_t want = (inner + 31) / 32 * 32;
    bx = (unsigned)(want < 256 ? want : 256);
    gx = clamp_u((inner + 4 * (int64_t)bx - 1) / (4 * (int64_t)bx), 4 * sms);
  }
  /* rows over y: about 32 blocks per SM in all, the grid-stride loop does the rest */
  unsigned gy = clamp_u(rows, 65535);
  int64_t budget = 32 * sms / gx;
  if (gy > budget) gy = clamp_u(budget, 65535);
  int64_t row_begin = 0, row_end = rows;
  void *params[] = {&a, &row_begin, &row_end};
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  const jx_cuda_split *sp = &s->split;
  if (sp->pieces < 2)
    return jx_cuda_check(cu->LaunchKernel(r->x->module->functions[s->kernel], gx, gy, 1, bx, 1, 1,
                                          0, d->compute, params, NULL),
                         "cuLaunchKernel", d->info.ordinal);
  /* split across blocks: the pieces' partial results in scratch, then combined */
  int o = 0, red = r->p->eqns[g->first + g->count - 1].out[0];
  while (g->stores[o] != red) o++;
  uint64_t scratch = 0;
  size_t esize = sp->kind == JX_CUDA_COMBINE_F64 ? 8 : 4;
  st = jx_cuda_allocator_alloc(d->memory, (size_t)sp->pieces * (size_t)sp->outputs * esize,
                               &scratch);
  if (st) return st;
  a.buf[g->nloads + o] = (char *)(uintptr_t)scratch;
  a.pieces = sp->pieces;
  a.part = sp->outputs;
  memcpy(a.piece, sp->start, sizeof a.piece);
  st = jx_cuda_check(cu->LaunchKernel(r->x->module->functions[s->kernel], gx, gy,
                                      (unsigned)sp->pieces, bx, 1, 1, 0, d->compute, params, NULL),
                     "cuLaunchKernel", d->info.ordinal);
  jx_cuda_combine_args c = {(const void *)(uintptr_t)scratch,
                            (void *)(uintptr_t)r->vars[red].dev,
                            sp->outputs,
                            sp->pieces,
                            sp->op,
                            sp->kind,
                            sp->npairs,
                            {{0}}};
  memcpy(c.pairs, sp->pairs, sizeof c.pairs);
  jx_cuda_kargs ca;
  memset(&ca, 0, sizeof ca);
  memcpy(ca.strides, &c, sizeof c);
  void *cparams[] = {&ca, &row_begin, &row_end};
  if (!st)
    st = jx_cuda_check(cu->LaunchKernel(r->x->module->functions[r->x->combine_fn],
                                        clamp_u((sp->outputs + 255) / 256, 32 * sms), 1, 1, 256, 1,
                                        1, 0, d->compute, cparams, NULL),
                       "cuLaunchKernel", d->info.ordinal);
  /* ordered on the compute stream: a later use of the block runs after both launches */
  jx_cuda_allocator_free(d->memory, scratch);
  return st;
}

/* One launch of the gather kernel described by a (ka's buffers already
 * set): a thread per element of a->n, blocks of 256, at most 32 per SM. */
static jx_status launch_gather(run_state *r, jx_cuda_kargs *ka, const jx_cuda_gather_args *a) {
  jx_cuda_device *d = r->x->device;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  if (a->kind == 4) /* a reshape keeps the elements' order: a copy, at the copy engine's speed */
    return jx_cuda_check(cu->MemcpyDtoDAsync((CUdeviceptr)(uintptr_t)a->out,
                                             (CUdeviceptr)(uintptr_t)a->operand,
                                             (size_t)a->n * (size_t)a->elem_bytes, d->compute),
                         "cuMemcpyDtoDAsync", d->info.ordinal);
  memcpy(ka->strides, a, sizeof *a);
  int64_t sms = d->info.sm_count > 0 ? d->info.sm_count : 1;
  unsigned gx = clamp_u((a->n + 255) / 256, 32 * sms);
  int64_t row_begin = 0, row_end = 1;
  void *params[] = {ka, &row_begin, &row_end};
  return jx_cuda_check(cu->LaunchKernel(r->x->module->functions[r->x->gather_fn], gx, 1, 1, 256, 1,
                                        1, 0, d->compute, params, NULL),
                       "cuLaunchKernel", d->info.ordinal);
}

/* A scatter-add of whole rows (kernels_gather.h's kind 6): the updates
 * sorted by row in int32 scratch, then each row's added in order. */
static jx_status scatter_rows(run_state *r, jx_cuda_kargs *ka, jx_cuda_gather_args *a) {
  jx_cuda_device *d = r->x->device;
  const jx_cuda_driver_api *cu = jx_cuda_driver();
  size_t n = (size_t)a->updates, v = (size_t)a->table_rows + 1;
  uint64_t scratch = 0;
  jx_status st = jx_cuda_allocator_alloc(d->memory, (3 * n + v) * sizeof(int32_t), &scratch);
  if (st) return st;
  a->rows = (int32_t *)(uintptr_t)scratch;
  a->ranks = a->rows + n;
  a->perm = a->ranks + n;
  a->starts = a->perm + n;
  st = jx_cuda_check(
      cu->MemsetD8Async((CUdeviceptr)(uintptr_t)a->starts, 0, v * sizeof(int32_t), d->compute),
      "cuMemsetD8Async", d->info.ordinal);
  int64_t sms = d->info.sm_count > 0 ? d->info.sm_count : 1;
  for (int phase = JX_CUDA_SCATTER_ROWS_COUNT; phase <= JX_CUDA_SCATTER_ROWS_ADD && !st; phase++) {
    a->phase = phase;
    memcpy(ka->strides, a, sizeof *a);
    int64_t threads = phase == JX_CUDA_SCATTER_ROWS_ADD ? a->updates * a->row_elems : a->updates;
    unsigned gx = phase == JX_CUDA_SCATTER_ROWS_SCAN ? 1 : clamp_u((threads + 255) / 256, 32 * sms);
    int64_t row_begin = 0, row_end = 1;
    void *params[] = {ka, &row_begin, &row_end};
    st = jx_cuda_check(cu->LaunchKernel(r->x->module->functions[r->x->gather_fn], gx, 1, 1, 256, 1,
                                        1, 0, d->compute, params, NULL),
                       "cuLaunchKernel", d->info.ordinal);
  }
  /* ordered on the compute stream: a later use of the block runs after the launches */
  jx_cuda_allocator_free(d->memory, scratch);
  return st;
}

/* Runs step k's gather, dynamic_slice, dynamic_update_slice, slice,
 * reshape or scatter-add with the gather kernel on the compute stream. */
static jx_status run_gather(run_state *r, int k) {
  const jx_eqn *e = &r->p->eqns[r->x->steps[k].group.first];
  jx_cuda_gather_args a;
  if (jx_cuda_gather_plan(r->p, e, &a))
    return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: step %d is not a gather", k);
  jx_status st = JX_OK;
  for (int i = 0; i < e->nin && !st; i++) st = to_device(r, e->in[i]);
  if (!st) st = device_buffer(r, e->out[0]);
  if (st || jx_shape_numel(r->p->avals[e->out[0]].shape) == 0) return st;
  jx_cuda_kargs ka;
  memset(&ka, 0, sizeof ka);
  a.operand = (const void *)(uintptr_t)r->vars[e->in[0]].dev;
  if (a.kind == 0 || a.kind == 2 || a.kind == 5 || a.kind == 6)
    a.indices = (const void *)(uintptr_t)r->vars[e->in[1]].dev;
  a.out = (void *)(uintptr_t)r->vars[e->out[0]].dev;
  for (int i = a.kind == 1 || a.kind == 2 ? a.kind : e->nin; i < e->nin; i++) /* the starts */
    ka.buf[i - a.kind] = (char *)(uintptr_t)r->vars[e->in[i]].dev;
  if (a.kind == 5 || a.kind == 6) { /* scatter-add: the operand copied, then the updates added */
    a.operand = (const void *)(uintptr_t)r->vars[e->in[2]].dev;
    jx_cuda_gather_args c;
    memset(&c, 0, sizeof c);
    c.kind = 4;
    c.n = jx_shape_numel(r->p->avals[e->in[0]].shape);
    c.elem_bytes = a.elem_bytes;
    c.operand = (const void *)(uintptr_t)r->vars[e->in[0]].dev;
    c.out = a.out;
    st = launch_gather(r, &ka, &c);
  }
  if (!st && a.kind == 6) return scatter_rows(r, &ka, &a);
  return st || a.n == 0 ? st : launch_gather(r, &ka, &a);
}

/* Runs step k's dot_general as one cuBLASLt GEMM on the compute stream. */
static jx_status run_gemm(run_state *r, int k) {
  const cuda_step *s = &r->x->steps[k];
  const jx_eqn *e = &r->p->eqns[s->group.first];
  jx_status st = to_device(r, e->in[0]);
  if (!st) st = to_device(r, e->in[1]);
  if (!st) st = device_buffer(r, e->out[0]);
  if (st) return st;
  return jx_cuda_gemm(r->x->blas, &s->desc, r->vars[e->in[0]].dev, r->vars[e->in[1]].dev,
                      r->vars[e->out[0]].dev, 0, r->x->device->compute);
}

/* Runs step k's collective on device buffers (collectives.run): the
 * operands on the device, the results in new blocks. */
static jx_status run_collective(run_state *r, int k) {
  const jx_eqn *e = &r->p->eqns[r->x->steps[k].group.first];
  CUdeviceptr ins_s[8], outs_s[8];
  CUdeviceptr *ins = e->nin > 8 ? malloc(sizeof *ins * (size_t)e->nin) : ins_s;
  CUdeviceptr *outs = e->nout > 8 ? malloc(sizeof *outs * (size_t)e->nout) : outs_s;
  jx_status st = ins && outs ? JX_OK : out_of_memory();
  for (int i = 0; i < e->nin && !st; i++) {
    st = to_device(r, e->in[i]);
    ins[i] = r->vars[e->in[i]].dev;
  }
  for (int o = 0; o < e->nout && !st; o++) {
    st = device_buffer(r, e->out[o]);
    outs[o] = r->vars[e->out[o]].dev;
  }
  if (!st) st = r->x->collectives.run(r->x->collectives.ctx, r->p, e, ins, outs);
  if (ins != ins_s) free(ins);
  if (outs != outs_s) free(outs);
  return st;
}

/* A fused step's buffers (cuda_fuse.h). */
static jx_status fused_input(void *ctx, int v, CUdeviceptr *ptr) {
  run_state *r = ctx;
  jx_status st = to_device(r, v);
  *ptr = r->vars[v].dev;
  return st;
}
static jx_status fused_output(void *ctx, int v, CUdeviceptr *ptr) {
  run_state *r = ctx;
  jx_status st = device_buffer(r, v);
  *ptr = r->vars[v].dev;
  return st;
}

/* Runs equation e on the host, as the CPU executable's equation steps do. */
static jx_status run_host_eqn(run_state *r, const jx_eqn *e) {
  jx_array *ins_s[16], *outs_s[16];
  jx_array **ins = e->nin > 16 ? malloc(sizeof *ins * (size_t)e->nin) : ins_s;
  jx_array **outs = e->nout > 16 ? malloc(sizeof *outs * (size_t)e->nout) : outs_s;
  jx_status st = ins && outs ? JX_OK : out_of_memory();
  for (int i = 0; i < e->nin && !st; i++) {
    st = to_host(r, e->in[i]);
    ins[i] = r->vars[e->in[i]].host;
  }
  if (!st) /* a loop over compiled bodies runs as the CPU executable runs it */
    st = jx_control_runs(e) ? jx_control_run(e, ins, outs)
                            : jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs);
  for (int o = 0; o < e->nout && !st; o++) r->vars[e->out[o]].host = outs[o];
  if (ins != ins_s) free(ins);
  if (outs != outs_s) free(outs);
  return st;
}

/* Drops v after step k when k is its last reader: the run's block goes back
 * to the allocator, the run's host value is freed (with its device copy). */
static void release(run_state *r, int v, int k) {
  slot *s = &r->vars[v];
  if (r->x->last_step[v] != k) return;
  if (s->dev && s->owned) jx_cuda_allocator_free(r->x->device->memory, (uint64_t)s->dev);
  s->dev = 0;
  s->owned = 0;
  if (r->x->temporary[v] && s->host) jx_scope_release_now(s->host);
  if (r->x->temporary[v]) s->host = NULL;
}

static void release_dead(run_state *r, int k) {
  const cuda_step *s = &r->x->steps[k];
  int as_kernel = s->kernel >= 0 || jx_cuda_fused_at(r->x->fused, k);
  JX_FUSION_FOR_READS(r->p, &s->group, as_kernel, v, release(r, v, k));
}

/* Takes the device blocks of the donated inputs (uploading a host one
 * first), marking the caller's arrays donated as the CPU executable does;
 * the others run undonated, with one line under JX_LOG_COMPILES=1. */
static jx_status take_donated(run_state *r, jx_array *const *in) {
  jx_cuda_executable *x = r->x;
  const jx_program *p = r->p;
  r->donated = calloc((size_t)p->nvars + 1, 1);
  if (!r->donated) return out_of_memory();
  for (int i = 0; i < p->nin; i++) {
    if (!x->donate[i]) continue;
    char why[128];
    const char *refused = jx_donation_conflict(p, in, i, why, sizeof why);
    if (refused) {
      if (jx_env_flag("JX_LOG_COMPILES"))
        fprintf(stderr, "jx: donated input %d of '%s' was not usable: %s\n", i, x->donor, refused);
      continue;
    }
    int v = p->in[i];
    slot *s = &r->vars[v];
    jx_status st = to_device(r, v);
    if (!st && s->owned) { /* another thread's upload was attached: ours is as good */
      jx_cuda_allocator_free(x->device->memory, (uint64_t)s->dev);
      s->dev = 0;
      st = to_device(r, v);
    }
    uint64_t ptr = 0;
    if (!st) st = jx_cuda_resident_take(in[i], x->device, x->donor, i, &ptr);
    if (st) return st;
    s->host = NULL; /* donated: a host equation reads the block, copied down */
    s->dev = (CUdeviceptr)ptr;
    s->owned = 1;
    r->donated[v] = 1;
    if (x->last_step[v] < 0) release(r, v, -1); /* never read */
  }
  return JX_OK;
}

/* The outputs: an array the run already has (an input, a constant, a host
 * equation's result) is returned as it is; a value only on the device
 * becomes a device-resident array that owns its block, ready after the
 * event recorded behind the run's last kernel. Nothing waits here. */
static jx_status make_outputs(run_state *r, jx_array **out) {
  const jx_program *p = r->p;
  jx_cuda_ready *ready = NULL;
  jx_status st = JX_OK;
  for (int o = 0; o < p->nout && !st; o++) {
    slot *s = &r->vars[p->out[o]];
    if (s->host) continue;
    if (!s->dev || !s->owned)
      return jx_error_set(JX_ERR_INTERNAL, "CUDA executor: output %d has no value", o);
    if (!ready && !(ready = jx_cuda_ready_record(r->x->device)))
      return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
    jx_aval a = p->avals[p->out[o]];
    jx_array *h = jx_array_unbacked(a.dtype, a.shape, a.weak);
    int kept = h->poisoned ? -1 : jx_cuda_resident_attach(h, r->x->device, (uint64_t)s->dev, ready);
    if (kept < 0) st = jx_last_status() ? jx_last_status() : JX_ERR_OUT_OF_MEMORY;
    if (kept > 0) {
      s->host = h;
      s->dev = 0; /* h owns the block now */
      s->owned = 0;
    }
  }
  jx_cuda_ready_release(ready);
  for (int o = 0; o < p->nout && !st; o++) out[o] = jx_keep(r->vars[p->out[o]].host);
  return st;
}

jx_status jx_cuda_executable_run(jx_cuda_executable *x, const jx_program *p, jx_array *const *in,
                                 jx_array **out) {
  const void *top = jx_donation_swap(NULL); /* only jx_call's own program donates */
  int donating = x->donate && top && (top == p || top == x->attached);
  if (p == x->attached) p = x->program; /* the lowered copy: the same inputs and outputs */
  run_state r = {x, p, calloc((size_t)p->nvars + 1, sizeof(slot)), NULL};
  if (!r.vars) return out_of_memory();
  const jx_exec_nested *outer_nested = jx_exec_nested_enter(&x->nested);
  for (int i = 0; i < p->nin; i++) r.vars[p->in[i]].host = in[i];
  for (int c = 0; c < p->nconst; c++) r.vars[p->constvar[c]].host = p->constval[c];
  jx_status st = jx_cuda_device_make_current(x->device);
  jx_scope_begin(); /* the host values the run makes, freed after their last use */
  if (donating && !st) {
    jx_dispatch_wait_all(); /* queued CPU runs may still read the arrays it takes */
    st = take_donated(&r, in);
  }
  if (!st) st = jx_cuda_step_profile_mark(x->profile, x->device, 0);
  for (int k = 0; k < x->nsteps && !st; k++) {
    const cuda_step *s = &x->steps[k];
    if (s->group.skip) { /* read through by the kernels, or dead */
      st = jx_cuda_step_profile_mark(x->profile, x->device, k + 1);
      continue;
    }
    if (s->kernel >= 0) {
      st = run_kernel(&r, k);
    } else if (s->gemm) {
      st = run_gemm(&r, k);
    } else if (s->collective) {
      st = run_collective(&r, k);
    } else if (s->gather) {
      st = run_gather(&r, k);
    } else if (jx_cuda_fused_at(x->fused, k)) {
      st = jx_cuda_fused_run(x->fused, k, &(jx_cuda_fused_io){&r, fused_input, fused_output});
    } else {
      for (int e = s->group.first; e < s->group.first + s->group.count && !st; e++)
        st = run_host_eqn(&r, &p->eqns[e]);
    }
    if (!st) release_dead(&r, k);
    if (!st) st = jx_cuda_step_profile_mark(x->profile, x->device, k + 1);
  }
  if (!st) st = jx_cuda_step_profile_collect(x->profile, x->device);
  if (!st) st = make_outputs(&r, out);
  /* the run's blocks left: values nothing read, or a failed run's */
  for (int v = 0; v < p->nvars; v++)
    if (r.vars[v].dev && r.vars[v].owned)
      jx_cuda_allocator_free(x->device->memory, (uint64_t)r.vars[v].dev);
  jx_scope_end();
  for (int o = 0; o < p->nout && !st; o++) jx_scope_adopt(out[o]);
  jx_exec_nested_leave(outer_nested);
  free(r.vars);
  free(r.donated);
  return st;
}

jx_status jx_cuda_set_donation(const jx_program *p, int nin, const int *donate,
                               const char *fn_name) {
  jx_cuda_executable *x = jx_program_executable(p);
  int any = 0;
  for (int i = 0; donate && i < nin; i++) any |= donate[i] != 0;
  if (!any || !x) return JX_OK;
  free(x->donate);
  free(x->donor);
  x->donate = calloc((size_t)nin, 1);
  x->donor = strdup(fn_name ? fn_name : "jit");
  if (!x->donate || !x->donor) {
    free(x->donate);
    free(x->donor);
    x->donate = NULL;
    x->donor = NULL;
    return out_of_memory();
  }
  for (int i = 0; i < nin; i++) x->donate[i] = donate[i] != 0;
  return JX_OK;
}

/* ---- attaching ---- */

static jx_status run_attached(void *exec, const jx_program *p, jx_array *const *in,
                              jx_array **out) {
  return jx_cuda_executable_run(exec, p, in, out);
}
static void free_attached(void *exec) { jx_cuda_executable_free(exec); }

jx_status jx_cuda_compile_attach(const jx_program *p, const char *dump_prefix) {
  if (jx_cuda_device_count() == 0)
    return jx_error_set(JX_ERR_UNIMPLEMENTED,
                        "jit of '%s': JX_PLATFORM=cuda, but CUDA cannot run it: %s (set "
                        "JX_PLATFORM=cpu to run on the CPU)",
                        p->name, jx_cuda_status());
  jx_cuda_device *d = NULL;
  int ordinal = 0;
  jx_status st = jx_cuda_process_device(&ordinal);
  if (!st) st = jx_cuda_device_open(ordinal, &d);
  if (st) return st;
  jx_cuda_executable *x = jx_cuda_executable_build(d, p, dump_prefix);
  if (!x) return jx_last_status() ? jx_last_status() : JX_ERR_INTERNAL;
  jx_program_attach(p, (jx_exec){x, run_attached, free_attached});
  return JX_OK;
}
