/// The files of a new plugin project, by language. Each project builds with `make` into
/// `build/<Name>.appex`, a bundle ready for `plugind verify` and `plugind install`.
struct PluginTemplate {
    /// Where the C header comes from: the installed plugind-dev (found by `pkg-config --cflags
    /// plugind-plugin` when the Makefile runs), or a copy in the project's include/ when plugind
    /// is not installed.
    enum HeaderSource {
        case pkgConfig
        case bundled(contents: String)
    }

    enum Language: String, CaseIterable {
        case c, cpp, rust, go, swift

        var displayName: String {
            switch self {
            case .c: "C"
            case .cpp: "C++"
            case .rust: "Rust"
            case .go: "Go"
            case .swift: "Swift"
            }
        }
    }

    var name: String
    var identifier: String
    var extensionPoint: String
    var language: Language
    /// Where a C project gets plugind_plugin.h.
    var header: HeaderSource
    /// The source tree, which a Swift project builds PluginKit from; nil for C.
    var checkout: SourceCheckout?
    /// Where the Rust and Go projects find their kits.
    var kits: KitLocation = KitLocation(rust: "", go: "")
    /// The `plugind` the Makefile runs (`plugind bind`): the one that wrote the project.
    var plugindExecutable: String

    /// The C++ kit's header, copied beside plugind_plugin.h when plugind is not installed.
    var cppKitHeader: String = ""

    /// Relative path → contents.
    func files() -> [(String, String)] {
        var files = [("manifest.json", manifest), ("README.md", readme)]
        switch language {
        case .c:
            files += [("Makefile", cMakefile), ("src/\(name).c", cSource)]
            if case .bundled(let contents) = header { files.append(("include/plugind_plugin.h", contents)) }
        case .cpp:
            files += [("Makefile", cppMakefile), ("CMakeLists.txt", cppCMakeLists), ("src/\(name).cpp", cppSource)]
            if case .bundled(let contents) = header {
                files.append(("include/plugind_plugin.h", contents))
                files.append(("include/plugind_plugin.hpp", cppKitHeader))
            }
        case .rust:
            files += [("Makefile", rustMakefile), ("Cargo.toml", rustCargo(kit: kits.rust)), ("src/lib.rs", rustSource)]
        case .go:
            files += [("Makefile", goMakefile), ("go.mod", goModule(kit: kits.go)), ("main.go", goSource), ("binding.go", goBinding)]
        case .swift:
            let binding = CodeBinding(extensionPoint: extensionPoint)
            files += [
                ("Makefile", swiftMakefile), ("Package.swift", swiftPackage), ("Sources/\(name)/\(name).swift", swiftSource),
                ("Sources/\(name)Binding/binding.c", binding.noteSource),
                ("Sources/\(name)Binding/include/\(name)Binding.h", "/* The binding note has no interface: see binding.c. */\n"),
            ]
        }
        return files
    }

    var manifest: String {
        """
        {
          "manifestVersion": 1,
          "identifier": "\(identifier)",
          "name": "\(name)",
          "version": "0.1.0",
          "extensionPoint": "\(extensionPoint)",
          "library": "lib\(name).so",\(language == .go ? "\n  \"limits\": {\"memoryBytes\": 3221225472}," : "")
          "description": "Greets its input."
        }

        """
    }

    /// Whether the scaffold's greeter asks its host whom to greet (the kits' do).
    var asksHost: Bool { [.cpp, .rust, .go].contains(language) }

    /// The file that holds the plugin's handler.
    var sourcePath: String {
        switch language {
        case .c: "src/\(name).c"
        case .cpp: "src/\(name).cpp"
        case .rust: "src/lib.rs"
        case .go: "main.go"
        case .swift: "Sources/\(name)/\(name).swift"
        }
    }

    var readme: String {
        """
        # \(name)

        A plugind plugin (\(language.displayName)) for the extension point `\(extensionPoint)`.

            make                                  # builds build/\(name).appex
            plugind verify build/\(name).appex      # checks it before it is installed
            plugind install build/\(name).appex     # copies it to your plugin directory
            plugind approve \(identifier) --yes
            plugind run \(identifier) "world"\(asksHost ? " --answer Ada   # prints: Hello, Ada: world" : "       # prints: Hello from \(name): world")
            make package KEY=~/.plugind-key         # signed build/\(name).plugin ('plugind keygen --output ~/.plugind-key' once)

        Edit the handler in \(sourcePath), and the manifest (limits, permissions,
        functions) in manifest.json; /usr/share/doc/plugind explains both.

        """
    }

    /// `make package`, the same in both languages' Makefiles.
    var packageRule: String {
        """
        # make package KEY=<private key from `plugind keygen`>: the signed single file to hand out.
        package: all
        \t@test -n "$(KEY)" || { echo "make package needs KEY=<your private key; make one with: $(PLUGIND) keygen --output <file>>" >&2; exit 1; }
        \t$(PLUGIND) sign $(BUNDLE) --key $(KEY)
        \t$(PLUGIND) pack $(BUNDLE) --output build/$(NAME).plugin
        """
    }

    var cMakefile: String {
        compiledMakefile(
            purpose: "Builds lib\(name).so and the bundle build/\(name).appex (manifest + library).", extension: "c",
            compiler: "CC", flags: "CFLAGS", standard: "-std=c11", bundledHeaders: ["plugind_plugin.h"])
    }

    /// The Makefile of a project one compiler builds from src/<Name>.<extension>: the headers
    /// through pkg-config where plugind-dev is installed, else the copies in include/.
    func compiledMakefile(purpose: String, extension: String, compiler: String, flags: String, standard: String, bundledHeaders: [String])
        -> String
    {
        let headerFlags: String
        let headerDependency: String
        switch header {
        case .pkgConfig:
            headerFlags = "$(shell pkg-config --cflags plugind-plugin)"
            headerDependency = ""
        case .bundled:
            headerFlags = "-Iinclude"
            headerDependency = bundledHeaders.map { " include/" + $0 }.joined()
        }
        return """
            # \(purpose)
            NAME := \(name)
            LIBRARY := lib$(NAME).so
            BUNDLE := build/$(NAME).appex
            \(flags) ?= -O2 -g
            \(flags) += \(standard) -Wall -Wextra -Werror -fPIC -fvisibility=hidden \(headerFlags)
            PLUGIND ?= \(plugindExecutable)

            all: $(BUNDLE)/$(LIBRARY) $(BUNDLE)/manifest.json

            $(BUNDLE)/$(LIBRARY): src/$(NAME).\(`extension`)\(headerDependency)
            \tmkdir -p $(BUNDLE)
            \t$(\(compiler)) $(\(flags)) -shared -o $@ src/$(NAME).\(`extension`)

            $(BUNDLE)/manifest.json: manifest.json
            \tmkdir -p $(BUNDLE)
            \tcp manifest.json $@

            \(packageRule)

            clean:
            \trm -rf build

            .PHONY: all package clean

            """
    }

    var cSource: String {
        """
        // \(name): a plugind plugin. Answers each request with a greeting followed by the request.
        #include <plugind_plugin.h>

        static const plugind_host *host;

        static int32_t greeter_init(const plugind_host *host_interface, void **state, plugind_plugin_response *error) {
            (void)state;
            (void)error;
            host = host_interface;
            return PLUGIND_PLUGIN_OK;
        }

        static int32_t greeter_handle(void *state, const plugind_plugin_request *request, plugind_plugin_response *response) {
            (void)state;
            static const char greeting[] = "Hello from \(name): ";
            if (host->append(response, (const uint8_t *)greeting, sizeof greeting - 1) != 0 ||
                host->append(response, request->bytes, request->length) != 0) {
                host->set_error(response, "the response does not fit");
                return 1;
            }
            return PLUGIND_PLUGIN_OK;
        }

        static const plugind_plugin descriptor = {
            .abi_version = PLUGIND_PLUGIN_ABI_VERSION,
            .size = sizeof(plugind_plugin),
            .name = "\(name)",
            .version = "0.1.0",
            .init = greeter_init,
            .handle = greeter_handle,
        };

        PLUGIND_PLUGIN_EXPORT const plugind_plugin *plugind_plugin_entry(void) { return &descriptor; }

        /* The extension point this code serves, recorded in the library: `plugind verify` checks
         * that the manifest names the same one. */
        PLUGIND_PLUGIN_BINDING("\(extensionPoint)");

        """
    }

    var swiftPackage: String {
        """
        // swift-tools-version: 6.2
        import PackageDescription

        let package = Package(
            name: "\(name)",
            products: [.library(name: "\(name)", type: .dynamic, targets: ["\(name)"])],
            dependencies: [.package(path: "\(checkout?.root ?? "")")],
            targets: [
                .target(
                    name: "\(name)",
                    dependencies: [.product(name: "PluginKit", package: "\(checkout?.packageIdentity ?? "plugind")"), "\(name)Binding"],
                    swiftSettings: [.swiftLanguageMode(.v6)]
                ),
                // Written by `plugind bind` (make runs it): records the extension point the code
                // binds to in the library, where `plugind verify` compares it with the manifest.
                .target(name: "\(name)Binding"),
            ]
        )

        """
    }

    var swiftSource: String {
        // Bound in code as on Apple platforms: the host's identifier and the point's name.
        let pointHost = extensionPoint.split(separator: ".").dropLast().joined(separator: ".")
        let pointName = extensionPoint.split(separator: ".").last.map(String.init) ?? extensionPoint
        return """
            import PluginKit

            /// \(name): answers each request with a greeting followed by the request.
            struct \(name): AppExtension {
                @AppExtensionPoint.Bind
                var extensionPoint: AppExtensionPoint {
                    AppExtensionPoint.Identifier(host: "\(pointHost)", name: "\(pointName)")
                }

                var configuration: some AppExtensionConfiguration {
                    ConnectionHandler { connection in
                        connection.requestHandler = { request in
                            Array("Hello from \(name): ".utf8) + request
                        }
                        return true
                    }
                }
            }

            @c(plugind_plugin_entry)
            public func pluginEntry() -> UnsafeRawPointer { PluginExport.entry(\(name).self) }

            """
    }

    var swiftMakefile: String {
        """
        # Builds lib\(name).so with SwiftPM and the bundle build/\(name).appex (manifest + library).
        # The extension point comes from the code: `plugind bind` writes it into manifest.json and
        # into the library before each build.
        NAME := \(name)
        CONFIGURATION ?= release
        BUNDLE := build/$(NAME).appex
        PLUGIND ?= \(plugindExecutable)

        all:
        \t$(PLUGIND) bind . --target $(NAME)
        \tswift build -c $(CONFIGURATION) --product $(NAME)
        \tmkdir -p $(BUNDLE)
        \tcp manifest.json $(BUNDLE)/
        \tcp "$$(swift build -c $(CONFIGURATION) --show-bin-path)/lib$(NAME).so" $(BUNDLE)/

        \(packageRule)

        clean:
        \trm -rf build .build

        .PHONY: all package clean

        """
    }
}
