import PlugindSystem

extension AppExtensionError {
    /// One frame of a plugin's stack, as the host could name it from its own copies of the
    /// loaded objects. Linux addition.
    ///
    /// Everything but `address` may be missing: an object the host does not know (it names only
    /// the files it gave the worker and the system's libraries), a stripped library, code without
    /// debug information. The strings come from the plugin's files: `description` shows them inert.
    public struct StackFrame: Sendable, Hashable, Codable, CustomStringConvertible {
        /// 0 is where the thread was stopped; the others are the calls that led there.
        public var index: Int
        /// The address in the worker (frame 0: the instruction; the others: the return address).
        public var address: UInt64
        /// The file name of the loaded object ("libgreeter.so"), when the address lies in one.
        public var object: String?
        /// The address relative to the object's load address, as `addr2line -e` takes it.
        public var objectOffset: UInt64?
        /// The function, demangled (C++, Rust and Swift names).
        public var function: String?
        /// The address's offset into `function`.
        public var functionOffset: UInt64?
        /// The source file and line, where the object has debug information.
        public var file: String?
        public var line: Int?

        public init(
            index: Int, address: UInt64, object: String? = nil, objectOffset: UInt64? = nil, function: String? = nil,
            functionOffset: UInt64? = nil, file: String? = nil, line: Int? = nil
        ) {
            self.index = index
            self.address = address
            self.object = object
            self.objectOffset = objectOffset
            self.function = function
            self.functionOffset = functionOffset
            self.file = file
            self.line = line
        }

        /// "#1 parse_header+0x1c in libparser.so (parser.c:42)", or "#3 0x7f12… in libc.so.6+0x29d90".
        public var description: String {
            var text = "#\(index) "
            if let function {
                text += InertText.escape(function)
                if let functionOffset, functionOffset > 0 { text += "+0x" + String(functionOffset, radix: 16) }
                if let object { text += " in " + InertText.escape(object) }
            } else {
                text += "0x" + String(address, radix: 16)
                if let object {
                    text += " in " + InertText.escape(object)
                    if let objectOffset { text += "+0x" + String(objectOffset, radix: 16) }
                }
            }
            if let file {
                let name = file.split(separator: "/").last.map(String.init) ?? file
                text += " (" + InertText.escape(name) + (line.map { ":\($0)" } ?? "") + ")"
            }
            return text
        }
    }
}
