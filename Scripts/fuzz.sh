#!/usr/bin/env bash
# Fuzzes the frame decoder, the manifest parser, the ELF reader, the host's protocol state
# machine (what a worker writes, interleaved with the host's own inputs), the policy, rules and
# trust files, plugin packages (as install unpacks them), the shared-memory rings (with a peer that
# lies about positions), extension-point descriptors, publishers' key and signature files, and
# what hosts and the CLI read that a
# plugin or another user can write (statistics pages for top, the plugin log and journal entries,
# activity records, the crash log, workers' stack reports and sandbox refusals) with libFuzzer (and
# AddressSanitizer), each for SECONDS (default 60), starting from the seeds in Fuzz/Corpus (the
# ELF reader also from real libraries: the example plugins and a few system libraries, copied in
# at run time). All targets are one executable, plugind-fuzz, built once. A crash leaves its
# input in .build/fuzz/crashes/<target>/ ('swift run plugind-fuzz <target> <file>' replays it);
# add it to Fuzz/Corpus/<target>/ with the fix, so that the regression tests replay it from then on.
#   Scripts/fuzz.sh [SECONDS] [frame-decoder|manifest-parser|elf-reader|channel-protocol|policy-files|package|shared-ring|
#                              extension-point-descriptor|publisher-key|statistics-page|plugin-log|activity-record|crash-log|
#                              worker-reports ...]
set -euo pipefail
cd "$(dirname "$0")/.."
Scripts/setup.sh

seconds="${1:-60}"
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
    targets=(frame-decoder manifest-parser elf-reader channel-protocol policy-files package shared-ring extension-point-descriptor
        publisher-key statistics-page plugin-log activity-record crash-log worker-reports)
fi

scratch=.build/fuzz
status=0
echo "== building plugind-fuzz with libFuzzer" >&2
swift build -c release --scratch-path "$scratch" --product plugind-fuzz \
    -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING -Xswiftc -use-ld=lld 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]' || true
binary="$scratch/release/plugind-fuzz"
test -x "$binary" || { echo "fuzz: the build of plugind-fuzz failed" >&2; exit 1; }
for target in "${targets[@]}"; do
    corpus="$scratch/corpus/$target"
    crashes="$scratch/crashes/$target"
    mkdir -p "$corpus" "$crashes"
    cp -n Fuzz/Corpus/"$target"/* "$corpus"/ 2>/dev/null || true
    if [ "$target" = elf-reader ]; then
        # Real libraries as seeds: small example plugins and system libraries of this machine.
        swift build --product Echo >/dev/null 2>&1 && swift build --product SwiftTextFilter >/dev/null 2>&1 || true
        for library in .build/debug/libEcho.so .build/debug/libSwiftTextFilter.so .build/debug/libFunctionLibrary.so \
            /usr/lib/*-linux-gnu/libffi.so.8 /usr/lib/*-linux-gnu/libz.so.1; do
            [ -f "$library" ] && cp -n "$library" "$corpus/seed-$(basename "$library")" || true
        done
    fi
    if [ "$target" = channel-protocol ]; then
        # Real encodings of a worker's messages as seeds: the fuzzer could hardly guess a frame.
        swift build --product plugind-fuzz >/dev/null 2>&1 && .build/debug/plugind-fuzz channel-protocol --write-seeds "$corpus" || true
    fi
    echo "== fuzzing $target for $seconds s" >&2
    # Swift's backtracer off: run after an input breaks an invariant (fatalError) or crashes the
    # target, it makes AddressSanitizer report an error that is not there, in the log beside the
    # real failure (libFuzzer's own report and saved input are all a failure needs).
    if ! SWIFT_BACKTRACE=enable=no PLUGIND_FUZZ_TARGET=$target "$binary" "$corpus" -max_total_time="$seconds" -max_len=$([ "$target" = elf-reader ] && echo 1048576 || echo 65536) -artifact_prefix="$crashes/" -print_final_stats=1 \
        2> "$scratch/$target.log"; then
        status=1
        echo "fuzz: $target found a failure; inputs in $crashes, log in $scratch/$target.log" >&2
    fi
    grep -E "^stat::(number_of_executed_units|average_exec_per_sec|new_units_added|peak_rss_mb)" "$scratch/$target.log" | sed "s/^/$target /" || true
done
exit $status
