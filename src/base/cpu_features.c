/* What the CPU can run (cpu_features.h). */
#include "cpu_features.h"

#include <stdatomic.h>
#include <unistd.h>

enum { HAS_AVX2_FMA = 1, HAS_AVX512F = 2 };

/* The HAS_* bits of this CPU, probed on the first call. */
static int features(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static atomic_int known = -1; /* racing first calls store the same value */
  int v = atomic_load(&known);
  if (v < 0) {
    __builtin_cpu_init();
    v = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? HAS_AVX2_FMA : 0) |
        (__builtin_cpu_supports("avx512f") ? HAS_AVX512F : 0);
    atomic_store(&known, v);
  }
  return v;
#else
  return 0;
#endif
}

int jx_cpu_has_avx2_fma(void) { return (features() & HAS_AVX2_FMA) != 0; }

int jx_cpu_has_avx512f(void) { return (features() & HAS_AVX512F) != 0; }

int jx_cpu_count(void) {
  static atomic_int cpus; /* 0 until asked; racing first calls store the same value */
  int n = atomic_load(&cpus);
  if (!n) {
    long c = sysconf(_SC_NPROCESSORS_ONLN);
    atomic_store(&cpus, n = c > 0 ? (int)c : 1);
  }
  return n;
}
