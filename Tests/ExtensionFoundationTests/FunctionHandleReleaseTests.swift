import ExtensionFoundation
import TestSupport
import Testing

@Suite("A handle's release through the host API", .tags(.unit))
struct FunctionHandleReleaseTests {
    @Test("a handle made by hand has no process to release it in: release() refuses and leaves it unreleased")
    func handMade() async {
        let handle = FunctionHandle(kind: "sqlite3", id: 5)
        await #expect(throws: FunctionCallError.self) { try await handle.release() }
        #expect(!handle.isReleased)
    }
}
