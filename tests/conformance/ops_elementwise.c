/* Conformance adapters for the elementwise ops. */
#include "conformance.h"

const conf_op conf_ops_elementwise[] = {{NULL, NULL}};
