/* What the CPU can run (cpu_features.h). */
#include "cpu_features.h"

#include <stdatomic.h>

int jx_cpu_has_avx2_fma(void) {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static atomic_int known = -1; /* racing first calls store the same value */
  int v = atomic_load(&known);
  if (v < 0) {
    __builtin_cpu_init();
    v = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    atomic_store(&known, v);
  }
  return v;
#else
  return 0;
#endif
}
