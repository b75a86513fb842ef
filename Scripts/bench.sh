#!/usr/bin/env bash
# Benchmarks: every figure of the performance goals next to its raw baseline measured in the
# same run (C pipe and socketpair ping-pong, posix_spawn of a trivial C program, the toolchain's
# swift-plugin-server), as ratios. Prints one table; writes .build/bench/results.json.
#   Scripts/bench.sh            full run (a few minutes)
#   Scripts/bench.sh --quick    few iterations: checks that the script itself works
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/setup.sh

echo "== swift build -c release" >&2
set +e
swift build -c release 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\]|^Building|^Compiling|^Write'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "bench: the release build failed" >&2
    exit "$status"
fi
# The worker and the command as installed (Scripts/installed-build.sh, as Scripts/stage.sh builds
# them): the worker's memory and start-up are what users' workers cost, and the command's start is
# what a shell pays for `plugind run` (linked statically, the Swift runtime and Foundation need no
# symbol lookups at start).
source Scripts/installed-build.sh
installed_build plugind-worker plugind
bin=$(swift build -c release --show-bin-path)

out="$PWD/.build/bench"
mkdir -p "$out"
for program in pingpong spawn first_byte load burst process_chain; do
    cc -O2 -pthread -o "$out/$program" "Benchmarks/Baselines/$program.c"
done
# The peers, measured in the same run (Benchmarks/PlugindBench/Suite.swift, peers()): Debian's
# bubblewrap, and Extism's runtime from PyPI's extism-sys wheel (its libextism, called from C by
# Benchmarks/Peers/extism_caller.c) with an echo module built for wasm32 by the toolchain's clang.
# A peer that cannot be had here is left out with a message; the rest of the run goes on.
if ! command -v bwrap >/dev/null; then
    if [ "$(id -u)" = 0 ]; then
        apt-get install -y -qq bubblewrap >/dev/null 2>&1 || echo "bench: could not install bubblewrap; its rows are left out" >&2
    else
        echo "bench: bubblewrap is not installed (sudo apt-get install bubblewrap); its rows are left out" >&2
    fi
fi
peers_venv="$out/peers-venv"
if [ ! -x "$peers_venv/bin/python" ]; then python3 -m venv "$peers_venv" || true; fi
if [ -x "$peers_venv/bin/python" ] && ! "$peers_venv/bin/python" -c 'import extism_sys' 2>/dev/null; then
    "$peers_venv/bin/pip" install -q 'extism-sys==1.41.0' || echo "bench: could not install extism-sys from PyPI; the Extism rows are left out" >&2
fi
rm -f "$out/libextism.so"
libextism=$("$peers_venv/bin/python" -c 'import extism_sys, os; print(os.path.join(os.path.dirname(extism_sys.__file__), "libextism_sys.so"))' 2>/dev/null || true)
if [ -n "$libextism" ] && [ -f "$libextism" ]; then ln -s "$libextism" "$out/libextism.so"; fi
cc -O2 -o "$out/extism_caller" Benchmarks/Peers/extism_caller.c -ldl
"$(dirname "$(command -v swift)")/clang" --target=wasm32 -O2 -nostdlib -Wl,--no-entry -Wl,--export=echo \
    -o "$out/echo.wasm" Benchmarks/Peers/extism_echo.wasm.c || echo "bench: the toolchain's clang could not build the wasm32 echo; the Extism rows are left out" >&2

# The C example plugins as their authors build them (cc -shared, no Swift runtime), for the C
# workers' figures (BenchHost.library).
mkdir -p "$out/c-plugins"
for name in Echo CTextFilter FunctionLibrary; do
    cc -O2 -shared -fPIC -I Sources/PlugindPluginABI/include -o "$out/c-plugins/lib$name.so" ExamplePlugins/$name/*.c
done
export PLUGIND_BENCH_C_PLUGINS="$out/c-plugins"
# A C host on libplugind (the release build's), for the round trip from C.
cc -O2 -o "$out/host_round_trip" Benchmarks/Baselines/host_round_trip.c -I Sources/CPlugindHostAPI/include \
    -L "$bin" -lPlugindHost -Wl,-rpath,"$bin"

# The Rust and Go kits' probes, for the kits' empty-request round trips (release builds, offline).
cargo=cargo
if [ -x /usr/bin/cargo ]; then cargo="env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo"; fi
CARGO_HOME="$out/cargo-home" $cargo build --release --offline --quiet --manifest-path Kits/Rust/probe/Cargo.toml --target-dir "$out/rust"
(cd Kits/Go/probe && GOFLAGS="-mod=mod -buildvcs=false" GOPROXY=off GOCACHE="$out/go-cache" \
    go build -buildmode=c-shared -o "$out/go/libKitProbe.so" .)

exec "$bin/plugind-bench" suite --baselines "$out" --output "$out/results.json" "$@"
