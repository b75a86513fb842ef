# shellcheck shell=bash disable=SC2154 # name and container are the caller's
# Sourced by nspawn-test.sh and podman-test.sh: what both container tests share. The caller
# sets `name` (its messages start with it) before sourcing it, and `container` before the checks:
# a function that runs its arguments as a command in a fresh container, with a deadline.
#   - a minimal Debian 12 tree (debootstrap) with the libraries a debug build of plugind needs,
#     cached under /var/cache/plugind-tests (or $PLUGIND_TEST_CACHE), keyed by what it holds,
#     verified before each use; built from $PLUGIND_TEST_DEBIAN_MIRROR, or deb.debian.org;
#   - a tiny probe tree (this machine's /usr bound read-only) to learn in a second whether a
#     container starts here at all, before anything is downloaded;
#   - the checks: which layers the container gives, a plugin refused without the policy, running
#     with it (the owner's and the administrator's), refused again once it is revoked.

[ "$(id -u)" -eq 0 ] || {
    echo "$name test: skipped (it starts containers, so it needs root)" >&2
    exit 0
}
checkout=$(pwd)
cache=${PLUGIND_TEST_CACHE:-/var/cache/plugind-tests}
suite=bookworm
mirror=${PLUGIND_TEST_DEBIAN_MIRROR:-http://deb.debian.org/debian}
# What a debug build of plugind and its worker load beyond Debian's minimal base (ldd of
# .build/debug/plugind; the Swift runtime comes from the toolchain, bound in read-only).
runtime_packages=(libarchive13 libssl3 libicu72 libncursesw6 libxml2)
plugin=org.plugind.examples.text-filter-c

skip() {
    echo "$name test: skipped ($*)" >&2
    exit 0
}
step() { echo "== $name: $*" >&2; }
fail() {
    echo "$name test: FAILED: $*" >&2
    exit 1
}

work=$(mktemp -d "/tmp/plugind-$name.XXXXXX")
chmod 0755 "$work"
building=""
# Anything mounted under a directory this test made (debootstrap mounts /proc and /sys in the tree
# it builds, and leaves them when it is stopped), deepest first.
unmount_under() {
    local mounted
    mounted=$(awk -v top="$1" 'index($2, top "/") == 1 || $2 == top { print $2 }' /proc/self/mounts | sort -r)
    [ -z "$mounted" ] || xargs -r -n1 umount -l <<<"$mounted" 2>/dev/null || true
}
# This shell's children but the command substitution asking: stopped by a signal, bash runs the
# exit trap at once, while the command it waited for (debootstrap, a container) still runs.
children() {
    local entry key value
    for entry in /proc/[0-9]*; do
        [ "${entry#/proc/}" != "$BASHPID" ] || continue
        while read -r key value; do
            if [ "$key" = PPid: ]; then
                [ "$value" != "$$" ] || echo "${entry#/proc/}"
                break
            fi
        done 2>/dev/null <"$entry/status" || true
    done
}
stop_children() {
    local pids pid
    pids=$(children)
    [ -n "$pids" ] || return 0
    # shellcheck disable=SC2086 # one pid a word
    kill -TERM $pids 2>/dev/null || true
    for pid in $pids; do
        timeout 30 tail --pid="$pid" -f /dev/null || kill -KILL "$pid" 2>/dev/null || true
    done
}
# Each test adds what stops its containers, should one outlive its manager (killed by a deadline).
cleanup_hooks=()
cleanup() {
    local hook
    stop_children
    for hook in "${cleanup_hooks[@]}"; do "$hook" || true; done
    if [ -n "$building" ]; then
        unmount_under "$building"
        rm -rf --one-file-system "$building"
    fi
    unmount_under "$work"
    rm -rf --one-file-system "$work"
}
trap cleanup EXIT

[ "$(uname -m)" = x86_64 ] || skip "the cached tree is amd64 only"

# Installs the Debian PACKAGES this test needs when COMMAND is missing; skips when it cannot.
need() {
    local command=$1
    shift
    command -v "$command" >/dev/null 2>&1 && return 0
    step "installing $*"
    if ! timeout 600 apt-get install -y --no-install-recommends "$@" >"$work/apt.log" 2>&1; then
        timeout 300 apt-get update >>"$work/apt.log" 2>&1 || true
        timeout 600 apt-get install -y --no-install-recommends "$@" >>"$work/apt.log" 2>&1 ||
            skip "apt-get cannot install $*: $(tail -1 "$work/apt.log")"
    fi
    command -v "$command" >/dev/null 2>&1 || skip "$* installed, but there is no $command"
}

# The smallest directory a container manager accepts as an operating system: this machine's /usr,
# which the caller binds read-only (`container_probe`'s job), with the usual links to it.
probe_tree() {
    local probe=$work/probe
    mkdir -p "$probe"/{etc,usr,proc,sys,dev,run,tmp,root,var/tmp}
    cp /etc/os-release "$probe/etc/os-release"
    local link
    for link in bin sbin lib lib64; do [ -e "/usr/$link" ] && ln -s "usr/$link" "$probe/$link"; done
    echo "$probe"
}

# The tree, built or taken from the cache; sets `tree` (the cache entry; the tree is $tree/root).
key=$(printf '%s\n' "debian $suite minbase $(dpkg --print-architecture)" "${runtime_packages[@]}" "format 1" | sha256sum | cut -c1-16)
tree=$cache/debian-$suite-$key

# Empty when TREE is whole: every package the key names installed, and every file of every
# package as dpkg unpacked it (dpkg --verify: each file's MD5 sum against the package's).
verify_tree() {
    local root=$1/root status
    [ -f "$1/complete" ] || { echo "it was never completed"; return 0; }
    status=$(dpkg-query --admindir="$root/var/lib/dpkg" -W -f='${db:Status-Abbrev}${Package}\n' "${runtime_packages[@]}" 2>&1 | grep -v '^ii ' || true)
    [ -z "$status" ] || { echo "packages missing: $(tr '\n' ' ' <<<"$status")"; return 0; }
    status=$(timeout 300 dpkg --root="$root" --verify 2>&1 | head -5 || true)
    [ -z "$status" ] || echo "dpkg --verify: $(tr '\n' ' ' <<<"$status")"
}

cached_tree() {
    local problem started
    mkdir -p "$cache"
    # One run builds while another waits: the tree is shared.
    exec 9>"$cache/.lock"
    flock -w 1200 9 || fail "another run held $cache/.lock for 20 minutes"
    if [ -d "$tree" ]; then
        step "verifying the cached tree $tree/root"
        problem=$(verify_tree "$tree")
        if [ -z "$problem" ]; then
            echo "$name: the cached tree is whole (debootstrapped $(cat "$tree/complete")); no download" >&2
            flock -u 9
            return 0
        fi
        echo "$name: the cached tree $tree fails verification ($problem): building it again" >&2
        rm -rf --one-file-system "$tree"
    fi
    need debootstrap debootstrap
    timeout 30 curl -fsS -o /dev/null "$mirror/dists/$suite/Release" 2>"$work/curl.log" ||
        skip "no usable cached tree, and the Debian mirror $mirror is unreachable: $(tail -1 "$work/curl.log")"
    step "debootstrap --variant=minbase $suite with ${runtime_packages[*]} (cached in $tree)"
    building=$(mktemp -d "$cache/.building.XXXXXX")
    started=$SECONDS
    local included
    included=$(IFS=,; echo "${runtime_packages[*]}")
    if ! timeout --kill-after=10 1200 debootstrap --variant=minbase --include="$included" "$suite" "$building/root" "$mirror" \
        >"$work/debootstrap.log" 2>&1; then
        tail -20 "$work/debootstrap.log" >&2
        [ -f "$building/root/debootstrap/debootstrap.log" ] && tail -20 "$building/root/debootstrap/debootstrap.log" >&2
        fail "debootstrap of $suite from $mirror"
    fi
    unmount_under "$building"
    # The downloaded packages are not needed once unpacked: a third less to keep.
    rm -f "$building"/root/var/cache/apt/archives/*.deb
    echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) from $mirror in $((SECONDS - started)) s" >"$building/complete"
    problem=$(verify_tree "$building")
    [ -z "$problem" ] || fail "the tree debootstrap just built fails verification: $problem"
    mv "$building" "$tree"
    building=""
    echo "$name: debootstrapped in $((SECONDS - started)) s, $(du -sh "$tree" | cut -f1) cached in $tree" >&2
    flock -u 9
}

# The products of this checkout's build, found the way the other tests find them.
bin=$(cd "$checkout" && readlink -f "$(swift build --show-bin-path 2>/dev/null || echo .build/debug)")
if [ ! -x "$bin/plugind" ] || [ ! -x "$bin/plugind-worker" ] || [ ! -e "$bin/libCTextFilter.so" ]; then
    fail "no plugind, plugind-worker or libCTextFilter.so in $bin: build first (swift build)"
fi
# A debug build loads the Swift runtime from the toolchain, at the path it was built with.
toolchain=$(dirname "$(readlink -f "$(command -v swift)")")
toolchain=${toolchain%/usr/bin}
[ -d "$toolchain/usr/lib/swift" ] || fail "no Swift toolchain at $toolchain"

# What the checks bind into each container: the example C text filter as a bundle to install
# from, and a home and an /etc/plugind of the test's own, so the tree stays as the cache holds it.
mkdir -p "$work/bundle/CTextFilter.appex" "$work/home" "$work/admin"
cp "$checkout/ExamplePlugins/CTextFilter/manifest.json" "$bin/libCTextFilter.so" "$work/bundle/CTextFilter.appex/"
chmod -R a+rX,go-w "$work/bundle"

# Runs ARGUMENTS in a fresh container (the function `container` gives it a deadline of 120
# seconds); sets `status`, `out` and `err`.
inside() {
    status=0
    "$container" "$@" >"$work/out" 2>"$work/err" || status=$?
    out=$(cat "$work/out")
    err=$(cat "$work/err")
    if [ "$status" -eq 124 ] || [ "$status" -eq 137 ]; then fail "$* in the container took over 120 s"; fi
}
# The same, failing unless it succeeds.
inside_ok() {
    inside "$@"
    [ "$status" -eq 0 ] || fail "$* in the container (exit status $status): $out $err"
}

# The checks, in the containers `container` starts. Each EXPECTED is an extended regular
# expression some line of the layers must match.
check_plugind() {
    local expected layers missing owner=/root/.config/plugind/policy.json administrator=/etc/plugind/policy.json
    step "plugind in the container: install and approve the C text filter"
    inside_ok plugind --version
    echo "$name: $out in the container" >&2
    inside_ok plugind install /mnt/bundle/CTextFilter.appex
    inside_ok plugind approve "$plugin" --yes

    step "the layers the container gives (plugind info $plugin)"
    inside_ok plugind info "$plugin"
    layers=$(grep -E '^    [a-z-]+: (applied|not-requested|unavailable) ' <<<"$out" || true)
    [ -n "$layers" ] || fail "plugind info shows no confinement layers: $out"
    sed -e 's/^    /  /' -e 's/ \[a launch refuses; .*\]$/ [a launch refuses]/' <<<"$layers" >&2
    missing=$(sed -n 's/^    \([a-z-]*\): unavailable .*/\1/p' <<<"$layers" | paste -sd' ' -)
    for expected in "$@"; do
        grep -E "$expected" <<<"$layers" >/dev/null || fail "no layer line matches '$expected'"
    done
    if [ -z "$missing" ]; then
        echo "$name: the container gives every layer: nothing to accept" >&2
        inside_ok plugind run "$plugin" hello
        [ "$out" = HELLO ] || fail "plugind run printed '$out'"
        return 0
    fi
    echo "$name: missing here: $missing" >&2
    # A refusal names the first layer that cannot be applied, and those found missing with it
    # (the Landlock pair together); a layer missing only once an earlier one is accepted is named
    # by the next refusal.
    local first=${missing%% *}
    local how="run 'plugind policy accept-missing $first"
    grep -F "    $first: unavailable " <<<"$layers" | grep -F "[a launch refuses; to run plugins without it on this machine, run 'plugind policy accept-missing $first'" >/dev/null ||
        fail "plugind info does not say how to accept $first"

    step "a launch without the policy is refused, saying how to accept"
    refused() {
        inside plugind run "$plugin" hello
        [ "$status" -ne 0 ] || fail "plugind run succeeded without the policy ($1): $out"
        [ -z "$out" ] || fail "a refused run printed '$out'"
        [[ $err == *"confinement layer '$first' cannot be applied"* && $err == *"$how"* && $err == *"$owner"* ]] ||
            fail "the refusal ($1) does not say how to accept: $err"
    }
    refused "nothing accepted"
    grep -m1 '^error:' <<<"$err" | cut -c1-240 | sed 's/$/.../' >&2

    step "plugind policy accept-missing $missing: the plugin runs"
    # shellcheck disable=SC2086 # the layers, one argument each
    inside_ok plugind policy accept-missing $missing
    [[ $err == *"Missing layers accepted on this machine now: ${missing// /, }."* ]] || fail "accept-missing said: $err"
    runs() {
        inside_ok plugind run "$plugin" hello
        [ "$out" = HELLO ] || fail "plugind run printed '$out' ($1)"
        [[ $err == *"warning: confinement layer '$first' is unavailable on this machine"* ]] ||
            fail "plugind run does not warn of the missing layer ($1): $err"
        inside_ok plugind info "$plugin"
        [[ $out == *"[accepted missing by $2]"* && $out == *"accepted missing on this machine: $first (missing now)"* ]] ||
            fail "plugind info does not say the layers are accepted by $2: $out"
    }
    runs "accepted by the owner" "$owner"

    step "plugind policy accept-missing --revoke: refused again"
    # shellcheck disable=SC2086
    inside_ok plugind policy accept-missing --revoke $missing
    refused "revoked by the owner"

    step "the administrator's policy (--administrator, /etc/plugind/policy.json) for every user"
    # shellcheck disable=SC2086
    inside_ok plugind policy accept-missing $missing --administrator
    runs "accepted by the administrator" "$administrator"
    # shellcheck disable=SC2086
    inside_ok plugind policy accept-missing --revoke $missing --administrator
    refused "revoked by the administrator"
}

# The cached tree is used read-only: nothing a container did may have changed it.
check_tree_unchanged() {
    local changed
    changed=$(find "$tree/root" -newer "$tree/complete" -print 2>/dev/null | head -3)
    [ -z "$changed" ] || fail "the containers changed the cached tree: $changed"
}
