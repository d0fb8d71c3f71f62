#!/usr/bin/env bash
# Install fast-agent (PyPI: fast-agent-mcp) into <repo>/.tools/fast-agent.
#
# Idempotent: if the pinned version is already installed, it does nothing.
# The last line of stdout is the absolute path of the `fast-agent` executable,
# so callers can do:  FAST_AGENT=$(scripts/install-fast-agent.sh | tail -n1)
#
# fast-agent-mcp needs Python 3.13. Looked up in this order:
#   1. $FAST_AGENT_PYTHON (if set)
#   2. python3.13 on PATH (only if it actually runs: a pyenv shim may refuse)
#   3. $(pyenv root)/versions/3.13*/bin/python3.13 (versioned binary, no shim);
#      if pyenv is not on PATH, ${PYENV_ROOT:-$HOME/.pyenv} is tried instead
set -euo pipefail

FAST_AGENT_MCP_VERSION="0.10.48"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
venv="$repo_root/.tools/fast-agent"
exe="$venv/bin/fast-agent"
stamp="$venv/.installed-fast-agent-mcp"

log() { echo "install-fast-agent: $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.fast-agent.lock"
flock 9

# Fast path: already installed at the pinned version.
if [[ -x "$exe" && -x "$venv/bin/python" && -f "$stamp" ]] \
    && [[ "$(cat "$stamp")" == "$FAST_AGENT_MCP_VERSION" ]] \
    && "$venv/bin/python" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 13) else 1)' 2>/dev/null; then
    echo "$exe"
    exit 0
fi

is_py313() {
    [[ -n "$1" ]] && "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 13) else 1)' >/dev/null 2>&1
}

find_python() {
    local cand
    if [[ -n "${FAST_AGENT_PYTHON:-}" ]]; then
        if is_py313 "$FAST_AGENT_PYTHON"; then echo "$FAST_AGENT_PYTHON"; return 0; fi
        log "FAST_AGENT_PYTHON=$FAST_AGENT_PYTHON is not a working Python 3.13"
        return 1
    fi
    if cand="$(command -v python3.13 2>/dev/null)" && is_py313 "$cand"; then
        echo "$cand"; return 0
    fi
    local root=""
    if command -v pyenv >/dev/null 2>&1; then
        root="$(pyenv root 2>/dev/null || true)"
    fi
    root="${root:-${PYENV_ROOT:-$HOME/.pyenv}}"
    if [[ -d "$root/versions" ]]; then
        # Newest 3.13.x first.
        while IFS= read -r cand; do
            if is_py313 "$cand"; then echo "$cand"; return 0; fi
        done < <(ls -d "$root"/versions/3.13*/bin/python3.13 2>/dev/null | sort -rV)
    fi
    return 1
}

if ! python="$(find_python)"; then
    log "ERROR: Python 3.13 not found (fast-agent-mcp requires it)."
    log "  Tried: \$FAST_AGENT_PYTHON, python3.13 on PATH, \$(pyenv root)/versions/3.13*/bin/python3.13"
    log "  Install one (e.g. 'pyenv install 3.13') or set FAST_AGENT_PYTHON=/path/to/python3.13."
    exit 1
fi
log "using $python ($("$python" --version 2>&1))"

# (Re)create the venv if missing or not Python 3.13.
if ! is_py313 "$venv/bin/python"; then
    log "creating virtual environment at $venv"
    rm -rf "$venv"
    mkdir -p "$(dirname "$venv")"
    "$python" -m venv "$venv"
fi

rm -f "$stamp"
log "installing fast-agent-mcp==$FAST_AGENT_MCP_VERSION"
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check \
    "fast-agent-mcp==$FAST_AGENT_MCP_VERSION" >&2

if [[ ! -x "$exe" ]]; then
    log "ERROR: install finished but $exe is missing"
    exit 1
fi
echo "$FAST_AGENT_MCP_VERSION" > "$stamp"
log "installed fast-agent-mcp $FAST_AGENT_MCP_VERSION"
echo "$exe"
