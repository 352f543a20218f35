"""Golden data for .npy files and printing (tests/unit/test_npy.c, test_print.c).

Writes tests/golden/data/npy/:
  <dt>.c.npy, <dt>.f.npy, <dt>.be.npy, <dt>.v2.npy, <dt>.v3.npy
        for every dtype: the array of shape (2, 3, 4) whose element k (row-major)
        is value(k) below, saved by NumPy in C order, Fortran order, big-endian
        byte order and format versions 2.0 / 3.0 (bf16 through ml_dtypes: '<V2')
  written.<name>.npy   np.save of the arrays listed in WRITTEN: jx_save_npy of the
        same arrays must give exactly these bytes
  corrupt/<name>.npy and corrupt.txt ("name status substring"): malformed files
        and the error each must give
  print/<name>.npy + print/<name>.txt: arrays and str() of them in NumPy

Run from the repository root:  python3 tests/golden/gen_npy.py
"""
import os
import shutil
import struct

import ml_dtypes
import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "npy")
bf16 = ml_dtypes.bfloat16
DTYPES = [("bool", np.bool_), ("i8", np.int8), ("i16", np.int16), ("i32", np.int32),
          ("i64", np.int64), ("u8", np.uint8), ("u16", np.uint16), ("u32", np.uint32),
          ("u64", np.uint64), ("f16", np.float16), ("bf16", bf16), ("f32", np.float32),
          ("f64", np.float64), ("c64", np.complex64), ("c128", np.complex128)]
SHAPE = (2, 3, 4)


def value(k, name):
    """Element k of the test array; test_npy.c has the same formula."""
    if name == "bool":
        return k % 3 == 0
    if name.startswith("u"):
        return k * 3
    if name.startswith("i"):
        return k * 5 - 40
    if name.startswith("c"):
        return complex(k * 0.75 - 6.5, k * 0.5 - 3)
    return k * 0.75 - 6.5


def test_array(name, t):
    n = int(np.prod(SHAPE))
    return np.array([value(k, name) for k in range(n)]).astype(t).reshape(SHAPE)


def write(path, arr, version=None, fortran=False):
    arr = np.asfortranarray(arr) if fortran else np.ascontiguousarray(arr)
    with open(path, "wb") as fh:
        np.lib.format.write_array(fh, arr, version=version)


def formats():
    for name, t in DTYPES:
        a = test_array(name, t)
        write(os.path.join(OUT, f"{name}.c.npy"), a)
        write(os.path.join(OUT, f"{name}.f.npy"), a, fortran=True)
        if name != "bf16":  # ml_dtypes has no big-endian bfloat16
            write(os.path.join(OUT, f"{name}.be.npy"), a.astype(np.dtype(t).newbyteorder(">")))
        write(os.path.join(OUT, f"{name}.v2.npy"), a, version=(2, 0))
        write(os.path.join(OUT, f"{name}.v3.npy"), a, version=(3, 0))


# arrays whose NumPy bytes jx must reproduce (test_npy.c builds the same ones)
WRITTEN = {
    "f32_2x3": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5,
    "i64_5": np.array([1, -2, 3, -4, 2 ** 40], np.int64),
    "bool_scalar": np.array(True),
    "u8_empty": np.zeros((0,), np.uint8),
    "bf16_2": np.array([1.5, -2.0], bf16),
    "f64_rank8": np.arange(256, dtype=np.float64).reshape(2, 2, 2, 2, 2, 2, 2, 2),
    "i16_big": np.zeros((123456789012, 0), np.int16),
    "f16_3x0x2": np.zeros((3, 0, 2), np.float16),
}


def header(d, version=(1, 0)):
    h = d.encode("latin1")
    fmt = "<H" if version == (1, 0) else "<I"
    hl = len(h) + 1
    pad = 64 - (8 + struct.calcsize(fmt) + hl) % 64
    return (b"\x93NUMPY" + bytes(version) + struct.pack(fmt, hl + pad) + h + b" " * pad + b"\n")


def corrupt():
    d = os.path.join(OUT, "corrupt")
    os.makedirs(d)
    good = "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
    data = np.zeros(6, np.float32).tobytes()
    cases = {
        "bad_magic": (b"\x93NUMPX\x01\x00" + header(good)[8:] + data, "CORRUPT", "bad magic"),
        "empty": (b"", "CORRUPT", "bad magic"),
        "short_prefix": (b"\x93NUMPY\x01", "CORRUPT", "bad magic"),
        "truncated_header": (header(good)[:40], "CORRUPT", "truncated"),
        "truncated_data": (header(good) + data[:20], "CORRUPT", "truncated"),
        "header_len_past_end": (b"\x93NUMPY\x01\x00\xff\xff" + good.encode(), "CORRUPT",
                                "truncated"),
        "header_len_huge_v2": (b"\x93NUMPY\x02\x00\xff\xff\xff\x7f" + good.encode(), "CORRUPT",
                               "header length"),
        "bad_version": (b"\x93NUMPY\x09\x00" + header(good)[8:] + data, "CORRUPT", "version 9"),
        "garbage_descr": (header("{'descr': 'zz!?', 'fortran_order': False, 'shape': (2, 3), }")
                          + data, "DTYPE", "'zz!?'"),
        "descr_not_string": (header("{'descr': 42, 'fortran_order': False, 'shape': (2, 3), }")
                             + data, "CORRUPT", "descr"),
        "complex256": (header("{'descr': '<c32', 'fortran_order': False, 'shape': (2, 3), }")
                       + data * 4, "DTYPE", "'<c32' is not supported"),
        "object": (header("{'descr': '|O', 'fortran_order': False, 'shape': (2, 3), }")
                   + data * 2, "DTYPE", "'|O' is not supported"),
        "structured": (header("{'descr': [('a', '<f4')], 'fortran_order': False, "
                              "'shape': (2, 3), }") + data, "CORRUPT", "descr"),
        "missing_descr": (header("{'fortran_order': False, 'shape': (2, 3), }") + data,
                          "CORRUPT", "no 'descr'"),
        "missing_shape": (header("{'descr': '<f4', 'fortran_order': False, }") + data,
                          "CORRUPT", "no 'shape'"),
        "missing_order": (header("{'descr': '<f4', 'shape': (2, 3), }") + data, "CORRUPT",
                          "fortran_order"),
        "bad_order": (header("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2, 3), }")
                      + data, "CORRUPT", "fortran_order"),
        "negative_dim": (header("{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 3), }")
                         + data, "CORRUPT", "malformed shape"),
        "huge_dim": (header("{'descr': '<f4', 'fortran_order': False, "
                            "'shape': (100000000000000000000000000000,), }") + data,
                     "CORRUPT", "too large"),
        "absurd_size": (header("{'descr': '<f8', 'fortran_order': False, "
                               "'shape': (4611686018427387904, 4611686018427387904), }") + data,
                        "SHAPE", "too many elements"),
        "big_but_short": (header("{'descr': '<f8', 'fortran_order': False, "
                                 "'shape': (1099511627776,), }") + data, "CORRUPT", "truncated"),
        "rank9": (header("{'descr': '<f4', 'fortran_order': False, "
                         "'shape': (1, 1, 1, 1, 1, 1, 1, 1, 1), }") + data, "SHAPE",
                  "more than 8 dimensions"),
        "unterminated_shape": (header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3")
                               + data, "CORRUPT", "shape"),
        "shape_garbage": (header("{'descr': '<f4', 'fortran_order': False, 'shape': (2, x), }")
                          + data, "CORRUPT", "malformed shape"),
    }
    with open(os.path.join(OUT, "corrupt.txt"), "w") as fh:
        fh.write("# written by tests/golden/gen_npy.py; name status substring-of-the-error\n")
        for name, (blob, status, msg) in cases.items():
            with open(os.path.join(d, name + ".npy"), "wb") as f:
                f.write(blob)
            fh.write(f"{name} {status} {msg}\n")


def print_cases():
    r = np.random.default_rng(7)
    cases = {
        "f64_2x2": np.array([[1.0, 2.0], [3.0, 4.0]]),
        "i64_3": np.array([1, 2, 3]),
        "bool_2": np.array([True, False]),
        "bool_2x2": np.array([[True, True], [False, True]]),
        "bool_1": np.array([True]),
        "f64_scalar": np.array(3.5),
        "f64_scalar_int": np.array(1.0),
        "f64_scalar_big": np.array(1e20),
        "f64_scalar_small": np.array(1.5e-5),
        "f64_scalar_negzero": np.array(-0.0),
        "f64_scalar_nan": np.array(np.nan),
        "f64_scalar_ninf": np.array(-np.inf),
        "f64_scalar_1e16": np.array(1e16),
        "f32_scalar": np.array(np.float32(0.1)),
        "f16_scalar": np.array(np.float16(0.1)),
        "i32_scalar": np.array(-7, np.int32),
        "u64_scalar": np.array(2 ** 64 - 1, np.uint64),
        "bool_scalar": np.array(False),
        "nonfinite": np.array([np.nan, np.inf, -np.inf]),
        "nan_inf": np.array([np.nan, np.inf]),
        "nan_mixed": np.array([np.nan, 1.5, -2.25]),
        "ninf_mixed": np.array([-np.inf, 2.0]),
        "empty": np.array([]),
        "empty_2x0": np.zeros((2, 0)),
        "empty_3x0x2": np.zeros((3, 0, 2), np.int32),
        "pad_right": np.array([1.5, 2.25]),
        "sci": np.array([1e-5, 1.5]),
        "sci_big": np.array([1e8, 1.0]),
        "sci_ratio": np.array([1e-3, 1e3]),
        "tie8": np.array([2.0 ** -9, 1.0]),
        "f32_thirds": np.array([0.1, 0.2, 1 / 3], np.float32),
        "f16_vals": np.array([0.1, 1.5, -65504, 6e-5], np.float16),
        "negatives": np.array([-1.5, 2.0, 3.25]),
        "negzero": np.array([-0.0, 1.0]),
        "arange30": np.arange(30.0),
        "wrap_f32": r.standard_normal(40).astype(np.float32),
        "wrap_i64": r.integers(-10 ** 12, 10 ** 12, size=30),
        "f64_5x7": r.standard_normal((5, 7)),
        "f32_2x3x4": r.standard_normal((2, 3, 4)).astype(np.float32),
        "f64_2x1x2x2": np.arange(8.0).reshape(2, 1, 2, 2) / 4,
        "i8_1x1x1": np.array([[[-128]]], np.int8),
        "u64_max": np.array([0, 2 ** 64 - 1], np.uint64),
        "i64_min": np.array([-(2 ** 63), 5], np.int64),
        "u8_row": np.arange(0, 250, 7, dtype=np.uint8),
        "int_widths": np.array([100, -5, 7]),
        "summary_2x1000": np.arange(2000.0).reshape(2, 1000),
        "summary_i32_1001": np.arange(1001, dtype=np.int32),
        "summary_3d": np.arange(2000, dtype=np.int16).reshape(10, 10, 20),
        "summary_f32_3d": (np.arange(3000, dtype=np.float32).reshape(30, 10, 10) / 7),
        "summary_bool": np.arange(1100).reshape(11, 100) % 3 == 0,
        "exactly_1000": np.arange(1000, dtype=np.int64),
        "long_rows_2d": r.standard_normal((3, 12)),
        "sci_2d": np.array([[1e-7, 2.5e10], [-3.0, 4e-2]]),
        "big_exp": np.array([1e-300, 1e300]),
        "mixed_width_sci": np.array([-1e-5, 123456789.0]),
        "c64_3": np.array([1 + 2j, -3.5 - 0.25j, 1e-5j], np.complex64),
        "c64_2x2_nonfinite": np.array([[1 + 2j, np.nan], [np.inf - 1j, 3]], np.complex64),
        "c128_sci": np.array([1e10 + 1j, 2], np.complex128),
        "c128_zeros": np.array([0j, complex(-0.0, -0.0)]),
        "c128_imag_nan": np.array([1 + 1j, complex(2, np.nan), complex(0, -np.inf)]),
        "c64_scalar": np.array(np.complex64(1 + 2j)),
        "c64_scalar_imag": np.array(np.complex64(2j)),
        "c64_scalar_negzero": np.array(np.complex64(complex(-0.0, -1))),
        "c128_scalar_big": np.array(np.complex128(1e20 + 1.5j)),
        "c64_scalar_thirds": np.array(np.complex64(1.1 + 2.25j)),
        "c64_scalar_nonfinite": np.array(np.complex64(complex(np.nan, np.inf))),
        "c64_scalar_zero": np.array(np.complex64(0)),
        "c64_scalar_small": np.array(np.complex64(-1e-5 + 3j)),
        "c128_wrap": (r.standard_normal(12) + 1j * r.standard_normal(12)),
    }
    d = os.path.join(OUT, "print")
    os.makedirs(d)
    for name, a in cases.items():
        np.save(os.path.join(d, name + ".npy"), a)
        with open(os.path.join(d, name + ".txt"), "w") as fh:
            fh.write(str(a))
    with open(os.path.join(d, "index.txt"), "w") as fh:
        fh.write("\n".join(cases) + "\n")


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
    formats()
    for name, a in WRITTEN.items():
        np.save(os.path.join(OUT, f"written.{name}.npy"), a)
    corrupt()
    print_cases()
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print(f"npy: {total / 1e6:.2f} MB -> {OUT}")


if __name__ == "__main__":
    main()
