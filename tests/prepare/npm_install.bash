# Sourced by tests/prepare/*.sh (not run itself: tests/run runs the *.sh files). Installs pinned
# npm packages into a cache folder OUTSIDE the repository, idempotently:
#   npm_install_pinned NAME DIR [--NPM-FLAG …] PACKAGE@VERSION …
# returns at once when DIR holds every pinned version; otherwise installs beside DIR and swaps
# the result in, so an interrupted install never looks complete.
npm_install_pinned() {
  local name=$1 dir=$2; shift 2
  local flags=()  # leading --flags go to npm install (e.g. --omit=optional for unused binaries)
  while [ $# -gt 0 ] && [ "${1#--}" != "$1" ]; do flags+=("$1"); shift; done
  local specs=("$@")
  installed() {
    local spec pkg version
    for spec in "${specs[@]}"; do
      pkg=${spec%@*}
      version=${spec##*@}
      node -e 'const v=require(process.argv[1]).version; process.exit(v===process.argv[2]?0:1)' \
        "$dir/node_modules/$pkg/package.json" "$version" 2>/dev/null || return 1
    done
  }
  command -v node >/dev/null || { echo "$name: node (>= 18) is required" >&2; return 1; }
  installed && return 0
  command -v npm >/dev/null || { echo "$name: npm is required" >&2; return 1; }
  echo "$name: installing ${specs[*]} into $dir"
  mkdir -p "$(dirname "$dir")"
  local tmp
  tmp=$(mktemp -d "$(dirname "$dir")/npm.XXXXXX")
  echo "{ \"name\": \"rootspec-$name\", \"private\": true }" > "$tmp/package.json"
  if ! (cd "$tmp" && npm install --no-audit --no-fund --loglevel=error ${flags[@]+"${flags[@]}"} "${specs[@]}"); then
    rm -rf "$tmp"
    return 1
  fi
  rm -rf "$dir.old"
  [ -e "$dir" ] && mv "$dir" "$dir.old"
  mv "$tmp" "$dir"
  rm -rf "$dir.old"
  installed || { echo "$name: install into $dir did not produce ${specs[*]}" >&2; return 1; }
}
