#!/usr/bin/env bash
# The main job on the bundled example plugins, from a fresh machine: installs what is missing,
# builds, installs the example plugins as bundles into a private demo directory, approves them
# the way the machine's owner would, and runs them through the CLI and the example host.
# Nothing outside .build/demo is touched.
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/setup.sh

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '$ %s\n' "$*"; "$@"; }

step "swift build"
set +e
swift build 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "demo: the build failed" >&2
    exit "$status"
fi
bin=$(swift build --show-bin-path)

demo="$PWD/.build/demo"
rm -rf "$demo"
mkdir -p "$demo/plugins"
for manifest in ExamplePlugins/*/manifest.json; do
    name=$(basename "$(dirname "$manifest")")
    bundle="$demo/plugins/$name.appex"
    mkdir -p "$bundle"
    cp "$manifest" "$bundle/"
    # A function-only bundle naming a system library by soname has no library of its own.
    if [ -e "$bin/lib$name.so" ]; then cp "$bin/lib$name.so" "$bundle/"; fi
done
# The Rust and Go examples build with their own toolchains (Debian's cargo and go, offline: the
# kits need only the standard library).
step "cargo and go build the Rust and Go examples"
cargo=cargo
if [ -x /usr/bin/cargo ]; then cargo="env RUSTC=/usr/bin/rustc RUSTDOC=/usr/bin/rustdoc /usr/bin/cargo"; fi
CARGO_HOME="$demo/cargo-home" $cargo build --release --offline --quiet \
    --manifest-path ExamplePlugins/RustGreeter/Cargo.toml --target-dir "$demo/cargo"
cp "$demo/cargo/release/libRustGreeter.so" "$demo/plugins/RustGreeter.appex/"
(cd ExamplePlugins/GoTextFilter && GOFLAGS="-mod=mod -buildvcs=false" GOPROXY=off GOCACHE="$demo/go-cache" \
    go build -buildmode=c-shared -o "$demo/plugins/GoTextFilter.appex/libGoTextFilter.so" .)
rm -f "$demo/plugins/GoTextFilter.appex/libGoTextFilter.h"
echo "built libRustGreeter.so and libGoTextFilter.so"
chmod -R go-w "$demo"

# A private home for plugind: search path, policy, state.
export PLUGIND_PATH="$demo/plugins"
export XDG_CONFIG_HOME="$demo/config" XDG_STATE_HOME="$demo/state" XDG_DATA_HOME="$demo/data"
export PLUGIND_ADMIN_POLICY_DIR="$demo/admin"
export PATH="$bin:$PATH"
# The Go runtime reserves about 1 GiB of address space at start-up: let plugins ask for 3 GiB.
export PLUGIND_MEMORY_LIMIT=3221225472

step "Installed plugins: none may run before the owner approves it"
run plugind list --all
printf '$ plugind run org.plugind.examples.text-filter-c "hello"\n'
plugind run org.plugind.examples.text-filter-c "hello" || echo "(exit status $?: not approved yet)"

step "The owner approves them (pinned to their SHA-256 and requested permissions)"
for id in org.plugind.examples.text-filter-c org.plugind.examples.text-filter-swift \
          org.plugind.examples.echo org.plugind.examples.function-library org.plugind.examples.countdown \
          org.plugind.examples.greeter org.plugind.examples.greeter-swift org.plugind.examples.zlib \
          org.plugind.examples.qsort org.plugind.examples.libm \
          org.plugind.examples.text-filter-cpp org.plugind.examples.greeter-rust org.plugind.examples.text-filter-go; do
    plugind approve "$id" --yes
done
run plugind list

step "Requests: the C and the Swift text filter, each in its own confined worker"
run plugind run org.plugind.examples.text-filter-c "Hello from a C plugin"; echo
echo "Hello from a Swift plugin, via stdin" | plugind run org.plugind.examples.text-filter-swift
head -c 1048576 /dev/urandom > "$demo/random.bin"
plugind run org.plugind.examples.echo --input "$demo/random.bin" > "$demo/echoed.bin"
cmp -s "$demo/random.bin" "$demo/echoed.bin" && echo "1 MiB of random bytes through the echo plugin: identical"

step "Plugins in C++ and Go, on their kits"
run plugind run org.plugind.examples.text-filter-cpp "hello from a c++ plugin"; echo
run plugind run org.plugind.examples.text-filter-go "words these reverses Go"; echo
printf '$ plugind run org.plugind.examples.text-filter-cpp ""\n'
plugind run org.plugind.examples.text-filter-cpp "" || echo "(exit status $?: the C++ plugin threw plugind::Error, the host got it)"

step "Typed calls through libffi"
run plugind call org.plugind.examples.function-library hypotenuse 3 4
run plugind call org.plugind.examples.function-library add_int64 -9223372036854775808 1
run plugind call org.plugind.examples.function-library reverse_string "plugind"
run plugind call org.plugind.examples.function-library identity_uint64 18446744073709551615 --json
echo "The machine's own zlib, named by its soname (libz.so.1, a symlink to the versioned file):"
run plugind call org.plugind.examples.zlib zlibVersion
run plugind call org.plugind.examples.zlib crc32 0 "hello" 5

step "Plugins that ask their host: the greeter asks whom to greet"
run plugind run org.plugind.examples.greeter --answer "Ada" "good morning"; echo
run plugind run org.plugind.examples.greeter-swift --answer "Grace" "good evening"; echo
run plugind run org.plugind.examples.greeter-rust --answer "Ferris" "good night"; echo

step "A long-running plugin reporting progress"
run plugind run org.plugind.examples.countdown 5

step "What a plugin may do, verified by a worker on this machine"
run plugind info org.plugind.examples.text-filter-swift

step "Disabling a plugin takes effect at once"
run plugind disable org.plugind.examples.echo
plugind run org.plugind.examples.echo "x" || echo "(exit status $?: disabled)"
run plugind enable org.plugind.examples.echo

step "The example host runs every available text filter, then lets every greeter greet it"
run plugind-example-host --name "Linus" "The quick brown fox"

step "The same host in C and in Python, over libplugind"
run make -s -C Examples/CHost PLUGIND_CFLAGS="-I$PWD/Sources/CPlugindHostAPI/include" \
    PLUGIND_LIBS="-L$bin -lPlugindHost -Wl,-rpath,$bin"
run Examples/CHost/text_host --name "Grace" "The quick brown fox"
run env PYTHONPATH="$PWD/Bindings/Python/src" PLUGIND_LIBRARY="$bin/libPlugindHost.so" PYTHONDONTWRITEBYTECODE=1 \
    python3 Examples/PythonHost/text_host.py --name "Guido" "The quick brown fox"

step "The machine's C libraries, confined, from Python: zlib's deflate stream, qsort with a Python comparator, libm on double complex"
run env PYTHONPATH="$PWD/Bindings/Python/src" PLUGIND_LIBRARY="$bin/libPlugindHost.so" PYTHONDONTWRITEBYTECODE=1 \
    python3 Examples/PythonHost/c_libraries.py --size 1048576 --count 2000
run plugind call org.plugind.examples.libm csqrt -- -3 4
# From the shell, a callback is answered by a program: one JSON line in, one answer out.
cat >"$demo/compare.py" <<'EOF'
import json, sys
for line in sys.stdin:
    a, b = (int.from_bytes(bytes.fromhex(x), "little", signed=True) for x in json.loads(line)["arguments"])
    print((a > b) - (a < b), flush=True)
EOF
run plugind call org.plugind.examples.qsort qsort 0300000000000000ffffffffffffffff0200000000000000 8 \
    --callback "compar=exec python3 $demo/compare.py"

step "The machine's LADSPA audio effects and frei0r video filters, unchanged, each in its own confined worker"
export LADSPA_PATH=/usr/lib/ladspa FREI0R_PATH=/usr/lib/frei0r-1
run plugind scan
plugind approve ladspa.amp.amp-mono --yes >/dev/null
plugind approve frei0r.invert0r --yes >/dev/null
python3 -c 'import math, struct, sys, wave
w = wave.open(sys.argv[1], "wb"); w.setnchannels(2); w.setsampwidth(2); w.setframerate(48000)
w.writeframes(b"".join(struct.pack("<hh", int(20000 * math.sin(i * 0.0576)), int(20000 * math.sin(i * 0.0864))) for i in range(48000)))
w.close()' "$demo/tone.wav"
run plugind audio apply ladspa.amp.amp-mono "$demo/tone.wav" "$demo/tone-quieter.wav" --control Gain=0.25
head -c $((64 * 48 * 4 * 3)) /dev/urandom >"$demo/frames.rgba"
run plugind video apply frei0r.invert0r "$demo/frames.rgba" "$demo/inverted.rgba" --size 64x48

echo
echo "demo: done (state kept in $demo)"
