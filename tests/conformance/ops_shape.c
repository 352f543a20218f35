/* Conformance adapters for the shape ops. */
#include "conformance.h"

const conf_op conf_ops_shape[] = {{NULL, NULL}};
