// libclang through dlopen: the few functions `plugind declare` needs, with libclang's C types
// declared here by their stable layout, so that neither a build nor the installed package needs
// libclang's headers (libclang-N-dev). Only the CLI calls this, at an author's request.

#include "plugind_header_reader.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct { int kind; int xdata; const void *data[3]; } CXCursor;
typedef struct { int kind; void *data[2]; } CXType;
typedef struct { const void *data; unsigned private_flags; } CXString;
typedef struct { const void *ptr_data[2]; unsigned int_data; } CXSourceLocation;
typedef void *CXIndex;
typedef void *CXTranslationUnit;
typedef void *CXDiagnostic;
typedef void *CXFile;
typedef int (*CXCursorVisitor)(CXCursor cursor, CXCursor parent, void *data);
typedef int (*CXFieldVisitor)(CXCursor cursor, void *data);

enum { CXCursor_UnionDecl = 3, CXCursor_FunctionDecl = 8, CXCursor_TypedefDecl = 20 };
enum { CXChildVisit_Continue = 1, CXVisit_Break = 0, CXVisit_Continue = 1, CXDiagnostic_Error = 3, CX_SC_Static = 3 };
enum { CXTranslationUnit_SkipFunctionBodies = 0x40 };

static struct {
    CXIndex (*createIndex)(int, int);
    void (*disposeIndex)(CXIndex);
    CXTranslationUnit (*parseTranslationUnit)(CXIndex, const char *, const char *const *, int, void *, unsigned, unsigned);
    void (*disposeTranslationUnit)(CXTranslationUnit);
    unsigned (*getNumDiagnostics)(CXTranslationUnit);
    CXDiagnostic (*getDiagnostic)(CXTranslationUnit, unsigned);
    int (*getDiagnosticSeverity)(CXDiagnostic);
    CXString (*formatDiagnostic)(CXDiagnostic, unsigned);
    unsigned (*defaultDiagnosticDisplayOptions)(void);
    void (*disposeDiagnostic)(CXDiagnostic);
    CXCursor (*getTranslationUnitCursor)(CXTranslationUnit);
    unsigned (*visitChildren)(CXCursor, CXCursorVisitor, void *);
    int (*getCursorKind)(CXCursor);
    CXString (*getCursorSpelling)(CXCursor);
    CXSourceLocation (*getCursorLocation)(CXCursor);
    int (*locationIsFromMainFile)(CXSourceLocation);
    void (*getSpellingLocation)(CXSourceLocation, CXFile *, unsigned *, unsigned *, unsigned *);
    CXString (*getFileName)(CXFile);
    CXType (*getCursorResultType)(CXCursor);
    CXType (*getCursorType)(CXCursor);
    unsigned (*isFunctionTypeVariadic)(CXType);
    int (*cursorGetNumArguments)(CXCursor);
    CXCursor (*cursorGetArgument)(CXCursor, unsigned);
    int (*cursorGetStorageClass)(CXCursor);
    unsigned (*cursorIsFunctionInlined)(CXCursor);
    CXString (*getTypeSpelling)(CXType);
    CXType (*getCanonicalType)(CXType);
    CXType (*getPointeeType)(CXType);
    CXType (*getResultType)(CXType);
    int (*getNumArgTypes)(CXType);
    CXType (*getArgType)(CXType, unsigned);
    unsigned (*isConstQualifiedType)(CXType);
    long long (*typeGetSizeOf)(CXType);
    long long (*typeGetAlignOf)(CXType);
    unsigned (*typeVisitFields)(CXType, CXFieldVisitor, void *);
    long long (*cursorGetOffsetOfField)(CXCursor);
    unsigned (*cursorIsBitField)(CXCursor);
    CXType (*getTypedefDeclUnderlyingType)(CXCursor);
    unsigned (*equalCursors)(CXCursor, CXCursor);
    CXCursor (*getTypeDeclaration)(CXType);
    const char *(*getCString)(CXString);
    void (*disposeString)(CXString);
} clang;

static void say(char *error, size_t size, const char *format, ...) {
    if (error == NULL || size == 0) return;
    va_list arguments;
    va_start(arguments, format);
    vsnprintf(error, size, format, arguments);
    va_end(arguments);
}

// The first libclang found: PLUGIND_LIBCLANG, then Debian 12's versions, newest first.
static int load_libclang(char *error, size_t error_size) {
    static int loaded = 0;
    if (loaded) return 0;
    const char *candidates[] = {getenv("PLUGIND_LIBCLANG"), "libclang-19.so.1", "libclang-16.so.1", "libclang-14.so.1",
                                "libclang.so.1", "libclang.so"};
    void *library = NULL;
    for (size_t index = 0; index < sizeof candidates / sizeof candidates[0] && library == NULL; index++) {
        if (candidates[index] != NULL && candidates[index][0] != '\0') library = dlopen(candidates[index], RTLD_NOW | RTLD_LOCAL);
    }
    if (library == NULL) {
        say(error, error_size,
            "libclang is not installed (install Debian's libclang1-14 and libclang-common-14-dev, or name a libclang with PLUGIND_LIBCLANG)");
        return -1;
    }
    struct {
        void **slot;
        const char *name;
    } symbols[] = {
        {(void **)&clang.createIndex, "clang_createIndex"},
        {(void **)&clang.disposeIndex, "clang_disposeIndex"},
        {(void **)&clang.parseTranslationUnit, "clang_parseTranslationUnit"},
        {(void **)&clang.disposeTranslationUnit, "clang_disposeTranslationUnit"},
        {(void **)&clang.getNumDiagnostics, "clang_getNumDiagnostics"},
        {(void **)&clang.getDiagnostic, "clang_getDiagnostic"},
        {(void **)&clang.getDiagnosticSeverity, "clang_getDiagnosticSeverity"},
        {(void **)&clang.formatDiagnostic, "clang_formatDiagnostic"},
        {(void **)&clang.defaultDiagnosticDisplayOptions, "clang_defaultDiagnosticDisplayOptions"},
        {(void **)&clang.disposeDiagnostic, "clang_disposeDiagnostic"},
        {(void **)&clang.getTranslationUnitCursor, "clang_getTranslationUnitCursor"},
        {(void **)&clang.visitChildren, "clang_visitChildren"},
        {(void **)&clang.getCursorKind, "clang_getCursorKind"},
        {(void **)&clang.getCursorSpelling, "clang_getCursorSpelling"},
        {(void **)&clang.getCursorLocation, "clang_getCursorLocation"},
        {(void **)&clang.locationIsFromMainFile, "clang_Location_isFromMainFile"},
        {(void **)&clang.getSpellingLocation, "clang_getSpellingLocation"},
        {(void **)&clang.getFileName, "clang_getFileName"},
        {(void **)&clang.getCursorResultType, "clang_getCursorResultType"},
        {(void **)&clang.getCursorType, "clang_getCursorType"},
        {(void **)&clang.isFunctionTypeVariadic, "clang_isFunctionTypeVariadic"},
        {(void **)&clang.cursorGetNumArguments, "clang_Cursor_getNumArguments"},
        {(void **)&clang.cursorGetArgument, "clang_Cursor_getArgument"},
        {(void **)&clang.cursorGetStorageClass, "clang_Cursor_getStorageClass"},
        {(void **)&clang.cursorIsFunctionInlined, "clang_Cursor_isFunctionInlined"},
        {(void **)&clang.getTypeSpelling, "clang_getTypeSpelling"},
        {(void **)&clang.getCanonicalType, "clang_getCanonicalType"},
        {(void **)&clang.getPointeeType, "clang_getPointeeType"},
        {(void **)&clang.getResultType, "clang_getResultType"},
        {(void **)&clang.getNumArgTypes, "clang_getNumArgTypes"},
        {(void **)&clang.getArgType, "clang_getArgType"},
        {(void **)&clang.isConstQualifiedType, "clang_isConstQualifiedType"},
        {(void **)&clang.typeGetSizeOf, "clang_Type_getSizeOf"},
        {(void **)&clang.typeGetAlignOf, "clang_Type_getAlignOf"},
        {(void **)&clang.typeVisitFields, "clang_Type_visitFields"},
        {(void **)&clang.cursorGetOffsetOfField, "clang_Cursor_getOffsetOfField"},
        {(void **)&clang.cursorIsBitField, "clang_Cursor_isBitField"},
        {(void **)&clang.getTypedefDeclUnderlyingType, "clang_getTypedefDeclUnderlyingType"},
        {(void **)&clang.equalCursors, "clang_equalCursors"},
        {(void **)&clang.getTypeDeclaration, "clang_getTypeDeclaration"},
        {(void **)&clang.getCString, "clang_getCString"},
        {(void **)&clang.disposeString, "clang_disposeString"},
    };
    for (size_t index = 0; index < sizeof symbols / sizeof symbols[0]; index++) {
        *symbols[index].slot = dlsym(library, symbols[index].name);
        if (*symbols[index].slot == NULL) {
            say(error, error_size, "the libclang found lacks %s", symbols[index].name);
            return -1;
        }
    }
    loaded = 1;
    return 0;
}

enum { MAXIMUM_PARAMETERS = 128 };

// The strings and blocks of one function's visit (or of the whole parse), freed after it. A
// struct's fields make their number unbounded; when memory runs out, a string reads as "".
struct string_pool {
    CXString *strings;
    int count, capacity;
    void **blocks;
    int block_count, block_capacity;
};

static int grow(void **array, int *capacity, size_t element_size) {
    int wanted = *capacity == 0 ? 32 : *capacity * 2;
    void *grown = realloc(*array, (size_t)wanted * element_size);
    if (grown == NULL) return -1;
    *array = grown;
    *capacity = wanted;
    return 0;
}

static const char *keep(struct string_pool *pool, CXString string) {
    if (pool->count == pool->capacity && grow((void **)&pool->strings, &pool->capacity, sizeof(CXString)) != 0) {
        clang.disposeString(string);
        return "";
    }
    pool->strings[pool->count++] = string;
    const char *text = clang.getCString(string);
    return text != NULL ? text : "";
}

// Takes `block` (malloc'd) to free with the pool; NULL when it cannot, having freed it.
static void *keep_block(struct string_pool *pool, void *block) {
    if (block == NULL) return NULL;
    if (pool->block_count == pool->block_capacity && grow((void **)&pool->blocks, &pool->block_capacity, sizeof(void *)) != 0) {
        free(block);
        return NULL;
    }
    pool->blocks[pool->block_count++] = block;
    return block;
}

static void drain(struct string_pool *pool) {
    for (int index = 0; index < pool->count; index++) clang.disposeString(pool->strings[index]);
    for (int index = 0; index < pool->block_count; index++) free(pool->blocks[index]);
    free(pool->strings);
    free(pool->blocks);
    memset(pool, 0, sizeof *pool);
}

// The translation unit's typedefs of structs and unions (typedef struct z_stream_s {…} z_stream),
// first declared first. Records are compared by declaration, so that a const struct finds its
// typedef too.
struct record_names {
    CXCursor *records;
    const char **names;
    int count, capacity, name_capacity;
};

struct typedef_collection {
    struct record_names *names;
    struct string_pool *pool;
};

static int collect_typedef(CXCursor cursor, CXCursor parent, void *data) {
    (void)parent;
    struct typedef_collection *collect = data;
    if (clang.getCursorKind(cursor) != CXCursor_TypedefDecl) return CXChildVisit_Continue;
    CXType underlying = clang.getCanonicalType(clang.getTypedefDeclUnderlyingType(cursor));
    if (underlying.kind != PLUGIND_HEADER_TYPE_RECORD) return CXChildVisit_Continue;
    struct record_names *names = collect->names;
    if (names->count == names->capacity && grow((void **)&names->records, &names->capacity, sizeof(CXCursor)) != 0)
        return CXChildVisit_Continue;
    if (names->count == names->name_capacity && grow((void **)&names->names, &names->name_capacity, sizeof(char *)) != 0)
        return CXChildVisit_Continue;
    names->records[names->count] = clang.getTypeDeclaration(underlying);
    names->names[names->count] = keep(collect->pool, clang.getCursorSpelling(cursor));
    names->count += 1;
    return CXChildVisit_Continue;
}

// A record's name as its header's users write it: the first typedef of it, else its tag, passing
// over names with a leading underscore (the implementation's) while another is left: glibc's
// `typedef struct _IO_FILE __FILE;` comes before `typedef struct _IO_FILE FILE;`.
static const char *record_name(const struct record_names *names, CXType record, struct string_pool *pool) {
    CXCursor declaration = clang.getTypeDeclaration(record);
    const char *first = NULL;
    for (int index = 0; index < names->count; index++) {
        const char *name = names->names[index];
        if (name[0] == '\0' || !clang.equalCursors(names->records[index], declaration)) continue;
        if (name[0] != '_') return name;
        if (first == NULL) first = name;
    }
    const char *tag = keep(pool, clang.getCursorSpelling(declaration));
    if ((tag[0] != '\0' && tag[0] != '_') || first == NULL) return tag;
    return first;
}

static plugind_header_type describe(CXType type, struct string_pool *pool, const struct record_names *names);
static void describe_callback(CXType function, plugind_header_type *description, struct string_pool *pool);

struct field_visit {
    struct string_pool *pool;
    plugind_header_field *fields;
    int count, capacity;
};

static int visit_field(CXCursor cursor, void *data) {
    struct field_visit *visit = data;
    if (visit->count == PLUGIND_HEADER_MAXIMUM_FIELDS) return CXVisit_Break;
    if (visit->count == visit->capacity && grow((void **)&visit->fields, &visit->capacity, sizeof(plugind_header_field)) != 0)
        return CXVisit_Break;
    plugind_header_field *field = &visit->fields[visit->count++];
    field->name = keep(visit->pool, clang.getCursorSpelling(cursor));
    field->offset = clang.cursorGetOffsetOfField(cursor);
    field->is_bit_field = clang.cursorIsBitField(cursor) != 0;
    field->type = describe(clang.getCursorType(cursor), visit->pool, NULL);
    return CXVisit_Continue;
}

// The layout of a complete struct or union, or NULL when memory runs out.
static const plugind_header_record *lay_out(CXType record, int is_union, struct string_pool *pool,
                                            const struct record_names *names) {
    plugind_header_record *layout = keep_block(pool, calloc(1, sizeof *layout));
    if (layout == NULL) return NULL;
    layout->name = record_name(names, record, pool);
    layout->is_union = is_union;
    layout->size = clang.typeGetSizeOf(record);
    layout->alignment = clang.typeGetAlignOf(record);
    struct field_visit visit = {pool, NULL, 0, 0};
    clang.typeVisitFields(record, visit_field, &visit);
    layout->fields = keep_block(pool, visit.fields);
    layout->field_count = layout->fields != NULL ? visit.count : 0;
    return layout;
}

// `names` given (a function's result or parameter): the layout of a complete struct one pointer
// points to is described too, and a callback's signature.
static plugind_header_type describe(CXType type, struct string_pool *pool, const struct record_names *names) {
    plugind_header_type description;
    memset(&description, 0, sizeof description);
    CXType canonical = clang.getCanonicalType(type);
    description.spelling = keep(pool, clang.getTypeSpelling(type));
    description.canonical = keep(pool, clang.getTypeSpelling(canonical));
    description.kind = canonical.kind;
    description.size = clang.typeGetSizeOf(canonical);
    description.innermost_name = "";
    CXType innermost = canonical;
    while (innermost.kind == PLUGIND_HEADER_TYPE_POINTER && description.pointer_depth < 16) {
        CXType pointee = clang.getPointeeType(innermost);
        CXType resolved = clang.getCanonicalType(pointee);
        if (description.pointer_depth == 0)
            description.innermost_is_const = clang.isConstQualifiedType(pointee) || clang.isConstQualifiedType(resolved);
        innermost = resolved;
        description.pointer_depth += 1;
    }
    description.innermost_kind = innermost.kind;
    description.innermost_size = clang.typeGetSizeOf(innermost);
    if (innermost.kind == PLUGIND_HEADER_TYPE_RECORD || innermost.kind == PLUGIND_HEADER_TYPE_ENUM) {
        CXCursor declaration = clang.getTypeDeclaration(innermost);
        description.innermost_name = keep(pool, clang.getCursorSpelling(declaration));
        description.innermost_is_union = clang.getCursorKind(declaration) == CXCursor_UnionDecl;
    }
    if (names != NULL && description.pointer_depth <= 1 && innermost.kind == PLUGIND_HEADER_TYPE_RECORD && description.innermost_size > 0)
        description.record = lay_out(innermost, description.innermost_is_union, pool, names);
    if (names != NULL && description.pointer_depth == 1 && innermost.kind == PLUGIND_HEADER_TYPE_FUNCTION_PROTO)
        describe_callback(innermost, &description, pool);
    return description;
}

// A callback's result and parameters into `description` (each described without a callback of
// its own, so that the description ends); nothing when memory runs out.
static void describe_callback(CXType function, plugind_header_type *description, struct string_pool *pool) {
    int count = clang.getNumArgTypes(function);
    if (count < 0) return;
    int described = count < PLUGIND_HEADER_MAXIMUM_CALLBACK_PARAMETERS ? count : PLUGIND_HEADER_MAXIMUM_CALLBACK_PARAMETERS;
    plugind_header_type *types = keep_block(pool, calloc((size_t)described + 1, sizeof *types));
    if (types == NULL) return;
    types[0] = describe(clang.getResultType(function), pool, NULL);
    for (int index = 0; index < described; index++) types[index + 1] = describe(clang.getArgType(function, (unsigned)index), pool, NULL);
    description->callback_types = types;
    description->callback_parameter_count = count;
    description->callback_is_variadic = clang.isFunctionTypeVariadic(function) != 0;
}

struct visit {
    plugind_header_visitor visitor;
    void *context;
    int main_file_only;
    const struct record_names *names;
};

static int visit_declaration(CXCursor cursor, CXCursor parent, void *data) {
    (void)parent;
    struct visit *visit = data;
    if (clang.getCursorKind(cursor) != CXCursor_FunctionDecl) return CXChildVisit_Continue;
    CXSourceLocation location = clang.getCursorLocation(cursor);
    if (visit->main_file_only && !clang.locationIsFromMainFile(location)) return CXChildVisit_Continue;

    struct string_pool pool;
    memset(&pool, 0, sizeof pool);
    plugind_header_function function;
    memset(&function, 0, sizeof function);
    CXFile file = NULL;
    clang.getSpellingLocation(location, &file, &function.line, NULL, NULL);
    function.file = file != NULL ? keep(&pool, clang.getFileName(file)) : "";
    function.name = keep(&pool, clang.getCursorSpelling(cursor));
    function.is_variadic = clang.isFunctionTypeVariadic(clang.getCursorType(cursor)) != 0;
    function.is_static = clang.cursorGetStorageClass(cursor) == CX_SC_Static || clang.cursorIsFunctionInlined(cursor) != 0;
    function.result = describe(clang.getCursorResultType(cursor), &pool, visit->names);

    int count = clang.cursorGetNumArguments(cursor);
    if (count < 0) count = 0;
    if (count > MAXIMUM_PARAMETERS) count = MAXIMUM_PARAMETERS + 1;  // reported as too many, not cut short
    const char *names[MAXIMUM_PARAMETERS + 1];
    plugind_header_type types[MAXIMUM_PARAMETERS + 1];
    for (int index = 0; index < count && index < MAXIMUM_PARAMETERS; index++) {
        CXCursor argument = clang.cursorGetArgument(cursor, (unsigned)index);
        names[index] = keep(&pool, clang.getCursorSpelling(argument));
        types[index] = describe(clang.getCursorType(argument), &pool, visit->names);
    }
    for (int index = MAXIMUM_PARAMETERS; index < count; index++) {
        // The one past the limit, there to say "too many": described as nothing.
        memset(&types[index], 0, sizeof types[index]);
        types[index].spelling = types[index].canonical = types[index].innermost_name = "";
        names[index] = "";
    }
    function.parameter_count = count;
    function.parameter_names = names;
    function.parameter_types = types;
    visit->visitor(&function, visit->context);
    drain(&pool);
    return CXChildVisit_Continue;
}

int plugind_header_read(const char *header, const char *const *arguments, int argument_count, int main_file_only,
                        plugind_header_visitor visitor, void *context, char *error, size_t error_size) {
    if (load_libclang(error, error_size) != 0) return -1;
    CXIndex index = clang.createIndex(0, 0);
    if (index == NULL) {
        say(error, error_size, "libclang could not start");
        return -1;
    }
    CXTranslationUnit unit =
        clang.parseTranslationUnit(index, header, arguments, argument_count, NULL, 0, CXTranslationUnit_SkipFunctionBodies);
    if (unit == NULL) {
        clang.disposeIndex(index);
        say(error, error_size, "libclang could not parse %s (is it readable?)", header);
        return -1;
    }
    size_t used = 0;
    if (error != NULL && error_size > 0) error[0] = '\0';
    unsigned diagnostics = clang.getNumDiagnostics(unit);
    for (unsigned at = 0; at < diagnostics; at++) {
        CXDiagnostic diagnostic = clang.getDiagnostic(unit, at);
        if (clang.getDiagnosticSeverity(diagnostic) >= CXDiagnostic_Error && error != NULL && used + 1 < error_size) {
            CXString text = clang.formatDiagnostic(diagnostic, clang.defaultDiagnosticDisplayOptions());
            const char *line = clang.getCString(text);
            int written = snprintf(error + used, error_size - used, "%s%s", used > 0 ? "\n" : "", line != NULL ? line : "");
            if (written > 0) used += (size_t)written < error_size - used ? (size_t)written : error_size - used - 1;
            clang.disposeString(text);
        }
        clang.disposeDiagnostic(diagnostic);
    }
    int status = 0;
    if (used > 0) {
        status = -1;
    } else {
        struct string_pool pool;
        memset(&pool, 0, sizeof pool);
        struct record_names names;
        memset(&names, 0, sizeof names);
        struct typedef_collection collect = {&names, &pool};
        CXCursor root = clang.getTranslationUnitCursor(unit);
        clang.visitChildren(root, collect_typedef, &collect);
        struct visit visit = {visitor, context, main_file_only, &names};
        clang.visitChildren(root, visit_declaration, &visit);
        free(names.records);
        free(names.names);
        drain(&pool);
    }
    clang.disposeTranslationUnit(unit);
    clang.disposeIndex(index);
    return status;
}
