/// The projects `plugind new --lang cpp|rust|go` writes: a greeter that asks its host whom to
/// greet, on the language's kit, with a Makefile whose `make` builds build/<Name>.appex.
extension PluginTemplate {
    /// Where the Rust and Go kits are: installed by plugind-dev, or in the source tree.
    struct KitLocation {
        var rust: String
        var go: String
    }

    // MARK: C++

    var cppMakefile: String {
        compiledMakefile(
            purpose: "Builds lib\(name).so with the C++ kit (plugind_plugin.hpp) and the bundle build/\(name).appex.",
            extension: "cpp", compiler: "CXX", flags: "CXXFLAGS", standard: "-std=c++17",
            bundledHeaders: ["plugind_plugin.h", "plugind_plugin.hpp"])
    }

    /// CMake, for authors who build with it: the installed kit through pkg-config.
    var cppCMakeLists: String {
        """
        # With plugind-dev installed: cmake -B build-cmake && cmake --build build-cmake
        cmake_minimum_required(VERSION 3.16)
        project(\(name) CXX)
        set(CMAKE_CXX_STANDARD 17)
        set(CMAKE_CXX_VISIBILITY_PRESET hidden)
        find_package(PkgConfig REQUIRED)
        pkg_check_modules(PLUGIND REQUIRED IMPORTED_TARGET plugind-plugin)
        add_library(\(name) SHARED src/\(name).cpp)
        target_link_libraries(\(name) PRIVATE PkgConfig::PLUGIND)

        """
    }

    var cppSource: String {
        """
        // \(name): a plugind plugin in C++. Asks its host whom to greet, then greets them with the
        // request; an empty request is an error the host sees with its message.
        #include <plugind_plugin.hpp>

        #include <stdexcept>
        #include <string>

        class \(name) : public plugind::Plugin {
        public:
            explicit \(name)(plugind::Host &host) { host.log(plugind::LogLevel::debug, "\(name) ready"); }

            plugind::Answer handle(plugind::Request &request) override {
                if (request.text().empty()) throw std::invalid_argument("nothing to greet: the request is empty");
                plugind::AskResult name = request.ask("name?");
                std::string whom = name ? std::string(name.text()) : "world";
                return "Hello, " + whom + ": " + std::string(request.text());
            }
        };

        PLUGIND_CPP_PLUGIN(\(name), "\(name)", "0.1.0");

        // The extension point this code serves, recorded in the library: `plugind verify` checks
        // that the manifest names the same one.
        PLUGIND_CPP_BINDING("\(extensionPoint)");

        """
    }

    // MARK: Rust

    func rustCargo(kit: String) -> String {
        """
        [package]
        name = "\(name.lowercased())"
        version = "0.1.0"
        edition = "2021"
        publish = false

        [lib]
        name = "\(name)"
        crate-type = ["cdylib"]

        [dependencies]
        plugind-plugin = { path = "\(kit)" }

        [profile.release]
        panic = "unwind"   # the kit turns a panic into a plugin error; "abort" would end the worker

        """
    }

    var rustSource: String {
        """
        //! \(name): a plugind plugin in Rust. Asks its host whom to greet, then greets them with the
        //! request; an empty request is an error the host sees with its message.
        #![allow(non_snake_case)]

        use plugind_plugin::{export_plugin, Error, Host, LogLevel, Plugin, Request};

        struct \(name);

        impl Plugin for \(name) {
            fn new(host: Host) -> Result<Self, Error> {
                host.log(LogLevel::Debug, "\(name) ready");
                Ok(\(name))
            }

            fn handle(&self, request: &Request) -> Result<Vec<u8>, Error> {
                if request.bytes().is_empty() {
                    return Err(Error::with_code(2, "nothing to greet: the request is empty"));
                }
                let whom = request.ask(b"name?").unwrap_or_else(|_| b"world".to_vec());
                Ok([b"Hello, ".as_slice(), &whom, b": ", request.bytes()].concat())
            }
        }

        export_plugin!(\(name), name = "\(name)", version = "0.1.0", point = "\(extensionPoint)");

        """
    }

    var rustMakefile: String {
        """
        # Builds lib\(name).so with cargo (offline: the kit needs only the standard library) and the
        # bundle build/\(name).appex.
        NAME := \(name)
        BUNDLE := build/$(NAME).appex
        CARGO ?= cargo
        PLUGIND ?= \(plugindExecutable)

        all:
        \t$(CARGO) build --release --offline --target-dir build/cargo
        \tmkdir -p $(BUNDLE)
        \tcp manifest.json $(BUNDLE)/
        \tcp build/cargo/release/lib$(NAME).so $(BUNDLE)/

        \(packageRule)

        clean:
        \trm -rf build

        .PHONY: all package clean

        """
    }

    // MARK: Go

    func goModule(kit: String) -> String {
        """
        module local/\(name.lowercased())

        go 1.19

        require plugind/kit v0.0.0

        replace plugind/kit => \(kit)

        """
    }

    var goSource: String {
        """
        // \(name): a plugind plugin in Go. Asks its host whom to greet, then greets them with the
        // request; an empty request is an error the host sees with its message.
        package main

        import "plugind/kit"

        type greeter struct{}

        func (greeter) Handle(request *kit.Request) ([]byte, error) {
        \tif len(request.Bytes()) == 0 {
        \t\treturn nil, &kit.Error{Code: 2, Message: "nothing to greet: the request is empty"}
        \t}
        \twhom, err := request.Ask([]byte("name?"))
        \tif err != nil {
        \t\twhom = []byte("world")
        \t}
        \treturn append([]byte("Hello, "+string(whom)+": "), request.Bytes()...), nil
        }

        func init() {
        \tkit.Register(kit.Definition{Name: "\(name)", Version: "0.1.0", New: func(kit.Host) (kit.Plugin, error) { return greeter{}, nil }})
        }

        func main() {}

        """
    }

    /// Records the extension point in the library (a C note through cgo), where `plugind verify`
    /// compares it with the manifest.
    var goBinding: String {
        """
        package main

        // The extension point this code serves, recorded in the library: `plugind verify` checks
        // that the manifest names the same one.

        /*
        #cgo CFLAGS: -I\(kits.go)/include
        #include <plugind_plugin.h>
        PLUGIND_PLUGIN_BINDING("\(extensionPoint)");
        */
        import "C"

        """
    }

    var goMakefile: String {
        """
        # Builds lib\(name).so with go build -buildmode=c-shared (offline: the kit needs only the
        # standard library) and the bundle build/\(name).appex. The Go runtime reserves about 1 GiB
        # of address space at start-up, so the manifest asks for 3 GiB: run it where the host allows
        # that (PLUGIND_MEMORY_LIMIT=3221225472 for plugind run).
        NAME := \(name)
        BUNDLE := build/$(NAME).appex
        GO ?= go
        PLUGIND ?= \(plugindExecutable)
        export GOFLAGS ?= -mod=mod -buildvcs=false
        export GOPROXY ?= off

        all:
        \tmkdir -p $(BUNDLE)
        \t$(GO) build -buildmode=c-shared -o $(BUNDLE)/lib$(NAME).so .
        \trm -f $(BUNDLE)/lib$(NAME).h
        \tcp manifest.json $(BUNDLE)/

        \(packageRule)

        clean:
        \trm -rf build

        .PHONY: all package clean

        """
    }
}
