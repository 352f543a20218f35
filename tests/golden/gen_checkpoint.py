"""A .safetensors file written by the safetensors library, which jx must
read (tests/unit/test_checkpoint.c), with the arrays it holds as .npy.

Run from the repository root: python3 tests/golden/gen_checkpoint.py
"""
import os

import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "checkpoint")


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(3)
    arrays = {
        "w": rng.normal(size=(3, 5)).astype(np.float32),
        "ids": np.arange(-4, 8, dtype=np.int64).reshape(2, 6),
        "mask": np.array([True, False, True]),
        "half": rng.normal(size=(4,)).astype(ml_dtypes.bfloat16),
        "scalar": np.array(2.5, dtype=np.float64),
    }
    save_file(arrays, os.path.join(OUT, "from_python.safetensors"))
    for name, a in arrays.items():
        np.save(os.path.join(OUT, name + ".npy"), a)


if __name__ == "__main__":
    main()
