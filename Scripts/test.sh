#!/usr/bin/env bash
# Sets up a fresh machine and runs every test: the README's test command, and what CI runs.
# It runs in stages; a stage that fails is recorded and the later ones still run, except that
# nothing runs after a failed setup or build (nothing could). It ends with a table of the
# stages (result, seconds) and exits 1 if any stage failed.
#   setup               installs the system packages (Scripts/setup.sh)
#   lint                checks the formatting (swift format lint)
#   build               builds everything, warnings as errors
#   suites              the Swift Testing suites, in parallel, without those below (the
#                       integration tests use the example plugins just built)
#   nested-builds       the suites that build packages of their own, one at a time, after the rest
#   user-setup          (root) the unprivileged user plugind-test (created if missing), and a copy
#                       of the package built for it when this checkout is not readable by it
#   user-suites         (root) the suites again as that user: root hides the ordinary user's path
#   user-nested-builds  through the sandbox (user namespace mapped to the user, no control groups,
#                       what the user's own files allow), and users are who run plugind
#   packaging           (root) the Debian packages from build to removal
#                       (Tests/Packaging/packaging-test.sh: it installs and removes them here)
#   containers          (root) plugind in real containers: systemd-nspawn on a debootstrapped
#                       Debian 12 (cached in /var/cache/plugind-tests), and Podman; each shows its
#                       layers, and a plugin refused without the policy and running with it
#
#   Scripts/test.sh [SWIFT-TEST-ARGUMENTS]      e.g. Scripts/test.sh --filter SecurityTests
#   Scripts/test.sh --quick [SWIFT-TEST-ARGUMENTS]
#
# Arguments go to every test stage (`swift test`, and the test binary as the user); with
# arguments, packaging and containers are skipped, as a filtered run asks for particular suites.
#
# --quick builds (`swift build --build-tests`: no setup, no lint, warnings not made errors) and
# runs the unit tier alone, in seconds: the suites tagged `unit`, which start no process and use
# nothing only root has (Tests/TestSupport/TestTags.swift). It exits with `swift test`'s status.
# Arguments after it go to `swift test`: a --skip narrows the tier, a --filter would add to it.
# Documentation/Testing.md describes the stages and the tiers.
set -euo pipefail
cd "$(dirname "$0")/.."

# The suites whose tests build packages of their own (`swift build` of a package depending on
# plugind, a scaffold's `make`, cargo and go builds of the kits, swiftc on every snippet). Such a
# build wants every processor for minutes; racing the parallel suites on a small machine, it ran
# past its time limit, and it slowed the tests around it. So they run apart, one at a time, after
# the other suites. Test identifiers are Swift Testing's: module, then type.
NESTED_BUILD_SUITES=(
    CLITests.SDKPackageTests
    CLITests.DocumentationSnippetTests
    CLITests.DevelopmentKitTests
    CLITests.KitBuildMistakeTests
    IntegrationTests.KitProbeTests
    IntegrationTests.KitUnitTests
)

case "${1:-}" in
    -h | --help)
        sed -n '2,33p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
esac

# Anchored, so that a suite is not also picked by the name of the file it is declared in (a
# filter matches source locations too).
alternatives=$(printf '%s|' "${NESTED_BUILD_SUITES[@]//./\\.}")
nested="(${alternatives%|})(/|$)"
only_nested="^${nested}"
# For --skip: everything that is not a nested-build suite. Swift Testing runs what any --filter
# selects and no --skip names, so this narrows the caller's filters instead of adding to them.
all_but_nested="^(?!${nested})"

# The stages that run test binaries: their output is kept for the summary.
TEST_STAGES=(suites nested-builds user-suites user-nested-builds)

user=plugind-test
work=$(mktemp -d /tmp/plugind-test-run.XXXXXX)
trap 'rm -rf "$work"' EXIT

names=()
results=()
durations=()
notes=()
failed=()
stopped=""

# Runs stage NAME (the function stage_NAME) in a subshell with errexit on, records it, and
# sets `outcome`. Never call it as a condition (`run_stage x || ...`): bash then ignores errexit
# in everything the stage runs, and a failing command in the middle of a stage would go unseen.
run_stage() {
    local name=$1 start status=0
    if [ -n "$stopped" ]; then
        record "$name" skipped - "$stopped"
        outcome=skipped
        return 0
    fi
    echo "== stage $name" >&2
    start=$SECONDS
    set +e
    if [[ " ${TEST_STAGES[*]} " == *" $name "* ]]; then
        # Kept, so that the summary can repeat what failed: a log read from its end (as CI's
        # is) shows the last stages, not the failing test of an early one.
        (
            set -e
            "stage_${name//-/_}"
        ) 2>&1 | tee "$work/$name.log"
        status=${PIPESTATUS[0]}
    else
        (
            set -e
            "stage_${name//-/_}"
        )
        status=$?
    fi
    set -e
    if [ "$status" -eq 0 ]; then
        outcome=passed
        record "$name" passed $((SECONDS - start)) ""
    else
        outcome=FAILED
        failed+=("$name")
        record "$name" FAILED $((SECONDS - start)) "exit status $status"
    fi
}

record() {
    names+=("$1")
    results+=("$2")
    durations+=("$3")
    notes+=("$4")
}

skip_stage() {
    record "$1" skipped - "$2"
}

test_binary() {
    local bin
    bin=$(swift build --show-bin-path)
    echo "$bin/plugindPackageTests.xctest"
}

stage_setup() {
    Scripts/setup.sh
}

stage_lint() {
    local lint
    lint=$(swift format lint --recursive Sources Tests 2>&1 || true)
    if [ -n "$lint" ]; then
        echo "$lint" >&2
        echo "test: swift format lint found problems (fix with: swift format format --in-place --recursive Sources Tests)" >&2
        return 1
    fi
}

stage_build() {
    swift build --build-tests -Xswiftc -warnings-as-errors 2>&1 | { grep -v '^\[[0-9]*/[0-9]*\]' || true; }
}

stage_suites() {
    swift test --skip-build --skip "$only_nested" "${arguments[@]}"
}

stage_nested_builds() {
    # A renamed suite would silently leave this list and race the others again.
    local tests listed suite missing=()
    tests=$(test_binary)
    listed=$("$tests" --testing-library swift-testing --list-tests 2>/dev/null)
    for suite in "${NESTED_BUILD_SUITES[@]}"; do
        grep -q "^${suite//./\\.}/" <<<"$listed" || missing+=("$suite")
    done
    if [ ${#missing[@]} -ne 0 ]; then
        echo "test: no tests in ${missing[*]}: update NESTED_BUILD_SUITES in $0" >&2
        return 1
    fi
    swift test --skip-build --no-parallel --skip "$all_but_nested" "${arguments[@]}"
}

# The tests find their sources and products by the paths they were built at, so they run as the
# user where it can read both: here when it can, else in a copy built for it.
stage_user_setup() {
    local tests root
    if ! id "$user" >/dev/null 2>&1; then
        echo "test: creating the unprivileged user $user" >&2
        useradd --system --no-create-home --shell /usr/sbin/nologin "$user"
    fi
    tests=$(test_binary)
    if runuser -u "$user" -- test -r Package.swift -a -x "$tests"; then
        root=$(pwd)
    else
        root=$work/package
        echo "test: copying the package to $root for $user (this checkout is not readable by it)" >&2
        chmod a+rx "$work"
        mkdir "$root"
        tar --exclude=./.build --exclude=./.git -cf - . | tar -C "$root" -xf -
        chmod -R a+rX "$root"
        (cd "$root" && swift build --build-tests 2>&1 | { grep -v '^\[[0-9]*/[0-9]*\]' || true; })
        chmod -R a+rX "$root/.build"
        tests=$(cd "$root" && test_binary)
    fi
    echo "$root" >"$work/user-root"
    echo "$tests" >"$work/user-tests"
    # A home of its own for this run: the caches the tools keep there (SwiftPM's manifest cache
    # for the nested package builds, clang's) must be the user's, never a directory another
    # account left in a shared place such as /tmp.
    mkdir "$work/home"
    chown "$user" "$work/home"
    chmod 0700 "$work/home"
    chmod a+x "$work"
}

# The test binary as the user, in the directory user-setup chose. Exit status 69 is Swift
# Testing's "no test matched": with the caller's filters, this half may select nothing.
as_user() {
    local status=0
    cd "$(cat "$work/user-root")"
    runuser -u "$user" -- env HOME="$work/home" PATH="$PATH" "$(cat "$work/user-tests")" --testing-library swift-testing \
        "$@" "${arguments[@]}" || status=$?
    if [ "$status" -eq 69 ] && [ ${#arguments[@]} -gt 0 ]; then
        echo "test: no test of this stage matches the arguments" >&2
        return 0
    fi
    return "$status"
}

stage_user_suites() {
    as_user --skip "$only_nested"
}

stage_user_nested_builds() {
    as_user --no-parallel --skip "$all_but_nested"
}

stage_packaging() {
    Tests/Packaging/packaging-test.sh
}

# Both container tests run, whatever the first one's result; each says when it is skipped, and why
# (no container can start here, nothing to install them with, no cached tree and no mirror).
stage_containers() {
    local status=0
    Tests/Containers/nspawn-test.sh || status=$?
    Tests/Containers/podman-test.sh || status=$?
    return "$status"
}

# The unit tier's suites, as an anchored --filter. Swift Testing 6.3 filters by name only (a tag
# filter, `--filter tag:unit`, came in a later version), so the tier is what the test binary says
# is tagged `unit`: its listing as an event stream carries each suite's tags (the field `_tags`,
# experimental, written in stream version 0). Read from the binary, not the sources, so that it is
# exactly what was built.
unit_filter() {
    local tests listing suites
    tests=$(test_binary)
    listing=$work/list.jsonl
    "$tests" --testing-library swift-testing --list-tests --event-stream-version 0 --event-stream-output-path "$listing" >/dev/null
    if ! grep -q '"_tags":\[' "$listing"; then
        echo "test: the test binary lists no tags (this Swift Testing does not write _tags): --quick cannot find the unit tier" >&2
        return 1
    fi
    suites=$(grep '"kind":"suite"' "$listing" | grep '"_tags":\[[^]]*"\.unit"' |
        sed -n 's/.*[{,]"id":"\([^"]*\)".*/\1/p' | sed 's/\./\\./g' | paste -sd'|' -)
    if [ -z "$suites" ]; then
        echo "test: no suite is tagged unit" >&2
        return 1
    fi
    echo "test: the unit tier: $(tr '|' '\n' <<<"$suites" | wc -l) suites" >&2
    echo "^(${suites})(/|\$)"
}

# --quick: the build and the unit tier, nothing else, and `swift test`'s status.
run_quick() {
    local filter start=$SECONDS status=0
    swift build --build-tests 2>&1 | { grep -v '^\[[0-9]*/[0-9]*\]' || true; }
    filter=$(unit_filter)
    swift test --skip-build --filter "$filter" "$@" || status=$?
    echo "test: the unit tier $([ "$status" -eq 0 ] && echo passed || echo "FAILED (exit status $status)") in $((SECONDS - start)) seconds with the build" >&2
    exit "$status"
}

if [ "${1:-}" = --quick ]; then
    shift
    run_quick "$@"
fi

arguments=("$@")

run_stage setup
[ "$outcome" = passed ] || stopped="setup failed"
run_stage lint
run_stage build
[ "$outcome" != FAILED ] || stopped="build failed"
run_stage suites
run_stage nested-builds
if [ "$(id -u)" -eq 0 ]; then
    run_stage user-setup
    user_outcome=$outcome
    for stage in user-suites user-nested-builds; do
        if [ "$user_outcome" = FAILED ]; then
            skip_stage "$stage" "user-setup failed"
        else
            run_stage "$stage"
        fi
    done
    for stage in packaging containers; do
        if [ $# -gt 0 ] && [ -z "$stopped" ]; then
            skip_stage "$stage" "arguments given"
        else
            run_stage "$stage"
        fi
    done
else
    for stage in user-setup user-suites user-nested-builds packaging containers; do
        skip_stage "$stage" "needs root"
    done
fi

echo "== summary" >&2
printf '%-20s %-8s %8s\n' stage result seconds >&2
for index in "${!names[@]}"; do
    printf '%-20s %-8s %8s%s\n' "${names[index]}" "${results[index]}" "${durations[index]}" "${notes[index]:+  (${notes[index]})}" >&2
done
if [ ${#failed[@]} -ne 0 ]; then
    for name in "${failed[@]}"; do
        [ -f "$work/$name.log" ] || continue
        echo "test: what failed in $name (from its log):" >&2
        grep -a -E '✘|^error: Exited|Fatal error|signal code' "$work/$name.log" | cut -c1-400 | head -n 60 >&2 || true
    done
    echo "test: ${#failed[@]} of ${#names[@]} stages failed: ${failed[*]}" >&2
    exit 1
fi
echo "test: every stage that ran passed" >&2
