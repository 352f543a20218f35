/* jx_blas_own_threads (blas_threads.h). The functions are weak so that jx
 * links against any CBLAS/LAPACK, not only OpenBLAS. */
#include "blas_threads.h"

extern void openblas_set_num_threads(int) __attribute__((weak));
extern int openblas_get_num_threads(void) __attribute__((weak));

int jx_blas_own_threads(void) {
  if (!openblas_set_num_threads || !openblas_get_num_threads) return 0;
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
  return 1;
}
