#ifndef PLUGIND_HEADER_READER_H
#define PLUGIND_HEADER_READER_H

// Reads the function declarations of a C header with libclang (Debian's libclang1-N, loaded with
// dlopen when asked, so that nothing links it): what `plugind declare` drafts declarations from.

#include <stddef.h>

typedef struct plugind_header_record plugind_header_record;

// A C type as the header writes it and as it resolves: the pointer levels above the innermost
// type, whether that innermost type is const, its kind and size. Kinds are libclang's CXTypeKind
// values of the canonical type (see the PLUGIND_HEADER_TYPE_* constants).
typedef struct plugind_header_type {
    const char *spelling;       // as written, typedefs kept ("uLongf *")
    const char *canonical;      // typedefs resolved ("unsigned long *")
    int kind;                   // the canonical type's kind
    long long size;             // its size in bytes; negative when incomplete or not a size
    int pointer_depth;          // how many pointers lead to the innermost type
    int innermost_kind;         // the kind under every pointer (the type itself when depth is 0)
    int innermost_is_const;     // whether the type one pointer points to is const (depth >= 1)
    long long innermost_size;   // the innermost type's size; negative when incomplete (opaque)
    const char *innermost_name; // a struct's, union's or enum's name ("sqlite3"), else ""
    int innermost_is_union;     // whether the innermost type is a union
    // The layout of the struct or union passed by value or one pointer points to, when the
    // header completes it (div_t, z_stream *); NULL otherwise, and always for a field's own type.
    const plugind_header_record *record;
    // For a pointer to a function with a prototype (a callback, `int (*)(const void *, const
    // void *)`) that is a function's parameter: its result, then its parameters, each described
    // without a callback or a record of its own; NULL and 0 otherwise. A count past
    // PLUGIND_HEADER_MAXIMUM_CALLBACK_PARAMETERS is reported, its types not described.
    const struct plugind_header_type *callback_types;
    int callback_parameter_count;
    int callback_is_variadic;
} plugind_header_type;

// Far more parameters than a declared callback may take.
enum { PLUGIND_HEADER_MAXIMUM_CALLBACK_PARAMETERS = 32 };

typedef struct plugind_header_field {
    const char *name;          // "" for an anonymous struct or union member
    long long offset;          // in bits, as libclang gives it; negative when it cannot say
    int is_bit_field;
    plugind_header_type type;  // its record is NULL: nested layouts are not described
} plugind_header_field;

// A struct or union the header completes, as the compiler lays it out for this machine.
struct plugind_header_record {
    const char *name;          // the first typedef naming it in the translation unit (z_stream), else its tag (tm)
    int is_union;
    long long size;
    long long alignment;
    int field_count;           // at most PLUGIND_HEADER_MAXIMUM_FIELDS
    const plugind_header_field *fields;
};

// Far more fields than a manifest may declare: a struct past it is described up to it.
enum { PLUGIND_HEADER_MAXIMUM_FIELDS = 1024 };

typedef struct plugind_header_function {
    const char *name;
    const char *file;
    unsigned line;
    int is_variadic;
    int is_static;    // static or inline in the header: no symbol a library exports
    plugind_header_type result;
    int parameter_count;
    const char *const *parameter_names;          // "" when the header names none
    const plugind_header_type *parameter_types;
} plugind_header_function;

// Called once per function declared in the header (with `main_file_only`, not in the headers it
// includes). The pointers are valid during the call only.
typedef void (*plugind_header_visitor)(const plugind_header_function *function, void *context);

// Parses `header` as C with `arguments` (-I, -D, -std) and visits its functions. Returns 0, or -1
// with `error` set: libclang missing, or the header's errors (as clang prints them).
int plugind_header_read(const char *header, const char *const *arguments, int argument_count, int main_file_only,
                        plugind_header_visitor visitor, void *context, char *error, size_t error_size);

// libclang's CXTypeKind values the caller classifies (stable across libclang versions).
enum {
    PLUGIND_HEADER_TYPE_VOID = 2,
    PLUGIND_HEADER_TYPE_BOOL = 3,
    PLUGIND_HEADER_TYPE_CHAR_U = 4,
    PLUGIND_HEADER_TYPE_UCHAR = 5,
    PLUGIND_HEADER_TYPE_USHORT = 8,
    PLUGIND_HEADER_TYPE_UINT = 9,
    PLUGIND_HEADER_TYPE_ULONG = 10,
    PLUGIND_HEADER_TYPE_ULONGLONG = 11,
    PLUGIND_HEADER_TYPE_CHAR_S = 13,
    PLUGIND_HEADER_TYPE_SCHAR = 14,
    PLUGIND_HEADER_TYPE_SHORT = 16,
    PLUGIND_HEADER_TYPE_INT = 17,
    PLUGIND_HEADER_TYPE_LONG = 18,
    PLUGIND_HEADER_TYPE_LONGLONG = 19,
    PLUGIND_HEADER_TYPE_FLOAT = 21,
    PLUGIND_HEADER_TYPE_DOUBLE = 22,
    PLUGIND_HEADER_TYPE_POINTER = 101,
    PLUGIND_HEADER_TYPE_RECORD = 105,
    PLUGIND_HEADER_TYPE_ENUM = 106,
    PLUGIND_HEADER_TYPE_FUNCTION_NO_PROTO = 110,
    PLUGIND_HEADER_TYPE_FUNCTION_PROTO = 111,
    PLUGIND_HEADER_TYPE_CONSTANT_ARRAY = 112,
    PLUGIND_HEADER_TYPE_VECTOR = 113,
    PLUGIND_HEADER_TYPE_INCOMPLETE_ARRAY = 114,
    PLUGIND_HEADER_TYPE_VARIABLE_ARRAY = 115,
};

#endif
