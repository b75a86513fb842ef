import CPlugindShims

/// Both ends of a pipe, created close-on-exec.
package struct Pipe: Sendable {
    package var readEnd: FileDescriptor
    package var writeEnd: FileDescriptor

    /// Wraps `pipe2(2)` with O_CLOEXEC (a GNU extension Swift does not see, hence the shim).
    package init() throws(SystemError) {
        var readFD: CInt = -1
        var writeFD: CInt = -1
        try checkShim("pipe2", plugind_shim_pipe(&readFD, &writeFD))
        readEnd = FileDescriptor(rawValue: readFD)
        writeEnd = FileDescriptor(rawValue: writeFD)
    }

    package func close() {
        readEnd.close()
        writeEnd.close()
    }
}
