#!/usr/bin/env bash
# Prints what travels to the GPU machine: the tracked tree (the files `git ls-files` lists, at
# their sizes in the working tree) plus .cache/gpu-carry (bench/gpu/prepare.sh), in MiB, and
# fails when the sum is over the limit, 48 MiB (the project's rule: results folders keep what a
# reader needs, raw traces stay out of git; bench/analysis/README.md).
#   bench/gpu/tree-size.sh                             limit 48 MiB
#   ROOTSPEC_TREE_LIMIT_MIB=40 bench/gpu/tree-size.sh   another limit
# Without .cache/gpu-carry (a fresh clone) the carry is estimated from what prepare.sh would put
# there: /usr/src/googletest and the /usr/include entries of its headers=(...) list, at their
# sizes on this machine. The ZeroMQ and PCRE2 source tarballs (src/, from Debian's source
# packages) cannot be measured before they are fetched: each one absent counts as an allowance of
# 2 MiB (4 MiB for both), an estimate, not a measurement.
# Exit status: 0 within the limit; 1 over it; 2 no git, not a git checkout, or a bad limit.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
me=bench/gpu/tree-size.sh
limit_mib=${ROOTSPEC_TREE_LIMIT_MIB:-48}
tarball_allowance=$((2 * 1024 * 1024))  # bytes, for each of src/zeromq.tar.gz and src/pcre2.tar.gz

usage_error() {
  echo "$me: $*" >&2
  exit 2
}
mib() { awk -v b="$1" 'BEGIN { printf "%.2f", b / 1048576 }'; }

[[ $limit_mib =~ ^[0-9]+([.][0-9]+)?$ ]] || usage_error "ROOTSPEC_TREE_LIMIT_MIB must be a number of MiB, not '$limit_mib'"
command -v git >/dev/null || usage_error "git is not installed: the tracked files cannot be listed"
if ! top=$(git -C "$root" rev-parse --show-toplevel 2>&1); then
  usage_error "$root is not a git checkout ($top): the tracked files cannot be listed"
fi
top=$(cd "$top" && pwd -P)
[ "$top" = "$root" ] || usage_error "$root is not the top of a git checkout (git's top: $top)"
cd "$root"

# Tracked files, as they are in the working tree: a file deleted there is not counted, nor a
# submodule's files (the device tool carries a submodule without them).
tracked_paths() {  # NUL-separated
  git ls-files -z --stage | while IFS= read -r -d '' entry; do
    mode=${entry%% *}
    path=${entry#*$'\t'}
    [ "$mode" = 160000 ] && continue
    [ -e "$path" ] || [ -L "$path" ] || continue
    printf '%s\0' "$path"
  done
}
count=$(tracked_paths | tr -cd '\0' | wc -c)
tracked=0
if [ "$count" -gt 0 ]; then
  tracked=$(tracked_paths | du -cb --files0-from=- | tail -n 1 | cut -f1)
fi

carry_dir=.cache/gpu-carry
notes=()
if [ -d "$carry_dir" ]; then
  carry=$(du -sb "$carry_dir" | cut -f1)
  how="$carry_dir"
  src_dir=$carry_dir/src
else
  # What bench/gpu/prepare.sh would copy, read from its headers=(...) line.
  line=$(grep -m 1 -E '^[[:space:]]*headers=\(' bench/gpu/prepare.sh) ||
    usage_error "cannot find the headers=(...) list in bench/gpu/prepare.sh"
  line=${line#*\(}
  read -r -a headers <<<"${line%%\)*}"
  carry=0
  sources=(/usr/src/googletest)
  for h in "${headers[@]}"; do sources+=("/usr/include/$h"); done
  for s in "${sources[@]}"; do
    if [ -e "$s" ]; then
      carry=$((carry + $(du -sb "$s" | cut -f1)))
    else
      notes+=("$s is not on this machine: counted as 0")
    fi
  done
  how="estimate, no $carry_dir: /usr/src/googletest and ${#headers[@]} /usr/include entries of prepare.sh"
  src_dir=
fi
missing=0
for t in zeromq.tar.gz pcre2.tar.gz; do
  [ -n "$src_dir" ] && [ -f "$src_dir/$t" ] && continue
  missing=$((missing + 1))
done
if [ "$missing" -gt 0 ]; then
  carry=$((carry + missing * tarball_allowance))
  how="$how, plus $(mib $((missing * tarball_allowance))) MiB allowed for $missing absent source tarball(s)"
fi

total=$((tracked + carry))
limit_bytes=$(awk -v m="$limit_mib" 'BEGIN { printf "%d", m * 1048576 }')
echo "tracked files: $(mib "$tracked") MiB ($count files)"
echo "GPU carry: $(mib "$carry") MiB ($how)"
for n in ${notes[@]+"${notes[@]}"}; do echo "  note: $n"; done
if [ "$total" -gt "$limit_bytes" ]; then
  echo "total: $(mib "$total") MiB, over the limit of $limit_mib MiB"
  echo "$me: the tracked tree plus the GPU carry must stay under $limit_mib MiB: keep raw traces" \
    "out of git (bench/results/.gitignore) and large files out of the tree" >&2
  exit 1
fi
echo "total: $(mib "$total") MiB, within the limit of $limit_mib MiB"
