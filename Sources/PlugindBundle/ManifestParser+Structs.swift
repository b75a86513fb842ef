import PlugindSystem
import PlugindTypes

// The `structs` key: C structs by layout, the fields a call may set or read, each at its offset
// (Documentation/ManifestReference.md, "Structs").

extension ObjectReader {
    /// `"structs": {"z_stream": {"size": 112, "alignment": 8, "fields": [{"name": "avail_in",
    /// "offset": 8, "type": "uint32"}, …]}}`, each layout checked (`FunctionStruct.validate`).
    mutating func readStructs() throws(ManifestError) -> [String: FunctionStruct] {
        guard let value = members["structs"] else { return [:] }
        let structs = ObjectReader(file: file, path: keyPath("structs"), value: value)
        try structs.requireObject()
        guard structs.members.count <= ManifestParser.maximumListCount else {
            throw error("structs", "declares \(structs.members.count) structs; at most \(ManifestParser.maximumListCount) are allowed")
        }
        var layouts: [String: FunctionStruct] = [:]
        for (name, declaration) in structs.members.sorted(by: { $0.key < $1.key }) {
            guard ManifestParser.isCIdentifier(name) else {
                throw structs.error(name, "is not a C identifier (a struct is named as C names it, such as z_stream)")
            }
            var entry = ObjectReader(file: file, path: structs.keyPath(name), value: declaration)
            try entry.requireObject()
            entry.warnUnknownKeys(ManifestParser.structKeys)
            warnings += entry.warnings
            guard let size = try entry.positiveInteger("size") else {
                throw entry.error("size", "is missing (sizeof(\(name)) in bytes, as the library's compiler lays it out)")
            }
            guard let alignment = try entry.positiveInteger("alignment") else {
                throw entry.error("alignment", "is missing (_Alignof(\(name)): 1, 2, 4, 8 or 16)")
            }
            guard case .array(let elements)? = entry.members["fields"] else {
                throw entry.error("fields", "must be an array of field objects (name, offset, type)")
            }
            guard elements.count <= FunctionStruct.maximumFields else {
                throw entry.error("fields", "has \(elements.count) entries; at most \(FunctionStruct.maximumFields) are allowed")
            }
            var fields: [FunctionStruct.Field] = []
            for (index, element) in elements.enumerated() {
                var field = ObjectReader(file: file, path: entry.keyPath("fields[\(index)]"), value: element)
                try field.requireObject()
                field.warnUnknownKeys(ManifestParser.fieldKeys)
                warnings += field.warnings
                fields.append(try field.readField())
            }
            let layout = FunctionStruct(
                name: name, size: Int(clamping: size), alignment: Int(clamping: alignment), fields: fields)
            do {
                try layout.validate()
            } catch {
                throw structs.error(name, "is refused: \(error)")
            }
            layouts[name] = layout
        }
        return layouts
    }

    /// `{"name": "next_in", "offset": 0, "type": "buffer", "direction": "in", "count":
    /// "avail_in", "advances": true}`, `{"name": "msg", "offset": 48, "type": "string"}`.
    private func readField() throws(ManifestError) -> FunctionStruct.Field {
        let name = try requiredString("name")
        guard ManifestParser.isCIdentifier(name) else { throw error("name", "must be a C identifier, found '\(InertText.escape(name))'") }
        let offset: Int
        switch members["offset"] {
        case .integer(let number)? where number >= 0 && number < Int64(FunctionStruct.maximumSize): offset = Int(number)
        case .unsignedInteger(let number)? where number < UInt64(FunctionStruct.maximumSize): offset = Int(number)
        case nil: throw error("offset", "is missing (offsetof the field, in bytes)")
        case let other?: throw error("offset", "must be a byte offset from 0 to \(FunctionStruct.maximumSize - 1), found \(other.typeName)")
        }
        let type = try requiredString("type")
        let notBuffer = ["direction", "element", "count", "advances"]
        switch type {
        case "string":
            for key in notBuffer where members[key] != nil {
                throw error(key, "does not apply: a string field is the library's const char *")
            }
            return FunctionStruct.Field(name: name, offset: offset, kind: .string)
        case "buffer":
            guard members["direction"] != nil else {
                throw error("direction", "is missing (in: the caller's bytes; out: room the library fills)")
            }
            let directionText = try requiredString("direction")
            guard let direction = FunctionDirection(rawValue: directionText), direction != .inout else {
                throw error("direction", "must be in or out for a buffer field, found '\(InertText.escape(directionText))'")
            }
            var element = FunctionValueType.uint8
            if members["element"] != nil {
                let text = try requiredString("element")
                guard let type = FunctionValueType(rawValue: text), type.isScalar else {
                    throw error(
                        "element", "must be a scalar type (bool, int8 … uint64, float or double), found '\(InertText.escape(text))'")
                }
                element = type
            }
            guard members["count"] != nil else { throw error("count", "is missing (the integer field that counts the buffer's elements)") }
            let count = try requiredString("count")
            var advances = false
            if let value = members["advances"] {
                guard case .bool(let flag) = value else { throw error("advances", "must be true or false, found \(value.typeName)") }
                advances = flag
            }
            return FunctionStruct.Field(
                name: name, offset: offset, kind: .buffer(direction: direction, element: element, count: count, advances: advances))
        default:
            guard let scalar = FunctionValueType(rawValue: type), scalar.isScalar else {
                throw error(
                    "type",
                    "must be a scalar type (bool, int8 … uint64, float or double), string or buffer, found '\(InertText.escape(type))'")
            }
            for key in notBuffer where members[key] != nil { throw error(key, "does not apply: \(type) is a scalar field") }
            return FunctionStruct.Field(name: name, offset: offset, kind: .scalar(scalar))
        }
    }

    /// The `set` and `get` of a struct argument or a struct handle, checked against `layout`.
    func readStructAccess(_ layout: FunctionStruct, of function: String) throws(ManifestError) -> FunctionStructAccess {
        let access = FunctionStructAccess(layout: layout, sets: try stringArray("set") ?? [], gets: try stringArray("get") ?? [])
        if let problem = access.validate() {
            throw error(problem.hasPrefix("gets") ? "get" : "set", "is refused: an argument of \(function) \(problem)")
        }
        return access
    }
}
