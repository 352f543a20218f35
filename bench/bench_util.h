/* Timing helpers shared by the benchmark programs. Include first (it asks
 * for clock_gettime). */
#ifndef JX_BENCH_UTIL_H
#define JX_BENCH_UTIL_H

#ifndef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L
#endif
#include <time.h>

static inline double bench_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

static inline double bench_now_s(void) { return bench_now_ns() * 1e-9; }

/* CPU time of the whole process (every thread), in ns: less disturbed by
 * other processes on a shared machine than wall time. */
static inline double bench_cpu_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* qsort comparator for doubles (medians) */
static inline int bench_cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

#endif
