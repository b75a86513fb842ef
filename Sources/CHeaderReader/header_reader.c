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

enum { CXCursor_FunctionDecl = 8, CXChildVisit_Continue = 1, CXDiagnostic_Error = 3, CX_SC_Static = 3 };
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
    unsigned (*isConstQualifiedType)(CXType);
    long long (*typeGetSizeOf)(CXType);
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
        {(void **)&clang.isConstQualifiedType, "clang_isConstQualifiedType"},
        {(void **)&clang.typeGetSizeOf, "clang_Type_getSizeOf"},
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

// The strings of one function's visit, disposed of after it.
enum { MAXIMUM_PARAMETERS = 128, MAXIMUM_STRINGS = 8 + 4 * MAXIMUM_PARAMETERS };

struct string_pool {
    CXString strings[MAXIMUM_STRINGS];
    int count;
};

static const char *keep(struct string_pool *pool, CXString string) {
    if (pool->count == MAXIMUM_STRINGS) {
        clang.disposeString(string);
        return "";
    }
    pool->strings[pool->count++] = string;
    const char *text = clang.getCString(string);
    return text != NULL ? text : "";
}

static void drain(struct string_pool *pool) {
    for (int index = 0; index < pool->count; index++) clang.disposeString(pool->strings[index]);
    pool->count = 0;
}

static plugind_header_type describe(CXType type, struct string_pool *pool) {
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
    if (innermost.kind == PLUGIND_HEADER_TYPE_RECORD || innermost.kind == PLUGIND_HEADER_TYPE_ENUM)
        description.innermost_name = keep(pool, clang.getCursorSpelling(clang.getTypeDeclaration(innermost)));
    return description;
}

struct visit {
    plugind_header_visitor visitor;
    void *context;
    int main_file_only;
};

static int visit_declaration(CXCursor cursor, CXCursor parent, void *data) {
    (void)parent;
    struct visit *visit = data;
    if (clang.getCursorKind(cursor) != CXCursor_FunctionDecl) return CXChildVisit_Continue;
    CXSourceLocation location = clang.getCursorLocation(cursor);
    if (visit->main_file_only && !clang.locationIsFromMainFile(location)) return CXChildVisit_Continue;

    struct string_pool pool;
    pool.count = 0;
    plugind_header_function function;
    memset(&function, 0, sizeof function);
    CXFile file = NULL;
    clang.getSpellingLocation(location, &file, &function.line, NULL, NULL);
    function.file = file != NULL ? keep(&pool, clang.getFileName(file)) : "";
    function.name = keep(&pool, clang.getCursorSpelling(cursor));
    function.is_variadic = clang.isFunctionTypeVariadic(clang.getCursorType(cursor)) != 0;
    function.is_static = clang.cursorGetStorageClass(cursor) == CX_SC_Static || clang.cursorIsFunctionInlined(cursor) != 0;
    function.result = describe(clang.getCursorResultType(cursor), &pool);

    int count = clang.cursorGetNumArguments(cursor);
    if (count < 0) count = 0;
    if (count > MAXIMUM_PARAMETERS) count = MAXIMUM_PARAMETERS + 1;  // reported as too many, not cut short
    const char *names[MAXIMUM_PARAMETERS + 1];
    plugind_header_type types[MAXIMUM_PARAMETERS + 1];
    for (int index = 0; index < count && index < MAXIMUM_PARAMETERS; index++) {
        CXCursor argument = clang.cursorGetArgument(cursor, (unsigned)index);
        names[index] = keep(&pool, clang.getCursorSpelling(argument));
        types[index] = describe(clang.getCursorType(argument), &pool);
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
        struct visit visit = {visitor, context, main_file_only};
        clang.visitChildren(clang.getTranslationUnitCursor(unit), visit_declaration, &visit);
    }
    clang.disposeTranslationUnit(unit);
    clang.disposeIndex(index);
    return status;
}
