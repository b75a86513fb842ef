import PlugindTypes

/// A handle owner that can release a handle and wait for it (a process's handles).
protocol FunctionHandleReleasing: FunctionHandleOwner {
    /// Calls the release function of `kind` with the handle numbered `id`.
    func release(kind: String, id: UInt64) async throws
}

extension FunctionHandle {
    /// Calls the kind's release function (the manifest's `"handles"`) with this handle, once: a
    /// second call, or one after passing the handle to the release function, does nothing. The
    /// NULL handle needs no release.
    ///
    /// - Throws: the errors of the call (`AppExtensionError` from a process); `FunctionCallError`
    ///   for a handle made by hand, which has no process to release it in.
    public func release() async throws {
        guard let releasing = owner as? any FunctionHandleReleasing else {
            throw FunctionCallError(
                "handle \(self) has no process to release it in (it was made by hand); call its release function instead")
        }
        guard !isNull, markReleased() else { return }
        try await releasing.release(kind: kind, id: id)
    }
}
