import CFFI
import PlugindWire

/// The libffi type of a struct passed or returned by value, built once at load from its declared
/// layout. libffi works out the struct's size, alignment and field offsets itself; they are
/// compared with the declaration's, so a layout the manifest got wrong is refused at load rather
/// than passed in the wrong registers. The type lives as long as the worker's function table.
enum ForeignStructType {
    /// A struct type for `layout`, or why libffi lays it out otherwise.
    static func make(_ layout: FunctionStruct) -> Result<UnsafeMutablePointer<ffi_type>, LoadFailure> {
        let fields = layout.fields.sorted { $0.offset < $1.offset }
        let elements = UnsafeMutablePointer<UnsafeMutablePointer<ffi_type>?>.allocate(capacity: fields.count + 1)
        for (index, field) in fields.enumerated() {
            elements[index] = ForeignFunctionTable.elementType(of: field)
        }
        elements[fields.count] = nil
        let type = UnsafeMutablePointer<ffi_type>.allocate(capacity: 1)
        type.initialize(to: ffi_type(size: 0, alignment: 0, type: UInt16(FFI_TYPE_STRUCT), elements: elements))
        let offsets = UnsafeMutablePointer<Int>.allocate(capacity: max(fields.count, 1))
        defer { offsets.deallocate() }
        let status = ffi_get_struct_offsets(FFI_DEFAULT_ABI, type, offsets)
        let laidOut = (0..<fields.count).map { offsets[$0] }
        guard status == FFI_OK, type.pointee.size == layout.size, Int(type.pointee.alignment) == layout.alignment,
            laidOut == fields.map(\.offset)
        else {
            let found = "size \(type.pointee.size), alignment \(type.pointee.alignment), offsets \(laidOut)"
            type.deallocate()
            elements.deallocate()
            return .failure(
                LoadFailure(
                    kind: .invalidConfiguration,
                    message:
                        "struct \(layout.name) passed by value is laid out by C as \(found), not as declared (size \(layout.size), alignment \(layout.alignment), offsets \(fields.map(\.offset)))"
                ))
        }
        return .success(type)
    }
}
