import TestSupport
import Testing

@testable import ExtensionFoundation

@Suite("Which files the host reads for a worker's stack report", .tags(.unit))
struct StackObjectFilesTests {
    private let files = StackObjectFiles(
        exact: [
            "/plugins/p.appex/libp.so": "/plugins/p.appex/libp.so", "/.plugind/system/libz.so.1": "/usr/lib/x86_64-linux-gnu/libz.so.1",
        ],
        directories: ["/opt/swift/usr/lib/swift/linux"], workerExecutable: "/usr/libexec/plugind/plugind-worker")

    @Test("the files the host gave the worker, its dependency directories, the system's libraries and the worker itself")
    func known() {
        #expect(files.hostPath(forWorkerPath: "/plugins/p.appex/libp.so") == "/plugins/p.appex/libp.so")
        #expect(files.hostPath(forWorkerPath: "/.plugind/system/libz.so.1") == "/usr/lib/x86_64-linux-gnu/libz.so.1")
        #expect(
            files.hostPath(forWorkerPath: "/opt/swift/usr/lib/swift/linux/libswiftCore.so")
                == "/opt/swift/usr/lib/swift/linux/libswiftCore.so")
        #expect(files.hostPath(forWorkerPath: "/lib/x86_64-linux-gnu/libc.so.6") == "/lib/x86_64-linux-gnu/libc.so.6")
        #expect(files.hostPath(forWorkerPath: "") == "/usr/libexec/plugind/plugind-worker")
    }

    @Test("any other path a hostile worker names is not opened")
    func unknown() {
        for path in [
            "/etc/shadow", "/home/owner/.ssh/id_ed25519", "/lib/../etc/passwd", "/lib/./x/../../etc/passwd", "relative/libc.so.6",
            "/plugins/p.appex/other.so", "/opt/swift/usr/lib/swift/linux/sub/libx.so", "/lib/x\nobject 9 0 /etc/shadow", "/libfake/x.so",
        ] {
            #expect(files.hostPath(forWorkerPath: path) == nil, "\(path)")
        }
        #expect(StackObjectFiles.none.hostPath(forWorkerPath: "") == nil)
    }
}
