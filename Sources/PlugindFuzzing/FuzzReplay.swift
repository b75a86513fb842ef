import Foundation

/// Runs a fuzz body over files: each argument is a file, or a directory whose files are inputs.
/// What plugind-fuzz does when built without libFuzzer, and how crashes are reproduced.
package enum FuzzReplay {
    package static func inputs(in paths: [String]) -> [(path: String, bytes: [UInt8])] {
        var result: [(String, [UInt8])] = []
        for path in paths {
            var isDirectory: ObjCBool = false
            guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else { continue }
            let files =
                isDirectory.boolValue
                ? ((try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []).sorted().map { path + "/" + $0 } : [path]
            for file in files {
                if let data = FileManager.default.contents(atPath: file) { result.append((file, [UInt8](data))) }
            }
        }
        return result
    }

    /// Replays `paths` through `body`; returns the exit status (0 when every input passed).
    package static func main(_ name: String, _ paths: [String], _ body: ([UInt8]) throws -> Void) -> Int32 {
        let inputs = inputs(in: paths)
        var failures = 0
        for (path, bytes) in inputs {
            do {
                try body(bytes)
            } catch {
                failures += 1
                print("\(name): \(path): \(error)")
            }
        }
        print("\(name): replayed \(inputs.count) input(s), \(failures) failure(s)")
        return failures == 0 ? 0 : 1
    }
}
