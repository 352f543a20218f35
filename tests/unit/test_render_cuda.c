/* The CUDA dialect of the kernel renderer, compiled by NVRTC (no GPU needed):
 * the fused groups of several programs (the jit test's chain, broadcasts and
 * scalars, select_n and comparisons, f64, integer_pow, every primitive the
 * renderer knows, in f32 and f64, and in c64 and c128 with complex values
 * as the dialect's structs of parts) render to CUDA C that NVRTC compiles for
 * sm_90 (cubin), the every-primitive programs also for sm_80 (cubin) and
 * compute_90 (PTX), each image naming every kernel. A broken source fails with the compiler's first
 * error; a missing library fails with "NVRTC not found". Where libnvrtc cannot be loaded the NVRTC
 * checks print "skipped: NVRTC not found" and pass; the rendering checks still run. */
#define _GNU_SOURCE /* memmem */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <cmocka.h>
#include <jx/jx.h>

#include "compile/fusion.h"
#include "cuda/nvrtc.h"
#include "nvrtc_test_cache.h"
#include "compile/render_c.h"
#include "compile/render_cuda.h"
#include "compile/prim_lowering.h"
#include "prims/prims.h"
#include "trace/fn.h"
#include "test_util.h"

static const char *self;
static int kernels_compiled; /* kernels NVRTC compiled (each to every target) */
static int images_built;     /* cubins and PTX images */
static int gpu_runs;         /* kernels run on a GPU and checked against the CPU */

static int have_nvrtc(void) {
  if (jx_nvrtc_available()) return 1;
  printf("skipped: NVRTC not found (%s)\n", jx_nvrtc_load_error());
  return 0;
}

/* ---- the programs ---- */

/* test_jit.c's chain: six elementwise ops with a scalar, one kernel */
static void chain(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *a = jx_mul(in[0], in[1]);
  jx_array *b = jx_add(a, jx_scalar(JX_F32, 0.5));
  jx_array *c = jx_tanh(b);
  jx_array *d = jx_exp(jx_neg(c));
  jx_array *e = jx_maximum(d, in[1]);
  out[0] = jx_sub(e, jx_sqrt(jx_abs(in[0])));
}

/* a bias broadcast along rows, a column vector along columns, scalars, and
 * two outputs (one used again after the group) */
static void broadcasts(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *row = jx_broadcast_in_dim(in[1], JX_SHAPE(4, 3, 16), JX_AXES(2));
  jx_array *col = jx_broadcast_in_dim(in[2], JX_SHAPE(4, 3, 16), JX_AXES(1));
  jx_array *h = jx_mul(jx_add(in[0], row), col);
  jx_array *g = jx_logistic(jx_mul(h, jx_scalar(JX_F32, 1.702)));
  out[0] = jx_mul(h, g);
  out[1] = jx_sub(jx_exp2(g), jx_scalar(JX_F32, 2.0));
}

/* comparisons, a bool mask, select_n and converts to and from bool */
static void selects(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *y = in[1];
  jx_array *m = jx_gt(x, y);
  jx_array *cases[2] = {jx_neg(x), jx_log1p(jx_abs(y))};
  jx_array *s = jx_select_n(m, 2, cases);
  /* each operand traced in its own statement: C leaves the order of a
   * call's arguments to the compiler, and the kernel's text follows it */
  jx_array *below = jx_le(s, y), *grown = jx_expm1(s), *waved = jx_cos(s);
  jx_array *t = jx_where(below, grown, waved);
  out[0] = jx_add(t, jx_astype(jx_lt(t, x), JX_F32));
  out[1] = jx_astype(jx_mul(t, y), JX_BOOL);
}

/* f64 throughout, with integer powers of both signs */
static void f64_pows(void *ctx, jx_array *const *in, jx_array **out) {
  (void)ctx;
  jx_array *x = in[0], *y = in[1];
  jx_array *cube = jx_integer_pow(x, 3), *inv_square = jx_integer_pow(y, -2);
  jx_array *a = jx_add(cube, inv_square);
  jx_array *sa = jx_sin(a);
  jx_array *b = jx_div(sa, jx_add(jx_rsqrt(jx_abs(y)), jx_scalar(JX_F64, 1.0)));
  jx_array *ab = jx_abs(b);
  out[0] = jx_pow(ab, jx_tanh(x));
  out[1] = jx_astype(jx_integer_pow(jx_astype(b, JX_F32), 5), JX_F64);
}

/* every primitive a kernel member computes (prim_lowering.h: the
 * expressions, convert_element_type and integer_pow), summed into one output
 * and the comparisons folded into another, with no scalars, so that the
 * whole program is one group; ctx points at the dtype */
static void every_op(void *ctx, jx_array *const *in, jx_array **out) {
  jx_dtype dt = *(const jx_dtype *)ctx;
  jx_array *x = in[0], *y = in[1], *c = in[2];
  jx_array *ax = jx_abs(x);
  jx_array *acc = jx_add(x, y);
  jx_array *terms[] = {jx_sub(x, y),
                       jx_mul(x, y),
                       jx_div(x, y),
                       jx_neg(x),
                       jx_exp(x),
                       jx_exp2(y),
                       jx_expm1(x),
                       jx_log(ax),
                       jx_log1p(ax),
                       jx_sqrt(ax),
                       jx_rsqrt(ax),
                       jx_tanh(x),
                       jx_logistic(y),
                       jx_sin(x),
                       jx_erf(y),
                       jx_cos(x),
                       jx_maximum(x, y),
                       jx_minimum(x, y),
                       jx_pow(ax, y),
                       jx_integer_pow(x, 4),
                       jx_integer_pow(y, -3),
                       jx_stop_gradient(y),
                       jx_astype(jx_astype(x, dt == JX_F32 ? JX_F64 : JX_F32), dt)};
  for (size_t k = 0; k < sizeof terms / sizeof terms[0]; k++) acc = jx_add(acc, terms[k]);
  jx_array *bools[] = {jx_eq(x, y),           jx_ne(x, y), jx_lt(x, y),
                       jx_le(x, y),           jx_gt(x, y), jx_ge(x, y),
                       jx_astype(x, JX_BOOL), c,           jx_isfinite(jx_exp(x))};
  out[0] = acc;
  /* acc = 2 acc + predicate, each predicate in turn (no scalars: their
   * broadcasts would read values defined inside the group) */
  for (size_t k = 0; k < sizeof bools / sizeof bools[0]; k++) {
    jx_array *twice = jx_add(acc, acc);
    jx_array *cases[2] = {twice, jx_add(twice, jx_astype(bools[k], dt))};
    acc = jx_select_n(bools[k], 2, cases);
  }
  out[1] = acc;
}

static void gpu_matches_cpu(jx_fn *f, jx_program *p, const jx_fusion_group *g,
                            jx_array *const *inputs, double rel);

/* deterministic values of dtype dt (bool: alternating), spread over
 * [-scale, scale] with a few exact zeros, ones and halves */
static jx_array *values(jx_dtype dt, jx_shape s, int seed, double scale) {
  int64_t n = jx_shape_numel(s);
  void *h = malloc((size_t)(n ? n : 1) * 8);
  assert_non_null(h);
  for (int64_t i = 0; i < n; i++) {
    double v = scale * sin(0.7 * (double)i + seed) * cos(0.13 * (double)i * seed);
    if (i % 17 == 3) v = 0.0;
    if (i % 23 == 5) v = 1.0;
    if (i % 29 == 7) v = -0.5;
    if (dt == JX_F32) ((float *)h)[i] = (float)v;
    if (dt == JX_F64) ((double *)h)[i] = v;
    if (dt == JX_BOOL) ((uint8_t *)h)[i] = (uint8_t)((i + seed) % 3 == 0);
  }
  jx_array *a = jx_array_from(dt, s, h);
  free(h);
  return a;
}

/* ---- rendering ---- */

typedef struct {
  char *tu;                 /* the CUDA prelude and every kernel */
  int nkernels;             /* kernels named jx_kernel_0 .. jx_kernel_{n-1} */
  int nfused;               /* equations inside them */
  int neqns;                /* equations of the program */
  const jx_prim *prims[64]; /* the primitives inside the kernels */
  int nprims;
} rendered;

static void append(rendered *r, const char *src) {
  size_t a = r->tu ? strlen(r->tu) : 0, b = strlen(src);
  r->tu = realloc(r->tu, a + b + 1);
  assert_non_null(r->tu);
  memcpy(r->tu + a, src, b + 1);
}

static void note_prims(rendered *r, const jx_program *p, const jx_fusion_group *g) {
  for (int m = g->first; m < g->first + g->count; m++) {
    int seen = 0;
    for (int k = 0; k < r->nprims; k++) seen |= r->prims[k] == p->eqns[m].prim;
    if (!seen && r->nprims < 64) r->prims[r->nprims++] = p->eqns[m].prim;
  }
}

/* Renders one group in both dialects, checks the CUDA text's shape, and
 * appends it to the translation unit. */
static void render_group(rendered *r, const jx_program *p, const jx_fusion_group *g) {
  char name[32];
  snprintf(name, sizeof name, "jx_kernel_%d", r->nkernels);
  char *cpu = jx_render_c(p, g, name);
  if (!cpu) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(cpu);
  char *cu = jx_render_cuda(p, g, name);
  if (!cu) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(cu);
  char want[64];
  snprintf(want, sizeof want, "extern \"C\" __global__ void %s(", name);
  assert_non_null(strstr(cu, want));
  assert_non_null(strstr(cu, "blockIdx.y"));
  assert_non_null(strstr(cu, "threadIdx.x"));
  assert_null(strstr(cu, "restrict ")); /* C's spelling stays in the C dialect */
  assert_null(strstr(cpu, "__global__"));
  assert_non_null(strstr(cpu, "restrict"));
  append(r, cu);
  free(cpu);
  free(cu);
  r->nkernels++;
  r->nfused += g->count;
  note_prims(r, p, g);
}

/* The jit's program of body for these inputs, fused as the executable fuses
 * it; each group the executable would compile is rendered, and run on a GPU
 * where there is one (against f on the CPU, to within rel). */
static rendered render_program(const char *fname, jx_body body, void *ctx, int nin, int nout,
                               const jx_aval *av, jx_array *const *inputs, double rel) {
  rendered r = {0};
  char *prelude = jx_render_cuda_prelude();
  assert_non_null(prelude);
  append(&r, prelude);
  free(prelude);
  jx_fn *f = jx_fn_create(fname, nin, nout, body, ctx);
  jx_fn *jf = jx_jit(f, NULL);
  jx_program *p = jx_fn_program(jf, av); /* simplified, as the jit fuses it */
  if (!p) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(p);
  r.neqns = p->neqns;
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  assert_true(ng >= 0);
  for (int k = 0; k < ng; k++)
    if (groups[k].compute >= 2 && groups[k].nstores > 0) {
      render_group(&r, p, &groups[k]);
      if (inputs) gpu_matches_cpu(f, p, &groups[k], inputs, rel);
    }
  free(groups);
  jx_program_release(p);
  jx_fn_release(jf);
  jx_fn_release(f);
  return r;
}

/* One group of all of p's equations, built here rather than by jx_fuse so
 * that primitives the fuser does not take yet (erf) still meet the
 * renderer: loads are the values read from outside, contiguous (rank 0:
 * stride 0); stores are the outputs. Every equation must be elementwise. */
static jx_fusion_group whole_group(const jx_program *p) {
  jx_fusion_group g;
  memset(&g, 0, sizeof g);
  g.first = 0;
  g.count = p->neqns;
  g.shape = p->avals[p->out[0]].shape;
  uint8_t defined[4096] = {0};
  assert_true(p->nvars < 4096);
  for (int m = 0; m < p->neqns; m++) {
    const jx_eqn *e = &p->eqns[m];
    assert_true(e->prim != &jx_prim_broadcast_in_dim);
    for (int i = 0; i < e->nin; i++) {
      int v = e->in[i];
      if (defined[v]) continue;
      int64_t st[JX_MAX_RANK] = {0}, acc = 1;
      jx_shape s = p->avals[v].shape;
      if (s.rank == g.shape.rank)
        for (int d = s.rank - 1; d >= 0; d--) {
          st[d] = s.dims[d] == 1 ? 0 : acc;
          acc *= s.dims[d];
        }
      if (jx_fusion_find_load(&g, v, st) >= 0) continue;
      assert_true(g.nloads < JX_FUSION_MAX_LOADS);
      g.loads[g.nloads].var = v;
      memcpy(g.loads[g.nloads].strides, st, sizeof st);
      g.nloads++;
    }
    defined[e->out[0]] = 1;
    g.compute++;
  }
  for (int o = 0; o < p->nout; o++) g.stores[g.nstores++] = p->out[o];
  return g;
}

/* ---- NVRTC ---- */

static int contains(const char *image, size_t n, const char *s) {
  return memmem(image, n, s, strlen(s)) != NULL;
}

/* Compiles r's translation unit for sm_90 (cubin) and, with every_target,
 * for sm_80 (cubin) and compute_90 (PTX) too; each image names every
 * kernel. What differs between the targets is the architecture, not the
 * program's structure: the every-op programs, which hold every primitive the
 * renderer knows, go to every target; the structural ones (broadcasts,
 * selects, several outputs) to sm_90 only, NVRTC taking ~1.5 s an image. */
static void compile_for(const rendered *r, const char *what, int every_target) {
  assert_true(r->nkernels >= 1);
  if (!have_nvrtc()) return;
  const struct {
    const char *arch;
    jx_nvrtc_output out;
  } targets[] = {{"sm_90", JX_NVRTC_CUBIN}, {"sm_80", JX_NVRTC_CUBIN}, {"sm_90", JX_NVRTC_PTX}};
  size_t ntargets = every_target ? sizeof targets / sizeof targets[0] : 1;
  for (size_t t = 0; t < ntargets; t++) {
    jx_nvrtc_options opt = {.arch = targets[t].arch, .output = targets[t].out};
    char *image = NULL;
    size_t n = 0;
    jx_status st = nvrtc_test_compile(r->tu, what, &opt, &image, &n);
    if (st) fprintf(stderr, "%s\n--- source ---\n%s\n", jx_last_error(), r->tu);
    assert_int_equal(st, JX_OK);
    assert_non_null(image);
    assert_true(n > 64);
    if (targets[t].out == JX_NVRTC_CUBIN)
      assert_memory_equal(image, "\177ELF", 4);
    else
      assert_non_null(strstr(image, ".target sm_90"));
    for (int k = 0; k < r->nkernels; k++) {
      char name[48];
      snprintf(name, sizeof name,
               targets[t].out == JX_NVRTC_PTX ? ".entry jx_kernel_%d(" : "jx_kernel_%d", k);
      assert_true(contains(image, n, name));
    }
    images_built++;
    free(image);
  }
  kernels_compiled += r->nkernels;
}

static void free_rendered(rendered *r) { free(r->tu); }

/* ---- running on a GPU, when there is one ----
 * A minimal CUDA driver loader (the CUDA backend will have the real one):
 * where libcuda and a device exist, kernels run and their results are
 * compared with the CPU's; elsewhere these checks print "skipped". */

typedef int CUresult;
typedef unsigned long long CUdeviceptr;
static struct {
  int tried, ok, cc;
  void *ctx, *dev_ctx;
  CUresult (*init)(unsigned);
  CUresult (*device_get)(int *, int);
  CUresult (*attribute)(int *, int, int);
  CUresult (*retain)(void **, int);
  CUresult (*set_current)(void *);
  CUresult (*load)(void **, const void *);
  CUresult (*unload)(void *);
  CUresult (*function)(void **, void *, const char *);
  CUresult (*alloc)(CUdeviceptr *, size_t);
  CUresult (*free)(CUdeviceptr);
  CUresult (*htod)(CUdeviceptr, const void *, size_t);
  CUresult (*dtoh)(void *, CUdeviceptr, size_t);
  CUresult (*launch)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                     void *, void **, void **);
  CUresult (*sync)(void);
} cu;

static int have_gpu(void) {
  if (!cu.tried) {
    cu.tried = 1;
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) h = dlopen("libcuda.so", RTLD_NOW | RTLD_LOCAL);
    struct {
      void *slot;
      const char *name;
    } syms[] = {{&cu.init, "cuInit"},
                {&cu.device_get, "cuDeviceGet"},
                {&cu.attribute, "cuDeviceGetAttribute"},
                {&cu.retain, "cuDevicePrimaryCtxRetain"},
                {&cu.set_current, "cuCtxSetCurrent"},
                {&cu.load, "cuModuleLoadData"},
                {&cu.unload, "cuModuleUnload"},
                {&cu.function, "cuModuleGetFunction"},
                {&cu.alloc, "cuMemAlloc_v2"},
                {&cu.free, "cuMemFree_v2"},
                {&cu.htod, "cuMemcpyHtoD_v2"},
                {&cu.dtoh, "cuMemcpyDtoH_v2"},
                {&cu.launch, "cuLaunchKernel"},
                {&cu.sync, "cuCtxSynchronize"}};
    int ok = h != NULL;
    for (size_t k = 0; k < sizeof syms / sizeof syms[0] && ok; k++) {
      void *f = dlsym(h, syms[k].name);
      memcpy(syms[k].slot, &f, sizeof f);
      ok = f != NULL;
    }
    int dev = 0, major = 0, minor = 0;
    ok = ok && cu.init(0) == 0 && cu.device_get(&dev, 0) == 0 &&
         cu.attribute(&major, 75, dev) == 0 && cu.attribute(&minor, 76, dev) == 0 &&
         cu.retain(&cu.ctx, dev) == 0 && cu.set_current(cu.ctx) == 0;
    cu.ok = ok;
    cu.cc = major * 10 + minor;
  }
  if (!cu.ok) printf("skipped: no CUDA device (libcuda or a GPU missing)\n");
  return cu.ok;
}

#define CU_OK(call) assert_int_equal((call), 0)

/* The values of var v of p as host bytes: an input's or a constant's. */
static void *host_value(const jx_program *p, int v, jx_array *const *inputs) {
  jx_array *a = NULL;
  for (int i = 0; i < p->nin; i++)
    if (p->in[i] == v) a = inputs[i];
  if (!a) assert_true(jx_program_is_const(p, v, &a));
  size_t n = (size_t)jx_size(a) * jx_dtype_size(jx_dtype_of(a));
  void *h = malloc(n ? n : 1);
  assert_non_null(h);
  check_ok(jx_read(a, h, n));
  return h;
}

/* Runs group g of p (rendered as kernel "k") on the GPU with grid (gx, gy)
 * of blocks of bx threads; the stores come back in out[s] (malloc'ed). */
static void run_on_gpu(const jx_program *p, const jx_fusion_group *g, jx_array *const *inputs,
                       unsigned gx, unsigned gy, unsigned bx, void **out) {
  char *src = jx_render_cuda_prelude(), *k = jx_render_cuda(p, g, "k");
  assert_non_null(src);
  assert_non_null(k);
  src = realloc(src, strlen(src) + strlen(k) + 1);
  strcat(src, k);
  free(k);
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d", cu.cc);
  jx_nvrtc_options opt = {.arch = arch};
  char *image = NULL;
  size_t n = 0;
  check_ok(jx_nvrtc_compile(src, "gpu_run.cu", &opt, &image, &n));
  free(src);
  void *mod = NULL, *fn = NULL;
  CU_OK(cu.load(&mod, image));
  free(image);
  CU_OK(cu.function(&fn, mod, "k"));
  jx_cuda_kargs a;
  memset(&a, 0, sizeof a);
  int rank = g->shape.rank > 0 ? g->shape.rank : 1;
  a.dims[0] = 1;
  for (int d = 0; d < g->shape.rank; d++) a.dims[d] = g->shape.dims[d];
  int64_t numel = jx_shape_numel(g->shape), inner = a.dims[rank - 1];
  for (int l = 0; l < g->nloads; l++) {
    int v = g->loads[l].var;
    size_t bytes = (size_t)jx_shape_numel(p->avals[v].shape) * jx_dtype_size(p->avals[v].dtype);
    void *h = host_value(p, v, inputs);
    CUdeviceptr d;
    CU_OK(cu.alloc(&d, bytes ? bytes : 1));
    CU_OK(cu.htod(d, h, bytes));
    free(h);
    a.buf[l] = (char *)(uintptr_t)d;
    memcpy(a.strides + l * JX_MAX_RANK, g->loads[l].strides, sizeof g->loads[l].strides);
  }
  for (int s = 0; s < g->nstores; s++) {
    CUdeviceptr d;
    CU_OK(cu.alloc(&d, (size_t)numel * jx_dtype_size(p->avals[g->stores[s]].dtype)));
    a.buf[g->nloads + s] = (char *)(uintptr_t)d;
  }
  int64_t row_begin = 0, row_end = numel / inner;
  void *args[] = {&a, &row_begin, &row_end};
  CU_OK(cu.launch(fn, gx, gy, 1, bx, 1, 1, 0, NULL, args, NULL));
  CU_OK(cu.sync());
  for (int s = 0; s < g->nstores; s++) {
    size_t bytes = (size_t)numel * jx_dtype_size(p->avals[g->stores[s]].dtype);
    out[s] = malloc(bytes);
    assert_non_null(out[s]);
    CU_OK(cu.dtoh(out[s], (CUdeviceptr)(uintptr_t)a.buf[g->nloads + s], bytes));
  }
  for (int b = 0; b < g->nloads + g->nstores; b++) CU_OK(cu.free((CUdeviceptr)(uintptr_t)a.buf[b]));
  CU_OK(cu.unload(mod));
}

/* Elements of got that differ from want (NaN equals NaN) beyond rel. */
static int64_t mismatches(jx_dtype dt, const void *got, const void *want, int64_t n, double rel,
                          int64_t *inexact) {
  int64_t bad = 0;
  *inexact = 0;
  for (int64_t i = 0; i < n; i++) {
    double x, y;
    if (dt == JX_F32) {
      x = ((const float *)got)[i];
      y = ((const float *)want)[i];
      *inexact += memcmp((const float *)got + i, (const float *)want + i, 4) != 0;
    } else if (dt == JX_F64) {
      x = ((const double *)got)[i];
      y = ((const double *)want)[i];
      *inexact += memcmp((const double *)got + i, (const double *)want + i, 8) != 0;
    } else {
      x = ((const uint8_t *)got)[i];
      y = ((const uint8_t *)want)[i];
      *inexact += x != y;
    }
    if (x != x && y != y) continue;
    if (x == y) continue;
    if (!(fabs(x - y) <= rel * fabs(y))) {
      if (bad < 5) fprintf(stderr, "  [%lld] gpu %.17g cpu %.17g\n", (long long)i, x, y);
      bad++;
    }
  }
  return bad;
}

/* f's jit program on the GPU, each single-kernel group checked against the
 * CPU result of f (rel 0: the same bits), with two launch shapes: a full
 * grid, and one small block that the grid-stride loops must walk across. */
static void gpu_matches_cpu(jx_fn *f, jx_program *p, const jx_fusion_group *g,
                            jx_array *const *inputs, double rel) {
  if (!have_gpu()) return;
  /* only groups that read inputs and constants and write outputs: the
   * others need the program's other steps, which is the backend's work */
  for (int l = 0; l < g->nloads; l++) {
    int v = g->loads[l].var, known = jx_program_is_const(p, v, NULL);
    for (int i = 0; i < p->nin; i++) known |= p->in[i] == v;
    if (!known) return;
  }
  for (int s = 0; s < g->nstores; s++) {
    int known = 0;
    for (int o = 0; o < p->nout; o++) known |= p->out[o] == g->stores[s];
    if (!known) return;
  }
  jx_array *want[16];
  assert_true(p->nout <= 16);
  check_ok(jx_call(f, inputs, want));
  int64_t numel = jx_shape_numel(g->shape);
  int rank = g->shape.rank > 0 ? g->shape.rank : 1;
  int64_t inner = g->shape.rank ? g->shape.dims[rank - 1] : 1, rows = numel / inner;
  const unsigned shapes[2][3] = {
      {(unsigned)((inner + 255) / 256), (unsigned)(rows < 65535 ? rows : 65535), 256}, {1, 2, 32}};
  for (int t = 0; t < 2; t++) {
    void *got[JX_FUSION_MAX_STORES];
    run_on_gpu(p, g, inputs, shapes[t][0], shapes[t][1], shapes[t][2], got);
    for (int s = 0; s < g->nstores; s++) {
      int o = 0;
      while (o < p->nout && p->out[o] != g->stores[s]) o++;
      jx_dtype dt = p->avals[g->stores[s]].dtype;
      void *h = malloc((size_t)numel * jx_dtype_size(dt));
      check_ok(jx_read(want[o], h, (size_t)numel * jx_dtype_size(dt)));
      int64_t inexact = 0, bad = mismatches(dt, got[s], h, numel, rel, &inexact);
      printf("gpu: %s output %d, launch %d: %lld of %lld elements differ in bits, %lld beyond "
             "%g\n",
             p->name, o, t, (long long)inexact, (long long)numel, (long long)bad, rel);
      assert_int_equal(bad, 0);
      free(h);
      free(got[s]);
    }
  }
  gpu_runs++;
}

/* ---- the tests ---- */

static void chain_compiles(void **state) {
  (void)state;
  jx_aval av[2] = {{JX_F32, 0, {2, {10, 100}}, 0}, {JX_F32, 0, {2, {10, 100}}, 0}};
  jx_array *in[2] = {values(JX_F32, JX_SHAPE(10, 100), 1, 3.0),
                     values(JX_F32, JX_SHAPE(10, 100), 2, 1.0)};
  rendered r = render_program("chain", chain, NULL, 2, 1, av, in, 0.0); /* the CPU's bits */
  assert_int_equal(r.nkernels, 1); /* the whole chain, as on the CPU */
  assert_true(r.nfused >= 7);
  compile_for(&r, "chain.cu", 0);
  free_rendered(&r);
}

static void broadcasts_and_scalars_compile(void **state) {
  (void)state;
  jx_aval av[3] = {
      {JX_F32, 0, {3, {4, 3, 16}}, 0}, {JX_F32, 0, {1, {16}}, 0}, {JX_F32, 0, {1, {3}}, 0}};
  jx_array *in[3] = {values(JX_F32, JX_SHAPE(4, 3, 16), 1, 4.0),
                     values(JX_F32, JX_SHAPE(16), 2, 1.0), values(JX_F32, JX_SHAPE(3), 3, 2.0)};
  rendered r = render_program("broadcasts", broadcasts, NULL, 3, 2, av, in, 0.0);
  assert_int_equal(r.nkernels, 1);
  /* rank 3: two outer dimensions unrolled with constant indices */
  assert_non_null(strstr(r.tu, "i = rem % a.dims[1];"));
  assert_non_null(strstr(r.tu, "a.strides["));
  assert_non_null(strstr(r.tu, "[0];")); /* a load broadcast along the columns */
  compile_for(&r, "broadcasts.cu", 0);
  free_rendered(&r);
}

static void selects_and_bools_compile(void **state) {
  (void)state;
  jx_aval av[2] = {{JX_F32, 0, {1, {257}}, 0}, {JX_F32, 0, {1, {257}}, 0}};
  jx_array *in[2] = {values(JX_F32, JX_SHAPE(257), 1, 3.0), values(JX_F32, JX_SHAPE(257), 2, 3.0)};
  rendered r = render_program("selects", selects, NULL, 2, 2, av, in, 0.0);
  assert_int_equal(r.nkernels, 1);
  assert_non_null(strstr(r.tu, "uint8_t"));
  compile_for(&r, "selects.cu", 0);
  free_rendered(&r);
}

static void f64_and_integer_pow_compile(void **state) {
  (void)state;
  jx_aval av[2] = {{JX_F64, 0, {2, {7, 9}}, 0}, {JX_F64, 0, {2, {7, 9}}, 0}};
  jx_array *in[2] = {values(JX_F64, JX_SHAPE(7, 9), 1, 2.0),
                     values(JX_F64, JX_SHAPE(7, 9), 2, 2.0)};
  /* f64 sin, tanh and pow are CUDA's, not glibc's: within a few ulp */
  rendered r = render_program("f64_pows", f64_pows, NULL, 2, 2, av, in, 1e-14);
  assert_true(r.nkernels >= 1);
  /* small powers are written out as products: y^-2 is 1 / (y * y) */
  assert_null(strstr(r.tu, "jx_ipow_double("));
  assert_non_null(strstr(r.tu, "((double)1 / ("));
  assert_non_null(strstr(r.tu, "const double v"));
  compile_for(&r, "f64_pows.cu", 0);
  free_rendered(&r);
}

static const char *const prim_names[JX_PRIM_COUNT] = {
#define NAME_OF(name) [JX_PRIM_##name] = #name,
    JX_PRIM_LIST(NAME_OF)
#undef NAME_OF
};

static void every_op_compiles(jx_dtype dt, const char *what) {
  jx_aval av[3] = {
      {dt, 0, {2, {5, 33}}, 0}, {dt, 0, {2, {5, 33}}, 0}, {JX_BOOL, 0, {2, {5, 33}}, 0}};
  jx_fn *f = jx_fn_create(what, 3, 2, every_op, &dt);
  jx_program *p = jx_fn_program(f, av);
  if (!p) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(p);
  jx_fusion_group g = whole_group(p);
  rendered r = {0};
  char *prelude = jx_render_cuda_prelude();
  assert_non_null(prelude);
  append(&r, prelude);
  free(prelude);
  render_group(&r, p, &g);
  /* every primitive a kernel member computes (prim_lowering.h) is there */
  for (int id = 0; id < JX_PRIM_COUNT; id++) {
    jx_lower_kind k = (jx_lower_kind)jx_prim_lowerings[id].kind;
    if (k != JX_LOWER_EXPR && k != JX_LOWER_CONVERT && k != JX_LOWER_INTEGER_POW) continue;
    /* rows of complex operands only, and complex(re, im), are every_op_complex's */
    if (k == JX_LOWER_EXPR && (!jx_lower_expr(&jx_prim_lowerings[id], dt) || id == JX_PRIM_complex))
      continue;
    int seen = 0;
    for (int j = 0; j < r.nprims; j++) seen |= r.prims[j]->id == (jx_prim_id)id;
    if (!seen) fprintf(stderr, "%s: no %s in the program\n", what, prim_names[id]);
    assert_true(seen);
  }
  jx_shape s = JX_SHAPE(5, 33);
  jx_array *in[3] = {values(dt, s, 1, 3.0), values(dt, s, 2, 2.0), values(JX_BOOL, s, 3, 1.0)};
  /* powf and the f64 functions are CUDA's own, not glibc's */
  gpu_matches_cpu(f, p, &g, in, dt == JX_F32 ? 1e-6 : 1e-14);
  jx_program_release(p);
  jx_fn_release(f);
  compile_for(&r, what, 1);
  free_rendered(&r);
}

static void every_op_f32_compiles(void **state) {
  (void)state;
  every_op_compiles(JX_F32, "every_op_f32.cu");
}

static void every_op_f64_compiles(void **state) {
  (void)state;
  every_op_compiles(JX_F64, "every_op_f64.cu");
}

/* every expression of complex operands (prim_lowering.c's c64/c128 rows),
 * converts between complex and real, integer_pow written out and through
 * the helper, select, and a row sum of it all; ctx points at the dtype */
static void every_op_complex(void *ctx, jx_array *const *in, jx_array **out) {
  jx_dtype dt = *(const jx_dtype *)ctx, part = dt == JX_C64 ? JX_F32 : JX_F64;
  jx_array *z = jx_complex(in[0], in[1]), *w = jx_complex(in[1], in[0]), *c = in[2];
  /* traced apart: the order of a call's arguments is the compiler's */
  jx_array *modulus = jx_abs(z), *real_w = jx_real(w);
  jx_array *terms[] = {jx_sub(z, w),
                       jx_mul(z, w),
                       jx_div(z, w),
                       jx_neg(z),
                       jx_exp(z),
                       jx_log(z),
                       jx_sqrt(z),
                       jx_rsqrt(w),
                       jx_tanh(z),
                       jx_sin(z),
                       jx_cos(w),
                       jx_tan(z),
                       jx_sinh(w),
                       jx_cosh(z),
                       jx_asin(z),
                       jx_acos(w),
                       jx_atan(z),
                       jx_asinh(w),
                       jx_acosh(z),
                       jx_atanh(w),
                       jx_exp2(z),
                       jx_expm1(w),
                       jx_log1p(z),
                       jx_pow(z, w),
                       jx_sign(z),
                       jx_conj(w),
                       jx_stop_gradient(w),
                       jx_integer_pow(z, 3),
                       jx_integer_pow(w, -21),
                       jx_select_n(c, 2, (jx_array *[]){z, w}),
                       jx_astype(jx_astype(z, dt == JX_C64 ? JX_C128 : JX_C64), dt),
                       jx_astype(jx_add(modulus, real_w), dt),
                       jx_astype(jx_imag(z), dt),
                       jx_astype(jx_astype(z, part), dt),
                       jx_astype(jx_astype(jx_eq(z, w), part), dt),
                       jx_astype(jx_astype(jx_ne(z, w), JX_BOOL), dt)};
  jx_array *acc = jx_add(z, w);
  for (size_t k = 0; k < sizeof terms / sizeof terms[0]; k++) acc = jx_add(acc, terms[k]);
  out[0] = jx_sum(acc, JX_AXES(1), 0);
}

static void every_op_complex_compiles(jx_dtype dt, const char *what) {
  jx_dtype part = dt == JX_C64 ? JX_F32 : JX_F64;
  jx_aval av[3] = {
      {part, 0, {2, {5, 33}}, 0}, {part, 0, {2, {5, 33}}, 0}, {JX_BOOL, 0, {2, {5, 33}}, 0}};
  jx_config_enable_x64(dt == JX_C128);
  jx_fn *f = jx_fn_create(what, 3, 1, every_op_complex, &dt);
  jx_fn *jf = jx_jit(f, NULL);
  jx_program *p = jx_fn_program(jf, av); /* simplified, as the jit fuses it */
  if (!p) fprintf(stderr, "%s\n", jx_last_error());
  assert_non_null(p);
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups), kernels = 0, k0 = -1;
  assert_true(ng >= 1);
  for (int k = 0; k < ng; k++)
    if (jx_fusion_group_is_kernel(&groups[k])) kernels++, k0 = k;
  assert_int_equal(kernels, 1); /* everything, ending in the row sum */
  assert_true(groups[k0].reduces);
  rendered r = {0};
  char *prelude = jx_render_cuda_prelude();
  assert_non_null(prelude);
  append(&r, prelude);
  free(prelude);
  render_group(&r, p, &groups[k0]);
  for (int id = 0; id < JX_PRIM_COUNT; id++) {
    if (!jx_lower_expr(&jx_prim_lowerings[id], dt) && id != JX_PRIM_complex) continue;
    int seen = 0;
    for (int j = 0; j < r.nprims; j++) seen |= r.prims[j]->id == (jx_prim_id)id;
    if (!seen) fprintf(stderr, "%s: no %s in the program\n", what, prim_names[id]);
    assert_true(seen);
  }
  assert_non_null(strstr(r.tu, dt == JX_C64 ? "const jx_c64 v" : "const jx_c128 v"));
  compile_for(&r, what, 1);
  free_rendered(&r);
  free(groups);
  jx_program_release(p);
  jx_fn_release(jf);
  jx_fn_release(f);
  jx_config_enable_x64(0);
}

static void every_op_c64_compiles(void **state) {
  (void)state;
  every_op_complex_compiles(JX_C64, "every_op_c64.cu");
}

static void every_op_c128_compiles(void **state) {
  (void)state;
  every_op_complex_compiles(JX_C128, "every_op_c128.cu");
}

/* the prelude alone: fastmath.h as __device__ functions, no headers */
static void prelude_has_no_headers(void **state) {
  (void)state;
  char *pre = jx_render_cuda_prelude();
  assert_non_null(pre);
  /* the dialect's header defines what fastmath.h's #ifndef JX_FM_FN would include */
  assert_true(strstr(pre, "#include") > strstr(pre, "#ifndef JX_FM_FN"));
  assert_true(strstr(pre, "#define JX_FM_FN") < strstr(pre, "#ifndef JX_FM_FN"));
  assert_non_null(strstr(pre, "jx_tanhf"));
  assert_non_null(strstr(pre, "typedef struct"));
  char *cpu = jx_render_c_prelude();
  assert_non_null(cpu);
  assert_non_null(strstr(cpu, "#include <math.h>"));
  assert_null(strstr(cpu, "__forceinline__"));
  free(cpu);
  if (!have_nvrtc()) {
    free(pre);
    return;
  }
  char *image = NULL;
  size_t n = 0;
  jx_status st = jx_nvrtc_compile(pre, "prelude.cu", NULL, &image, &n);
  if (st) fprintf(stderr, "%s\n", jx_last_error());
  assert_int_equal(st, JX_OK);
  assert_true(n > 0);
  free(image);
  free(pre);
}

static void broken_source_names_the_error(void **state) {
  (void)state;
  if (!have_nvrtc()) return;
  const char *src = "extern \"C\" __global__ void k(float *y) {\n"
                    "  y[0] = no_such_function(y[1]);\n"
                    "}\n";
  char *image = (char *)1;
  size_t n = 1;
  jx_status st = jx_nvrtc_compile(src, "broken.cu", NULL, &image, &n);
  assert_int_not_equal(st, JX_OK);
  assert_null(image);
  assert_int_equal(n, 0);
  const char *msg = jx_last_error();
  printf("broken source: %s\n", msg);
  assert_non_null(strstr(msg, "nvrtc: broken.cu"));
  assert_non_null(strstr(msg, "error"));
  assert_non_null(strstr(msg, "no_such_function"));
  jx_clear_error();
  /* a malformed architecture is refused before NVRTC sees it */
  jx_nvrtc_options opt = {.arch = "gfx90a"};
  st = jx_nvrtc_compile("", "empty.cu", &opt, &image, &n);
  assert_int_equal(st, JX_ERR_INVALID_ARGUMENT);
  assert_non_null(strstr(jx_last_error(), "gfx90a"));
  jx_clear_error();
  /* an architecture NVRTC does not know: its own message */
  opt.arch = "sm_1";
  st = jx_nvrtc_compile("", "empty.cu", &opt, &image, &n);
  assert_int_not_equal(st, JX_OK);
  assert_non_null(strstr(jx_last_error(), "nvrtc: empty.cu"));
  jx_clear_error();
  int major = 0, minor = -1;
  assert_int_equal(jx_nvrtc_version(&major, &minor), JX_OK);
  assert_true(major >= 11 && minor >= 0);
}

/* In a child process whose JX_NVRTC_PATH names no library: the loader says
 * so, and a compile fails with "NVRTC not found" instead of crashing. */
static void missing_library_is_reported(void **state) {
  (void)state;
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "JX_NVRTC_PATH=/nonexistent/libnvrtc.so '%s' --child-missing", self);
  int rc = system(cmd);
  assert_true(WIFEXITED(rc));
  assert_int_equal(WEXITSTATUS(rc), 0);
}

static int child_missing(void) {
  if (jx_nvrtc_available()) return 1;
  if (!strstr(jx_nvrtc_load_error(), "NVRTC not found")) return 2;
  char *image = NULL;
  size_t n = 0;
  if (jx_nvrtc_compile("", "x.cu", NULL, &image, &n) != JX_ERR_UNIMPLEMENTED) return 3;
  if (!strstr(jx_last_error(), "NVRTC not found") || image) return 4;
  int major, minor;
  if (jx_nvrtc_version(&major, &minor) == JX_OK) return 5;
  return 0;
}

static int report(void **state) {
  (void)state;
  if (jx_nvrtc_available())
    printf("NVRTC compiled %d kernels in %d images (cubins for sm_90, and for sm_80 and PTX "
           "for compute_90 of the every-primitive programs)\n",
           kernels_compiled, images_built);
  if (gpu_runs) printf("GPU: %d kernels ran and matched the CPU\n", gpu_runs);
  return 0;
}

int main(int argc, char **argv) {
  self = argv[0];
  if (argc == 2 && strcmp(argv[1], "--child-missing") == 0) {
    int rc = child_missing();
    if (rc) fprintf(stderr, "child: %d: %s\n", rc, jx_last_error());
    return rc;
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(prelude_has_no_headers, setup, teardown),
      cmocka_unit_test_setup_teardown(chain_compiles, setup, teardown),
      cmocka_unit_test_setup_teardown(broadcasts_and_scalars_compile, setup, teardown),
      cmocka_unit_test_setup_teardown(selects_and_bools_compile, setup, teardown),
      cmocka_unit_test_setup_teardown(f64_and_integer_pow_compile, setup, teardown),
      cmocka_unit_test_setup_teardown(every_op_f32_compiles, setup, teardown),
      cmocka_unit_test_setup_teardown(every_op_f64_compiles, setup, teardown),
      cmocka_unit_test_setup_teardown(every_op_c64_compiles, setup, teardown),
      cmocka_unit_test_setup_teardown(every_op_c128_compiles, setup, teardown),
      cmocka_unit_test_setup_teardown(broken_source_names_the_error, setup, teardown),
      cmocka_unit_test_setup_teardown(missing_library_is_reported, setup, teardown),
  };
  int rc = cmocka_run_group_tests(tests, NULL, report);
  jx_shutdown();
  return rc;
}
