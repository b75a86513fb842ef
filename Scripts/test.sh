#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the README's test command, and what CI runs.
#   1. installs the system packages (Scripts/setup.sh),
#   2. checks the formatting (swift format lint),
#   3. builds everything, warnings as errors,
#   4. runs the Swift Testing suites (the integration tests use the example plugins just built).
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/setup.sh

echo "== swift format lint" >&2
lint=$(swift format lint --recursive Sources Tests 2>&1 || true)
if [ -n "$lint" ]; then
    echo "$lint" >&2
    echo "test: swift format lint found problems (fix with: swift format format --in-place --recursive Sources Tests)" >&2
    exit 1
fi

echo "== swift build" >&2
set +e
swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]'
status=${PIPESTATUS[0]}
set -e
if [ "$status" -ne 0 ]; then
    echo "test: the build failed" >&2
    exit "$status"
fi

echo "== swift test" >&2
swift test --skip-build "$@"
