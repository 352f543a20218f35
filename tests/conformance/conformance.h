/* The conformance suite: every case in tests/golden/data/<family>/cases.txt
 * names an op and its parameters; its inputs and expected outputs are .npy
 * files written by tests/golden/gen_<family>.py from JAX/NumPy. Each op name
 * maps to a small adapter (ops_<family>.c) that calls the public API.
 *
 * cases.txt, one case a line:  <id> <op> [key=value ...]
 *   values: 3  -1.5  [0,2,-1]  f32  max   (no spaces inside a value)
 *   rtol=/atol= override the dtype's default tolerance for that case.
 * files: <id>.in0.npy, <id>.in1.npy, ... and <id>.out0.npy, ...
 * A family whose name ends in _x64 holds x64 JAX's results and runs with
 * jx_config_enable_x64(1); the others run in the default mode. */
#ifndef JX_TESTS_CONFORMANCE_H
#define JX_TESTS_CONFORMANCE_H

#include <jx/jx.h>

#define CONF_MAX_KV 24
#define CONF_MAX_IO 16

typedef struct {
  char id[128], op[64];
  int nkv;
  struct {
    char key[32];
    char val[256];
  } kv[CONF_MAX_KV];
} conf_case;

int conf_has(const conf_case *c, const char *key);
int64_t conf_int(const conf_case *c, const char *key, int64_t dflt);
double conf_double(const conf_case *c, const char *key, double dflt);
const char *conf_str(const conf_case *c, const char *key, const char *dflt);
jx_dtype conf_dtype(const conf_case *c, const char *key, jx_dtype dflt);
jx_axes conf_axes(const conf_case *c, const char *key, jx_axes dflt);    /* "[0,1]" */
jx_shape conf_shape(const conf_case *c, const char *key, jx_shape dflt); /* "[2,3]" */

/* An adapter: computes the op's outputs from its inputs; sets *nout. */
typedef jx_status (*conf_fn)(const conf_case *c, int nin, jx_array *const *in, int *nout,
                             jx_array **out);
typedef struct {
  const char *op;
  conf_fn fn;
} conf_op;

/* One table per family, each ending with {NULL, NULL}; conformance.c joins them. */
extern const conf_op conf_ops_elementwise[], conf_ops_shape[], conf_ops_indexing[],
    conf_ops_reduce[], conf_ops_contract[], conf_ops_random[], conf_ops_composites[];

/* How a case is run: eagerly against the goldens, and optionally also under
 * jit (same goldens), vmap (against a loop over the batch) or grad (numerical
 * derivative checks). */
typedef enum { CONF_EAGER, CONF_JIT, CONF_VMAP, CONF_GRAD, CONF_SHARDED } conf_mode;
typedef enum { CONF_PASS, CONF_FAIL, CONF_SKIP } conf_result;

conf_fn conf_lookup(const char *op);
/* 1 when got equals want within the case's tolerance times scale. */
int conf_compare(const conf_case *c, int k, jx_array *got, jx_array *want, double scale);
/* An adapter as a jx_fn body (ctx: a conf_adapter): the case's op applied
 * to the function's inputs (modes.c). */
typedef struct {
  conf_fn fn;
  const conf_case *c;
  int nin, nout;
} conf_adapter;
void conf_adapter_body(void *ctx, jx_array *const *in, jx_array **out);

/* Runs a case that passed eagerly under a transformation (modes.c). */
conf_result conf_run_mode(conf_mode mode, const conf_case *c, conf_fn fn, int nin,
                          jx_array *const *in, int nout, jx_array *const *want);

/* The sharded jit of a case, several layouts on 2-8 devices, and of its
 * vjp (sharded.c). */
conf_result conf_run_sharded(const conf_case *c, conf_fn fn, int nin, jx_array *const *in, int nout,
                             jx_array *const *want);

/* Adapters that return one array. */
#define CONF_ONE(name, expr)                                                                       \
  static jx_status name(const conf_case *c, int nin, jx_array *const *in, int *nout,               \
                        jx_array **out) {                                                          \
    (void)c;                                                                                       \
    (void)nin;                                                                                     \
    (void)in;                                                                                      \
    *nout = 1;                                                                                     \
    out[0] = (expr);                                                                               \
    return jx_last_status();                                                                       \
  }

#endif
