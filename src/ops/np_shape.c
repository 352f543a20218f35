/* jax.numpy's rearrangements: split, array_split, tile, repeat, roll,
 * moveaxis, swapaxes, diff and jnp.pad's modes other than "constant", each
 * built from slices, concatenations, broadcasts, transposes and gathers as
 * jax.numpy builds it (static shifts and counts, as JAX needs them under
 * jit). */
#include <stdlib.h>

#include "ops_util.h"

static char *str(jx_array *a, char *buf) { return jx_aval_str(a->dtype, a->shape, buf); }

static jx_status split_checked(const char *op, jx_array *a, int nidx, const int64_t *idx, int ax,
                               jx_array **out) {
  int64_t size = a->shape.dims[ax], prev = 0;
  for (int i = 0; i < nidx; i++) {
    if (idx[i] < prev || idx[i] > size) {
      char s[JX_AVAL_STR_CAP];
      return jx_error_set(JX_ERR_INVALID_ARGUMENT,
                          "%s: split index %d (%lld) of axis %d of %s is out of order or "
                          "outside [%lld, %lld]",
                          op, i, (long long)idx[i], ax, str(a, s), (long long)prev,
                          (long long)size);
    }
    prev = idx[i];
  }
  prev = 0;
  for (int i = 0; i <= nidx; i++) {
    int64_t stop = i < nidx ? idx[i] : size;
    out[i] = jx_ops_slice_axis(a, ax, prev, stop, 1);
    prev = stop;
  }
  return jx_check_inputs(op, nidx + 1, out);
}

/* the checks every split makes; *ax receives the normalized axis */
static jx_status split_prologue(const char *op, jx_array *a, int nout, int axis, jx_array **out,
                                int *ax) {
  if (!out) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: out is NULL", op);
  for (int i = 0; i < nout; i++) out[i] = jx_poison();
  jx_status st = jx_check_inputs(op, 1, &a);
  if (st) return st;
  if (a->shape.rank == 0) {
    char s[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE, "%s: cannot split the 0-d array %s", op, str(a, s));
  }
  *ax = jx_normalize_axis(axis, a->shape.rank, op);
  return *ax < 0 ? JX_ERR_INVALID_ARGUMENT : JX_OK;
}

static jx_status sections(const char *op, jx_array *a, int n, int axis, int even, jx_array **out) {
  if (n < 1) return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d sections (must be >= 1)", op, n);
  int ax;
  jx_status st = split_prologue(op, a, n, axis, out, &ax);
  if (st) return st;
  int64_t size = a->shape.dims[ax], part = size / n, longer = size % n;
  if (even && longer) {
    char s[JX_AVAL_STR_CAP];
    return jx_error_set(JX_ERR_SHAPE,
                        "%s: axis %d of %s (size %lld) does not split into %d equal sections", op,
                        ax, str(a, s), (long long)size, n);
  }
  int64_t *idx = malloc(sizeof *idx * (size_t)n);
  if (!idx) return jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
  for (int64_t i = 1, at = 0; i < n; i++) idx[i - 1] = at += part + (i <= longer);
  st = split_checked(op, a, n - 1, idx, ax, out);
  free(idx);
  return st;
}

jx_status jx_split_sections(jx_array *a, int n, int axis, jx_array **out) {
  return sections("jx_split", a, n, axis, 1, out);
}

jx_status jx_array_split(jx_array *a, int n, int axis, jx_array **out) {
  return sections("jx_array_split", a, n, axis, 0, out);
}

jx_status jx_split_at(jx_array *a, int n, const int64_t *idx, int axis, jx_array **out) {
  const char *op = "jx_split_at";
  if (n < 0 || (n > 0 && !idx))
    return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d indices at %p", op, n, (void *)idx);
  int ax;
  jx_status st = split_prologue(op, a, n + 1, axis, out, &ax);
  return st ? st : split_checked(op, a, n, idx, ax, out);
}

/* a with each element along axis ax repeated `times` times in place (or the whole axis tiled
 * when tile is set): a size-1 axis inserted next to ax, broadcast, merged */
static jx_array *stretch_axis(jx_array *a, int ax, int64_t times, int tile) {
  jx_shape s = a->shape, big = {a->shape.rank + 1, {0}};
  int at = tile ? ax : ax + 1;
  for (int d = 0, k = 0; d < big.rank; d++) big.dims[d] = d == at ? times : s.dims[k++];
  jx_axes keep = {s.rank, {0}};
  for (int d = 0, k = 0; d < big.rank; d++)
    if (d != at) keep.v[k++] = d;
  jx_array *x = jx_broadcast_in_dim(a, big, keep);
  s.dims[ax] *= times;
  return jx_reshape(x, s);
}

jx_array *jx_tile(jx_array *a, jx_shape reps) {
  const char *op = "jx_tile";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  char s[JX_AVAL_STR_CAP];
  if (reps.rank < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: too many repetitions", op);
    return jx_poison();
  }
  int r = reps.rank > a->shape.rank ? reps.rank : a->shape.rank;
  if (r + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: tiling %s to rank %d is not supported (at most %d)", op,
                 str(a, s), r, JX_MAX_RANK - 1);
    return jx_poison();
  }
  jx_shape s1 = {r, {0}};
  for (int d = 0; d < r; d++) {
    int k = d - (r - a->shape.rank);
    s1.dims[d] = k >= 0 ? a->shape.dims[k] : 1;
  }
  jx_array *x = jx_reshape(a, s1);
  for (int d = 0; d < r; d++) {
    int k = d - (r - reps.rank);
    int64_t times = k >= 0 ? reps.dims[k] : 1;
    if (times < 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: repetition %lld for axis %d is negative", op,
                   (long long)times, d);
      return jx_poison();
    }
    if (times != 1) x = stretch_axis(x, d, times, 1);
  }
  return x;
}

/* a flattened (axis JX_NONE) or a with axis normalized into *ax */
static jx_array *axis_or_flat(const char *op, jx_array *a, int axis, int *ax) {
  if (axis == JX_NONE) {
    *ax = 0;
    return jx_reshape(a, JX_SHAPE(-1));
  }
  *ax = jx_normalize_axis(axis, a->shape.rank, op);
  return *ax < 0 ? NULL : a;
}

jx_array *jx_repeat(jx_array *a, int64_t repeats, int axis) {
  const char *op = "jx_repeat";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (repeats < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: repeats %lld is negative", op, (long long)repeats);
    return jx_poison();
  }
  int ax;
  jx_array *x = axis_or_flat(op, a, axis, &ax);
  if (!x) return jx_poison();
  if (x->shape.rank + 1 > JX_MAX_RANK) {
    jx_error_set(JX_ERR_UNIMPLEMENTED, "%s: arrays of rank %d are not supported", op,
                 x->shape.rank);
    return jx_poison();
  }
  return stretch_axis(x, ax, repeats, 0);
}

jx_array *jx_repeat_counts(jx_array *a, int n, const int64_t *repeats, int axis) {
  const char *op = "jx_repeat_counts";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int ax;
  jx_array *x = axis_or_flat(op, a, axis, &ax);
  if (!x) return jx_poison();
  char s[JX_AVAL_STR_CAP];
  if (n != x->shape.dims[ax] || (n > 0 && !repeats)) {
    jx_error_set(JX_ERR_SHAPE, "%s: %d repeat counts for axis %d of %s (size %lld)", op, n, ax,
                 str(x, s), (long long)x->shape.dims[ax]);
    return jx_poison();
  }
  int64_t total = 0;
  for (int i = 0; i < n; i++) {
    if (repeats[i] < 0) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: repeat count %d is negative (%lld)", op, i,
                   (long long)repeats[i]);
      return jx_poison();
    }
    total += repeats[i];
  }
  if (total > INT32_MAX) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %lld repetitions in all is too many", op,
                 (long long)total);
    return jx_poison();
  }
  int32_t *idx = malloc(sizeof *idx * (size_t)(total ? total : 1));
  if (!idx) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "%s: out of memory", op);
    return jx_poison();
  }
  for (int64_t i = 0, k = 0; i < n; i++)
    for (int64_t j = 0; j < repeats[i]; j++) idx[k++] = (int32_t)i;
  jx_array *ix = jx_array_from(JX_I32, JX_SHAPE(total), idx);
  free(idx);
  return jx_take(x, ix, ax);
}

jx_array *jx_roll(jx_array *a, int64_t shift, int axis) {
  const char *op = "jx_roll";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int ax;
  jx_array *x = axis_or_flat(op, a, axis, &ax);
  if (!x) return jx_poison();
  int64_t n = x->shape.dims[ax];
  if (n > 0) {
    int64_t i = ((-shift) % n + n) % n;
    x = jx_concatenate(
        2, (jx_array *[]){jx_ops_slice_axis(x, ax, i, n, 1), jx_ops_slice_axis(x, ax, 0, i, 1)},
        ax);
  }
  return axis == JX_NONE ? jx_reshape(x, a->shape) : x;
}

jx_array *jx_roll_axes(jx_array *a, int n, const int64_t *shifts, const int *axes) {
  const char *op = "jx_roll_axes";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  if (n < 0 || (n > 0 && (!shifts || !axes))) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: %d shifts and axes (or a NULL list)", op, n);
    return jx_poison();
  }
  jx_array *x = a;
  for (int i = 0; i < n && !x->poisoned; i++) { /* an axis named twice rolls by the sum */
    if (axes[i] == JX_NONE) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: axes[%d] is JX_NONE; jx_roll rolls the flattened array", op, i);
      return jx_poison();
    }
    int ax = jx_normalize_axis(axes[i], a->shape.rank, op);
    if (ax < 0) return jx_poison();
    x = jx_roll(x, shifts[i], ax);
  }
  return x;
}

jx_array *jx_moveaxis(jx_array *a, jx_axes source, jx_axes destination) {
  const char *op = "jx_moveaxis";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int r = a->shape.rank;
  if (source.n < 0 || source.n != destination.n) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: source and destination must have one length, got %d and %d", op, source.n,
                 destination.n);
    return jx_poison();
  }
  int src[JX_MAX_RANK], dst[JX_MAX_RANK], used_src[JX_MAX_RANK] = {0}, used_dst[JX_MAX_RANK] = {0};
  for (int i = 0; i < source.n; i++) {
    src[i] = jx_normalize_axis(source.v[i], r, op);
    dst[i] = src[i] < 0 ? -1 : jx_normalize_axis(destination.v[i], r, op);
    if (dst[i] < 0) return jx_poison();
    if (used_src[src[i]]++ || used_dst[dst[i]]++) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: repeated axis in %s (%d)", op,
                   used_src[src[i]] > 1 ? "source" : "destination",
                   used_src[src[i]] > 1 ? source.v[i] : destination.v[i]);
      return jx_poison();
    }
  }
  jx_axes perm = {r, {0}};
  int at = 0;
  for (int d = 0; d < r; d++) { /* destination slots get their source, the rest keep order */
    int moved = -1;
    for (int i = 0; i < source.n; i++)
      if (dst[i] == d) moved = src[i];
    if (moved >= 0) {
      perm.v[d] = moved;
      continue;
    }
    while (used_src[at]) at++;
    perm.v[d] = at++;
  }
  return jx_transpose(a, perm);
}

jx_array *jx_swapaxes(jx_array *a, int axis1, int axis2) {
  const char *op = "jx_swapaxes";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int r = a->shape.rank;
  int x = jx_normalize_axis(axis1, r, op), y = x < 0 ? -1 : jx_normalize_axis(axis2, r, op);
  if (y < 0) return jx_poison();
  jx_axes perm = {r, {0}};
  for (int d = 0; d < r; d++) perm.v[d] = d == x ? y : d == y ? x : d;
  return jx_transpose(a, perm);
}

/* jnp.diff's prepend/append e along axis ax of x: a scalar becomes one slice of x's shape */
static jx_array *diff_edge(jx_array *e, jx_array *x, int ax, jx_dtype dt, int weak) {
  if (e->shape.rank == 0) {
    jx_shape s = x->shape;
    s.dims[ax] = 1;
    e = jx_broadcast_to(e, s);
  }
  return jx_ops_convert(e, dt, weak);
}

static jx_array *diff(const char *op, jx_array *a, int n, int axis, jx_array *prepend,
                      jx_array *append) {
  if (jx_check_inputs(op, 1, &a) || (prepend && jx_check_inputs(op, 1, &prepend)) ||
      (append && jx_check_inputs(op, 1, &append)))
    return jx_poison();
  char s[JX_AVAL_STR_CAP];
  if (n < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: order %d must be >= 0", op, n);
    return jx_poison();
  }
  if (a->shape.rank == 0) {
    jx_error_set(JX_ERR_SHAPE, "%s: needs at least a 1-D array, got %s", op, str(a, s));
    return jx_poison();
  }
  int ax = jx_normalize_axis(axis, a->shape.rank, op);
  if (ax < 0) return jx_poison();
  jx_array *x = a;
  if (prepend || append) { /* concatenated first, in their common dtype */
    int weak = a->weak;
    jx_dtype dt = a->dtype;
    jx_array *edges[2] = {prepend, append}, *parts[3];
    static const char *const names[2] = {"prepend", "append"};
    for (int i = 0; i < 2; i++) {
      if (!edges[i]) continue;
      jx_shape es = edges[i]->shape, want = a->shape;
      want.dims[ax] = es.rank ? es.dims[ax] : 1;
      if (es.rank && !jx_shape_equal(es, want)) {
        char se[JX_AVAL_STR_CAP];
        jx_error_set(JX_ERR_SHAPE, "%s: %s %s must be a scalar or match a %s but on axis %d", op,
                     names[i], str(edges[i], se), str(a, s), ax);
        return jx_poison();
      }
      dt = jx_promote_weak(dt, weak, edges[i]->dtype, edges[i]->weak, &weak);
    }
    int k = 0;
    if (prepend) parts[k++] = diff_edge(prepend, a, ax, dt, weak);
    parts[k++] = jx_ops_convert(a, dt, weak);
    if (append) parts[k++] = diff_edge(append, a, ax, dt, weak);
    x = jx_concatenate(k, parts, ax);
  }
  int is_bool = x->dtype == JX_BOOL;
  for (int k = 0; k < n; k++) {
    int64_t len = x->shape.dims[ax];
    jx_array *hi = jx_ops_slice_axis(x, ax, len < 1 ? len : 1, len, 1);
    jx_array *lo = jx_ops_slice_axis(x, ax, 0, len < 1 ? 0 : len - 1, 1);
    x = is_bool ? jx_ne(hi, lo) : jx_sub(hi, lo);
  }
  return x;
}

jx_array *jx_diff(jx_array *a, int n, int axis) { return diff("jx_diff", a, n, axis, NULL, NULL); }

jx_array *jx_diff_with(jx_array *a, int n, int axis, jx_array *prepend, jx_array *append) {
  return diff("jx_diff_with", a, n, axis, prepend, append);
}

/* ---- jnp.pad modes ---- */

static jx_array *cat3(jx_array *x, jx_array *y, jx_array *z, int ax) {
  return jx_concatenate(3, (jx_array *[]){x, y, z}, ax);
}

/* `times` copies of the one-wide slice e along ax */
static jx_array *widen(jx_array *e, int ax, int64_t times) {
  jx_shape s = e->shape;
  s.dims[ax] = times;
  return jx_broadcast_to(e, s);
}

static jx_array *pad_edge(jx_array *a, int ax, int64_t lo, int64_t hi) {
  int64_t n = a->shape.dims[ax];
  return cat3(widen(jx_ops_slice_axis(a, ax, 0, 1, 1), ax, lo), a,
              widen(jx_ops_slice_axis(a, ax, n - 1, n, 1), ax, hi), ax);
}

static jx_array *pad_wrap(jx_array *a, int ax, int64_t lo, int64_t hi) {
  int64_t n = a->shape.dims[ax];
  int64_t copies = lo / n + hi / n + 1, parts = copies + 2, k = 0;
  jx_array **p = malloc(sizeof *p * (size_t)parts);
  if (!p) {
    jx_error_set(JX_ERR_OUT_OF_MEMORY, "jx_pad_mode: out of memory");
    return jx_poison();
  }
  if (lo % n) p[k++] = jx_ops_slice_axis(a, ax, n - lo % n, n, 1);
  for (int64_t i = 0; i < copies; i++) p[k++] = a;
  if (hi % n) p[k++] = jx_ops_slice_axis(a, ax, 0, hi % n, 1);
  jx_array *r = jx_concatenate((int)k, p, ax);
  free(p);
  return r;
}

/* NumPy's reflection, repeated while the padding is wider than the axis: "reflect" leaves the
 * edge out of each mirror image, "symmetric" repeats it; the odd reflection mirrors through the
 * edge value too (2 * edge - x), each image through the outermost value so far */
static jx_array *pad_mirror(jx_array *a, int ax, int64_t lo, int64_t hi, int symmetric, int odd) {
  int64_t n = a->shape.dims[ax];
  int offset = !symmetric && n > 1;
  for (int before = 1; before >= 0; before--) {
    int64_t left = before ? lo : hi, len = a->shape.dims[ax];
    jx_array *edge =
        before ? jx_ops_slice_axis(a, ax, 0, 1, 1) : jx_ops_slice_axis(a, ax, len - 1, len, 1);
    while (left > 0) {
      int64_t cur = left < n - offset ? left : n - offset;
      len = a->shape.dims[ax];
      left -= cur;
      jx_array *x = before ? jx_ops_slice_axis(a, ax, offset, offset + cur, 1)
                           : jx_ops_slice_axis(a, ax, len - cur - offset, len - offset, 1);
      x = jx_flip(x, JX_AXES(ax));
      if (odd) {
        x = jx_sub(jx_add(edge, edge), x);
        if (n > 1)
          edge = before ? jx_ops_slice_axis(x, ax, 0, 1, 1)
                        : jx_ops_slice_axis(x, ax, cur - 1, cur, 1);
      }
      a = jx_concatenate(2, before ? (jx_array *[]){x, a} : (jx_array *[]){a, x}, ax);
    }
  }
  return a;
}

/* linspace from value to the edge (endpoint excluded), in a's dtype (integers floored) */
static jx_array *ramp(jx_array *a, jx_array *edge, int ax, int64_t num, double value) {
  jx_dtype ct = jx_to_inexact(a->dtype);
  jx_array *stop = jx_squeeze(jx_ops_convert(edge, ct, 0), JX_AXES(ax));
  jx_array *r = jx_linspace(jx_full(ct, JX_SHAPE(), value), stop, num, 0, ax);
  if (jx_is_int(a->dtype)) r = jx_floor(r);
  return jx_ops_convert(r, a->dtype, a->weak);
}

static jx_array *pad_ramp(jx_array *a, int ax, int64_t lo, int64_t hi, double value) {
  int64_t n = a->shape.dims[ax];
  jx_array *before = ramp(a, jx_ops_slice_axis(a, ax, 0, 1, 1), ax, lo, value);
  jx_array *after = ramp(a, jx_ops_slice_axis(a, ax, n - 1, n, 1), ax, hi, value);
  return cat3(before, a, jx_flip(after, JX_AXES(ax)), ax);
}

/* the statistic of jnp.pad's mode over the slice x of ax (kept), rounded back for integers */
static jx_array *pad_stat_of(jx_array *x, int ax, int stat) {
  jx_array *r;
  switch (stat) {
  case 0: r = jx_max(x, JX_AXES(ax), 1); break;
  case 1: r = jx_min(x, JX_AXES(ax), 1); break;
  case 2: r = jx_mean(x, JX_AXES(ax), 1); break;
  default: r = jx_median(x, JX_AXES(ax), 1); break;
  }
  if (jx_is_int(x->dtype)) r = jx_round(r);
  return jx_ops_convert(r, x->dtype, x->weak);
}

/* jnp.pad's statistic modes along ax: the statistic of the first stat_lo (0: all) elements
 * repeated before, of the last stat_hi after */
static jx_array *pad_stat(jx_array *a, int ax, int64_t lo, int64_t hi, int stat, int64_t stat_lo,
                          int64_t stat_hi) {
  int64_t n = a->shape.dims[ax];
  int64_t sl = stat_lo && stat_lo < n ? stat_lo : n, sh = stat_hi && stat_hi < n ? stat_hi : n;
  jx_array *before = pad_stat_of(jx_ops_slice_axis(a, ax, 0, sl, 1), ax, stat);
  jx_array *after = pad_stat_of(jx_ops_slice_axis(a, ax, n - sh, n, 1), ax, stat);
  return cat3(widen(before, ax, lo), a, widen(after, ax, hi), ax);
}

static const char *const pad_modes[] = {"constant", "edge",        "reflect", "symmetric",
                                        "wrap",     "linear_ramp", "empty"};
static const char *const pad_stat_modes[] = {"maximum", "minimum", "mean", "median"};

static int pad_mode_index(const char *mode) {
  for (int i = 0; mode && i < 7; i++)
    if (!strcmp(mode, pad_modes[i])) return i;
  return -1;
}

/* mode m of pad_modes; odd: reflect and symmetric mirror through the edge */
/* one non-negative width before and after per axis of a */
static jx_status check_pad_widths(const char *op, jx_array *a, jx_shape lo, jx_shape hi) {
  char s[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (lo.rank != r || hi.rank != r)
    return jx_error_set(JX_ERR_SHAPE, "%s: %s needs %d widths before and after, got %d and %d", op,
                        str(a, s), r, lo.rank, hi.rank);
  for (int d = 0; d < r; d++)
    if (lo.dims[d] < 0 || hi.dims[d] < 0)
      return jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: negative padding (%lld, %lld) on axis %d",
                          op, (long long)lo.dims[d], (long long)hi.dims[d], d);
  return JX_OK;
}

static jx_array *pad_mode(const char *op, jx_array *a, jx_shape lo, jx_shape hi, int m,
                          double value, int odd) {
  char s[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  if (check_pad_widths(op, a, lo, hi)) return jx_poison();
  if (m == 0 || m == 6) return jx_pad(a, lo, hi, m == 0 ? value : 0); /* JAX's empty: zeros */
  jx_array *x = a;
  for (int d = 0; d < r && !x->poisoned; d++) {
    int64_t l = lo.dims[d], h = hi.dims[d];
    if (l == 0 && h == 0) continue;
    if (x->shape.dims[d] == 0) {
      jx_error_set(JX_ERR_SHAPE, "%s: cannot pad the empty axis %d of %s in mode \"%s\"", op, d,
                   str(a, s), pad_modes[m]);
      return jx_poison();
    }
    switch (m) {
    case 1: x = pad_edge(x, d, l, h); break;
    case 2: x = pad_mirror(x, d, l, h, 0, odd); break;
    case 3: x = pad_mirror(x, d, l, h, 1, odd); break;
    case 4: x = pad_wrap(x, d, l, h); break;
    default: x = pad_ramp(x, d, l, h, value); break;
    }
  }
  return x;
}

jx_array *jx_pad_mode(jx_array *a, jx_shape lo, jx_shape hi, const char *mode, double value) {
  const char *op = "jx_pad_mode";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int m = pad_mode_index(mode);
  if (m < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: mode \"%s\" is not one of constant, edge, reflect, symmetric, wrap, "
                 "linear_ramp, empty (maximum, minimum, mean and median: jx_pad_stat)",
                 op, mode ? mode : "(null)");
    return jx_poison();
  }
  return pad_mode(op, a, lo, hi, m, value, 0);
}

jx_array *jx_pad_reflect(jx_array *a, jx_shape lo, jx_shape hi, const char *mode,
                         const char *reflect_type) {
  const char *op = "jx_pad_reflect";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int m = pad_mode_index(mode);
  if (m != 2 && m != 3) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: mode \"%s\" is not \"reflect\" or \"symmetric\"", op,
                 mode ? mode : "(null)");
    return jx_poison();
  }
  int odd = reflect_type && !strcmp(reflect_type, "odd");
  if (reflect_type && !odd && strcmp(reflect_type, "even")) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT, "%s: reflect_type \"%s\" is not \"even\" or \"odd\"", op,
                 reflect_type);
    return jx_poison();
  }
  return pad_mode(op, a, lo, hi, m, 0, odd);
}

jx_array *jx_pad_stat(jx_array *a, jx_shape lo, jx_shape hi, const char *mode, jx_shape stat_lo,
                      jx_shape stat_hi) {
  const char *op = "jx_pad_stat";
  if (jx_check_inputs(op, 1, &a)) return jx_poison();
  int stat = -1;
  for (int i = 0; mode && i < 4; i++)
    if (!strcmp(mode, pad_stat_modes[i])) stat = i;
  if (stat < 0) {
    jx_error_set(JX_ERR_INVALID_ARGUMENT,
                 "%s: mode \"%s\" is not one of maximum, minimum, mean, median", op,
                 mode ? mode : "(null)");
    return jx_poison();
  }
  char s[JX_AVAL_STR_CAP];
  int r = a->shape.rank;
  int whole = stat_lo.rank == 0 && stat_hi.rank == 0;
  if (!whole && (stat_lo.rank != r || stat_hi.rank != r)) {
    jx_error_set(JX_ERR_SHAPE, "%s: %s needs %d stat lengths before and after, got %d and %d", op,
                 str(a, s), r, stat_lo.rank, stat_hi.rank);
    return jx_poison();
  }
  for (int d = 0; !whole && d < r; d++) {
    if (stat_lo.dims[d] < 1 || stat_hi.dims[d] < 1) {
      jx_error_set(JX_ERR_INVALID_ARGUMENT,
                   "%s: stat lengths (%lld, %lld) on axis %d must be >= 1 (0 yields no value)", op,
                   (long long)stat_lo.dims[d], (long long)stat_hi.dims[d], d);
      return jx_poison();
    }
  }
  if (check_pad_widths(op, a, lo, hi)) return jx_poison();
  jx_array *x = a;
  for (int d = 0; d < r && !x->poisoned; d++) {
    if (x->shape.dims[d] == 0 && (lo.dims[d] || hi.dims[d])) {
      jx_error_set(JX_ERR_SHAPE, "%s: cannot pad the empty axis %d of %s in mode \"%s\"", op, d,
                   str(a, s), mode);
      return jx_poison();
    }
    if (lo.dims[d] || hi.dims[d])
      x = pad_stat(x, d, lo.dims[d], hi.dims[d], stat, whole ? 0 : stat_lo.dims[d],
                   whole ? 0 : stat_hi.dims[d]);
  }
  return x;
}
