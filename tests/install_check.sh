#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a program against it
# through pkg-config, shared and static, as a user would; runs both.
set -euo pipefail
build=$1 source=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
pc=$(dirname "$(find "$prefix" -name jx.pc)")
export PKG_CONFIG_PATH=$pc
cc=${CC:-cc}
libdir=$(pkg-config --variable=libdir jx)
"$cc" "$source/examples/tour.c" $(pkg-config --cflags --libs jx) -o "$prefix/tour"
LD_LIBRARY_PATH=$libdir "$prefix/tour" >/dev/null
"$cc" "$source/examples/tour.c" $(pkg-config --cflags jx) "$libdir/libjx.a" \
  $(pkg-config --libs-only-l --static jx | sed 's/-ljx//') -o "$prefix/tour_static"
"$prefix/tour_static" >/dev/null
echo "install + pkg-config: shared and static builds run"
