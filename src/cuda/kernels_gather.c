/* The gather kernel's source and plan (kernels_gather.h). */
#include "kernels_gather.h"

#include <math.h>
#include <string.h>

#include "../compile/render_cuda.h"
#include "../prims/prim_id.h"

_Static_assert(sizeof(jx_cuda_gather_args) ==
                   32 + 5 * 8 * JX_MAX_RANK + 3 * 4 * JX_MAX_RANK + 48 + 8 + 24 + 32,
               "jx_cuda_gather_args has padding");
_Static_assert(sizeof(jx_cuda_gather_args) <= sizeof(((jx_cuda_kargs *)0)->strides),
               "jx_cuda_gather_args does not fit in the kernel arguments' strides");

const char jx_cuda_gather_src[] =
    "typedef struct {\n"
    "  const char *operand, *indices;\n"
    "  char *out;\n"
    "  long long n;\n"
    "  long long out_dims[8], op_dims[8], op_strides[8], idx_dims[8], slice_sizes[8];\n"
    "  int win_of[8], is_offset[8], start_map[8];\n"
    "  int out_rank, op_rank, idx_rank, nstart;\n"
    "  int index_vector_dim, index_bytes, index_unsigned, elem_bytes;\n"
    "  int fill, kind;\n"
    "  unsigned long long fill_bits;\n"
    "  int phase, unused_;\n"
    "  long long updates, row_elems, table_rows;\n"
    "  int *rows, *ranks, *starts, *perm;\n"
    "} jx_cuda_gather_args;\n"
    /* an integer of `bytes` bytes at p as int64 (unsigned values above
     * INT64_MAX saturate: out of range either way) */
    "static __device__ long long jx_gather_int(const char *p, int bytes, int uns) {\n"
    "  if (uns) {\n"
    "    unsigned long long u = bytes == 1   ? *(const unsigned char *)p\n"
    "                           : bytes == 2 ? *(const unsigned short *)p\n"
    "                           : bytes == 4 ? *(const unsigned int *)p\n"
    "                                        : *(const unsigned long long *)p;\n"
    "    return u > 0x7fffffffffffffffull ? 0x7fffffffffffffffll : (long long)u;\n"
    "  }\n"
    "  return bytes == 1   ? *(const signed char *)p\n"
    "         : bytes == 2 ? *(const short *)p\n"
    "         : bytes == 4 ? *(const int *)p\n"
    "                      : *(const long long *)p;\n"
    "}\n"
    "static __device__ void jx_gather_copy(char *to, const char *from, int bytes) {\n"
    "  switch (bytes) {\n"
    "  case 1: *to = *from; break;\n"
    "  case 2: *(unsigned short *)to = *(const unsigned short *)from; break;\n"
    "  case 4: *(unsigned int *)to = *(const unsigned int *)from; break;\n"
    "  default: *(unsigned long long *)to = *(const unsigned long long *)from; break;\n"
    "  }\n"
    "}\n"
    /* scatter-add of f32 (kind 5): thread w owns element w of the update
     * window (out_dims are the updates' dims, is_offset their window dims)
     * and adds the windows' element w in the updates' row-major order, as
     * the host does; each start dim is an inserted (size 1) window dim, so
     * no two threads write one element. A window that does not fit is
     * dropped, or clamped in clip mode (fill). Each add is in double,
     * rounded once, as the host combines. */
    "static __device__ void jx_scatter_add_one(const jx_cuda_gather_args &a, long long j,\n"
    "                                           long long u) {\n"
    "  if (a.elem_bytes == 2) { /* bf16: the exact sum rounded once (the prelude's rounding) */\n"
    "    unsigned short *o = (unsigned short *)a.out + j;\n"
    "    const unsigned short ub = ((const unsigned short *)a.operand)[u];\n"
    "    *o = jx_f32_bf16((float)((double)jx_bf16_f32(*o) + (double)jx_bf16_f32(ub)));\n"
    "    return;\n"
    "  }\n"
    "  float *o = (float *)a.out + j;\n"
    "  *o = (float)((double)*o + (double)((const float *)a.operand)[u]);\n"
    "}\n"
    "static __device__ void jx_scatter_add_window(const jx_cuda_gather_args &a, long long w) {\n"
    "  long long wi[8], g[8], start[8], nb = 1, rem = w;\n"
    "  for (int d = a.out_rank - 1; d >= 0; d--)\n"
    "    if (a.is_offset[d]) {\n"
    "      wi[d] = rem % a.out_dims[d];\n"
    "      rem /= a.out_dims[d];\n"
    "    } else {\n"
    "      nb *= a.out_dims[d];\n"
    "    }\n"
    "  for (long long b = 0; b < nb; b++) {\n"
    "    rem = b;\n"
    "    int nbd = 0;\n"
    "    for (int d = 0; d < a.out_rank; d++) nbd += !a.is_offset[d];\n"
    "    for (int d = a.out_rank - 1, k = nbd - 1; d >= 0; d--)\n"
    "      if (!a.is_offset[d]) {\n"
    "        g[k--] = rem % a.out_dims[d];\n"
    "        rem /= a.out_dims[d];\n"
    "      }\n"
    "    for (int d = 0; d < a.op_rank; d++) start[d] = 0;\n"
    "    for (int k = 0; k < a.nstart; k++) {\n"
    "      long long flat = 0;\n"
    "      for (int d = 0, c = 0; d < a.idx_rank; d++)\n"
    "        flat = flat * a.idx_dims[d] + (d == a.index_vector_dim ? k : g[c++]);\n"
    "      start[a.start_map[k]] =\n"
    "          jx_gather_int(a.indices + flat * a.index_bytes, a.index_bytes, a.index_unsigned);\n"
    "    }\n"
    "    int skip = 0;\n"
    "    long long j = 0, u = 0;\n"
    "    for (int d = 0; d < a.op_rank; d++) {\n"
    "      const long long hi = a.op_dims[d] - a.slice_sizes[d];\n"
    "      if (hi < 0) skip = 1;\n"
    "      if (start[d] < 0 || start[d] > hi) {\n"
    "        if (!a.fill) skip = 1;\n"
    "        start[d] = start[d] < 0 || hi < 0 ? 0 : hi;\n"
    "      }\n"
    "      j += (start[d] + (a.win_of[d] >= 0 ? wi[a.win_of[d]] : 0)) * a.op_strides[d];\n"
    "    }\n"
    "    if (skip) continue;\n"
    "    for (int d = 0, c = 0; d < a.out_rank; d++)\n"
    "      u = u * a.out_dims[d] + (a.is_offset[d] ? wi[d] : g[c++]);\n"
    "    jx_scatter_add_one(a, j, u);\n"
    "  }\n"
    "}\n"
    /* kind 6, one phase a launch (kernels_gather.h) */
    "static __device__ void jx_scatter_rows(const jx_cuda_gather_args &a) {\n"
    "  const long long first = (long long)blockIdx.x * blockDim.x + threadIdx.x,\n"
    "                  step = (long long)gridDim.x * blockDim.x;\n"
    "  if (a.phase == 0) {\n"
    "    for (long long i = first; i < a.updates; i += step) {\n"
    "      long long r = jx_gather_int(a.indices + i * a.index_bytes, a.index_bytes,\n"
    "                                  a.index_unsigned);\n"
    "      if (r < 0 || r >= a.table_rows) r = a.fill ? (r < 0 ? 0 : a.table_rows - 1) : -1;\n"
    "      a.rows[i] = (int)r;\n"
    "      if (r >= 0) atomicAdd((unsigned *)&a.starts[r], 1u);\n"
    "    }\n"
    "  } else if (a.phase == 1) {\n"
    "    for (long long i = first; i < a.updates; i += step) {\n"
    "      const int r = a.rows[i];\n"
    "      int k = 0;\n"
    "      for (long long e = 0; r >= 0 && e < i; e++) k += a.rows[e] == r;\n"
    "      a.ranks[i] = k;\n"
    "    }\n"
    "  } else if (a.phase == 2) { /* one block: a chunk a thread, its sum, then the sums' */\n"
    "    __shared__ int sums[256];\n"
    "    const long long n = a.table_rows, per = (n + blockDim.x - 1) / blockDim.x;\n"
    "    const long long lo = threadIdx.x * per, hi = lo + per < n ? lo + per : n;\n"
    "    int s = 0;\n"
    "    for (long long r = lo; r < hi; r++) s += a.starts[r];\n"
    "    sums[threadIdx.x] = s;\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x == 0) {\n"
    "      int run = 0;\n"
    "      for (unsigned t = 0; t < blockDim.x; t++) {\n"
    "        const int c = sums[t];\n"
    "        sums[t] = run;\n"
    "        run += c;\n"
    "      }\n"
    "      a.starts[n] = run;\n"
    "    }\n"
    "    __syncthreads();\n"
    "    int run = sums[threadIdx.x];\n"
    "    for (long long r = lo; r < hi; r++) {\n"
    "      const int c = a.starts[r];\n"
    "      a.starts[r] = run;\n"
    "      run += c;\n"
    "    }\n"
    "  } else if (a.phase == 3) {\n"
    "    for (long long i = first; i < a.updates; i += step)\n"
    "      if (a.rows[i] >= 0) a.perm[a.starts[a.rows[i]] + a.ranks[i]] = (int)i;\n"
    "  } else {\n"
    "    const long long total = a.starts[a.table_rows];\n"
    "    for (long long t = first; t < total * a.row_elems; t += step) {\n"
    "      const long long p = t / a.row_elems, w = t - p * a.row_elems;\n"
    "      const int r = a.rows[a.perm[p]];\n"
    "      if (p != a.starts[r]) continue; /* the row's first update adds them all */\n"
    "      for (long long q = p; q < a.starts[r + 1]; q++)\n"
    "        jx_scatter_add_one(a, (long long)r * a.row_elems + w,\n"
    "                           (long long)a.perm[q] * a.row_elems + w);\n"
    "    }\n"
    "  }\n"
    "}\n"
    /* the executor's step signature (render_cuda.h): the description in the
     * bytes of ka.strides; a dynamic slice's scalar starts at ka.buf[d] */
    "extern \"C\" __global__ void jx_cuda_step_gather(const jx_cuda_kargs ka, int64_t row_begin,\n"
    "                                                int64_t row_end) {\n"
    "  const jx_cuda_gather_args &a = *(const jx_cuda_gather_args *)ka.strides;\n"
    "  if (a.kind == 6) {\n"
    "    jx_scatter_rows(a);\n"
    "    return;\n"
    "  }\n"
    "  for (long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; i < a.n;\n"
    "       i += (long long)gridDim.x * blockDim.x) {\n"
    "    long long oi[8], g[8], start[8], rem = i;\n"
    "    for (int d = a.out_rank - 1; d >= 0; d--) {\n"
    "      oi[d] = a.out_dims[d] ? rem % a.out_dims[d] : 0;\n"
    "      rem = a.out_dims[d] ? rem / a.out_dims[d] : 0;\n"
    "    }\n"
    "    if (a.kind == 5) {\n"
    "      jx_scatter_add_window(a, i);\n"
    "      continue;\n"
    "    }\n"
    "    if (a.kind >= 3) { /* a slice: starts and steps fixed; a reshape: the same order */\n"
    "      long long j = a.kind == 4 ? i : 0;\n"
    "      for (int d = 0; a.kind == 3 && d < a.op_rank; d++)\n"
    "        j += (a.idx_dims[d] + oi[d] * a.slice_sizes[d]) * a.op_strides[d];\n"
    "      jx_gather_copy(a.out + i * a.elem_bytes, a.operand + j * a.elem_bytes, a.elem_bytes);\n"
    "      continue;\n"
    "    }\n"
    "    for (int d = 0; d < a.op_rank; d++) start[d] = 0;\n"
    "    if (a.kind == 0) {\n"
    "      for (int d = 0, b = 0; d < a.out_rank; d++)\n"
    "        if (!a.is_offset[d]) g[b++] = oi[d];\n"
    "      for (int k = 0; k < a.nstart; k++) {\n"
    "        long long flat = 0;\n"
    "        for (int d = 0, b = 0; d < a.idx_rank; d++)\n"
    "          flat = flat * a.idx_dims[d] + (d == a.index_vector_dim ? k : g[b++]);\n"
    "        start[a.start_map[k]] =\n"
    "            jx_gather_int(a.indices + flat * a.index_bytes, a.index_bytes, "
    "a.index_unsigned);\n"
    "      }\n"
    "    } else {\n"
    "      for (int d = 0; d < a.op_rank; d++) {\n"
    "        const int b = a.start_map[d];\n"
    "        start[d] = jx_gather_int(ka.buf[d], b < 0 ? -b : b, b < 0);\n"
    "      }\n"
    "    }\n"
    "    int oob = 0, inside = 1;\n"
    "    long long j = 0, u = 0;\n"
    "    for (int d = 0; d < a.op_rank; d++) {\n"
    "      const long long hi = a.op_dims[d] - a.slice_sizes[d];\n"
    "      if (hi < 0) oob = 1;\n"
    "      if (start[d] < 0 || start[d] > hi) {\n"
    "        oob = 1;\n"
    "        start[d] = start[d] < 0 || hi < 0 ? 0 : hi;\n"
    "      }\n"
    "      j += (start[d] + (a.win_of[d] >= 0 ? oi[a.win_of[d]] : 0)) * a.op_strides[d];\n"
    "      const long long w = oi[d] - start[d];\n"
    "      inside = inside && w >= 0 && w < a.slice_sizes[d];\n"
    "      u = u * a.slice_sizes[d] + w;\n"
    "    }\n"
    "    const char *from = a.kind == 2 ? (inside ? a.indices + u * a.elem_bytes\n"
    "                                             : a.operand + i * a.elem_bytes)\n"
    "                       : a.fill && oob ? (const char *)&a.fill_bits\n"
    "                                       : a.operand + j * a.elem_bytes;\n"
    "    jx_gather_copy(a.out + i * a.elem_bytes, from, a.elem_bytes);\n"
    "  }\n"
    "}\n";

static int contains(const jx_ilist *l, int64_t v) {
  for (int i = 0; i < l->n; i++)
    if (l->v[i] == v) return 1;
  return 0;
}

/* gather.c's store_fill, as bits */
static uint64_t fill_bits(jx_dtype dt) {
  uint64_t b = 0;
  if (dt == JX_F32) {
    float f = NAN;
    memcpy(&b, &f, 4);
  } else if (dt == JX_F64) {
    double f = NAN;
    memcpy(&b, &f, 8);
  } else if (dt == JX_BF16 || dt == JX_F16) {
    b = dt == JX_BF16 ? 0x7fc0 : 0x7e00;
  } else if (jx_is_signed_int(dt)) {
    b = 1ull << (jx_dtype_bits(dt) - 1);
  } else {
    b = dt == JX_BOOL ? 1 : ~0ull;
  }
  return b;
}

/* The element's dtype: 1, 2, 4 or 8 bytes, copied as bits (complex: not
 * here). */
static int copyable(jx_dtype dt) {
  size_t es = jx_dtype_size(dt);
  return (es == 1 || es == 2 || es == 4 || es == 8) && dt != JX_C64;
}

/* dynamic_slice (kind 1) and dynamic_update_slice (kind 2): the scalar
 * starts are inputs [first, first + rank); a window of slice_sizes (the
 * output's shape, or the update's) clamped into the operand. */
static int plan_dynamic(const jx_program *p, const jx_eqn *e, int kind, jx_cuda_gather_args *a) {
  const int first = kind == 1 ? 1 : 2;
  const jx_aval *op = &p->avals[e->in[0]], *out = &p->avals[e->out[0]];
  const jx_aval *win = kind == 1 ? out : &p->avals[e->in[1]];
  if (e->nout != 1 || e->nin != first + op->shape.rank || !copyable(op->dtype)) return -1;
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->n = jx_shape_numel(out->shape);
  a->out_rank = out->shape.rank;
  a->op_rank = op->shape.rank;
  a->elem_bytes = (int32_t)jx_dtype_size(op->dtype);
  jx_shape_strides(op->shape, a->op_strides);
  for (int d = 0; d < op->shape.rank; d++) {
    const jx_aval *s = &p->avals[e->in[first + d]];
    if (!jx_is_int(s->dtype) || s->shape.rank != 0) return -1;
    int32_t bytes = (int32_t)jx_dtype_size(s->dtype);
    a->start_map[d] = jx_is_unsigned_int(s->dtype) ? -bytes : bytes;
    a->out_dims[d] = out->shape.dims[d];
    a->op_dims[d] = op->shape.dims[d];
    a->slice_sizes[d] = win->shape.dims[d];
    a->win_of[d] = kind == 1 ? d : -1;
  }
  return 0;
}

/* slice (kind 3: idx_dims the starts, slice_sizes the steps) and reshape
 * (kind 4: a row-major array keeps its elements' order) */
static int plan_static(const jx_program *p, const jx_eqn *e, int kind, jx_cuda_gather_args *a) {
  const jx_aval *op = &p->avals[e->in[0]], *out = &p->avals[e->out[0]];
  if (e->nin != 1 || e->nout != 1 || !copyable(op->dtype)) return -1;
  memset(a, 0, sizeof *a);
  a->kind = kind;
  a->n = jx_shape_numel(out->shape);
  a->out_rank = out->shape.rank;
  a->op_rank = kind == 3 ? op->shape.rank : 0;
  a->elem_bytes = (int32_t)jx_dtype_size(op->dtype);
  jx_shape_strides(op->shape, a->op_strides);
  for (int d = 0; d < out->shape.rank; d++) a->out_dims[d] = out->shape.dims[d];
  for (int d = 0; kind == 3 && d < op->shape.rank; d++) {
    a->idx_dims[d] = e->params.l[0].v[d];
    a->slice_sizes[d] = e->params.l[2].n ? e->params.l[2].v[d] : 1;
  }
  return 0;
}

/* Kind 6 where kind 5's scatter_add adds whole rows: one start dim, the
 * operand's first and inserted; the window the operand's other dims whole,
 * as the updates' trailing dims; one index per update, in the updates'
 * row-major order (the index vector dim last and of size 1, or implicit). */
static void plan_scatter_rows(jx_cuda_gather_args *a, const jx_aval *up) {
  const int batch = a->out_rank - (a->op_rank - 1);
  if (a->nstart != 1 || a->start_map[0] != 0 || a->win_of[0] != -1 || batch < 0) return;
  int64_t updates = 1, row = 1;
  for (int d = 0; d < a->out_rank; d++) {
    if (a->is_offset[d] != (d >= batch)) return;
    if (d < batch) updates *= up->shape.dims[d];
  }
  for (int d = 1; d < a->op_rank; d++) {
    if (a->win_of[d] != batch + d - 1 || a->slice_sizes[d] != a->op_dims[d]) return;
    row *= a->op_dims[d];
  }
  int vec = a->index_vector_dim < a->idx_rank; /* an explicit index vector dim */
  if (vec && (a->index_vector_dim != a->idx_rank - 1 || a->idx_dims[a->idx_rank - 1] != 1)) return;
  if (a->idx_rank - vec != batch) return;
  for (int d = 0; d < batch; d++)
    if (a->idx_dims[d] != up->shape.dims[d]) return;
  if (updates > JX_CUDA_SCATTER_ROWS_MAX_UPDATES || a->op_dims[0] >= INT32_MAX || row == 0) return;
  a->kind = 6;
  a->updates = updates;
  a->row_elems = row;
  a->table_rows = a->op_dims[0];
}

/* scatter_add of f32 or bf16 (kind 5) whose start dims are all inserted window dims:
 * out_dims the updates' shape, is_offset their window dims, win_of operand
 * dim -> updates dim (-1 inserted), slice_sizes the windows' sizes, fill
 * the clip mode; n the threads: a window's elements. */
static int plan_scatter_add(const jx_program *p, const jx_eqn *e, jx_cuda_gather_args *a) {
  if (e->nin != 3 || e->nout != 1) return -1;
  const jx_aval *op = &p->avals[e->in[0]], *idx = &p->avals[e->in[1]], *up = &p->avals[e->in[2]];
  const jx_params *pr = &e->params;
  const jx_ilist *uwd = &pr->l[0], *ins = &pr->l[1], *sdo = &pr->l[2];
  if ((op->dtype != JX_F32 && op->dtype != JX_BF16) || up->dtype != op->dtype ||
      !jx_is_int(idx->dtype))
    return -1;
  for (int k = 0; k < sdo->n; k++)
    if (!contains(ins, sdo->v[k])) return -1; /* windows could overlap: two threads, one element */
  memset(a, 0, sizeof *a);
  a->kind = 5;
  a->out_rank = up->shape.rank;
  a->op_rank = op->shape.rank;
  a->idx_rank = idx->shape.rank;
  a->nstart = sdo->n;
  a->index_vector_dim = (int32_t)pr->i[0];
  a->index_bytes = (int32_t)jx_dtype_size(idx->dtype);
  a->index_unsigned = jx_is_unsigned_int(idx->dtype);
  a->elem_bytes = (int32_t)jx_dtype_size(op->dtype);
  a->fill = pr->i[1] == 1;
  a->n = 1;
  for (int d = 0; d < up->shape.rank; d++) {
    a->out_dims[d] = up->shape.dims[d];
    a->is_offset[d] = contains(uwd, d);
    if (a->is_offset[d]) a->n *= up->shape.dims[d];
  }
  jx_shape_strides(op->shape, a->op_strides);
  for (int d = 0, k = 0; d < op->shape.rank; d++) {
    a->op_dims[d] = op->shape.dims[d];
    a->win_of[d] = contains(ins, d) ? -1 : (int32_t)uwd->v[k++];
    a->slice_sizes[d] = a->win_of[d] < 0 ? 1 : up->shape.dims[a->win_of[d]];
  }
  for (int d = 0; d < idx->shape.rank; d++) a->idx_dims[d] = idx->shape.dims[d];
  for (int k = 0; k < sdo->n; k++) a->start_map[k] = (int32_t)sdo->v[k];
  plan_scatter_rows(a, up);
  return 0;
}

int jx_cuda_gather_plan(const jx_program *p, const jx_eqn *e, jx_cuda_gather_args *a) {
  if (e->prim->id == JX_PRIM_scatter_add) return plan_scatter_add(p, e, a);
  if (e->prim->id == JX_PRIM_slice) return plan_static(p, e, 3, a);
  if (e->prim->id == JX_PRIM_reshape || e->prim->id == JX_PRIM_squeeze ||
      e->prim->id == JX_PRIM_expand_dims)
    return plan_static(p, e, 4, a);
  if (e->prim->id == JX_PRIM_dynamic_slice) return plan_dynamic(p, e, 1, a);
  if (e->prim->id == JX_PRIM_dynamic_update_slice) return plan_dynamic(p, e, 2, a);
  if (e->prim->id != JX_PRIM_gather || e->nin != 2 || e->nout != 1) return -1;
  const jx_aval *op = &p->avals[e->in[0]], *idx = &p->avals[e->in[1]], *out = &p->avals[e->out[0]];
  const jx_params *pr = &e->params;
  const jx_ilist *offs = &pr->l[0], *coll = &pr->l[1], *sim = &pr->l[2], *ss = &pr->l[3];
  if (!copyable(op->dtype) || !jx_is_int(idx->dtype) || ss->n != op->shape.rank) return -1;
  size_t es = jx_dtype_size(op->dtype);
  memset(a, 0, sizeof *a);
  a->n = jx_shape_numel(out->shape);
  a->out_rank = out->shape.rank;
  a->op_rank = op->shape.rank;
  a->idx_rank = idx->shape.rank;
  a->nstart = sim->n;
  a->index_vector_dim = (int32_t)pr->i[0];
  a->index_bytes = (int32_t)jx_dtype_size(idx->dtype);
  a->index_unsigned = jx_is_unsigned_int(idx->dtype);
  a->elem_bytes = (int32_t)es;
  a->fill = pr->i[1] == 1;
  a->fill_bits = fill_bits(op->dtype);
  for (int d = 0; d < out->shape.rank; d++) {
    a->out_dims[d] = out->shape.dims[d];
    a->is_offset[d] = contains(offs, d);
  }
  jx_shape_strides(op->shape, a->op_strides);
  for (int d = 0, k = 0; d < op->shape.rank; d++) {
    a->op_dims[d] = op->shape.dims[d];
    a->slice_sizes[d] = ss->v[d];
    a->win_of[d] = contains(coll, d) ? -1 : (int32_t)offs->v[k++];
  }
  for (int d = 0; d < idx->shape.rank; d++) a->idx_dims[d] = idx->shape.dims[d];
  for (int k = 0; k < sim->n; k++) a->start_map[k] = (int32_t)sim->v[k];
  return 0;
}
