// swift-tools-version: 6.2
import Foundation
import PackageDescription

// The SDK's host, the host written from Apple's documentation, and one executable per whole
// host program of plugind's documentation (Sources/Snippet*, written there by DocumentationSnippetTests'
// companion in SDKPackageTests): one package, so that plugind is built once for all of them.
let snippets = ((try? FileManager.default.contentsOfDirectory(atPath: Context.packageDirectory + "/Sources")) ?? [])
    .filter { $0.hasPrefix("Snippet") }.sorted()

let package = Package(
    name: "TransformHost",
    dependencies: [.package(path: "@PLUGIND_ROOT@"), .package(path: "../TextTransformKit")],
    targets: [
        .executableTarget(
            name: "TransformHost",
            dependencies: [
                .product(name: "ExtensionFoundation", package: "@PLUGIND_PACKAGE@"),
                .product(name: "TextTransformHostKit", package: "TextTransformKit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .executableTarget(
            name: "AppleDocumentationHost",
            dependencies: [
                .product(name: "ExtensionFoundation", package: "@PLUGIND_PACKAGE@"),
                .product(name: "TextTransformHostKit", package: "TextTransformKit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
        + snippets.map { name in
            .executableTarget(
                name: name, dependencies: [.product(name: "ExtensionFoundation", package: "@PLUGIND_PACKAGE@")],
                swiftSettings: [.swiftLanguageMode(.v6)])
        }
)
