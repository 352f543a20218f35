/* The linear algebra family's rows, listed for prims/registry.c. */
#include "linalg_prims.h"

const jx_prim *const jx_prims_linalg[] = {
    &jx_prim_cholesky, &jx_prim_triangular_solve, &jx_prim_lu, &jx_prim_eigh, &jx_prim_qr, NULL};
