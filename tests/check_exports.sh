#!/usr/bin/env bash
# libjx.so exports the public API and nothing else: every function a header
# in include/jx declares (each marked JX_API; the library is built with
# hidden visibility), and no other symbol, each named jx_*.
#
#   check_exports.sh LIBJX_SO INCLUDE_DIR GCC
#
# The declarations come from the compiler, not from reading the headers:
# gcc -aux-info writes one prototype per function a translation unit
# declares, with the file it is declared in.
set -euo pipefail
lib=$1 inc=$(cd "$2" && pwd) gcc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

for h in "$inc"/jx/*.h; do echo "#include <jx/${h##*/}>"; done >"$tmp/all.c"
"$gcc" -std=c11 -DJX_NO_LOCATION_MACROS -I"$inc" -fsyntax-only -aux-info "$tmp/aux" "$tmp/all.c"
# "/* .../include/jx/ops.h:21:NC */ extern jx_array *jx_add (jx_array *, jx_array *);"
grep -F "$inc/jx/" "$tmp/aux" | grep -v '\*/ static ' |
  sed -E 's/^.*\*\/ extern [^(]*[ *]([A-Za-z_][A-Za-z0-9_]*) \(.*$/\1/' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" | awk '{print $NF}' | sort -u >"$tmp/exported"

fail=0
report() { # title, file of names
  if [ -s "$2" ]; then
    echo "$1 ($(wc -l <"$2")):"
    sed 's/^/  /' "$2"
    fail=1
  fi
}
comm -23 "$tmp/exported" "$tmp/declared" >"$tmp/internal"
report "exported by $lib but declared in no header of include/jx (build it with hidden visibility; mark public functions JX_API)" "$tmp/internal"
grep -v '^jx_' "$tmp/exported" >"$tmp/unprefixed" || true
report "exported without the jx_ prefix" "$tmp/unprefixed"
comm -13 "$tmp/exported" "$tmp/declared" >"$tmp/missing"
report "declared in include/jx but not exported (JX_API missing, or no definition)" "$tmp/missing"
echo "$(wc -l <"$tmp/exported") symbols exported, $(wc -l <"$tmp/declared") functions declared in include/jx"
exit $fail
