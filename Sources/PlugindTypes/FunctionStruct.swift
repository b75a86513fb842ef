/// A C struct a manifest declares (`"structs"`): its size, alignment and the fields a host may
/// set or read, each at its offset. Bytes no field declares are the library's: the host never
/// reads or writes them, and the worker zeroes them when it makes the struct.
///
/// A struct lives in the worker: for one call (a `struct` argument, `struct timespec *ts`), or
/// between calls as a handle of a kind the manifest's `"handles"` gives the struct (`z_stream`,
/// which must not move while the library holds pointers into it). Its pointer fields are never
/// the host's to write: a buffer field points to memory the worker binds to it, a string field
/// is the library's to set.
public struct FunctionStruct: Hashable, Sendable {
    public var name: String
    public var size: Int
    public var alignment: Int
    public var fields: [Field]

    /// The largest struct a manifest may declare.
    public static let maximumSize = 1 << 16
    /// The most fields a struct may declare.
    public static let maximumFields = 64

    public struct Field: Hashable, Sendable {
        public enum Kind: Hashable, Sendable {
            /// `bool`, an integer, `float` or `double`.
            case scalar(FunctionValueType)
            /// A `const char *` the library sets (`z_stream.msg`): read as text, NULL as "".
            case string
            /// A pointer to elements of memory the worker binds when the caller sets the field:
            /// the caller's bytes (`in`), or room for what the library writes (`out`). `count`
            /// names the integer field that counts them. When `advances`, the library moves the
            /// pointer along and decreases the count as it goes (zlib's `next_in`/`avail_in`):
            /// what it wrote is the capacity less the count left.
            case buffer(direction: FunctionDirection, element: FunctionValueType, count: String, advances: Bool)
        }

        public var name: String
        public var offset: Int
        public var kind: Kind

        public init(name: String, offset: Int, kind: Kind) {
            self.name = name
            self.offset = offset
            self.kind = kind
        }

        /// The field's size in C: a pointer's for strings and buffers.
        public var byteWidth: Int {
            if case .scalar(let type) = kind { return type.byteWidth }
            return 8
        }
    }

    public init(name: String, size: Int, alignment: Int, fields: [Field]) {
        self.name = name
        self.size = size
        self.alignment = alignment
        self.fields = fields
    }

    public func field(named name: String) -> Field? {
        fields.first { $0.name == name }
    }

    /// The buffer field `name` counts, if any.
    public func buffer(countedBy name: String) -> Field? {
        fields.first { field in
            if case .buffer(_, _, let count, _) = field.kind { return count == name }
            return false
        }
    }

    /// Checks the layout: every field inside the struct at an offset aligned for its type, none
    /// overlapping another, every buffer counted by an integer field that counts only it.
    ///
    /// - Throws: `FunctionDeclarationError` naming the struct and the field.
    public func validate() throws(FunctionDeclarationError) {
        func refuse(_ field: String?, _ problem: String) -> FunctionDeclarationError {
            FunctionDeclarationError(function: "struct \(name)", parameter: nil, argument: field.map { "field '\($0)'" }, problem: problem)
        }
        guard FunctionSignature.isCIdentifier(name) else { throw refuse(nil, "is not a C identifier") }
        guard size > 0, size <= Self.maximumSize else { throw refuse(nil, "has size \(size); it must be 1 to \(Self.maximumSize) bytes") }
        guard [1, 2, 4, 8, 16].contains(alignment) else { throw refuse(nil, "has alignment \(alignment); it must be 1, 2, 4, 8 or 16") }
        guard size % alignment == 0 else { throw refuse(nil, "has size \(size), not a multiple of its alignment \(alignment)") }
        guard fields.count <= Self.maximumFields else {
            throw refuse(nil, "declares \(fields.count) fields; at most \(Self.maximumFields) are allowed")
        }
        var names: Set<String> = []
        var counters: [String: String] = [:]
        for field in fields {
            guard FunctionSignature.isCIdentifier(field.name) else { throw refuse(field.name, "is not a C identifier") }
            guard names.insert(field.name).inserted else { throw refuse(field.name, "is declared twice") }
            let width = field.byteWidth
            guard field.offset >= 0, field.offset <= size - width else {
                throw refuse(field.name, "at offset \(field.offset) with \(width) bytes does not fit in the \(size) bytes of the struct")
            }
            guard field.offset % width == 0 else {
                throw refuse(field.name, "is at offset \(field.offset), not aligned for its \(width) bytes")
            }
            guard width <= alignment else {
                throw refuse(field.name, "has \(width) bytes, more than the struct's alignment \(alignment) allows")
            }
            if let other = fields.first(where: {
                $0.name != field.name && $0.offset < field.offset + width && field.offset < $0.offset + $0.byteWidth
            }) {
                throw refuse(field.name, "overlaps field '\(other.name)'")
            }
            switch field.kind {
            case .scalar(let type):
                guard type.isScalar else { throw refuse(field.name, "is \(type); a field is a scalar, a string or a buffer") }
            case .string:
                break
            case .buffer(let direction, let element, let count, _):
                guard direction != .inout else {
                    throw refuse(
                        field.name, "is an inout buffer; a buffer field is in (the caller's bytes) or out (room the library fills)")
                }
                guard element.isScalar else { throw refuse(field.name, "holds \(element); a buffer holds scalars") }
                guard let counter = self.field(named: count), case .scalar(let type) = counter.kind, type.isInteger else {
                    throw refuse(field.name, "is counted by '\(count)', which is not an integer field of \(name)")
                }
                if let earlier = counters[count] {
                    throw refuse(field.name, "is counted by '\(count)', which already counts '\(earlier)'; a count field counts one buffer")
                }
                counters[count] = field.name
            }
        }
    }
}

extension FunctionStruct {
    /// Why the struct cannot be passed or returned by value, or nil when it can. C passes a
    /// struct by value in registers chosen by the types of all its bytes (x86-64 puts an
    /// eightbyte holding a `double` in a vector register, one holding an `int` in a general one),
    /// so the layout must declare every field, each where C puts it: at the next offset aligned
    /// for its size, the struct as large as its last field rounded up to its alignment, which is
    /// that of its largest field. Buffers are for structs passed by pointer: a copy's pointer
    /// would tell the host nothing back.
    public var byValueProblem: String? {
        var end = 0
        var largest = 1
        for field in fields.sorted(by: { $0.offset < $1.offset }) {
            if case .buffer = field.kind {
                return "holds buffer field '\(field.name)'; a struct passed or returned by value holds scalars and strings"
            }
            let width = field.byteWidth
            let expected = (end + width - 1) / width * width
            guard field.offset == expected else {
                let gap = field.offset > expected ? "bytes \(end) to \(field.offset - 1) are no field's" : "it overlaps"
                return
                    "declares field '\(field.name)' at offset \(field.offset) where C would put it at \(expected) (\(gap)); a struct passed or returned by value declares every field, for C chooses its registers by them all"
            }
            end = field.offset + width
            largest = max(largest, width)
        }
        let padded = (end + largest - 1) / largest * largest
        guard !fields.isEmpty, size == padded, alignment == largest else {
            return
                "has size \(size) and alignment \(alignment), where its fields make \(padded) and \(largest); a struct passed or returned by value declares every field, for C chooses its registers by them all"
        }
        return nil
    }
}

/// Which fields of a struct a call sets before the function runs and reads after it: what a
/// `struct` argument, or a handle of a struct kind, exchanges with the caller.
public struct FunctionStructAccess: Hashable, Sendable {
    public var layout: FunctionStruct
    /// Fields the caller gives values, in the order it passes them. Setting an `in` buffer sets
    /// its count from the bytes; setting an `out` buffer binds room for as many elements as its
    /// count field (which the caller sets too) says.
    public var sets: [String]
    /// Fields the result reports, in order, named `argument.field`.
    public var gets: [String]

    public init(layout: FunctionStruct, sets: [String] = [], gets: [String] = []) {
        self.layout = layout
        self.sets = sets
        self.gets = gets
    }

    /// The fields the caller passes values for: `set`, less the counts of the `in` buffers it
    /// sets (their lengths) and the `out` buffers (their room comes from their counts).
    public var inputFields: [FunctionStruct.Field] {
        sets.compactMap { name -> FunctionStruct.Field? in
            guard let field = layout.field(named: name) else { return nil }
            switch field.kind {
            case .buffer(.out, _, _, _): return nil
            case .scalar:
                if let buffer = layout.buffer(countedBy: name), case .buffer(.in, _, _, _) = buffer.kind, sets.contains(buffer.name) {
                    return nil
                }
                return field
            default: return field
            }
        }
    }

    /// The type of the value the caller passes for `field`, or the result reports for it.
    public static func valueType(of field: FunctionStruct.Field) -> FunctionValueType {
        switch field.kind {
        case .scalar(let type): type
        case .string: .string
        case .buffer: .bytes
        }
    }

    /// Checks `set` and `get` against the layout; `problem` describes what is wrong.
    public func validate() -> String? {
        for (list, names) in [("set", sets), ("get", gets)] {
            var seen: Set<String> = []
            for name in names {
                guard layout.field(named: name) != nil else { return "\(list)s '\(name)', which struct \(layout.name) does not declare" }
                guard seen.insert(name).inserted else { return "\(list)s '\(name)' twice" }
            }
        }
        for name in sets {
            guard let field = layout.field(named: name) else { continue }
            switch field.kind {
            case .string:
                return "sets '\(name)', a string the library sets (a pointer field is never the caller's to write)"
            case .buffer(.out, _, let count, _):
                guard sets.contains(count) else {
                    return "sets out buffer '\(name)' but not its count '\(count)', the room to bind for it"
                }
            case .buffer(.in, _, let count, _):
                guard !sets.contains(count) else {
                    return "sets both in buffer '\(name)' and its count '\(count)'; the count is the length of the bytes given"
                }
            default:
                break
            }
        }
        for name in gets {
            guard let field = layout.field(named: name) else { continue }
            guard case .buffer(let direction, _, let count, _) = field.kind else { continue }
            guard direction == .out else { return "gets in buffer '\(name)'; only what the library writes comes back" }
            guard sets.contains(name) else {
                return "gets out buffer '\(name)' without setting it; set it (and '\(count)') so the call binds fresh room for it"
            }
            guard gets.contains(count) else {
                return "gets out buffer '\(name)' but not its count '\(count)', by which the host checks its length"
            }
        }
        return nil
    }
}
