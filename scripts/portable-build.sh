#!/usr/bin/env bash
# A nightshift for login nodes: one binary for x86_64 Linux whose glibc
# floor is 2.17 (RHEL/Rocky 7 and 8, Ubuntu 18.04 and later), built with
# cargo-zigbuild and Zig from PyPI's `ziglang`; and the same for aarch64
# (Grace nodes) with --aarch64. Each is checked: no symbol it needs is
# newer than GLIBC_2.17 (read with readelf, any architecture). With
# --test, the command-line tests run on the x86_64 binary.
#
#   scripts/portable-build.sh [--aarch64] [--test]
#
# Leaves target/portable/nightshift-x86_64 (and nightshift-aarch64).
# The NVML agent loads the driver's library at run time (dlopen), so the
# binary starts on a node without one.
set -euo pipefail
cd "$(dirname "$0")/.."

FLOOR=2.17
AARCH64=0
TEST=0
for a in "$@"; do
    case "$a" in
    --aarch64) AARCH64=1 ;;
    --test) TEST=1 ;;
    *) echo "usage: $0 [--aarch64] [--test]" >&2; exit 2 ;;
    esac
done

# Zig from PyPI, in a virtualenv of its own; cargo-zigbuild from crates.io.
# Both pinned: a new release of either changes the binary the login nodes
# get, and is taken here on purpose, by changing these lines.
ZIGLANG_VERSION=0.17.1
ZIGBUILD_VERSION=0.24.1
ZIG_VENV="${ZIG_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/nightshift/zig-venv}"
if [ "$("$ZIG_VENV/bin/pip" show ziglang 2>/dev/null | sed -n 's/^Version: //p')" != "$ZIGLANG_VERSION" ]; then
    python3 -m venv "$ZIG_VENV"
    "$ZIG_VENV/bin/pip" install --quiet "ziglang==$ZIGLANG_VERSION"
fi
export PATH="$ZIG_VENV/bin:$PATH" # cargo-zigbuild runs `python3 -m ziglang`
if [ "$(cargo zigbuild --version 2>/dev/null | awk '{print $2}')" != "$ZIGBUILD_VERSION" ]; then
    cargo install --locked --version "$ZIGBUILD_VERSION" cargo-zigbuild
fi

built="${CARGO_TARGET_DIR:-target}"
targets=(x86_64)
[ "$AARCH64" = 1 ] && targets+=(aarch64)
mkdir -p target/portable
for arch in "${targets[@]}"; do
    rustup target add "$arch-unknown-linux-gnu" >/dev/null
    NIGHTSHIFT_GLIBC_FLOOR="$FLOOR" cargo zigbuild --release --locked --bin nightshift --target "$arch-unknown-linux-gnu.$FLOOR"
    out="target/portable/nightshift-$arch"
    cp "$built/$arch-unknown-linux-gnu/release/nightshift" "$out"
    # The newest glibc version any symbol asks for.
    # (No match is no error here: the check below says what it means.)
    newest=$(readelf --dyn-syms --wide "$out" | { grep -o 'GLIBC_[0-9.]*' || true; } | sed 's/GLIBC_//' | sort -uV | tail -1)
    if [ -z "$newest" ]; then
        echo "portable: $out asks for no glibc symbol version at all: not a glibc build?" >&2
        exit 1
    fi
    if [ "$(printf '%s\n%s\n' "$newest" "$FLOOR" | sort -V | tail -1)" != "$FLOOR" ]; then
        echo "portable: $out needs GLIBC_$newest, newer than its floor $FLOOR:" >&2
        readelf --dyn-syms --wide "$out" | grep "GLIBC_$newest" >&2
        exit 1
    fi
    echo "portable: $out ($(du -h "$out" | cut -f1)) needs glibc $newest at most (floor $FLOOR)"
done

if [ "$TEST" = 1 ]; then
    # The command-line tests, each command run by the portable binary.
    NIGHTSHIFT_TEST_BIN="$PWD/target/portable/nightshift-x86_64" cargo test --test cli
fi
