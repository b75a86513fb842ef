#!/usr/bin/env bash
# Builds plugind for installation and stages the installed layout under DESTDIR:
#   Scripts/stage.sh DESTDIR [PREFIX]      (PREFIX defaults to /usr)
# A release build as installed (Scripts/installed-build.sh: the Swift runtime linked statically, so
# that the binaries run on a Debian 12 machine without the Swift toolchain); then, under DESTDIR/PREFIX:
#   bin/plugind, libexec/plugind/plugind-worker,
#   share/man/man1/plugind.1 and plugind-<subcommand>.1, share/man/man5/plugind-manifest.5 and
#     plugind-policy.5 (written by 'plugind help --man' from the same descriptions as --help and
#     CLI.md, and from the Markdown references), share/doc/plugind/ (README.md and
#     Documentation/*.md, which the manual pages and --help cite),
#   bash, zsh and fish completions ('plugind completions'),
#   include/plugind/plugind_plugin.h and plugind_plugin.hpp (the C++ kit), share/pkgconfig/plugind-plugin.pc,
#   share/plugind/kits/rust/plugind-plugin and share/plugind/kits/go/plugind (the Rust and Go kits,
#     whose projects 'plugind new' points at),
#   lib/<multiarch>/libplugind.so.0 (the C host API, Swift runtime linked in, exporting exactly the
#     functions of include/plugind/plugind.h), its libplugind.so link and lib/<multiarch>/pkgconfig/plugind.pc,
#   lib/plugind/plugins/ (the system plugin directory plugind searches).
# Used by Scripts/package.sh (the Debian packages) and Scripts/install.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
destdir=${1:?usage: Scripts/stage.sh DESTDIR [PREFIX]}
prefix=${2:-/usr}
case $destdir in /*) ;; *) destdir=$(pwd)/$destdir ;; esac

Scripts/setup.sh
source Scripts/installed-build.sh
installed_build plugind-worker plugind
bin=$(swift build -c release --show-bin-path)

# libplugind: a release build of its own (its Swift flags differ, and sharing .build/release
# would rebuild every module whenever one build or the other runs), the runtime linked in with
# -static-stdlib, the SONAME versioned, and a version script that exports the header's
# functions and nothing else (not the shims it links, not the Swift runtime).
header=Sources/CPlugindHostAPI/include/plugind/plugind.h
library_build=$(pwd)/.build/libplugind
mkdir -p "$library_build"
exports=$library_build/exports.map
{
    echo "PLUGIND_0 {"
    echo "  global:"
    grep '^[a-z]' "$header" | grep -o 'plugind_[a-z_]*(' | tr -d '(' | sort -u | sed 's/^/    /; s/$/;/'
    echo "  local: *;"
    echo "};"
} > "$exports"
echo "== swift build -c release (libplugind)" >&2
swift build -c release --scratch-path "$library_build" --product PlugindHost -Xswiftc -static-stdlib \
    -Xlinker -soname=libplugind.so.0 -Xlinker --version-script="$exports" -Xlinker -z -Xlinker now 2>&1 \
    | grep -v '^\[[0-9]*/[0-9]*\]' || true
library=$(swift build -c release --scratch-path "$library_build" --show-bin-path)/libPlugindHost.so
[ -f "$library" ] || { echo "stage: the release build of libplugind failed" >&2; exit 1; }
if readelf -d "$library" | grep -q 'libswift'; then
    echo "stage: $library links the Swift runtime dynamically; -static-stdlib did not apply" >&2
    exit 1
fi
declared=$(grep -c '^    plugind_' "$exports")
exported=$(nm -D --defined-only --extern-only "$library" | awk '{print $3}' | grep -v '^PLUGIND_0$' | sort -u)
if [ "$(echo "$exported" | grep -c '^plugind_')" -ne "$declared" ] || echo "$exported" | grep -qv '^plugind_'; then
    echo "stage: $library exports other than the $declared functions of $header:" >&2
    echo "$exported" | grep -v '^plugind_' | head >&2
    exit 1
fi
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)

root=$destdir$prefix
rm -rf "$destdir"
install -d "$root/bin" "$root/libexec/plugind" "$root/share/man/man1" "$root/share/man/man5" \
    "$root/share/bash-completion/completions" "$root/share/zsh/vendor-completions" \
    "$root/share/fish/vendor_completions.d" "$root/include/plugind" "$root/share/pkgconfig" \
    "$root/lib/plugind/plugins"
install -m 0755 "$bin/plugind" "$root/bin/plugind"
install -m 0755 "$bin/plugind-worker" "$root/libexec/plugind/plugind-worker"

plugind="$bin/plugind"
"$plugind" help --man > "$root/share/man/man1/plugind.1"
for command in $("$plugind" help --markdown | sed -n 's/^## plugind \(.*\)$/\1/p'); do
    "$plugind" help --man "$command" > "$root/share/man/man1/plugind-$command.1"
done
"$plugind" help --man manifest Documentation/ManifestReference.md > "$root/share/man/man5/plugind-manifest.5"
"$plugind" help --man policy Documentation/PolicyFiles.md > "$root/share/man/man5/plugind-policy.5"
install -d "$root/share/doc/plugind"
install -m 0644 README.md Documentation/*.md "$root/share/doc/plugind/"
"$plugind" completions bash > "$root/share/bash-completion/completions/plugind"
"$plugind" completions zsh > "$root/share/zsh/vendor-completions/_plugind"
"$plugind" completions fish > "$root/share/fish/vendor_completions.d/plugind.fish"
chmod 0644 "$root"/share/man/man*/* "$root"/share/*/completions/* "$root"/share/zsh/vendor-completions/* \
    "$root"/share/fish/vendor_completions.d/*

install -m 0644 Sources/PlugindPluginABI/include/plugind_plugin.h "$root/include/plugind/plugind_plugin.h"
install -m 0644 Sources/PlugindPluginABI/include/plugind_plugin.hpp "$root/include/plugind/plugind_plugin.hpp"
rust_kit="$root/share/plugind/kits/rust/plugind-plugin"
go_kit="$root/share/plugind/kits/go/plugind"
install -d "$rust_kit/src" "$go_kit/include"
install -m 0644 Kits/Rust/plugind-plugin/Cargo.toml Kits/Rust/plugind-plugin/Cargo.lock "$rust_kit/"
install -m 0644 Kits/Rust/plugind-plugin/src/*.rs "$rust_kit/src/"
install -m 0644 Kits/Go/plugind/go.mod Kits/Go/plugind/kit.go Kits/Go/plugind/kit.c Kits/Go/plugind/kit.h "$go_kit/"
# The Go kit's cgo finds the installed C header (relative: both are under the prefix).
ln -sf ../../../../../../include/plugind/plugind_plugin.h "$go_kit/include/plugind_plugin.h"
install -m 0644 "$header" "$root/include/plugind/plugind.h"
install -d "$root/lib/$multiarch/pkgconfig"
version_number=$("$plugind" --version | sed 's/^plugind //')
install -m 0644 "$library" "$root/lib/$multiarch/libplugind.so.$version_number"
ln -sf "libplugind.so.$version_number" "$root/lib/$multiarch/libplugind.so.0"
ln -sf libplugind.so.0 "$root/lib/$multiarch/libplugind.so"
sed -e "s|@PREFIX@|$prefix|" -e "s|@LIBDIR@|$prefix/lib/$multiarch|" -e "s|@VERSION@|$version_number|" \
    Packaging/plugind.pc.in > "$root/lib/$multiarch/pkgconfig/plugind.pc"
version=$("$plugind" --version | sed 's/^plugind //')
sed -e "s|@PREFIX@|$prefix|" -e "s|@VERSION@|$version|" Packaging/plugind-plugin.pc.in > "$root/share/pkgconfig/plugind-plugin.pc"
chmod 0644 "$root/share/pkgconfig/plugind-plugin.pc"
echo "staged plugind $version for $prefix in $destdir" >&2
