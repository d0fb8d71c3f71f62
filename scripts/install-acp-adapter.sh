#!/usr/bin/env bash
# Install one of Zed's ACP adapters from npm into <repo>/.tools/<name>:
#   scripts/install-acp-adapter.sh claude   # @zed-industries/claude-agent-acp
#   scripts/install-acp-adapter.sh codex    # @zed-industries/codex-acp (+ its platform binary)
#
# Idempotent: with the pinned version installed it does nothing. The last
# line of stdout is the absolute path of the adapter's executable. Only the
# npm registry is needed; codex-acp's native binary comes in a platform
# package (@zed-industries/codex-acp-linux-x64, about 230 MB), checked here.
set -euo pipefail

CLAUDE_VERSION="0.23.1"
CODEX_VERSION="0.16.0"

which="${1:-}"
case "$which" in
    claude) pkg="@zed-industries/claude-agent-acp"; version="$CLAUDE_VERSION"; bin="claude-agent-acp" ;;
    codex) pkg="@zed-industries/codex-acp"; version="$CODEX_VERSION"; bin="codex-acp" ;;
    *) echo "usage: $0 claude|codex" >&2; exit 2 ;;
esac

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
prefix="$repo_root/.tools/$which-acp"
exe="$prefix/node_modules/.bin/$bin"
stamp="$prefix/.installed"

log() { echo "install-acp-adapter($which): $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.$which-acp.lock"
flock 9

if [[ -x "$exe" && -f "$stamp" && "$(cat "$stamp")" == "$version" ]]; then
    echo "$exe"
    exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
    log "ERROR: npm not found on PATH (needs Node.js and npm)"
    exit 1
fi

pkgs=("$pkg@$version")
if [[ $which == codex ]]; then
    case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) plat="@zed-industries/codex-acp-linux-x64" ;;
        Linux-aarch64) plat="@zed-industries/codex-acp-linux-arm64" ;;
        *) plat="" ;;
    esac
    [[ -n "$plat" ]] && pkgs+=("$plat@$version")
fi

rm -f "$stamp"
mkdir -p "$prefix"
if [[ ! -f "$prefix/package.json" ]]; then
    echo "{ \"name\": \"quorum-tools-$which-acp\", \"private\": true }" > "$prefix/package.json"
fi
log "installing ${pkgs[*]} into $prefix"
npm install --prefix "$prefix" --save-exact --no-audit --no-fund \
    --loglevel=error --no-update-notifier "${pkgs[@]}" >&2

if [[ ! -x "$exe" ]]; then
    log "ERROR: install finished but $exe is missing"
    exit 1
fi
if [[ $which == codex && -n "${plat:-}" ]]; then
    native="$prefix/node_modules/$plat/bin/codex-acp"
    if [[ ! -x "$native" ]]; then
        log "ERROR: the platform package $plat did not arrive ($native is missing)"
        exit 1
    fi
    size=$(stat -c %s "$native")
    if (( size < 50000000 )); then
        log "ERROR: $native is only $size bytes; the platform binary did not arrive whole"
        exit 1
    fi
fi
echo "$version" > "$stamp"
log "installed $pkg $version"
echo "$exe"
