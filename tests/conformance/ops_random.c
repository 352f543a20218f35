/* Conformance adapters for the random ops. */
#include "conformance.h"

const conf_op conf_ops_random[] = {{NULL, NULL}};
