import CHeaderReader
import Glibc

/// Reads a C header's functions through libclang (`CHeaderReader`, which loads it when asked).
enum HeaderReader {
    struct Failure: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    /// The functions `header` declares, in order: only its own with `mainFileOnly`, else those of
    /// the headers it includes too. `arguments` are the compiler's (-I, -D).
    static func functions(in header: String, arguments: [String], mainFileOnly: Bool) throws(Failure) -> [HeaderFunction] {
        final class Collected {
            var functions: [HeaderFunction] = []
        }
        let collected = Collected()
        var error = [CChar](repeating: 0, count: 16 * 1024)
        let compilerArguments = ["-x", "c", "-std=gnu11"] + arguments
        let status = withCStrings(compilerArguments) { pointers in
            withExtendedLifetime(collected) {
                plugind_header_read(
                    header, pointers, Int32(pointers.count), mainFileOnly ? 1 : 0,
                    { function, context in
                        guard let function, let context else { return }
                        Unmanaged<Collected>.fromOpaque(context).takeUnretainedValue().functions.append(HeaderReader.copy(function.pointee))
                    }, Unmanaged.passUnretained(collected).toOpaque(), &error, error.count)
            }
        }
        guard status == 0 else {
            throw Failure(message: String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return collected.functions
    }

    private static func withCStrings<Result>(_ strings: [String], _ body: ([UnsafePointer<CChar>?]) -> Result) -> Result {
        let copies = strings.map { strdup($0) }
        defer { for copy in copies { free(copy) } }
        return body(copies.map { UnsafePointer($0) })
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    private static func copy(_ type: plugind_header_type) -> HeaderType {
        HeaderType(
            spelling: text(type.spelling), canonical: text(type.canonical), kind: type.kind, size: type.size,
            pointerDepth: Int(type.pointer_depth), innermostKind: type.innermost_kind, innermostIsConst: type.innermost_is_const != 0,
            innermostSize: type.innermost_size, innermostName: text(type.innermost_name), innermostIsUnion: type.innermost_is_union != 0,
            record: type.record.map { copy($0.pointee) },
            callback: type.callback_types.map { types in
                (0...Int(min(max(type.callback_parameter_count, 0), Int32(PLUGIND_HEADER_MAXIMUM_CALLBACK_PARAMETERS)))).map {
                    copy(types[$0])
                }
            },
            callbackParameterCount: Int(type.callback_parameter_count), callbackIsVariadic: type.callback_is_variadic != 0)
    }

    private static func copy(_ record: plugind_header_record) -> HeaderRecord {
        let fields = (0..<Int(max(record.field_count, 0))).compactMap { index -> HeaderRecord.Field? in
            guard let field = record.fields?[index] else { return nil }
            return HeaderRecord.Field(
                name: text(field.name), offsetBits: field.offset, isBitField: field.is_bit_field != 0, type: copy(field.type))
        }
        return HeaderRecord(
            name: text(record.name), isUnion: record.is_union != 0, size: record.size, alignment: record.alignment, fields: fields)
    }

    private static func copy(_ function: plugind_header_function) -> HeaderFunction {
        let count = Int(max(function.parameter_count, 0))
        let parameters = (0..<count).map { index in
            HeaderFunction.Parameter(name: text(function.parameter_names?[index]), type: copy(function.parameter_types[index]))
        }
        return HeaderFunction(
            name: text(function.name), file: text(function.file), line: Int(function.line), isVariadic: function.is_variadic != 0,
            isStatic: function.is_static != 0, result: copy(function.result), parameters: parameters)
    }
}
