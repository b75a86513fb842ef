// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "TextTransformKit",
    products: [
        .library(name: "TextTransformExtensionKit", targets: ["TextTransformExtensionKit"]),
        .library(name: "TextTransformHostKit", targets: ["TextTransformHostKit"]),
    ],
    dependencies: [.package(path: "@PLUGIND_ROOT@")],
    targets: [
        .target(
            name: "TextTransformExtensionKit",
            dependencies: [.product(name: "PluginKit", package: "@PLUGIND_PACKAGE@")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
        .target(
            name: "TextTransformHostKit",
            dependencies: [.product(name: "ExtensionFoundation", package: "@PLUGIND_PACKAGE@")],
            swiftSettings: [.swiftLanguageMode(.v6)]
        ),
    ]
)
