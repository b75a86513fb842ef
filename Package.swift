// swift-tools-version: 6.2
import PackageDescription

// Applied to every Swift target: Swift 6 language mode plus the upcoming features the project's
// style relies on (explicit public imports, `any` for existentials, member import visibility).
let swiftSettings: [SwiftSetting] = [
    .swiftLanguageMode(.v6),
    .enableUpcomingFeature("ExistentialAny"),
    .enableUpcomingFeature("MemberImportVisibility"),
    .enableUpcomingFeature("InternalImportsByDefault"),
    .enableUpcomingFeature("NonisolatedNonsendingByDefault"),
]

let gnuSource: [CSetting] = [.define("_GNU_SOURCE")]

/// Example plugins written in C: (product and target name, directory under ExamplePlugins).
let cExamplePlugins: [(name: String, path: String)] = [
    ("CTextFilter", "ExamplePlugins/CTextFilter"),
    ("Echo", "ExamplePlugins/Echo"),
    ("FunctionLibrary", "ExamplePlugins/FunctionLibrary"),
    ("Countdown", "ExamplePlugins/Countdown"),
    ("Greeter", "ExamplePlugins/Greeter"),
]

/// Plugins written in C++ on the C++ kit (plugind_plugin.hpp): the example and the kit's probe.
let cppPlugins: [(name: String, path: String)] = [
    ("CppTextFilter", "ExamplePlugins/CppTextFilter"),
    ("CppKitProbe", "ExamplePlugins/Testing/CppKitProbe"),
]

/// Plugins that exist for the tests and the benchmarks: (product and target name, directory).
let testPlugins: [(name: String, path: String)] = [
    ("ConversationProbe", "ExamplePlugins/Testing/ConversationProbe"),
    ("SystemLibraryProbe", "ExamplePlugins/Testing/SystemLibraryProbe"),
    ("HostileDecoder", "ExamplePlugins/Testing/HostileDecoder"),
]

/// The system libraries a test plugin links beyond libc.
let testPluginLibraries: [String: [LinkerSetting]] = ["SystemLibraryProbe": [.linkedLibrary("archive")]]

/// Plugins that misbehave on purpose, one per behaviour, for the fault-isolation tests.
let faultyPlugins = [
    "FaultySegfault", "FaultyAbort", "FaultyHang", "FaultyAbortAtLoad", "FaultyExitAtLoad",
    "FaultyHangAtLoad", "FaultyNoEntry", "FaultyWrongABI", "FaultyFlood", "FaultyBusyLoop",
    "FaultyMemoryHog", "FaultyForkBomb", "FaultyDescriptorHog", "FaultyProtocolGarbage",
    "FaultyProtocolClose", "FaultyOversizedResponse", "FaultyNetworkClient", "FaultyFileReader",
    "FaultyBundleWriter", "FaultySignalHost", "FaultyGrandchild", "FaultySharedMemoryLie",
    "FaultyDescriptorProbe", "FaultyHostileProbe", "FaultyThreadedCallbacks",
]

let pluginTargets: [Target] =
    cExamplePlugins.map { plugin in
        .target(
            name: plugin.name,
            dependencies: ["PlugindPluginABI"],
            path: plugin.path,
            exclude: ["manifest.json"],
            publicHeadersPath: ".",
            cSettings: gnuSource
        )
    }
    + cppPlugins.map { plugin in
        .target(
            name: plugin.name,
            dependencies: ["PlugindPluginABI"],
            path: plugin.path,
            exclude: plugin.name == "CppTextFilter" ? ["manifest.json"] : [],
            publicHeadersPath: "."
        )
    }
    + testPlugins.map { plugin in
        .target(
            name: plugin.name, dependencies: ["PlugindPluginABI"], path: plugin.path, publicHeadersPath: ".", cSettings: gnuSource,
            linkerSettings: testPluginLibraries[plugin.name] ?? [])
    }
    + faultyPlugins.map { name in
        .target(
            name: name,
            dependencies: ["FaultyPluginSupport"],
            path: "ExamplePlugins/Faulty/\(name)",
            publicHeadersPath: ".",
            cSettings: gnuSource
        )
    }
    + [
        .target(name: "FaultyPluginSupport", dependencies: ["PlugindPluginABI"], path: "ExamplePlugins/Faulty/Support"),
        .target(
            name: "SwiftTextFilter",
            dependencies: ["PluginKit"],
            path: "ExamplePlugins/SwiftTextFilter",
            exclude: ["manifest.json"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SwiftGreeter",
            dependencies: ["PluginKit"],
            path: "ExamplePlugins/SwiftGreeter",
            exclude: ["manifest.json"],
            swiftSettings: swiftSettings
        ),
        .target(
            name: "SwiftExtensionProbe",
            dependencies: ["PluginKit"],
            path: "ExamplePlugins/Testing/SwiftExtensionProbe",
            swiftSettings: swiftSettings
        ),
    ]

let pluginProducts: [Product] =
    (cExamplePlugins.map(\.name) + cppPlugins.map(\.name) + testPlugins.map(\.name) + faultyPlugins + [
        "SwiftTextFilter", "SwiftGreeter", "SwiftExtensionProbe",
    ]).map { name in
        .library(name: name, type: .dynamic, targets: [name])
    }

let package = Package(
    name: "plugind",
    products: [
        .library(name: "ExtensionFoundation", targets: ["ExtensionFoundation"]),
        .library(name: "PluginKit", targets: ["PluginKit"]),
        .executable(name: "plugind", targets: ["plugind"]),
        .executable(name: "plugind-worker", targets: ["plugind-worker"]),
        .executable(name: "plugind-example-host", targets: ["plugind-example-host"]),
        // libplugind: the host API for C and other languages (installed as libplugind.so.0).
        .library(name: "PlugindHost", type: .dynamic, targets: ["PlugindHost"]),
    ] + pluginProducts,
    targets: [
        // C: spawning, pidfd and wait, fatal-signal reporting (host and worker).
        .target(name: "CPlugindShims", cSettings: gnuSource, linkerSettings: [.linkedLibrary("gcc_s")]),
        // C: the full-screen terminal of `plugind browse`, through ncursesw (Debian's libncurses-dev).
        .target(
            name: "CTerminal", cSettings: gnuSource,
            linkerSettings: [.linkedLibrary("ncursesw"), .linkedLibrary("tinfo")]),
        // C: the worker's confinement layers (prctl, rlimits, seccomp, Landlock).
        // libseccomp (Debian's libseccomp-dev for its header, libseccomp2 at run time) is loaded
        // when filters are compiled, not linked: the launcher lets it go before it forks.
        .target(name: "CPlugindConfinement", cSettings: gnuSource),
        // Callbacks into the worker without generated code: a pool of compiled stubs (x86-64).
        .target(name: "CPlugindCallbacks", cSettings: gnuSource),
        // C: names a plugin's stack from the host's files with elfutils' libdw (Debian's
        // libdw-dev for the headers, libdw1 at run time), in `plugind-worker --symbolize`,
        // confined before it parses them. libdw is loaded then (dlopen), not linked: workers and
        // launchers would map it for nothing.
        .target(
            name: "CPlugindSymbolizer", dependencies: ["CPlugindConfinement"], cSettings: gnuSource,
            linkerSettings: [.linkedLibrary("stdc++")]),
        // C: a C header's function declarations through libclang (Debian's libclang1-N, loaded with
        // dlopen when `plugind declare` asks, never linked): the CLI only.
        .target(name: "CHeaderReader", cSettings: gnuSource),
        // libarchive: plugin packages (`plugind pack`, `plugind install FILE`); the CLI only.
        .systemLibrary(name: "CArchive", pkgConfig: "libarchive", providers: [.apt(["libarchive-dev"])]),
        .systemLibrary(name: "CFFI", pkgConfig: "libffi", providers: [.apt(["libffi-dev"])]),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        // The plugin ABI: one C header shared by the worker, C plugins and PluginKit.
        .target(name: "PlugindPluginABI"),

        .target(name: "PlugindSystem", dependencies: ["CPlugindShims"], swiftSettings: swiftSettings),
        // The few value types of the public API that the worker shares (function signatures and
        // values, log levels): re-exported by ExtensionFoundation, so hosts import one module.
        .target(name: "PlugindTypes", swiftSettings: swiftSettings),
        .target(name: "PlugindWire", dependencies: ["PlugindSystem", "PlugindTypes"], swiftSettings: swiftSettings),
        // C: getdents64 for the bundle reader, in a target of its own so the worker does not link it.
        .target(name: "CDirectoryEntries"),
        .target(
            name: "PlugindBundle", dependencies: ["PlugindSystem", "PlugindTypes", "CCrypto", "CDirectoryEntries"],
            swiftSettings: swiftSettings),
        // Plugin packages (libarchive): for the CLI and the package fuzz target, kept out of libplugind.
        .target(
            name: "PlugindPackages", dependencies: ["PlugindBundle", "PlugindSystem", "PlugindWire", "CArchive"],
            swiftSettings: swiftSettings),
        // The engine behind the host API: the host's value types (configuration, identities,
        // errors, messages), reading policy, discovery, launch, the channel, sessions, activity,
        // and the runtime that owns them. Its API for the CLI and the tests is `package`.
        .target(
            name: "PlugindEngine",
            dependencies: ["PlugindTypes", "PlugindSystem", "PlugindWire", "PlugindBundle", "CPlugindShims"],
            swiftSettings: swiftSettings
        ),
        // The public host API, a layer over the engine (which it re-exports for the value types).
        .target(
            name: "ExtensionFoundation",
            dependencies: ["PlugindEngine", "PlugindTypes", "PlugindSystem", "PlugindWire", "PlugindBundle"],
            swiftSettings: swiftSettings
        ),
        // What only the owner's and the administrator's tools do: edit the policy, review an
        // approval, follow a publisher's update. Linked by the CLI, never by a host.
        .target(
            name: "PlugindPolicyEditing",
            dependencies: ["PlugindEngine", "PlugindBundle", "PlugindSystem"],
            swiftSettings: swiftSettings
        ),
        // C: the header of libplugind's C API (plugind/plugind.h); the Swift target implements it.
        .target(name: "CPlugindHostAPI"),
        .target(
            name: "PlugindHost", dependencies: ["ExtensionFoundation", "PlugindEngine", "CPlugindHostAPI", "PlugindSystem"],
            swiftSettings: swiftSettings
        ),
        .target(name: "PluginKit", dependencies: ["PlugindTypes", "PlugindPluginABI", "PluginKitABINote"], swiftSettings: swiftSettings),
        // C: the ABI note a Swift plugin carries (one file that includes the plugin header).
        .target(name: "PluginKitABINote", dependencies: ["PlugindPluginABI"]),
        // The worker's bookkeeping as a state machine without system calls (`WorkerCore`).
        .target(name: "PlugindWorkerCore", dependencies: ["PlugindWire"], swiftSettings: swiftSettings),
        .executableTarget(
            name: "plugind-worker",
            dependencies: [
                "PlugindSystem", "PlugindWire", "PlugindWorkerCore", "PlugindPluginABI", "CFFI", "CPlugindShims",
                "CPlugindConfinement", "CPlugindSymbolizer", "CPlugindCallbacks",
            ],
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "plugind",
            dependencies: [
                "ExtensionFoundation", "PlugindEngine", "PlugindPolicyEditing", "PlugindBundle", "PlugindPackages", "PlugindSystem",
                "PlugindWire", "CTerminal", "CArchive", "CPlugindShims", "CHeaderReader",
            ],
            swiftSettings: swiftSettings
        ),

        // Fuzz targets (Scripts/fuzz.sh builds them with libFuzzer; normally they replay inputs).
        .target(name: "PlugindFuzzing", dependencies: ["PlugindWire", "PlugindBundle", "PlugindPackages"], swiftSettings: swiftSettings),
        // Fuzz targets of what hosts and the CLI read (statistics pages, the plugin log, activity
        // records, the crash log, workers' reports, policy files) and of the host's protocol state
        // machine: they need the engine's package API,
        // so they live here, linked by the fuzz executable and the tests only, never by a library
        // that ships.
        .target(
            name: "PlugindHostFuzzing",
            dependencies: ["PlugindEngine", "PlugindPolicyEditing", "PlugindFuzzing", "PlugindSystem", "PlugindWire"],
            swiftSettings: swiftSettings),
        .target(name: "CFuzzerDriver", path: "Fuzz/CFuzzerDriver"),
        .executableTarget(
            name: "plugind-fuzz",
            dependencies: ["PlugindEngine", "PlugindFuzzing", "PlugindHostFuzzing", "CFuzzerDriver"],
            path: "Fuzz/PlugindFuzz",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "plugind-bench",
            dependencies: [
                "ExtensionFoundation", "PlugindEngine", "PlugindPolicyEditing", "PlugindBundle", "PlugindSystem", "CPlugindShims",
            ],
            path: "Benchmarks/PlugindBench",
            swiftSettings: swiftSettings
        ),
        .executableTarget(
            name: "plugind-example-host",
            dependencies: ["ExtensionFoundation"],
            swiftSettings: swiftSettings
        ),

        .target(
            name: "TestSupport",
            dependencies: ["ExtensionFoundation", "PlugindEngine", "PlugindSystem", "CTestSupport"],
            path: "Tests/TestSupport",
            swiftSettings: swiftSettings
        ),
        // C the tests need and Swift cannot call (variadic system calls).
        .target(name: "CTestSupport", path: "Tests/CTestSupport", cSettings: gnuSource),
        .testTarget(
            name: "PlugindWireTests",
            dependencies: ["PlugindWire", "PlugindSystem", "PlugindFuzzing", "PlugindBundle", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "IntegrationTests",
            dependencies: [
                "ExtensionFoundation", "PlugindEngine", "PlugindPolicyEditing", "PlugindWire", "PlugindSystem", "PlugindBundle",
                "TestSupport",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "ExtensionFoundationTests",
            dependencies: [
                "ExtensionFoundation", "PlugindEngine", "PlugindPolicyEditing", "PlugindWire", "PlugindSystem", "PlugindBundle",
                "TestSupport", "CPlugindShims", "PlugindFuzzing", "PlugindHostFuzzing",
            ],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PlugindSystemTests",
            dependencies: ["PlugindSystem", "CPlugindShims", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PlugindWorkerCoreTests",
            // The engine for what the host reads back of the worker's refusals.
            dependencies: ["PlugindWorkerCore", "PlugindWire", "PlugindEngine", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "PlugindBundleTests",
            dependencies: ["PlugindBundle", "PlugindWire", "TestSupport"],
            swiftSettings: swiftSettings
        ),
        .testTarget(
            name: "CLITests",
            // plugind itself for the browser's model, which is tested without a terminal.
            dependencies: [
                "TestSupport", "ExtensionFoundation", "PlugindEngine", "PlugindPolicyEditing", "PlugindSystem", "plugind", "CTerminal",
                "PlugindFuzzing", "PlugindHostFuzzing",
            ],
            swiftSettings: swiftSettings
        ),
    ] + pluginTargets,
    cxxLanguageStandard: .cxx17
)
