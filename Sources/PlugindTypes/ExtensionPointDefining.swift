/// What Apple's ExtensionFoundation marks the types that represent extension points with: the
/// host's `AppExtensionPoint` (ExtensionFoundation) and the extension's (PluginKit) adopt it, so
/// code constrained on it, as Apple's may be, compiles on both sides. It asks nothing.
public protocol ExtensionPointDefining {}
