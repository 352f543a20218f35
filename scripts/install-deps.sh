#!/usr/bin/env bash
# Installs what jx needs to build and test on Debian 12 (run as root).
set -euo pipefail
# clang and its sanitizer runtime build the second (sanitized) test pass;
# clang-format checks the formatting. liblapacke (on OpenBLAS's LAPACK) runs
# the linear algebra functions; libcjson reads checkpoint manifests,
# zlib the gzipped datasets;
# the datasets are the examples' and the training job's default data; Open MPI builds the
# MPI plugin (libjx_mpi.so) and runs the tests of many processes (mpirun); Gloo builds the
# plugin (libjx_gloo.so) for processes that meet at a coordinator without MPI; GLPK solves the
# automatic sharding planner's integer linear program; FFTW3 runs the Fourier transforms;
# iproute2 (ip) makes the network namespaces of the two-host test (launch.train_hosts).
packages=(build-essential cmake pkg-config libopenblas-dev liblapacke-dev libcmocka-dev libcjson-dev zlib1g-dev clang
          libclang-rt-14-dev clang-format dataset-fashion-mnist fortunes libopenmpi-dev openmpi-bin
          libgloo-dev libglpk-dev libfftw3-dev iproute2)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
