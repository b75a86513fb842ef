#!/usr/bin/env bash
# The chaos soak (issue 30; not part of Scripts/test.sh): several long-lived hosts on libplugind
# launch a mix of good and hostile plugins while the owner's decisions, installs, updates and
# uninstalls, and SIGKILLs of workers, launchers and hosts, happen at random around them; the
# invariants are checked all along and at the end (Scripts/soak/driver.py lists them). Prints
# progress every 30 s and a JSON summary at the end; exits 1 if any invariant broke.
#
#   Scripts/soak.sh --minutes N [--hosts K] [--seed S] [--json FILE] [--keep]
#
# --seed replays a run's choices (the hosts' timing still differs); --keep leaves the work
# directory (plugins, policy, plugin log, the hosts' stderr) for a look afterwards.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { sed -n '8p' "$0" | sed 's/^# *//' >&2; }
minutes="" keep=false
forwarded=()
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes=${2:?--minutes needs a number}; shift 2 ;;
        --hosts|--seed|--json) forwarded+=("$1" "${2:?$1 needs a value}"); shift 2 ;;
        --keep) keep=true; shift ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "soak: unknown argument '$1'" >&2; usage; exit 2 ;;
    esac
done
[ -n "$minutes" ] || { echo "soak: --minutes is required" >&2; usage; exit 2; }

echo "== swift build" >&2
swift build 2>&1 | grep -v '^\[[0-9]*/[0-9]*\]' >&2 || true
bin=$(swift build --show-bin-path)
[ -x "$bin/plugind" ] && [ -e "$bin/libPlugindHost.so" ] || { echo "soak: the build failed" >&2; exit 1; }

work=$(mktemp -d /tmp/plugind-soak.XXXXXX)
chmod 0755 "$work"
if ! $keep; then trap 'rm -rf "$work"' EXIT; fi
status=0
python3 Scripts/soak/driver.py --minutes "$minutes" --bin "$bin" --work "$work" "${forwarded[@]}" || status=$?
$keep && echo "soak: the work directory is $work" >&2
exit "$status"
