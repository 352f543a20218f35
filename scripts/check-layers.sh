#!/usr/bin/env bash
# The layer check: each folder of src/ is a layer and uses only the layers
# below it. Fails, naming the file, the symbol or header and the two
# folders, when a source includes a higher folder's header or an object of
# the library (jx_objects, built in BUILD) references a symbol defined in a
# higher folder. Usage: scripts/check-layers.sh [BUILD] (default: build).
set -euo pipefail
cd "$(dirname "$0")/.."
objs=${1:-build}/CMakeFiles/jx_objects.dir/src

# The layers, lowest first; docs/architecture.md draws the same order.
order="base < array < prims < ir < trace < ops < linalg < fft < transform < compile < parallel < cuda < debug < nn < io < plugins"

# Known violations, one line each: "folder/file what reason". None today;
# the check fails on a line whose violation is gone.
allow=""

fail=0
grep -qF "$order" docs/architecture.md ||
  { echo "docs/architecture.md does not state the order: $order" >&2; fail=1; }
for d in src/*/; do
  d=${d#src/}; d=${d%/}
  [[ " $order " == *" $d "* ]] || { echo "src/$d is in no layer: add it to the order" >&2; fail=1; }
done
# the objects of today's sources (a moved source leaves its old object behind)
sources=$(cd src && ls */*.c | grep -v '^plugins/')
for f in $sources; do
  [ -f "$objs/$f.o" ] || { echo "$objs/$f.o is missing: build jx_objects first" >&2; exit 1; }
done

# Every use as "from-folder file what to-folder", then the ones going up.
{
  grep -rHo '#include "\.\./[a-z_]*/[^"]*"' src | sed -E 's|^src/([^/]*)/([^:]*):#include "\.\./([^/]*)/([^"]*)"|\1 \1/\2 ../\3/\4 \3|'
  cd "$objs"
  join -1 1 -2 1 <(nm -A -u $(printf "%s.o " $sources) | awk '{sub(/:$/, "", $1); print $NF, $1}' | sort -k1,1) \
    <(nm -A -g --defined-only $(printf "%s.o " $sources) | awk '{split($1, p, "/"); print $NF, p[1]}' | sort -u -k1,1) |
    awk '{split($2, p, "/"); f = $2; sub(/\.o$/, "", f); if (p[1] != $3) print p[1], f, $1, $3}'
} | awk -v order="$order" -v allow="$allow" '
  BEGIN { n = split(order, l, " < "); for (i = 1; i <= n; i++) rank[l[i]] = i
          m = split(allow, a, "\n"); for (i = 1; i <= m; i++) if (split(a[i], w, " ") >= 2) ok[w[1] " " w[2]] = a[i] }
  rank[$1] < rank[$4] {
    if (($2 " " $3) in ok) { used[$2 " " $3] = 1; next }
    printf "%s uses %s from %s/, above %s/\n", $2, $3, $4, $1; bad++ }
  END { for (k in ok) if (!(k in used)) { printf "allowed but gone, delete the line: %s\n", ok[k]; bad++ }
        exit bad > 0 }' || fail=1

[ "$fail" = 0 ] && echo "layers: $order"
exit "$fail"
