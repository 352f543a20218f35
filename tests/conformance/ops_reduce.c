/* Conformance adapters for the reduce ops. */
#include "conformance.h"

const conf_op conf_ops_reduce[] = {{NULL, NULL}};
