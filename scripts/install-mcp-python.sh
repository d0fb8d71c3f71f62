#!/usr/bin/env bash
# Install the official MCP Python SDK (PyPI: mcp) into <repo>/.tools/mcp-python:
# the MCP client the tests drive `quorum mcp` with (tests/mcp_client.py).
#
# Idempotent: if the pinned version is already installed, it does nothing.
# The last line of stdout is the absolute path of the venv's `python`, so
# callers can do:  PY=$(scripts/install-mcp-python.sh | tail -n1)
#
# mcp needs Python 3.10 or newer. Looked up in this order:
#   1. $MCP_PYTHON (if set)
#   2. python3 on PATH (if it is 3.10 or newer and actually runs)
#   3. $(pyenv root)/versions/3.1*/bin/python3 (newest first; no shim);
#      if pyenv is not on PATH, ${PYENV_ROOT:-$HOME/.pyenv} is tried instead
set -euo pipefail

MCP_VERSION="2.3.0"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
venv="$repo_root/.tools/mcp-python"
exe="$venv/bin/python"
stamp="$venv/.installed-mcp"

log() { echo "install-mcp-python: $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.mcp-python.lock"
flock 9

is_recent() {
    [[ -n "$1" ]] && "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)' >/dev/null 2>&1
}

# Fast path: already installed at the pinned version.
if [[ -f "$stamp" && "$(cat "$stamp")" == "$MCP_VERSION" ]] && is_recent "$exe" \
    && "$exe" -c 'import mcp.client.stdio' 2>/dev/null; then
    echo "$exe"
    exit 0
fi

find_python() {
    local cand
    if [[ -n "${MCP_PYTHON:-}" ]]; then
        if is_recent "$MCP_PYTHON"; then echo "$MCP_PYTHON"; return 0; fi
        log "MCP_PYTHON=$MCP_PYTHON is not a working Python 3.10 or newer"
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

if ! python="$(find_python)"; then
    log "ERROR: Python 3.10 or newer not found (the mcp package requires it)."
    log "  Tried: \$MCP_PYTHON, python3 on PATH, \$(pyenv root)/versions/3.1*/bin/python3"
    log "  Install one (apt-get install python3 python3-venv) or set MCP_PYTHON=/path/to/python3."
    exit 1
fi
log "using $python ($("$python" --version 2>&1))"

if ! is_recent "$exe"; then
    log "creating virtual environment at $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi

rm -f "$stamp"
log "installing mcp==$MCP_VERSION"
"$exe" -m pip install --quiet --disable-pip-version-check "mcp==$MCP_VERSION" >&2

if ! "$exe" -c 'import mcp.client.stdio' 2>/dev/null; then
    log "ERROR: install finished but \`import mcp.client.stdio\` fails in $exe"
    exit 1
fi
echo "$MCP_VERSION" > "$stamp"
log "installed mcp $MCP_VERSION"
echo "$exe"
