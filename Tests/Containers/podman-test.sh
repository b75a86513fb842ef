#!/usr/bin/env bash
# plugind in a Podman container, on this machine (Scripts/test.sh runs it as root): the same
# minimal Debian 12 tree as nspawn-test.sh (Tests/Containers/lib.sh; cached in
# /var/cache/plugind-tests, no download once cached) as the container's root under a throwaway
# overlay, with this checkout's build and the Swift toolchain bound in read-only, and Podman's
# defaults otherwise (its seccomp profile, its capabilities). Shows the layers the container
# gives, and checks that a plugin is refused without the policy, saying how to accept, runs once
# 'plugind policy accept-missing' accepts the missing layers (the owner's and the
# administrator's), and is refused again once revoked. Skipped, with the reason, when not root,
# when Podman cannot be installed, when it cannot start a container here, or when there is no
# cached tree and the Debian mirror is unreachable. Podman keeps its state in the test's own
# directory, removed at the end.
set -euo pipefail
cd "$(dirname "$0")/../.."
name=podman
# shellcheck source=Tests/Containers/lib.sh
source Tests/Containers/lib.sh

need podman podman

storage=$work/podman
# Its own storage and run directories (nothing in /var/lib/containers), no events log, and
# control groups through the file system: without systemd as PID 1 there is no systemd manager.
podman_options=(--root "$storage/root" --runroot "$storage/run" --tmpdir "$storage/tmp" --storage-driver vfs
    --cgroup-manager cgroupfs --events-backend none)
# Podman asks for more open files and processes than a container such as Docker's may raise its
# limits to (it lacks CAP_SYS_RESOURCE): ask for what every machine allows.
limits=$(($(ulimit -Hn) < 4096 ? $(ulimit -Hn) : 4096))
run_options=(--rm --network none --ulimit "nofile=$limits:$limits" --ulimit "nproc=$limits:$limits")
# When a container ends, conmon starts 'podman container cleanup' on its own: wait for it (and
# anything else using this storage) before the storage is removed.
podman_processes() {
    local pid entry
    for entry in /proc/[0-9]*; do
        tr '\0' ' ' 2>/dev/null <"$entry/cmdline" | grep -qF -- "$storage/" || continue
        pid=${entry#/proc/}
        timeout 60 tail --pid="$pid" -f /dev/null || kill -9 "$pid" 2>/dev/null || true
    done
}
# Podman makes /run/containers/networks even for a container without a network.
made_run_containers=$([ -e /run/containers ] || echo yes)
podman_leftovers() {
    # A container whose 'podman run' was killed outright keeps running under conmon.
    timeout 60 podman "${podman_options[@]}" rm --all --force --time 0 >/dev/null 2>&1 || true
    podman_processes
    [ -z "$made_run_containers" ] || rmdir /run/containers/networks /run/containers 2>/dev/null || true
}
cleanup_hooks+=(podman_leftovers)

podman_run() { # SECONDS [RUN-OPTIONS...] -- COMMAND... (a --rootfs among the options)
    local limit=$1
    shift
    timeout --kill-after=10 "$limit" podman "${podman_options[@]}" run "${run_options[@]}" "$@"
}

step "can Podman start a container here"
probe=$(probe_tree)
status=0
podman_run 120 -v /usr:/usr:ro --rootfs "$probe" /bin/true >"$work/probe.log" 2>&1 || status=$?
if [ "$status" -ne 0 ]; then
    # crun, Podman's default runtime on Debian 12, refuses a machine whose control groups are
    # v1 with a v2 hierarchy beside them ("cgroups in hybrid mode not supported"); runc does not.
    first=$(grep -v '^$' "$work/probe.log" | tail -1)
    need runc runc
    podman_options+=(--runtime runc)
    status=0
    podman_run 120 -v /usr:/usr:ro --rootfs "$probe" /bin/true >"$work/probe.log" 2>&1 || status=$?
    [ "$status" -eq 0 ] || skip "Podman cannot start a container here: $first; with runc: $(grep -v '^$' "$work/probe.log" | tail -1)"
    echo "$name: runc, as crun cannot run here: $first" >&2
fi

cached_tree

# Every container: the tree under a throwaway overlay (":O"), this build and the toolchain
# read-only at their own paths, the bundle to install, and the test's own home and /etc/plugind,
# which last from one container to the next.
in_podman() {
    podman_run 120 -v "$toolchain:$toolchain:ro" -v "$bin:$bin:ro" -v "$work/bundle:/mnt/bundle:ro" \
        -v "$work/home:/root" -v "$work/admin:/etc/plugind" --env HOME=/root --env PATH="$bin:/usr/bin:/bin" \
        --rootfs "$tree/root:O" "$@"
}
container=in_podman

# No layer is required missing: Podman's defaults vary more between machines than nspawn's.
# shellcheck disable=SC2119
check_plugind
check_tree_unchanged
echo "$name test: passed" >&2
