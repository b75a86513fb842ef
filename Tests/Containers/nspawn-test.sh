#!/usr/bin/env bash
# plugind in a systemd-nspawn container, on this machine (Scripts/test.sh runs it as root): a
# minimal Debian 12 tree (debootstrap, cached in /var/cache/plugind-tests: no download once
# cached) with this checkout's build and the Swift toolchain bound in read-only. Shows the layers
# the container gives (nspawn's default seccomp filter answers EPERM to Landlock, so 'filesystem'
# and 'signals' are missing, and plugind must say it is the filter), and checks that a plugin is
# refused without the policy, saying how to accept, runs once 'plugind policy accept-missing'
# accepts the missing layers (the owner's and the administrator's), and is refused again once
# revoked. Skipped, with the reason, when not root, when systemd-nspawn or debootstrap cannot be
# installed, when nspawn cannot start a container here, or when there is no cached tree and the
# Debian mirror is unreachable. The tree is mounted with a throwaway overlay, never changed.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=nspawn
# shellcheck source=Tests/Containers/lib.sh
source Tests/Containers/lib.sh

need systemd-nspawn systemd-container

# Without systemd as PID 1 there is no system bus to register with, nor a unit to move into:
# --register=no --keep-unit. --as-pid2 gives the command a stub init, as no init runs. Every
# container of this run has the same UUID, which its processes carry in their environment.
uuid=$(cat /proc/sys/kernel/random/uuid)
nspawn() { # SECONDS ROOT [OPTIONS...] -- COMMAND...
    local limit=$1 root=$2
    shift 2
    timeout --kill-after=10 "$limit" systemd-nspawn --quiet --register=no --keep-unit --as-pid2 --pipe \
        --machine="plugind-test-$$" --uuid="$uuid" --directory="$root" --tmpfs=/tmp "$@"
}
# nspawn killed outright leaves its container running: then its stub init, the parent of the
# processes with this run's UUID, is killed, and every process of the container with it.
stop_containers() {
    local entry pid parent
    for entry in /proc/[0-9]*; do
        tr '\0' '\n' 2>/dev/null <"$entry/environ" | grep -qx "container_uuid=$uuid" || continue
        pid=${entry#/proc/}
        parent=$(ps -o ppid= -p "$pid" | tr -d ' ')
        [ "$(cat "/proc/$parent/comm" 2>/dev/null)" != sd-stubinit ] || kill -9 "$parent" 2>/dev/null || true
        kill -9 "$pid" 2>/dev/null || true
    done
}
cleanup_hooks+=(stop_containers)

step "can systemd-nspawn start a container here"
probe=$(probe_tree)
status=0
nspawn 60 "$probe" --read-only --bind-ro=/usr -- /bin/true >"$work/probe.log" 2>&1 || status=$?
[ "$status" -eq 0 ] || skip "systemd-nspawn cannot start a container here: $(grep -v '^$' "$work/probe.log" | tail -1)"

cached_tree

# Every container: the tree under a throwaway overlay (nspawn creates the mount points in it, and
# the container writes to /etc), this build and the toolchain read-only at their own paths, the
# bundle to install, and the test's own home and /etc/plugind, which last from one container to
# the next.
in_nspawn() {
    nspawn 120 "$tree/root" --volatile=overlay --bind-ro="$toolchain" --bind-ro="$bin" \
        --bind-ro="$work/bundle:/mnt/bundle" --bind="$work/home:/root" --bind="$work/admin:/etc/plugind" \
        --setenv=HOME=/root --setenv=PATH="$bin:/usr/bin:/bin" -- "$@"
}
container=in_nspawn

filter='unavailable — a seccomp filter of this container or service refuses landlock_create_ruleset \(EPERM\)'
check_plugind "^    filesystem: $filter" "^    signals: $filter"
check_tree_unchanged
echo "$name test: passed" >&2
