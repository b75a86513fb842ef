#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the README's test command, and what CI runs.
#   1. installs the system packages (Scripts/setup.sh),
#   2. checks the formatting (swift format lint),
#   3. builds everything, warnings as errors,
#   4. runs the Swift Testing suites (the integration tests use the example plugins just built),
#   5. when started as root, runs them all again as an unprivileged user (created if missing):
#      root hides the ordinary user's path through the sandbox (user namespace mapped to the
#      user, no control groups, what the user's own files allow), and users are who run plugind.
#   6. when started as root, the Debian packages from build to removal
#      (Tests/Packaging/packaging-test.sh: it installs and removes them on this machine).
# Arguments are passed to `swift test` (e.g. --filter SecurityTests); with arguments, step 6 is
# skipped, as a filtered run asks for particular suites.
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

if [ "$(id -u)" -ne 0 ]; then
    [ $# -eq 0 ] && Tests/Packaging/packaging-test.sh
    exit 0
fi

# As an ordinary user. The tests find their sources and products by the paths they were built
# at, so they run where the user can read both: here when it can, else in a copy built for it.
user=plugind-test
if ! id "$user" >/dev/null 2>&1; then
    echo "== creating the unprivileged user $user" >&2
    useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
fi
tests=$(swift build --show-bin-path)/plugindPackageTests.xctest
if runuser -u "$user" -- test -r Package.swift -a -x "$tests"; then
    root=$(pwd)
else
    root=$(mktemp -d /tmp/plugind-unprivileged.XXXXXX)
    trap 'rm -rf "$root"' EXIT
    echo "== copying the package to $root for $user (this checkout is not readable by it)" >&2
    tar --exclude=./.build --exclude=./.git -cf - . | tar -C "$root" -xf -
    chmod -R a+rX "$root"
    (cd "$root" && swift build --build-tests 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]')
    chmod -R a+rX "$root/.build"
    tests=$(cd "$root" && swift build --show-bin-path)/plugindPackageTests.xctest
fi
echo "== swift test as $user" >&2
cd "$root"
runuser -u "$user" -- env HOME=/tmp PATH="$PATH" "$tests" --testing-library swift-testing "$@"
cd - >/dev/null

if [ $# -eq 0 ]; then
    echo "== packaging" >&2
    Tests/Packaging/packaging-test.sh
fi
