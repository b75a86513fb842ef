import TestSupport
import Testing

@testable import plugind

/// What `plugind bind` reads from a Swift extension's `Implementing { … }` without compiling it,
/// and how it writes the result into a manifest and the library's note.
@Suite("plugind bind: capabilities read from code", .tags(.unit))
struct CapabilityReaderTests {
    func read(_ code: String) throws(CodeBinding.Failure) -> [String] {
        try CapabilityReader([("Extension.swift", code)]).statedCapabilities()
    }

    @Test("Supports(\"…\") and types of the extension's own with a literal id, in order; none without a block")
    func reads() throws {
        let code = """
            struct Markdown: AppExtensionPoint.Capability {
                var id: String { "text/markdown" }
            }
            struct Rust: Capability, Sendable { let id = "text/x-rust" }
            struct Filter: AppExtension {
                @Bind
                var extensionPoint: AppExtensionPoint {
                    Identifier(host: "com.example.editor", name: "filters")
                    Implementing {
                        Markdown()
                        AppExtensionPoint.Supports("text/plain"); Rust()
                    }
                }
            }
            """
        #expect(try read(code) == ["text/markdown", "text/plain", "text/x-rust"])
        #expect(try read("struct Filter: AppExtension {}").isEmpty)
        #expect(try read("Capabilities { Supports(\"a/b\") }") == ["a/b"])
    }

    @Test(
        "what only running code could tell is refused with the capability named",
        arguments: [
            (
                "Implementing { Computed() }\nstruct Computed: Capability { var id: String { prefix + \"x\" } }",
                "cannot tell the identifier of the capability Computed()"
            ),
            ("Implementing { Named(\"text/plain\") }", "cannot read the capability 'Named(\"text/plain\")' without running code"),
            ("Implementing { Supports(\"has space\") }", "'has space' is not a capability identifier"),
            ("Implementing { Supports(\"a/b\"); Supports(\"a/b\") }", "the capability 'a/b' is stated twice"),
            ("Implementing { Supports(\"a/b\") }\nImplementing { Supports(\"c/d\") }", "states capabilities more than once"),
        ])
    func refuses(code: String, reason: String) {
        #expect {
            try read(code)
        } throws: { error in
            "\(error)".contains(reason)
        }
    }

    @Test("the manifest gets capabilities after its point, or in place of the ones it had; the note records them")
    func writes() throws {
        let binding = CodeBinding(extensionPoint: "com.example.editor.filters", capabilities: ["text/markdown", "text/plain"])
        let fresh = "{\n    \"extensionPoint\": \"com.example.old.filters\",\n    \"library\": \"libF.so\"\n}\n"
        #expect(
            try binding.applied(toManifest: fresh)
                == "{\n    \"extensionPoint\": \"com.example.editor.filters\",\n    \"capabilities\": [\"text/markdown\", \"text/plain\"],\n    \"library\": \"libF.so\"\n}\n"
        )
        let stated = "{\"extensionPoint\": \"com.example.editor.filters\", \"capabilities\": [\"text/html\"]}"
        #expect(
            try binding.applied(toManifest: stated)
                == "{\"extensionPoint\": \"com.example.editor.filters\", \"capabilities\": [\"text/markdown\", \"text/plain\"]}")
        // No capabilities in code: a manifest without the key is left without one.
        #expect(try CodeBinding(extensionPoint: "com.example.editor.filters").applied(toManifest: fresh).contains("capabilities") == false)
        #expect(binding.noteSource.contains(#""extensionPoint=com.example.editor.filters\ncapabilities=text/markdown text/plain""#))
        #expect(
            binding.noteSource.contains(
                "char description[\("extensionPoint=com.example.editor.filters\ncapabilities=text/markdown text/plain".utf8.count)]"))
    }
}
