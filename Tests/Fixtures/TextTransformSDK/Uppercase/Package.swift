// swift-tools-version: 6.2
import PackageDescription

let package = Package(
    name: "Uppercase",
    products: [.library(name: "Uppercase", type: .dynamic, targets: ["Uppercase"])],
    dependencies: [.package(path: "@PLUGIND_ROOT@"), .package(path: "../TextTransformKit")],
    targets: [
        .target(
            name: "Uppercase",
            dependencies: [
                .product(name: "PluginKit", package: "@PLUGIND_PACKAGE@"),
                .product(name: "TextTransformExtensionKit", package: "TextTransformKit"),
            ],
            swiftSettings: [.swiftLanguageMode(.v6)]
        )
    ]
)
