/// A C type as libclang read it from a header: what `DeclarationDraft` classifies.
struct HeaderType: Sendable, Equatable {
    /// libclang's `CXTypeKind` values that matter here (stable across its versions).
    enum Kind {
        static let void: Int32 = 2
        static let bool: Int32 = 3
        static let charUnsigned: Int32 = 4
        static let unsignedChar: Int32 = 5
        static let unsignedShort: Int32 = 8
        static let unsignedInt: Int32 = 9
        static let unsignedLong: Int32 = 10
        static let unsignedLongLong: Int32 = 11
        static let charSigned: Int32 = 13
        static let signedChar: Int32 = 14
        static let short: Int32 = 16
        static let int: Int32 = 17
        static let long: Int32 = 18
        static let longLong: Int32 = 19
        static let float: Int32 = 21
        static let double: Int32 = 22
        static let pointer: Int32 = 101
        static let record: Int32 = 105
        static let enumeration: Int32 = 106
        static let functionWithoutPrototype: Int32 = 110
        static let functionPrototype: Int32 = 111
        static let constantArray: Int32 = 112
        static let vector: Int32 = 113
        static let incompleteArray: Int32 = 114
        static let variableArray: Int32 = 115
        static let arrays = [constantArray, vector, incompleteArray, variableArray]
    }

    /// As written, typedefs kept (`uLongf *`).
    var spelling: String
    /// With typedefs resolved (`unsigned long *`).
    var canonical: String
    var kind: Int32
    /// In bytes; negative when incomplete.
    var size: Int64
    /// How many pointers lead to `innermostKind`.
    var pointerDepth: Int
    var innermostKind: Int32
    /// Whether what one pointer points to is const.
    var innermostIsConst: Bool
    /// Negative for an incomplete (opaque) struct.
    var innermostSize: Int64
    /// The struct's, union's or enum's name under the pointers (`sqlite3`); empty otherwise.
    var innermostName: String
    var innermostIsUnion: Bool = false
    /// The layout of the struct passed by value or one pointer points to, when the header
    /// completes it (`div_t`, `z_stream *`); nil otherwise, and for a field's own type.
    var record: HeaderRecord? = nil
    /// A function's parameter that points to a function with a prototype (a callback): that
    /// function's result, then its parameters; nil otherwise.
    var callback: [HeaderType]? = nil
    /// How many parameters the callback takes, those past the ones described included.
    var callbackParameterCount = 0
    var callbackIsVariadic = false
}

/// A struct or union a header completes, as the compiler lays it out for this machine.
struct HeaderRecord: Sendable, Equatable {
    struct Field: Sendable, Equatable {
        /// Empty for an anonymous struct or union member.
        var name: String
        /// In bits; negative when libclang cannot say.
        var offsetBits: Int64
        var isBitField: Bool
        var type: HeaderType
    }

    /// The first typedef naming it (`z_stream` for `struct z_stream_s`), else its tag (`tm`).
    var name: String
    var isUnion: Bool
    var size: Int64
    var alignment: Int64
    var fields: [Field]
}

/// A function a header declares.
struct HeaderFunction: Sendable, Equatable {
    struct Parameter: Sendable, Equatable {
        /// Empty when the header names none.
        var name: String
        var type: HeaderType
    }

    var name: String
    var file: String
    var line: Int
    var isVariadic: Bool
    /// `static` or `inline` in the header: no library exports it.
    var isStatic: Bool
    var result: HeaderType
    var parameters: [Parameter]
}
