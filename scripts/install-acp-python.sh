#!/usr/bin/env bash
# Install the ACP Python SDK (PyPI: agent-client-protocol) into
# <repo>/.tools/acp-python: the ACP client the tests drive `quorum acp` with
# (tests/acp_client.py).
#
# Idempotent: if the pinned version is already installed, it does nothing.
# The last line of stdout is the absolute path of the venv's `python`, so
# callers can do:  PY=$(scripts/install-acp-python.sh | tail -n1)
#
# The SDK needs Python 3.10 or newer. Looked up in this order:
#   1. $ACP_PYTHON (if set)
#   2. python3 on PATH (if it is 3.10 or newer and actually runs)
#   3. $(pyenv root)/versions/3.1*/bin/python3 (newest first; no shim);
#      if pyenv is not on PATH, ${PYENV_ROOT:-$HOME/.pyenv} is tried instead
set -euo pipefail

ACP_VERSION="0.12.1"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
venv="$repo_root/.tools/acp-python"
exe="$venv/bin/python"
stamp="$venv/.installed-acp"

log() { echo "install-acp-python: $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.acp-python.lock"
flock 9

is_recent() {
    [[ -n "$1" ]] && "$1" -c 'import sys; sys.exit(0 if sys.version_info[:2] >= (3, 10) else 1)' >/dev/null 2>&1
}

# Fast path: already installed at the pinned version.
if [[ -f "$stamp" && "$(cat "$stamp")" == "$ACP_VERSION" ]] && is_recent "$exe" \
    && "$exe" -c 'import acp' 2>/dev/null; then
    echo "$exe"
    exit 0
fi

find_python() {
    local cand
    if [[ -n "${ACP_PYTHON:-}" ]]; then
        if is_recent "$ACP_PYTHON"; then echo "$ACP_PYTHON"; return 0; fi
        log "ACP_PYTHON=$ACP_PYTHON is not a working Python 3.10 or newer"
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
    log "ERROR: Python 3.10 or newer not found (the agent-client-protocol package requires it)."
    log "  Tried: \$ACP_PYTHON, python3 on PATH, \$(pyenv root)/versions/3.1*/bin/python3"
    log "  Install one (apt-get install python3 python3-venv) or set ACP_PYTHON=/path/to/python3."
    exit 1
fi
log "using $python ($("$python" --version 2>&1))"

if ! is_recent "$exe"; then
    log "creating virtual environment at $venv"
    rm -rf "$venv"
    "$python" -m venv "$venv"
fi

rm -f "$stamp"
log "installing agent-client-protocol==$ACP_VERSION"
"$exe" -m pip install --quiet --disable-pip-version-check "agent-client-protocol==$ACP_VERSION" >&2

if ! "$exe" -c 'import acp' 2>/dev/null; then
    log "ERROR: install finished but \`import acp\` fails in $exe"
    exit 1
fi
echo "$ACP_VERSION" > "$stamp"
log "installed agent-client-protocol $ACP_VERSION"
echo "$exe"
