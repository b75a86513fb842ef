#!/usr/bin/env bash
# Installs plugind on a machine without dpkg (or into a prefix of one's own), and removes it:
#   Scripts/install.sh [--prefix DIR]              (default /usr/local)
#   Scripts/install.sh [--prefix DIR] --uninstall
# What is installed is what the Debian package holds (Scripts/stage.sh builds and stages it), and
# every file and directory it creates is recorded in DIR/share/plugind/installed-files, so that
# --uninstall removes exactly that: directories only when they are empty, never a plugin, an
# approval or a rule someone put there. With --prefix /usr or /usr/local as root it also creates
# /etc/plugind (the administrator's policy) when missing.
set -euo pipefail
cd "$(dirname "$0")/.."

prefix=/usr/local
uninstall=
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2 ;;
        --prefix=*) prefix=${1#--prefix=}; shift ;;
        --uninstall) uninstall=1; shift ;;
        -h|--help) sed -n '2,10s/^# \{0,1\}//p' "$0"; exit 0 ;;
        *) echo "install: unknown argument '$1' (see --help)" >&2; exit 2 ;;
    esac
done
case $prefix in /*) ;; *) prefix=$(pwd)/$prefix ;; esac
prefix=${prefix%/}
record=$prefix/share/plugind/installed-files

remove_recorded() {
    [ -f "$record" ] || { echo "install: nothing recorded at $record; is plugind installed under $prefix?" >&2; return 1; }
    # Files first, then directories deepest first (sort -r puts a directory after what it holds).
    grep '^f ' "$record" | cut -c3- | while IFS= read -r path; do rm -f -- "$path"; done
    local directories
    directories=$(grep '^d ' "$record.dirs" 2>/dev/null | cut -c3- | sort -r || true)
    rm -f -- "$record" "$record.dirs"
    while IFS= read -r path; do
        [ -n "$path" ] && { rmdir -- "$path" 2>/dev/null || true; }
    done <<< "$directories"
    if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
}

if [ -n "$uninstall" ]; then
    remove_recorded
    echo "removed plugind from $prefix" >&2
    exit 0
fi

stage=$(pwd)/.build/install-stage
Scripts/stage.sh "$stage" "$prefix"
if [ -f "$record" ]; then
    echo "== replacing the plugind installed under $prefix" >&2
    remove_recorded
fi
files=$stage.files
directories=$stage.dirs
: > "$files"
: > "$directories"
# Every directory the stage holds and the record's own, parents first, recorded only when this
# run makes it.
{ (cd "$stage$prefix" && find . -mindepth 1 -type d); echo ./share/plugind; } | sort -u | while IFS= read -r directory; do
    missing=()
    path=$prefix/${directory#./}
    while [ ! -e "$path" ]; do missing=("$path" "${missing[@]}"); path=$(dirname "$path"); done
    for each in "${missing[@]}"; do mkdir -- "$each" && echo "d $each" >> "$directories"; done
done
(cd "$stage$prefix" && find . -type f | sort) | while IFS= read -r file; do
    path=$prefix/${file#./}
    install -m "$(stat -c %a "$stage$prefix/$file")" "$stage$prefix/$file" "$path"
    echo "f $path" >> "$files"
done
if [ "$(id -u)" -eq 0 ] && { [ "$prefix" = /usr ] || [ "$prefix" = /usr/local ]; }; then
    if [ ! -e /etc/plugind ]; then
        install -d -m 0755 /etc/plugind
        echo "d /etc/plugind" >> "$directories"
    fi
fi
# A library under /usr/local/lib is found once the loader's cache knows it.
if [ "$(id -u)" -eq 0 ] && command -v ldconfig >/dev/null; then ldconfig; fi
mv "$files" "$record"
mv "$directories" "$record.dirs"
rm -rf "$stage"
echo "installed plugind under $prefix ($(wc -l < "$record") files, recorded in $record)" >&2
if [ "$prefix" != /usr ] && [ "$prefix" != /usr/local ]; then
    echo "note: add $prefix/bin to PATH, and $prefix/share/pkgconfig to PKG_CONFIG_PATH for plugin builds" >&2
fi
