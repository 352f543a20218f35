/* Conformance adapters for the contract ops. */
#include "conformance.h"

const conf_op conf_ops_contract[] = {{NULL, NULL}};
