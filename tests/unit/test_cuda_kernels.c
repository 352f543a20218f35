/* Every kernel the conformance suite's jit mode builds, in the CUDA dialect,
 * checked without a GPU. For each case of each family under
 * tests/golden/data, the adapter is traced as jx_jit traces it (the traced
 * program, simplified), fused, and every group that runs as a kernel is
 * rendered in the CUDA dialect; the distinct kernels of a family (kernels
 * are generic in the shape: many cases differ only there) make one
 * translation unit after the prelude. Then:
 *  - NVRTC compiles the unit for sm_90 (to PTX: its front end and
 *    optimizer, where a CUDA C++ error would show; test_render_cuda builds
 *    cubins for a few); skipped, with a message, without libnvrtc;
 *  - the CUDA emulator (tests/cuda_emu) runs every kernel of every case on
 *    the values the program gives its loads (the program evaluated eagerly,
 *    equation by equation) over grids of several blocks in both dimensions,
 *    so that the grid-stride loops take turns, and each stored value must
 *    equal the eager evaluation's bit for bit (a NaN equals any NaN: its sign
 *    and payload depend on operand order, and a GPU's NaN is canonical);
 *    skipped, with a message, where no C++ compiler is found.
 * Nested programs (the bodies of scan/while/cond) are not visited. */
#define _GNU_SOURCE                     /* memmem */
#define main        jx_conformance_main /* the runner's helpers, not its main */
#include "conformance/conformance.c"
#undef main

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <cmocka.h>
#include <dirent.h>
#include <time.h>

#include "compile/fusion.h"
#include "cuda/nvrtc.h"
#include "compile/render_cuda.h"
#include "compile/simplify.h"
#include "cuda_emu/cuda_emu_runner.h"
#include "cuda_emu/step_launch.h"
#include "ir/program.h"
#include "prims/prim.h"
#include "trace/dispatch.h"
#include "trace/fn.h"
#include "test_util.h"

/* One kernel of one case: its group, the host values of its loads, and the
 * eager evaluation's values of its stores. */
typedef struct {
  char name[40], label[200];
  jx_fusion_group g;
  void *in[JX_FUSION_MAX_LOADS];
  void *want[JX_FUSION_MAX_STORES];
  size_t store_bytes[JX_FUSION_MAX_STORES];
  int64_t store_numel[JX_FUSION_MAX_STORES];
  jx_dtype store_dtype[JX_FUSION_MAX_STORES];
  int64_t dims[JX_MAX_RANK], rows, inner;
} kernel_case;

typedef struct {
  char *cuda_tu; /* the prelude and the distinct kernels */
  size_t cuda_len;
  kernel_case *k;
  int n, cap;
  int cases, traced;
  int row_reductions, col_reductions; /* kernels that end in a reduction */
  char **unique;                      /* the distinct kernels' sources (named "K") */
  int nunique;
} family;

/* totals over every family, for the summary line */
static int total_kernels, total_distinct, total_nvrtc, total_emulated, total_equal;
static int nan_bits; /* elements that are NaNs of another sign or payload */

static void append(char **tu, size_t *len, const char *s) {
  size_t n = strlen(s);
  *tu = realloc(*tu, *len + n + 1);
  assert_non_null(*tu);
  memcpy(*tu + *len, s, n + 1);
  *len += n;
}

static void *host_copy(jx_array *a, size_t *bytes) {
  size_t n = (size_t)jx_size(a) * jx_dtype_size(jx_dtype_of(a));
  void *h = malloc(n ? n : 1);
  assert_non_null(h);
  check_ok(jx_read(a, h, n));
  if (bytes) *bytes = n;
  return h;
}

/* p evaluated equation by equation, eagerly: env[v] for every variable. */
static int evaluate(const jx_program *p, jx_array *const *in, jx_array **env) {
  for (int i = 0; i < p->nin; i++) env[p->in[i]] = in[i];
  for (int c = 0; c < p->nconst; c++) env[p->constvar[c]] = p->constval[c];
  for (int k = 0; k < p->neqns; k++) {
    const jx_eqn *e = &p->eqns[k];
    jx_array *ins[64], *outs[64];
    if (e->nin > 64 || e->nout > 64) return -1;
    for (int i = 0; i < e->nin; i++) ins[i] = env[e->in[i]];
    if (jx_bind_sub(e->prim, e->nin, ins, &e->params, e->nsub, e->sub, outs)) return -1;
    for (int o = 0; o < e->nout; o++) env[e->out[o]] = outs[o];
  }
  return 0;
}

/* Renders p's kernels into the family's units and keeps their values. */
static void add_program(family *f, const jx_program *p, jx_array *const *in, const char *label) {
  jx_fusion_group *groups = NULL;
  int ng = jx_fuse(p, &groups);
  if (ng < 0) fprintf(stderr, "%s: %s\n", label, jx_last_error());
  assert_true(ng >= 0);
  int any = 0;
  for (int k = 0; k < ng; k++) any |= jx_fusion_group_is_kernel(&groups[k]);
  jx_array **env = any ? calloc((size_t)p->nvars + 1, sizeof *env) : NULL;
  if (any && evaluate(p, in, env)) {
    fprintf(stderr, "%s: evaluating its program: %s\n", label, jx_last_error());
    fail();
  }
  for (int k = 0; k < ng; k++) {
    const jx_fusion_group *g = &groups[k];
    if (!jx_fusion_group_is_kernel(g)) continue;
    if (f->n == f->cap) {
      f->cap = f->cap ? 2 * f->cap : 64;
      f->k = realloc(f->k, (size_t)f->cap * sizeof *f->k);
      assert_non_null(f->k);
    }
    kernel_case *kc = &f->k[f->n];
    memset(kc, 0, sizeof *kc);
    snprintf(kc->label, sizeof kc->label, "%s group %d", label, k);
    kc->g = *g;
    f->row_reductions += g->reduces && !g->lead;
    f->col_reductions += g->reduces && g->lead;
    char *src = jx_render_cuda(p, g, "K");
    if (!src) fprintf(stderr, "%s: %s\n", kc->label, jx_last_error());
    assert_non_null(src);
    int u = 0;
    while (u < f->nunique && strcmp(f->unique[u], src)) u++;
    if (u == f->nunique) {
      f->unique = realloc(f->unique, (size_t)(u + 1) * sizeof *f->unique);
      assert_non_null(f->unique);
      f->unique[f->nunique++] = src;
      char name[32];
      snprintf(name, sizeof name, "jx_kernel_%d", u);
      char *named = jx_render_cuda(p, g, name);
      assert_non_null(named);
      append(&f->cuda_tu, &f->cuda_len, named);
      free(named);
    } else {
      free(src);
    }
    snprintf(kc->name, sizeof kc->name, "jx_kernel_%d", u);
    for (int l = 0; l < g->nloads; l++) kc->in[l] = host_copy(env[g->loads[l].var], NULL);
    for (int s = 0; s < g->nstores; s++) {
      kc->want[s] = host_copy(env[g->stores[s]], &kc->store_bytes[s]);
      kc->store_numel[s] = jx_size(env[g->stores[s]]);
      kc->store_dtype[s] = p->avals[g->stores[s]].dtype;
    }
    int rank = g->shape.rank > 0 ? g->shape.rank : 1;
    kc->dims[0] = 1;
    for (int d = 0; d < g->shape.rank; d++) kc->dims[d] = g->shape.dims[d];
    kc->inner = kc->dims[rank - 1];
    kc->rows = jx_fusion_kernel_rows(g); /* a column reduction's: the kept dims' */
    f->n++;
  }
  free(env);
  free(groups);
}

/* One case: its inputs from the goldens, its adapter traced as jx_jit
 * traces it. Cases whose adapter reads its inputs on the host do not trace. */
static void add_case(family *f, const char *dir, const conf_case *c) {
  conf_fn fn = conf_lookup(c->op);
  assert_non_null(fn);
  char path[1400];
  jx_array *in[CONF_MAX_IO];
  jx_aval av[CONF_MAX_IO];
  int nin = 0, nout = 0;
  for (; nin < CONF_MAX_IO; nin++) {
    snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, c->id, nin);
    if (!file_exists(path)) break;
    in[nin] = jx_load_npy(path);
    av[nin] = (jx_aval){jx_dtype_of(in[nin]), 0, jx_shape_of(in[nin]), 0};
  }
  for (; nout < CONF_MAX_IO; nout++) {
    snprintf(path, sizeof path, "%s/%s.out%d.npy", dir, c->id, nout);
    if (!file_exists(path)) break;
  }
  check_ok(jx_last_status());
  f->cases++;
  conf_adapter a = {fn, c, nin, nout};
  jx_fn *body = jx_fn_create(c->op, nin, nout, conf_adapter_body, &a);
  jx_program *traced = jx_fn_program(body, av);
  jx_program *p = traced ? jx_simplify(traced) : NULL;
  if (p) {
    f->traced++;
    add_program(f, p, in, c->id);
  }
  jx_clear_error(); /* an adapter that reads its inputs on the host: not jitted */
  if (p) jx_program_release(p);
  if (traced) jx_program_release(traced);
  jx_fn_release(body);
}

/* 1 when the element of dtype dt at a is a NaN (any sign and payload). */
static int is_nan(jx_dtype dt, const unsigned char *a) {
  uint64_t u = 0;
  if (dt == JX_F32) {
    memcpy(&u, a, 4);
    return (u & 0x7fffffffu) > 0x7f800000u;
  }
  if (dt == JX_BF16) {
    memcpy(&u, a, 2);
    return (u & 0x7fffu) > 0x7f80u;
  }
  if (dt == JX_F64) {
    memcpy(&u, a, 8);
    return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
  }
  return 0;
}

/* -1 when store s of got and want hold the same bits, else the first
 * element that differs. A NaN equals any NaN: its sign and payload depend
 * on the order in which a compiler put a commutative operation's operands
 * (x86 keeps the first NaN's, a GPU gives the canonical NaN); counted in
 * *nan_bits. */
static int64_t first_difference(const kernel_case *kc, int s, const void *got, const void *want,
                                int *nan_bits) {
  const size_t es = jx_dtype_size(kc->store_dtype[s]);
  const unsigned char *a = got, *b = want;
  for (int64_t i = 0; i < kc->store_numel[s]; i++, a += es, b += es) {
    if (!memcmp(a, b, es)) continue;
    if (is_nan(kc->store_dtype[s], a) && is_nan(kc->store_dtype[s], b)) {
      (*nan_bits)++;
      continue;
    }
    unsigned long long x = 0, y = 0;
    memcpy(&x, a, es < 8 ? es : 8);
    memcpy(&y, b, es < 8 ? es : 8);
    fprintf(stderr, "%s: store %d element %lld: 0x%llx, not 0x%llx\n", kc->label, s, (long long)i,
            x, y);
    return i;
  }
  return -1;
}

/* Runs one kernel in the emulator; 1 when every store equals the eager
 * evaluation's. */
static int check_kernel(cuda_emu_module *m, const kernel_case *kc) {
  const jx_fusion_group *g = &kc->g;
  cuda_emu_step_args fa;
  memset(&fa, 0, sizeof fa);
  for (int l = 0; l < g->nloads; l++) {
    fa.a.buf[l] = kc->in[l];
    memcpy(fa.a.strides + l * JX_MAX_RANK, g->loads[l].strides, sizeof g->loads[l].strides);
  }
  memcpy(fa.a.dims, kc->dims, sizeof kc->dims);
  void *got[JX_FUSION_MAX_STORES];
  for (int s = 0; s < g->nstores; s++) {
    got[s] = calloc(1, kc->store_bytes[s] ? kc->store_bytes[s] : 1);
    assert_non_null(got[s]);
    fa.a.buf[g->nloads + s] = got[s];
  }
  /* two grids: blocks of 32 threads, up to 2 along the columns and 3 along
   * the rows; and one block of 3 threads, so that the grid-stride loops
   * take several turns even on the conformance suite's small shapes */
  int64_t gx = (kc->inner + 31) / 32, gy = kc->rows;
  const cuda_emu_dim3 grids[3] = {{(unsigned)(gx < 1   ? 1
                                              : gx > 2 ? 2
                                                       : gx),
                                   (unsigned)(gy < 1   ? 1
                                              : gy > 3 ? 3
                                                       : gy),
                                   1},
                                  {1, 1, 1},
                                  {1, 1, 1}};
  /* and a column reduction also as the executor launches it: tiles of 32
   * columns by 8 row groups (256 threads) */
  const cuda_emu_dim3 blocks[3] = {{32, 1, 1}, {3, 1, 1}, {256, 1, 1}};
  fa.row_begin = 0;
  fa.row_end = kc->rows;
  void *kernel = cuda_emu_kernel(m, kc->name);
  assert_non_null(kernel);
  int same = 1;
  for (int t = 0; t < (g->reduces && g->lead ? 3 : 2); t++) {
    for (int s = 0; s < g->nstores; s++) memset(got[s], 0xff, kc->store_bytes[s]);
    assert_int_equal(cuda_emu_launch_step(m, kernel, grids[t], blocks[t], &fa), 0);
    for (int s = 0; s < g->nstores; s++)
      if (first_difference(kc, s, got[s], kc->want[s], &nan_bits) >= 0) {
        same = 0;
        fprintf(stderr, "%s (%s, grid %d): store %d differs from the eager evaluation's\n",
                kc->label, kc->name, t, s);
      }
  }
  for (int s = 0; s < g->nstores; s++) free(got[s]);
  return same;
}

static void free_family(family *f) {
  for (int k = 0; k < f->n; k++) {
    for (int l = 0; l < f->k[k].g.nloads; l++) free(f->k[k].in[l]);
    for (int s = 0; s < f->k[k].g.nstores; s++) free(f->k[k].want[s]);
  }
  for (int u = 0; u < f->nunique; u++) free(f->unique[u]);
  free(f->unique);
  free(f->k);
  free(f->cuda_tu);
}

static double seconds(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void check_family(const char *name) {
  double t0 = seconds();
  char dir[1024], path[1200];
  snprintf(dir, sizeof dir, "%s/%s", JX_TEST_DATA, name);
  snprintf(path, sizeof path, "%s/cases.txt", dir);
  FILE *fp = fopen(path, "r");
  assert_non_null(fp);
  size_t len = strlen(name); /* a *_x64 family holds x64 JAX's results (conformance.h) */
  jx_config_enable_x64(len > 4 && strcmp(name + len - 4, "_x64") == 0);
  family f;
  memset(&f, 0, sizeof f);
  char *prelude = jx_render_cuda_prelude();
  append(&f.cuda_tu, &f.cuda_len, prelude);
  free(prelude);
  char line[4096];
  conf_case c;
  while (fgets(line, sizeof line, fp)) {
    if (!parse_line(line, &c)) continue;
    jx_scope_begin();
    add_case(&f, dir, &c);
    jx_scope_end();
  }
  fclose(fp);
  printf("%s: %d cases, %d traced, %d kernels (%d distinct; %d end in a row reduction, %d in "
         "a column reduction) in %.1f s\n",
         name, f.cases, f.traced, f.n, f.nunique, f.row_reductions, f.col_reductions,
         seconds() - t0);
  t0 = seconds();
  total_kernels += f.n;
  total_distinct += f.nunique;
  if (f.n == 0) {
    free_family(&f);
    return;
  }
  if (jx_nvrtc_available()) {
    jx_nvrtc_options opt = {.arch = "sm_90", .output = JX_NVRTC_PTX};
    char *image = NULL;
    size_t n = 0;
    jx_status st = jx_nvrtc_compile(f.cuda_tu, name, &opt, &image, &n);
    if (st) fprintf(stderr, "%s\n", jx_last_error());
    assert_int_equal(st, JX_OK);
    for (int u = 0; u < f.nunique; u++) { /* every kernel is an entry of the image */
      char entry[64];
      snprintf(entry, sizeof entry, ".entry jx_kernel_%d(", u);
      assert_non_null(memmem(image, n, entry, strlen(entry)));
    }
    free(image);
    total_nvrtc += f.nunique;
    printf("%s: NVRTC compiled the %d distinct kernels for sm_90 (PTX) in %.1f s\n", name,
           f.nunique, seconds() - t0);
    t0 = seconds();
  } else {
    printf("skipped: NVRTC not found (%s)\n", jx_nvrtc_load_error());
  }
  if (cuda_emu_available()) {
    char log[4096];
    cuda_emu_module *m = cuda_emu_compile(f.cuda_tu, name, log, sizeof log);
    if (!m) fprintf(stderr, "%s\n", log);

    assert_non_null(m);
    int equal = 0;
    for (int k = 0; k < f.n; k++) equal += check_kernel(m, &f.k[k]);
    cuda_emu_unload(m);
    printf("%s: emulated %d kernels in %.1f s: %d equal to the eager evaluation in bits\n", name,
           f.n, seconds() - t0, equal);
    total_emulated += f.n;
    total_equal += equal;
    assert_int_equal(equal, f.n);
  } else {
    printf("skipped: CUDA emulation (%s)\n", cuda_emu_missing());
  }
  free_family(&f);
}

#define FAMILY_TEST(fam)                                                                           \
  static void fam##_kernels(void **state) {                                                        \
    (void)state;                                                                                   \
    check_family(#fam);                                                                            \
  }
FAMILY_TEST(elementwise)
FAMILY_TEST(reduce)
FAMILY_TEST(shape)
FAMILY_TEST(indexing)
FAMILY_TEST(contract)
FAMILY_TEST(random)
FAMILY_TEST(random_x64)
FAMILY_TEST(composites)

/* Every family with goldens is one of the tests above. */
static void every_family_is_covered(void **state) {
  (void)state;
  const char *known[] = {"elementwise", "reduce", "shape",      "indexing",
                         "contract",    "random", "random_x64", "composites"};
  DIR *d = opendir(JX_TEST_DATA);
  assert_non_null(d);
  struct dirent *e;
  while ((e = readdir(d))) {
    char path[1400];
    snprintf(path, sizeof path, "%s/%s/cases.txt", JX_TEST_DATA, e->d_name);
    if (!file_exists(path)) continue;
    int found = 0;
    for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
      found |= strcmp(known[k], e->d_name) == 0;
    if (!found) fprintf(stderr, "family %s has no test here\n", e->d_name);
    assert_true(found);
  }
  closedir(d);
  printf("in all: %d kernels, %d distinct; NVRTC compiled %d; emulated %d, %d equal to the "
         "eager evaluation in bits (%d elements NaNs of another sign or payload)\n",
         total_kernels, total_distinct, total_nvrtc, total_emulated, total_equal, nan_bits);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(elementwise_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(reduce_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(shape_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(indexing_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(contract_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(random_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(random_x64_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(composites_kernels, setup, teardown),
      cmocka_unit_test_setup_teardown(every_family_is_covered, setup, teardown),
  };
  int failed = cmocka_run_group_tests(tests, NULL, NULL);
  jx_shutdown();
  return failed;
}
