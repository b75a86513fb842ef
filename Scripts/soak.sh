#!/usr/bin/env bash
# The chaos soak (not part of Scripts/test.sh): several long-lived hosts on libplugind
# launch a mix of good and hostile plugins while the owner's decisions, installs, updates and
# uninstalls, and SIGKILLs of workers, launchers and hosts, happen at random around them; the
# invariants are checked all along and at the end (Scripts/soak/driver.py lists them). Prints
# progress every 30 s and a JSON summary at the end; exits 1 if any invariant broke.
#
#   Scripts/soak.sh --minutes N [--hosts K] [--seed S] [--json FILE] [--keep] [--cpu-hog]
#
# --seed replays a run's choices (the hosts' timing still differs); --keep leaves the work
# directory (plugins, policy, plugin log, the hosts' stderr) for a look afterwards. --cpu-hog
# keeps every processor busy for the whole soak: Debian's stress-ng, one matrix-multiplying
# worker per processor (stress-ng --cpu $(nproc) --cpu-method matrixprod; Scripts/setup.sh
# stress-ng installs it), in a process group of its own that is ended however the soak ends (and
# that ends itself 10 minutes after the soak should have). The good plugins' default request
# deadlines and launch timeouts must hold under it as without it, and the summary says whether
# it ran and how busy the machine was (load average and CPU pressure, sampled every second).
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '8p' "$0" | sed 's/^# *//' >&2; }
minutes="" keep=false cpu_hog=false
forwarded=()
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
        --hosts|--seed|--json) forwarded+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
        --keep) keep=true; shift ;;
        --cpu-hog) cpu_hog=true; shift ;;
        -h|--help) sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "soak: unknown argument '$1'" >&2; usage; exit 2 ;;
    esac
done
[ -n "$minutes" ] || { echo "soak: --minutes is required" >&2; usage; exit 2; }
[[ $minutes =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "soak: --minutes takes a number, not '$minutes'" >&2; usage; exit 2; }
if $cpu_hog && ! command -v stress-ng >/dev/null; then Scripts/setup.sh stress-ng; fi

echo "== swift build" >&2
swift build 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]' >&2 || true
bin=$(swift build --show-bin-path)
[ -x "$bin/plugind" ] && [ -e "$bin/libPlugindHost.so" ] || { echo "soak: the build failed" >&2; exit 1; }

work=$(mktemp -d /tmp/plugind-soak.XXXXXX)
chmod 0755 "$work"
# The hog runs in a process group of its own, whose id is its pid, so that ending the group ends
# stress-ng and every worker it forked; but in this session, not one of its own (setsid): with the
# kernel's autogroup scheduling each session shares the processors as one, so a hog in a session
# of its own would take no more from the hosts than any one session does. In this one, the hosts
# and the owner's commands share their session's part with the hog's workers. (Each plugin worker
# starts a session of its own, which this cannot change: there, the hog competes as one session.)
hog_group=""
stop_hog() {
    [ -n "$hog_group" ] || return 0
    local tries=0
    kill -TERM -- "-$hog_group" "$hog_group" 2>/dev/null || true
    while kill -0 -- "-$hog_group" 2>/dev/null && [ $tries -lt 100 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    kill -KILL -- "-$hog_group" 2>/dev/null || true
    wait "$hog_group" 2>/dev/null || true
    hog_group=""
}
# The driver runs in the background and is waited for, so that a signal to this script ends it
# at once (bash runs a trap only once the command in the foreground is done): it stops its hosts
# on SIGTERM.
driver=""
# shellcheck disable=SC2317 # run by the EXIT trap
end_driver() {
    [ -n "$driver" ] || return 0
    kill -TERM "$driver" 2>/dev/null || true
    wait "$driver" 2>/dev/null || true
    driver=""
}
# shellcheck disable=SC2317 # run by the EXIT trap
cleanup() {
    end_driver
    stop_hog
    if ! $keep; then rm -rf "$work"; fi
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
# The soak runs copies of the products, so that a build while it runs (in a checkout others work
# in too) does not replace the CLI, the worker, libplugind or a plugin's library under the hosts.
mkdir "$work/bin"
cp "$bin/plugind" "$bin/plugind-worker" "$bin"/lib*.so "$work/bin/"
bin=$work/bin
if $cpu_hog; then
    # Its own --timeout is the backstop should this script be killed before its trap runs.
    backstop=$(awk -v minutes="$minutes" 'BEGIN { printf "%d", minutes * 60 + 600 }')
    hog=(stress-ng --cpu "$(nproc)" --cpu-method matrixprod --timeout "${backstop}s")
    python3 -c 'import os, sys; os.setpgid(0, 0); os.execvp(sys.argv[1], sys.argv[1:])' "${hog[@]}" \
        </dev/null >"$work/cpu-hog.log" 2>&1 &
    hog_group=$!
    # A hog that cannot run ends at once.
    sleep 1
    if ! kill -0 -- "-$hog_group" 2>/dev/null; then
        echo "soak: the CPU hog (${hog[*]}) ended at once; its output:" >&2
        cat "$work/cpu-hog.log" >&2
        hog_group=""
        exit 1
    fi
    echo "soak: the CPU hog runs: ${hog[*]} (process group $hog_group)" >&2
    forwarded+=(--cpu-hog "$hog_group" --cpu-hog-command "${hog[*]}")
fi
python3 Scripts/soak/driver.py --minutes "$minutes" --bin "$bin" --work "$work" "${forwarded[@]}" &
driver=$!
status=0
wait "$driver" || status=$?
driver=""
stop_hog
$keep && echo "soak: the work directory is $work" >&2
exit "$status"
