#!/usr/bin/env bash
# Install opencode (npm: opencode-ai) into <repo>/.tools/opencode.
#
# Idempotent: if the pinned version is already installed and runs, it does nothing.
# The last line of stdout is the absolute path of the `opencode` executable,
# so callers can do:  OPENCODE=$(scripts/install-opencode.sh | tail -n1)
#
# Only the npm registry is needed. opencode-ai's postinstall (postinstall.mjs)
# copies the native binary out of a platform package (opencode-linux-x64, ...,
# listed as optionalDependencies, also on npm) to node_modules/opencode-ai/bin/
# opencode.exe; it downloads nothing from elsewhere. The platform package for
# this machine is also installed explicitly (and the other optional ones are
# omitted), so the postinstall never needs its fallback (a nested `npm install`).
set -euo pipefail

OPENCODE_VERSION="1.18.33"

script_dir="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd -- "$script_dir/.." && pwd -P)"
prefix="$repo_root/.tools/opencode"
exe="$prefix/node_modules/.bin/opencode"
stamp="$prefix/.installed-opencode-ai"

log() { echo "install-opencode: $*" >&2; }

# Tests running side by side may call this at once: one installs, the
# others wait for it and then find it installed.
mkdir -p "$repo_root/.tools"
exec 9>"$repo_root/.tools/.opencode.lock"
flock 9

# Fast path: already installed at the pinned version (stamp written only after
# a successful install and `opencode --version` check).
if [[ -x "$exe" && -f "$stamp" && "$(cat "$stamp")" == "$OPENCODE_VERSION" ]]; then
    echo "$exe"
    exit 0
fi

if ! command -v npm >/dev/null 2>&1; then
    log "ERROR: npm not found on PATH (needs Node.js and npm)"
    exit 1
fi

# The platform package the postinstall would pick first (see its packageNames()).
platform_pkg() {
    local os arch
    case "$(uname -s)" in
        Linux) os=linux ;;
        Darwin) os=darwin ;;
        *) return 0 ;;
    esac
    case "$(uname -m)" in
        x86_64 | amd64) arch=x64 ;;
        aarch64 | arm64) arch=arm64 ;;
        *) return 0 ;;
    esac
    local name="opencode-$os-$arch"
    if [[ $arch == x64 ]]; then
        local avx2=1
        if [[ $os == linux ]]; then
            grep -qw avx2 /proc/cpuinfo 2>/dev/null || avx2=0
        else
            [[ "$(sysctl -n hw.optional.avx2_0 2>/dev/null || true)" == 1 ]] || avx2=0
        fi
        [[ $avx2 == 1 ]] || name="$name-baseline"
    fi
    if [[ $os == linux ]] && ldd --version 2>&1 | grep -qi musl; then
        name="$name-musl"
    fi
    echo "$name"
}

pkgs=("opencode-ai@$OPENCODE_VERSION")
npm_opts=()
plat="$(platform_pkg)"
if [[ -n "$plat" ]]; then
    # With the right platform package named explicitly, the optional ones are
    # not needed (npm would also add every one matching this OS/CPU, e.g. the
    # -baseline build: another 177 MB binary each).
    pkgs+=("$plat@$OPENCODE_VERSION")
    npm_opts+=(--omit=optional)
fi

rm -f "$stamp"
mkdir -p "$prefix"
# A package.json of its own, so npm installs here and not in a parent project.
if [[ ! -f "$prefix/package.json" ]]; then
    echo '{ "name": "quorum-tools-opencode", "private": true }' > "$prefix/package.json"
fi
log "installing ${pkgs[*]} into $prefix"
npm install --prefix "$prefix" --save-exact --no-audit --no-fund \
    --loglevel=error --no-update-notifier ${npm_opts[@]+"${npm_opts[@]}"} "${pkgs[@]}" >&2

if [[ ! -x "$exe" ]]; then
    log "ERROR: install finished but $exe is missing"
    exit 1
fi
got="$("$exe" --version 2>/dev/null || true)"
if [[ "$got" != "$OPENCODE_VERSION" ]]; then
    log "ERROR: $exe --version printed '$got', expected $OPENCODE_VERSION"
    exit 1
fi
echo "$OPENCODE_VERSION" > "$stamp"
log "installed opencode $OPENCODE_VERSION"
echo "$exe"
