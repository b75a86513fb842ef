# The release build of plugind's programs as they are installed, and the checks of what they link.
# Sourced by Scripts/stage.sh (the packages and Scripts/install.sh) and Scripts/bench.sh (whose
# figures are what users' workers cost), from the package's root:
#   installed_build PRODUCT...     builds each product; exits with a message when a check fails
# Every program: the Swift runtime linked in statically (--static-swift-stdlib), so that it runs
# on a Debian 12 machine without the Swift toolchain; bound at load and relocations read-only
# (full RELRO), as Debian hardens its own binaries. The worker also takes the few pieces of
# libstdc++ and libgcc it uses, and libffi, from their archives (Packaging/worker-link), and maps
# libseccomp only while a launcher compiles the filters: each library a worker maps is relocated
# data of every worker's own.

installed_build_flags=(-c release --static-swift-stdlib -Xlinker -z -Xlinker now -Xlinker -z -Xlinker relro)

installed_build() {
    local product bin search
    for product in "$@"; do
        local flags=("${installed_build_flags[@]}")
        [ "$product" = plugind-worker ] && flags+=(-Xlinker -L"$PWD/Packaging/worker-link")
        echo "== swift build ${flags[*]} --product $product" >&2
        swift build "${flags[@]}" --product "$product" 2>&1 | grep -Ev '^\[[0-9]+/[0-9]+\]|^Building|^Compiling|^Write' || true
    done
    bin=$(swift build -c release --show-bin-path)
    for product in "$@"; do
        [ -x "$bin/$product" ] || { echo "installed build: the release build of $product failed" >&2; exit 1; }
        # The toolchain's own library directory must not be searched by an installed binary
        # (SwiftPM adds $ORIGIN, the binary's own root-owned directory, which is harmless).
        search=$(readelf -d "$bin/$product" | sed -n 's/.*R\(UN\)\{0,1\}PATH.*\[\(.*\)\]/\2/p')
        if [ -n "$search" ] && [ "$search" != '$ORIGIN' ]; then
            echo "installed build: $bin/$product searches $search for libraries; an installed binary must not" >&2
            exit 1
        fi
        if readelf -d "$bin/$product" | grep -q 'libswiftCore'; then
            echo "installed build: $bin/$product links the Swift runtime dynamically; --static-swift-stdlib did not apply" >&2
            exit 1
        fi
    done
    [[ " $* " == *" plugind-worker "* ]] || return 0
    for library in libstdc++ libgcc_s libffi; do
        if readelf -d "$bin/plugind-worker" | grep -q "NEEDED.*\[$library\.so"; then
            echo "installed build: plugind-worker needs $library.so; Packaging/worker-link/$library.so was not used" >&2
            exit 1
        fi
    done
    if readelf -d "$bin/plugind-worker" | grep -q 'NEEDED.*\[libseccomp\.so'; then
        echo "installed build: plugind-worker needs libseccomp.so; it must load it with dlopen (CPlugindConfinement/libseccomp.c)" >&2
        exit 1
    fi
    # Every worker maps the runtimes its executable links, relocated for its own layout: the
    # worker's modules stay clear of Swift concurrency (ContinuousClock included: MonotonicInstant)
    # and of _StringProcessing (String.contains(String): containsBytes(of:)). Linking them cost
    # each worker about 280 KiB of unique memory.
    for runtime in swift_task_create _RegexParser; do
        if nm "$bin/plugind-worker" | grep -q "$runtime"; then
            echo "installed build: plugind-worker links $runtime: a module the worker links uses Swift concurrency or _StringProcessing" >&2
            exit 1
        fi
    done
}
