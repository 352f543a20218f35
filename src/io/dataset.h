/* The dataset structure, shared by the datasets and the loader. */
#ifndef JX_SRC_IO_DATASET_H
#define JX_SRC_IO_DATASET_H

#include <jx/jx.h>

#define JX_DATASET_MAX_ARRAYS 8

struct jx_dataset {
  int n;                                   /* arrays per example */
  int64_t len;                             /* examples */
  jx_array *arrays[JX_DATASET_MAX_ARRAYS]; /* one reference each */
};

#endif
