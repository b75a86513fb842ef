// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Reverse",
    products: [.library(name: "Reverse", type: .dynamic, targets: ["Reverse"])],
    dependencies: [.package(path: "@PLUGIND_ROOT@"), .package(path: "../TextTransformKit")],
    targets: [
        .target(
            name: "Reverse",
            dependencies: [
                .product(name: "PluginKit", package: "@PLUGIND_PACKAGE@"),
                .product(name: "TextTransformExtensionKit", package: "TextTransformKit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
