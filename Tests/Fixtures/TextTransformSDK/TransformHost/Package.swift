// swift-tools-version: 6.2
import PackageDescription

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
        )
    ]
)
