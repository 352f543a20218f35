/* jx/base.h: status codes, errors with source locations, scopes, shapes.
 *
 * Every op records the first error of the calling thread and returns a
 * poisoned array that later ops pass along without crashing; functions that
 * can fail return jx_status. The macros at the end of each public header wrap
 * every call so that an error message names the caller's file:line
 * (define JX_NO_LOCATION_MACROS before including jx.h to turn them off).
 *
 * Thread safety: the error state and the scope stack are per thread; every
 * function here may be called from any thread (jx.h states the whole
 * threading contract). */
#ifndef JX_BASE_H
#define JX_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Marks a function of the public API: libjx.so exports these and nothing
 * else (the library is built with hidden visibility). */
#if defined(__GNUC__) || defined(__clang__)
#define JX_API __attribute__((visibility("default")))
#else
#define JX_API
#endif

#define JX_MAX_RANK 8

typedef int jx_status;
enum { /* append-only */
       JX_OK = 0,
       JX_ERR_INVALID_ARGUMENT = 1, /* a bad value: NULL, an axis out of range, ... */
       JX_ERR_SHAPE = 2,            /* shapes that do not fit the op */
       JX_ERR_DTYPE = 3,            /* a dtype the op does not accept */
       JX_ERR_OUT_OF_MEMORY = 4,
       JX_ERR_IO = 5,      /* a file could not be read or written */
       JX_ERR_CORRUPT = 6, /* a file or buffer is malformed or truncated */
       JX_ERR_UNIMPLEMENTED = 7,
       JX_ERR_INTERNAL = 8, /* a broken invariant of jx itself */
       JX_ERR_TRACE = 9,    /* a tracer used where a concrete value is needed */
       JX_ERR_TIMEOUT = 10, /* a deadline passed */
       JX_ERR_POISONED = 11 /* an input carried an earlier error */
};

typedef struct jx_array jx_array;

/* A shape and an axis list, passed by value: JX_SHAPE(32, 784), JX_AXES(0, 1).
 * JX_SHAPE() is a scalar's shape; JX_AXES() means "none" or "all", as each op
 * documents. A list longer than JX_MAX_RANK gets rank/n = -1, which every op
 * rejects with an error. */
typedef struct {
  int rank;
  int64_t dims[JX_MAX_RANK];
} jx_shape;
typedef struct {
  int n;
  int v[JX_MAX_RANK];
} jx_axes;

/* in_axes/out_axes entry meaning "not mapped" (JAX's None) */
#define JX_NONE (-0x7fff)

static inline jx_shape jx_shape_make(int rank, const int64_t *dims) {
  jx_shape s = {0, {0}};
  if (rank > JX_MAX_RANK) {
    s.rank = -1;
    return s;
  }
  s.rank = rank;
  for (int i = 0; i < rank; i++) s.dims[i] = dims[i];
  return s;
}
static inline jx_axes jx_axes_make(int n, const int *v) {
  jx_axes a = {0, {0}};
  if (n > JX_MAX_RANK) {
    a.n = -1;
    return a;
  }
  a.n = n;
  for (int i = 0; i < n; i++) a.v[i] = v[i];
  return a;
}
/* The leading 0 makes the empty list legal C; it is skipped. */
#define JX_SHAPE(...)                                                                              \
  jx_shape_make((int)(sizeof((int64_t[]){0, __VA_ARGS__}) / sizeof(int64_t)) - 1,                  \
                (const int64_t[]){0, __VA_ARGS__} + 1)
#define JX_AXES(...)                                                                               \
  jx_axes_make((int)(sizeof((int[]){0, __VA_ARGS__}) / sizeof(int)) - 1,                           \
               (const int[]){0, __VA_ARGS__} + 1)

/* ---- errors ----
 * A call fails by what happens in it: each function's result (a status, a
 * poisoned array, NULL) says whether that call failed, and an error left
 * recorded by an earlier call never makes a later valid call fail. The
 * thread keeps its first error (message and status) for jx_last_error and
 * jx_last_status until jx_clear_error, so a program may run many calls and
 * look once at the end. Inside a call (a jx_fn body, a tree map function)
 * jx_last_status reports, and jx_clear_error clears, only that call's
 * error. This needs the location macros below, which mark where each call
 * begins; a program that turns them off calls jx_clear_error once it has
 * handled an error. */
JX_API const char *jx_last_error(void); /* "" when none; valid until the next error or clear */
JX_API jx_status jx_last_status(void);  /* JX_OK when none */
JX_API void jx_clear_error(void);
/* Records an error the way jx's own functions do (the first error of the
 * thread wins; the handler is called; a located caller's file:line is
 * prepended): for libraries built on jx — layers, optimizers, loaders. */
JX_API jx_status jx_report_error(jx_status code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Called for every error recorded (after the message is complete). The default
 * handler is NULL: errors are collected and the program goes on.
 * jx_error_abort prints the message to stderr and aborts, which suits examples. */
typedef void (*jx_error_handler)(jx_status code, const char *message);
JX_API void jx_set_error_handler(jx_error_handler fn);
JX_API void jx_error_abort(jx_status code, const char *message);

/* ---- ownership ----
 * Every jx_array * returned by an op belongs to the innermost open scope and is
 * released when that scope ends. jx_keep takes a reference the caller owns,
 * dropped by jx_release. With no scope open, results belong to the thread's
 * root scope, freed by jx_thread_end (or jx_shutdown). */
JX_API void jx_scope_begin(void);
JX_API void jx_scope_end(void);
JX_API jx_array *jx_keep(jx_array *a);
JX_API void jx_release(jx_array *a);
/* Hands a reference the caller owns (from jx_keep, or from a function that
 * returns owned references) to the innermost scope; returns a. */
JX_API jx_array *jx_scope_own(jx_array *a);
/* Frees the calling thread's scopes, its root scope included; other threads
 * and the process-wide state are untouched. A thread that used jx calls it
 * before it exits (jx's own threads do). */
JX_API void jx_thread_end(void);
/* The end of the program's use of jx, callable from any thread at any time:
 * every run queued by any thread's jx_call ends first (so the pending
 * results other threads wait for become ready), the dispatch thread stops
 * (a later jx_call starts it again), then the calling thread's scopes
 * (jx_thread_end) and the cache of released buffers are freed. Other
 * threads' scopes and their calls in progress are not touched. */
JX_API void jx_shutdown(void);

/* ---- source locations (used by the macros; not for direct calls) ---- */
#define JX__STR2(x) #x
#define JX__STR(x)  JX__STR2(x)
#define JX_HERE     __FILE__ ":" JX__STR(__LINE__)
JX_API void jx_loc_enter_(void);
JX_API void jx_loc_enter_at_(const char *where);
JX_API jx_array *jx_loc_leave_(const char *where, jx_array *result);
JX_API jx_status jx_loc_leave_status_(const char *where, jx_status result);
JX_API double jx_loc_leave_double_(const char *where, double result);
JX_API int64_t jx_loc_leave_i64_(const char *where, int64_t result);
JX_API void *jx_loc_leave_ptr_(const char *where, void *result);
JX_API void jx_loc_leave_void_(const char *where);
#ifndef JX_NO_LOCATION_MACROS
#define JX_LOCATED(fn, ...) (jx_loc_enter_at_(JX_HERE), jx_loc_leave_(JX_HERE, (fn)(__VA_ARGS__)))
#define JX_LOCATED_STATUS(fn, ...)                                                                 \
  (jx_loc_enter_at_(JX_HERE), jx_loc_leave_status_(JX_HERE, (fn)(__VA_ARGS__)))
#define JX_LOCATED_DOUBLE(fn, ...)                                                                 \
  (jx_loc_enter_at_(JX_HERE), jx_loc_leave_double_(JX_HERE, (fn)(__VA_ARGS__)))
#define JX_LOCATED_I64(fn, ...)                                                                    \
  (jx_loc_enter_at_(JX_HERE), jx_loc_leave_i64_(JX_HERE, (fn)(__VA_ARGS__)))
/* a function returning a pointer of type T (a jx_fn *, a jx_tree *, ...) */
#define JX_LOCATED_PTR(T, fn, ...)                                                                 \
  ((T)(jx_loc_enter_at_(JX_HERE), jx_loc_leave_ptr_(JX_HERE, (void *)(fn)(__VA_ARGS__))))
#define JX_LOCATED_VOID(fn, ...)                                                                   \
  (jx_loc_enter_at_(JX_HERE), (fn)(__VA_ARGS__), jx_loc_leave_void_(JX_HERE))
#endif

#ifdef __cplusplus
}
#endif
#endif
