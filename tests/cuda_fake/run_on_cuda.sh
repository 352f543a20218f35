#!/usr/bin/env bash
# The suite on CUDA (docs/cuda.md, "The suite on CUDA"): runs one test program
# with JX_PLATFORM=cuda, so that its jitted programs run on CUDA device 0.
#   run_on_cuda.sh FAKE_DRIVER PROGRAM [ARGS...]
# JX_TEST_CUDA_DRIVER picks the driver (FAKE_DRIVER is the fake NCCL's
# eight-device driver for the sharding tests, JX_TEST_CUDA_MESH_DEVICES=8):
#   fake (default)  FAKE_DRIVER (tests/cuda_fake: kernels run in the CPU
#                   emulator), modules handed over as source, and each also
#                   compiled by NVRTC where libnvrtc loads (CI, no GPU);
#   real            the machine's driver, NVRTC's cubins and cuBLASLt
#                   (scripts/gpu-check.sh sets it where jx sees a GPU).
set -u
fake=$1
shift
export JX_PLATFORM=cuda
case ${JX_TEST_CUDA_DRIVER:-fake} in
real)
  unset JX_CUDA_DRIVER_PATH JX_CUDA_MODULE_SOURCE JX_CUDA_MODULE_NVRTC_CHECK JX_NCCL_PATH
  # the sharding tests' meshes want a GPU per device (JX_TEST_CUDA_MESH_DEVICES)
  want=${JX_TEST_CUDA_MESH_DEVICES:-0}
  have=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  if ((want > have)); then
    echo "skipped: the test's meshes need $want GPUs, the machine has $have"
    exit 0
  fi
  echo "[ cuda     ] JX_PLATFORM=cuda on the machine's CUDA driver"
  ;;
fake)
  # the fake driver compiles kernels with the system C++ compiler
  if ! command -v "${CXX:-g++}" >/dev/null && ! command -v g++ >/dev/null &&
    ! command -v c++ >/dev/null && ! command -v clang++ >/dev/null; then
    echo "skipped: no C++ compiler (\$CXX, g++, c++, clang++) for the fake CUDA driver's emulator"
    exit 0
  fi
  export JX_CUDA_DRIVER_PATH=$fake JX_CUDA_MODULE_SOURCE=1 JX_CUDA_MODULE_NVRTC_CHECK=1
  echo "[ cuda     ] JX_PLATFORM=cuda on the fake CUDA driver (kernels in the emulator)"
  ;;
*)
  echo "JX_TEST_CUDA_DRIVER='$JX_TEST_CUDA_DRIVER': expected fake or real" >&2
  exit 2
  ;;
esac
exec "$@"
