/* Runs every case of the families named on the command line:
 *   jx_conformance DATA_DIR FAMILY...
 * and ends with "N passed, M failed". */
#include "conformance.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static const conf_op *const tables[] = {conf_ops_elementwise, conf_ops_shape,    conf_ops_indexing,
                                        conf_ops_reduce,      conf_ops_contract, conf_ops_random,
                                        conf_ops_composites};

static const char *find_kv(const conf_case *c, const char *key) {
  for (int i = 0; i < c->nkv; i++)
    if (strcmp(c->kv[i].key, key) == 0) return c->kv[i].val;
  return NULL;
}
int conf_has(const conf_case *c, const char *key) { return find_kv(c, key) != NULL; }
int64_t conf_int(const conf_case *c, const char *key, int64_t dflt) {
  const char *v = find_kv(c, key);
  return v ? strtoll(v, NULL, 10) : dflt;
}
double conf_double(const conf_case *c, const char *key, double dflt) {
  const char *v = find_kv(c, key);
  return v ? strtod(v, NULL) : dflt;
}
const char *conf_str(const conf_case *c, const char *key, const char *dflt) {
  const char *v = find_kv(c, key);
  return v ? v : dflt;
}
jx_dtype conf_dtype(const conf_case *c, const char *key, jx_dtype dflt) {
  const char *v = find_kv(c, key);
  if (!v) return dflt;
  for (int d = 0; d < JX_NUM_DTYPES; d++)
    if (strcmp(jx_dtype_name((jx_dtype)d), v) == 0) return (jx_dtype)d;
  fprintf(stderr, "%s: unknown dtype '%s'\n", c->id, v);
  return dflt;
}
static int parse_list(const char *v, int64_t *out) {
  int n = 0;
  const char *p = v + (*v == '[');
  while (*p && *p != ']' && n < JX_MAX_RANK + 1) {
    char *end;
    out[n++] = strtoll(p, &end, 10);
    p = end + (*end == ',');
    if (end == p && *p != ']') break;
  }
  return n;
}
jx_axes conf_axes(const conf_case *c, const char *key, jx_axes dflt) {
  const char *v = find_kv(c, key);
  if (!v) return dflt;
  int64_t tmp[JX_MAX_RANK + 1];
  int n = parse_list(v, tmp);
  jx_axes a = {n > JX_MAX_RANK ? -1 : n, {0}};
  for (int i = 0; i < n && i < JX_MAX_RANK; i++) a.v[i] = (int)tmp[i];
  return a;
}
jx_shape conf_shape(const conf_case *c, const char *key, jx_shape dflt) {
  const char *v = find_kv(c, key);
  if (!v) return dflt;
  int64_t tmp[JX_MAX_RANK + 1];
  int n = parse_list(v, tmp);
  jx_shape s = {n > JX_MAX_RANK ? -1 : n, {0}};
  for (int i = 0; i < n && i < JX_MAX_RANK; i++) s.dims[i] = tmp[i];
  return s;
}

conf_fn conf_lookup(const char *op) {
  for (size_t t = 0; t < sizeof tables / sizeof *tables; t++)
    for (const conf_op *o = tables[t]; o->op; o++)
      if (strcmp(o->op, op) == 0) return o->fn;
  return NULL;
}

/* JAX's default test tolerances per dtype */
static double default_tol(jx_dtype dt) {
  switch (dt) {
  case JX_F16: return 1e-3;
  case JX_BF16: return 1e-2;
  case JX_F32: return 1e-6;
  case JX_F64: return 1e-15;
  default: return 0;
  }
}

/* One element as a double, decoded here rather than by the library under test. */
static double decode(jx_dtype dt, const unsigned char *p) {
  switch (dt) {
  case JX_BOOL: return *p != 0;
  case JX_I8: return *(const int8_t *)p;
  case JX_U8: return *p;
  case JX_I16: {
    int16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  case JX_U16: {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
  }
  case JX_I32: {
    int32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  case JX_U32: {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
  }
  case JX_F16: {
    uint16_t v;
    memcpy(&v, p, 2);
    return jx_f16_to_f32(v);
  }
  case JX_BF16: {
    uint16_t v;
    memcpy(&v, p, 2);
    return jx_bf16_to_f32(v);
  }
  case JX_F32: {
    float v;
    memcpy(&v, p, 4);
    return v;
  }
  case JX_F64: {
    double v;
    memcpy(&v, p, 8);
    return v;
  }
  default: return NAN;
  }
}

int conf_compare(const conf_case *c, int k, jx_array *got, jx_array *want, double scale) {
  jx_dtype gd = jx_dtype_of(got), wd = jx_dtype_of(want);
  jx_shape gs = jx_shape_of(got), ws = jx_shape_of(want);
  if (gd != wd) {
    printf("FAIL %s (%s) out%d: dtype %s, expected %s\n", c->id, c->op, k, jx_dtype_name(gd),
           jx_dtype_name(wd));
    return 0;
  }
  int same = gs.rank == ws.rank;
  for (int i = 0; same && i < gs.rank; i++) same = gs.dims[i] == ws.dims[i];
  if (!same) {
    printf("FAIL %s (%s) out%d: shape rank %d, expected rank %d (or dims differ)\n", c->id, c->op,
           k, gs.rank, ws.rank);
    return 0;
  }
  int64_t n = jx_size(got);
  size_t es = jx_dtype_size(gd), bytes = es * (size_t)n;
  unsigned char *gb = malloc(bytes ? bytes : 1), *wb = malloc(bytes ? bytes : 1);
  int ok = 1;
  if (jx_read(got, gb, bytes) || jx_read(want, wb, bytes)) {
    printf("FAIL %s (%s) out%d: could not read: %s\n", c->id, c->op, k, jx_last_error());
    ok = 0;
  }
  double tol = default_tol(gd);
  double rtol = scale * conf_double(c, "rtol", tol), atol = scale * conf_double(c, "atol", tol);
  for (int64_t i = 0; i < n && ok; i++) {
    if (gd == JX_I64 || gd == JX_U64) { /* exact, as 64-bit integers */
      int64_t a, b;
      memcpy(&a, gb + 8 * i, 8);
      memcpy(&b, wb + 8 * i, 8);
      if (a != b) {
        printf("FAIL %s (%s) out%d[%lld]: got %lld, expected %lld\n", c->id, c->op, k, (long long)i,
               (long long)a, (long long)b);
        ok = 0;
      }
      continue;
    }
    double a = decode(gd, gb + es * (size_t)i), b = decode(gd, wb + es * (size_t)i);
    int good = (isnan(a) && isnan(b)) || a == b || fabs(a - b) <= atol + rtol * fabs(b);
    if (!good) {
      printf("FAIL %s (%s) out%d[%lld]: got %.17g, expected %.17g (rtol %g atol %g)\n", c->id,
             c->op, k, (long long)i, a, b, rtol, atol);
      ok = 0;
    }
  }
  free(gb);
  free(wb);
  return ok;
}

static int parse_line(char *line, conf_case *c) {
  memset(c, 0, sizeof *c);
  char *tok = strtok(line, " \t\n");
  if (!tok || tok[0] == '#') return 0;
  snprintf(c->id, sizeof c->id, "%s", tok);
  tok = strtok(NULL, " \t\n");
  if (!tok) return 0;
  snprintf(c->op, sizeof c->op, "%s", tok);
  while ((tok = strtok(NULL, " \t\n")) && c->nkv < CONF_MAX_KV) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = '\0';
    snprintf(c->kv[c->nkv].key, sizeof c->kv[0].key, "%s", tok);
    snprintf(c->kv[c->nkv].val, sizeof c->kv[0].val, "%s", eq + 1);
    c->nkv++;
  }
  return 1;
}

static int file_exists(const char *p) {
  FILE *f = fopen(p, "rb");
  if (f) fclose(f);
  return f != NULL;
}

static conf_result run_case(const char *dir, const conf_case *c, conf_mode mode) {
  conf_fn fn = conf_lookup(c->op);
  if (!fn) {
    printf("FAIL %s: no adapter for op '%s'\n", c->id, c->op);
    return CONF_FAIL;
  }
  char path[1400];
  jx_array *in[CONF_MAX_IO], *want[CONF_MAX_IO], *got[CONF_MAX_IO] = {0};
  int nin = 0, nwant = 0, ngot = 0;
  for (; nin < CONF_MAX_IO; nin++) {
    snprintf(path, sizeof path, "%s/%s.in%d.npy", dir, c->id, nin);
    if (!file_exists(path)) break;
    in[nin] = jx_load_npy(path);
  }
  for (; nwant < CONF_MAX_IO; nwant++) {
    snprintf(path, sizeof path, "%s/%s.out%d.npy", dir, c->id, nwant);
    if (!file_exists(path)) break;
    want[nwant] = jx_load_npy(path);
  }
  if (jx_last_status() != JX_OK) {
    printf("FAIL %s: loading goldens: %s\n", c->id, jx_last_error());
    return CONF_FAIL;
  }
  jx_status st = fn(c, nin, in, &ngot, got);
  if (st != JX_OK || jx_last_status() != JX_OK) {
    printf("FAIL %s (%s): %s\n", c->id, c->op, jx_last_error());
    return CONF_FAIL;
  }
  if (ngot != nwant) {
    printf("FAIL %s (%s): %d outputs, expected %d\n", c->id, c->op, ngot, nwant);
    return CONF_FAIL;
  }
  int ok = 1;
  for (int k = 0; k < nwant && ok; k++) ok = conf_compare(c, k, got[k], want[k], 1.0);
  if (!ok || mode == CONF_EAGER) return ok ? CONF_PASS : CONF_FAIL;
  return conf_run_mode(mode, c, fn, nin, in, nwant, want);
}

int main(int argc, char **argv) {
  conf_mode mode = CONF_EAGER;
  int first = 1;
  if (argc > 2 && strncmp(argv[1], "--mode=", 7) == 0) {
    const char *m = argv[1] + 7;
    mode = strcmp(m, "jit") == 0       ? CONF_JIT
           : strcmp(m, "vmap") == 0    ? CONF_VMAP
           : strcmp(m, "grad") == 0    ? CONF_GRAD
           : strcmp(m, "sharded") == 0 ? CONF_SHARDED
                                       : CONF_EAGER;
    first = 2;
    if (mode == CONF_SHARDED) jx_set_cpu_device_count(8);
  }
  if (argc < first + 2) {
    fprintf(stderr, "usage: %s [--mode=eager|jit|vmap|grad|sharded] DATA_DIR FAMILY...\n", argv[0]);
    return 2;
  }
  int passed = 0, failed = 0, skipped = 0;
  for (int f = first + 1; f < argc; f++) {
    char dir[1024], path[1200];
    snprintf(dir, sizeof dir, "%s/%s", argv[first], argv[f]);
    snprintf(path, sizeof path, "%s/cases.txt", dir);
    size_t len = strlen(argv[f]);
    jx_config_enable_x64(len > 4 && strcmp(argv[f] + len - 4, "_x64") == 0);
    FILE *fp = fopen(path, "r");
    if (!fp) {
      printf("FAIL %s: cannot open %s\n", argv[f], path);
      failed++;
      continue;
    }
    char line[4096];
    conf_case c;
    while (fgets(line, sizeof line, fp)) {
      if (!parse_line(line, &c)) continue;
      jx_scope_begin();
      conf_result r = run_case(dir, &c, mode);
      passed += r == CONF_PASS;
      failed += r == CONF_FAIL;
      skipped += r == CONF_SKIP;
      jx_clear_error();
      jx_scope_end();
    }
    fclose(fp);
  }
  printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
  jx_shutdown();
  return failed ? 1 : 0;
}
