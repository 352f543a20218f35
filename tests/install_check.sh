#!/usr/bin/env bash
# Installs the build into a temporary prefix and builds a program against it
# through pkg-config, shared and static, as a user would; runs both. The
# shared one runs without LD_LIBRARY_PATH (jx.pc's rpath variable), and
# `pkg-config --libs jx` alone links a program that uses libm itself.
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
env -u LD_LIBRARY_PATH "$prefix/tour" >/dev/null
# a program of its own that calls libm (a volatile argument: no constant folding)
printf '%s\n' '#include <jx/jx.h>' '#include <math.h>' \
  'int main(void) { volatile double x = 2; return !(jx_dtype_size(JX_F32) == 4 && cbrt(x) > 1); }' \
  >"$prefix/uses_libm.c"
"$cc" "$prefix/uses_libm.c" $(pkg-config --cflags --libs jx) -o "$prefix/uses_libm"
env -u LD_LIBRARY_PATH "$prefix/uses_libm"
# a system install empties the rpath
if pkg-config --define-variable=rpath= --libs jx | grep -q rpath; then
  echo "pkg-config --define-variable=rpath= still gives an rpath" >&2
  exit 1
fi
"$cc" "$source/examples/tour.c" $(pkg-config --cflags jx) "$libdir/libjx.a" \
  $(pkg-config --libs-only-l --static jx | sed 's/-ljx//') -o "$prefix/tour_static"
"$prefix/tour_static" >/dev/null
echo "install + pkg-config: shared and static builds run"
