#!/usr/bin/env bash
# Installs the Debian packages plugind builds against, when they are missing:
#   libffi-dev      (libffi: typed calls into plugin functions)
#   libssl-dev      (OpenSSL's libcrypto: SHA-256 of approved libraries)
#   libseccomp-dev  (the header of the worker's seccomp filters; libseccomp2 is loaded at run time)
#   libncurses-dev  (ncursesw: the full-screen terminal of 'plugind browse')
#   libarchive-dev  (plugin packages: 'plugind pack', 'plugind install FILE')
#   tmux            (the tests drive 'plugind browse' in a real terminal through it)
#   pkg-config      (SwiftPM finds the libraries through it)
#   dpkg-dev        ('plugind pack --format deb' asks its dpkg-shlibdeps for a plugin's Depends,
#                   and strips the plugin's libraries with its binutils and xz-utils)
#   lintian         (the tests check that a plugin's package has no lintian error or warning)
#   python3-pytest  (the Python package's tests, and Debian's python3 that runs them)
#   python3-pip, python3-setuptools, python3-wheel, python3-venv
#                   (the tests install the Python package with pip, offline, in a virtual
#                   environment too)
#   valgrind        (the packaging test runs the C host on the installed libplugind under it)
#   libasan8        (GCC's AddressSanitizer: the C host tests run under it, leak check included)
#   libsqlite3-0    (a system library the tests call by soname, beside zlib1g, libssl3's
#                    libcrypto, libm and libc, which every Debian machine with the above has)
#   libglib2.0-dev  (the documentation's GLib main-loop snippet compiles against it in a test)
#   libclang1-14, libclang-common-14-dev
#                   ('plugind declare' reads C headers with libclang, loaded when asked; the
#                   second package holds the compiler's own headers, stddef.h and the like)
#   libdw-dev       (elfutils' libdw: the host names the functions and lines of a crashed or hung
#                    plugin's stack from its own copies of the libraries)
#   gdb             ('plugind debug' starts a plugin's worker under it; its test runs gdb in batch)
#   strace          (the fault tests kill plugind before each system call that changes a file, and
#                    make a sync fail, with its syscall tampering)
#   systemd         (journalctl for 'plugind logs' where plugin logs are in the journal; as root the
#                    tests start systemd-journald in a namespace of their own to read entries back)
#   g++, rustc, cargo, golang-go
#                   (the C++, Rust and Go plugin kits, their examples and tests; Debian's, used
#                    offline: the kits need only the standard libraries)
#   ladspa-sdk, cmt, swh-plugins, tap-plugins, frei0r-plugins, frei0r-plugins-dev
#                   (the LADSPA and frei0r plugins Debian ships: the tests run every one confined
#                   and compare it with the same library driven in-process by reference hosts of
#                   their own, built against ladspa.h (ladspa-sdk) and frei0r.h (frei0r-plugins-dev);
#                   ladspa-sdk brings libsndfile1, which 'plugind audio apply' loads when it runs)
#   gcc-aarch64-linux-gnu, libc6-dev-arm64-cross, qemu-user
#                   (the worker's callback stubs are assembly for x86-64 and AArch64: a test builds
#                   them for AArch64 and runs them under qemu-user, with BTI and PAC enforced; the
#                   cross C library's headers are only a recommendation of the compiler's package,
#                   which --no-install-recommends leaves out)
# More packages may be named as arguments (Scripts/package.sh adds debhelper, lintian, fakeroot).
# Needs root (or sudo) only when something has to be installed.
set -euo pipefail

missing=()
for package in libffi-dev libssl-dev libseccomp-dev libncurses-dev libarchive-dev tmux pkg-config dpkg-dev lintian python3-pytest python3-pip python3-setuptools python3-wheel python3-venv valgrind libasan8 libsqlite3-0 libglib2.0-dev libclang1-14 libclang-common-14-dev libdw-dev gdb strace systemd g++ rustc cargo golang-go ladspa-sdk cmt swh-plugins tap-plugins frei0r-plugins frei0r-plugins-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user "$@"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done

if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi

echo "setup: installing ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/plugind-apt.log 2>&1; then
    # A fresh machine may have no package lists yet.
    $sudo apt-get update >>/tmp/plugind-apt.log 2>&1
    $sudo apt-get install -y --no-install-recommends "${missing[@]}" >>/tmp/plugind-apt.log 2>&1 || {
        cat /tmp/plugind-apt.log >&2
        echo "setup: could not install ${missing[*]}" >&2
        exit 1
    }
fi
