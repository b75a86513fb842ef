/// A test's own failure with a message, for what `#require` cannot say (a value of the wrong case).
struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
