/* Conformance adapters for the indexing ops. */
#include "conformance.h"

const conf_op conf_ops_indexing[] = {{NULL, NULL}};
