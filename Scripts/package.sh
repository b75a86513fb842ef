#!/usr/bin/env bash
# Builds the Debian packages under .build/packages/:
#   plugind_<version>_<arch>.deb       the command, manual pages, completions,
#                                      /usr/lib/plugind/plugins and /etc/plugind
#   plugind-worker_<version>_<arch>.deb
#                                      the worker, which the command and every host start
#   libplugind0_<version>_<arch>.deb   libplugind.so.0, the C host API (needs plugind-worker only)
#   plugind-dev_<version>_<arch>.deb   plugind_plugin.h and plugind-plugin.pc (plugins), plugind.h,
#                                      libplugind.so and plugind.pc (hosts)
#   python3-plugind_<version>_all.deb  the Python host package, over libplugind0
# The binaries are built and staged by Scripts/stage.sh (the Swift toolchain is not a Debian
# package, so the build happens before debhelper runs); debhelper (Packaging/debian) installs
# them, strips them, computes Depends from their ELF files with dpkg-shlibdeps, and lintian checks
# the result: any error fails this script. Installs debhelper, lintian and fakeroot when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

Scripts/setup.sh debhelper dh-python lintian fakeroot dpkg-dev
release_file=Sources/PlugindTypes/PlugindRelease.swift
version=$(sed -n 's/.*static let version = "\(.*\)".*/\1/p' "$release_file")
if [ -z "$version" ]; then
    echo "package: no 'static let version = \"…\"' in $release_file: where is plugind's release version?" >&2
    exit 1
fi
changelog=$(dpkg-parsechangelog -l Packaging/debian/changelog -S Version)
if [ "$version" != "$changelog" ]; then
    echo "package: plugind is version $version but Packaging/debian/changelog's newest entry is $changelog; add an entry (dch -v $version)" >&2
    exit 1
fi

work=$(pwd)/.build/packaging
source=$work/plugind-$version
rm -rf "$work"
mkdir -p "$source"
Scripts/stage.sh "$source/stage" /usr
# The Python package is pure Python over libplugind (ctypes): its files as they are, for
# python3-plugind, whose dependencies and byte-compiling dh_python3 takes care of.
python_package=$source/stage/usr/lib/python3/dist-packages/plugind
install -d "$python_package"
install -m 0644 Bindings/Python/src/plugind/*.py Bindings/Python/src/plugind/py.typed "$python_package/"
cp -a Packaging/debian "$source/debian"

echo "== dpkg-buildpackage" >&2
if ! (cd "$source" && DEB_BUILD_OPTIONS="noautodbgsym" dpkg-buildpackage -b -us -uc >"$work/build.log" 2>&1); then
    cat "$work/build.log" >&2
    echo "package: dpkg-buildpackage failed (log: $work/build.log)" >&2
    exit 1
fi
echo "== lintian" >&2
changes=$(ls "$work"/plugind_*.changes)
if ! lintian --fail-on error --tag-display-limit 0 "$changes" > "$work/lintian.log" 2>&1; then
    cat "$work/lintian.log" >&2
    echo "package: lintian found errors" >&2
    exit 1
fi
sed 's/^/lintian: /' "$work/lintian.log" >&2
mkdir -p .build/packages
rm -f .build/packages/plugind_*.deb .build/packages/plugind-worker_*.deb .build/packages/plugind-dev_*.deb \
    .build/packages/libplugind0_*.deb .build/packages/python3-plugind_*.deb
mv "$work"/plugind_*.deb "$work"/plugind-worker_*.deb "$work"/plugind-dev_*.deb "$work"/libplugind0_*.deb \
    "$work"/python3-plugind_*.deb .build/packages/

ls -l .build/packages/*.deb
