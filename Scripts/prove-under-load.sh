#!/usr/bin/env bash
# Proves that the test command passes on a machine whose every processor is busy: runs
# Scripts/test.sh several times in a row while a load runs (by default Debian's stress-ng, one
# CPU worker per processor, installed through Scripts/setup.sh when missing), keeps each run's
# log, and prints every failure (the stages that failed, the tests that failed and the issues they
# recorded) and a one-line verdict. Not part of Scripts/test.sh: three runs take about an hour.
#
#   Scripts/prove-under-load.sh [--runs N] [--load-command CMD] [--log-dir DIR] [-- TEST-ARGUMENTS]
#
#   --runs N             how many runs of the test command, one after the other (default 3)
#   --load-command CMD   the load, run with bash -c in a process group of its own from before the
#                        first run to the end (default: stress-ng --cpu "$(nproc)"). A parallel
#                        build instead: --load-command 'while :; do swift build -j "$(nproc)"
#                        --scratch-path /tmp/plugind-load; rm -rf /tmp/plugind-load; done'
#   --log-dir DIR        where the logs go: run-N.log for each run, load.log for the load
#                        (default: a new directory /tmp/plugind-prove.XXXXXX)
#   --test-command CMD   for testing this script: the command to run instead of Scripts/test.sh
#   TEST-ARGUMENTS       passed to Scripts/test.sh, e.g. -- --filter SDKPackageTests
#
# Exits 0 when every run passed under load; 1 when a run failed, or the load ended before the
# last run did (that run proves nothing); 2 on a usage error. Ending it (Ctrl-C, SIGTERM) ends
# the load and the run in progress, with everything they started.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '8p' "$0" | sed 's/^# *//' >&2; }
fail_usage() {
    echo "prove-under-load: $1" >&2
    usage
    exit 2
}

runs=3
load_command=""
log_dir=""
test_command=Scripts/test.sh
test_arguments=()
while [ $# -gt 0 ]; do
    case "$1" in
        --runs | --load-command | --log-dir | --test-command)
            [ $# -ge 2 ] || fail_usage "$1 needs a value"
            case "$1" in
                --runs) runs=$2 ;;
                --load-command) load_command=$2 ;;
                --log-dir) log_dir=$2 ;;
                --test-command) test_command=$2 ;;
            esac
            shift 2
            ;;
        -h | --help)
            sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
            exit 0
            ;;
        --)
            shift
            test_arguments=("$@")
            break
            ;;
        *) fail_usage "unknown argument '$1'" ;;
    esac
done
[[ $runs =~ ^[1-9][0-9]{0,2}$ ]] || fail_usage "--runs takes a number from 1 to 999, not '$runs'"
[ -n "$test_command" ] || fail_usage "--test-command is empty"
if [ -z "$load_command" ]; then
    load_command="stress-ng --cpu $(nproc)"
    command -v stress-ng >/dev/null || Scripts/setup.sh stress-ng
fi
if [ ${#test_arguments[@]} -gt 0 ]; then
    test_command+=$(printf ' %q' "${test_arguments[@]}")
fi
if [ -n "$log_dir" ]; then
    mkdir -p "$log_dir"
else
    log_dir=$(mktemp -d /tmp/plugind-prove.XXXXXX)
fi
log_dir=$(cd "$log_dir" && pwd)

# The load and each run are started in process groups of their own (a background child of this
# non-interactive shell is never a group leader, so setsid makes its own pid the group's id), so
# that ending a group ends everything it started.
load_group=""
run_group=""

# Ends process group $1: SIGTERM, up to ten seconds for it to go, then SIGKILL.
end_group() {
    local group=$1 tries=0
    kill -TERM -- "-$group" 2>/dev/null || return 0
    wait "$group" 2>/dev/null || true
    while kill -0 -- "-$group" 2>/dev/null && [ $tries -lt 100 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    kill -KILL -- "-$group" 2>/dev/null || true
}

cleanup() {
    if [ -n "$run_group" ]; then
        echo "prove-under-load: ending the run in progress" >&2
        end_group "$run_group"
    fi
    if [ -n "$load_group" ]; then
        end_group "$load_group"
        echo "prove-under-load: the load ended" >&2
    fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Failures in a run's log: the stages the summary table marks FAILED, and Swift Testing's lines
# for failed tests (its colours removed).
failed_stages() {
    awk '/^== summary/ { table = 1; next } table && $2 == "FAILED" { print $1 }' "$1"
}
plain_log() {
    sed 's/\x1b\[[0-9;]*m//g' "$1"
}
# Swift Testing names a test by its display name in quotes, or else by its function:
#   ✘ Test "name" recorded an issue at File.swift:12:5: Expectation failed: ...
#   ✘ Test name() failed after 0.001 seconds with 1 issue.
#   ✘ Test "name" with 2 test cases failed after 0.001 seconds with 1 issue.
failed_tests() {
    plain_log "$1" | grep -E '^[^A-Za-z]*Test ("[^"]*"|[^ ]+) (recorded an issue|failed after|with [0-9]+ test cases? failed)' |
        sed -E 's/^[^A-Za-z]*Test ("[^"]*"|[^ ]+) .*/\1/' | sort -u
}
# The issues themselves (a time limit says so here), and XCTest's failures.
recorded_issues() {
    plain_log "$1" | grep -E '^[^A-Za-z]*Test .* recorded an issue|Test Case .* failed' | sed -E 's/^[^A-Za-z]*//' |
        cut -c1-240 | sort -u
}

echo "prove-under-load: $runs run(s) of '$test_command' under load '$load_command'; logs in $log_dir" >&2
setsid bash -c "$load_command" </dev/null >"$log_dir/load.log" 2>&1 &
load_group=$!
# A load command that cannot run (a typo, a missing tool) ends at once.
sleep 2
if ! kill -0 -- "-$load_group" 2>/dev/null; then
    load_group=""
    echo "prove-under-load: the load ended at once; its output:" >&2
    cat "$log_dir/load.log" >&2
    exit 1
fi
echo "prove-under-load: the load runs (process group $load_group)" >&2

# Shows the stage headers and the summary table of a run as it goes; the whole output is in the log.
progress='^== (stage|summary)|^[a-z-]+ +(passed|FAILED|skipped) |^(stage +result|test: )'
failures=()
load_lost=""
for ((run = 1; run <= runs; run++)); do
    log=$log_dir/run-$run.log
    echo "== run $run of $runs, from $(date +%T), log $log" >&2
    start=$SECONDS
    # shellcheck disable=SC2016 # the inner shell expands its own arguments
    setsid bash -c 'set -o pipefail; (eval "$1") 2>&1 | tee "$2" | { grep --line-buffered -E "$3" >&2 || true; }' _ "$test_command" "$log" "$progress" </dev/null &
    run_group=$!
    status=0
    wait "$run_group" || status=$?
    run_group=""
    read -r load1 load5 _ </proc/loadavg
    seconds=$((SECONDS - start))
    if ! kill -0 -- "-$load_group" 2>/dev/null; then
        load_lost="the load ended during run $run (see $log_dir/load.log)"
    fi

    stages=$(failed_stages "$log" | paste -sd ' ' -)
    if [ "$status" -eq 0 ]; then
        echo "run $run: passed in $seconds s (load average $load1 over 1 min, $load5 over 5)" >&2
    else
        echo "run $run: FAILED with exit status $status in $seconds s (load average $load1 over 1 min, $load5 over 5)" >&2
        if [ -n "$stages" ]; then
            echo "  failed stages: $stages" >&2
        else
            echo "  no summary table in the log: the test command ended before it (see $log)" >&2
        fi
        mapfile -t tests < <(failed_tests "$log")
        if [ ${#tests[@]} -gt 0 ]; then
            echo "  failed tests:" >&2
            printf '    %s\n' "${tests[@]}" >&2
            echo "  issues recorded:" >&2
            recorded_issues "$log" | sed 's/^/    /' >&2
        fi
        failures+=("run $run: ${stages:-exit status $status}")
    fi
    if [ -n "$load_lost" ]; then
        echo "prove-under-load: $load_lost" >&2
        break
    fi
done

end_group "$load_group"
load_group=""
if [ ${#failures[@]} -ne 0 ]; then
    failed_list=$(printf '%s; ' "${failures[@]}")
    echo "verdict: FAILED: ${#failures[@]} of $((run > runs ? runs : run)) runs failed under load '$load_command' (${failed_list%; })${load_lost:+; $load_lost}; logs in $log_dir"
    exit 1
fi
if [ -n "$load_lost" ]; then
    echo "verdict: NOT PROVEN: $load_lost; logs in $log_dir"
    exit 1
fi
echo "verdict: PASSED: $runs of $runs runs of '$test_command' passed under load '$load_command'; logs in $log_dir"
