import CPlugindShims
import TestSupport
import Testing

@testable import ExtensionFoundation
@testable import PlugindEngine

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

    @Test("the worker sends each object's path as UTF-8, cut on a character: the host refuses any other, so none is lost")
    func workerPathsAreUTF8() {
        func sent(_ path: [UInt8], capacity: Int = Int(PLUGIND_SHIM_STACK_MAX_PATH)) -> [UInt8] {
            var output = [UInt8](repeating: 0, count: capacity)
            let count = (path + [0]).withUnsafeBufferPointer { name in
                name.withMemoryRebound(to: CChar.self) { plugind_shim_stack_object_path($0.baseAddress!, &output, capacity) }
            }
            return Array(output.prefix(count))
        }
        let plain = Array("/usr/lib/x86_64-linux-gnu/libé€😀.so".utf8)
        #expect(sent(plain) == plain)
        // Bytes that begin no character (a stray byte, a surrogate, an overlong slash) stand as '?'.
        #expect(sent(Array("/a".utf8) + [0xFF] + Array("b".utf8)) == Array("/a?b".utf8))
        #expect(sent([0x2F, 0xED, 0xA0, 0x80]) == Array("/???".utf8))
        #expect(sent([0x2F, 0xC0, 0xAF]) == Array("/??".utf8))
        // A cut inside a character leaves the character out; a cut between characters keeps all.
        let long = Array("/lib/".utf8) + [UInt8](repeating: 0x61, count: 153) + Array("€x".utf8)
        #expect(sent(long) == Array(long.prefix(158)))
        #expect(sent(Array(long.prefix(161))) == Array(long.prefix(158)))
        #expect(sent(Array(long.prefix(158))) == Array(long.prefix(158)))
        for path in [plain, Array("/a".utf8) + [0xFF], long] {
            #expect(String(validating: sent(path), as: UTF8.self) != nil, "\(path)")
        }
    }
}
