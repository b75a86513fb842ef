#include <ffi.h>

// libffi's type descriptors are global variables; these give Swift stable pointers to them.
static inline ffi_type *plugind_ffi_type_void(void) { return &ffi_type_void; }
static inline ffi_type *plugind_ffi_type_uint8(void) { return &ffi_type_uint8; }
static inline ffi_type *plugind_ffi_type_sint8(void) { return &ffi_type_sint8; }
static inline ffi_type *plugind_ffi_type_uint16(void) { return &ffi_type_uint16; }
static inline ffi_type *plugind_ffi_type_sint16(void) { return &ffi_type_sint16; }
static inline ffi_type *plugind_ffi_type_uint32(void) { return &ffi_type_uint32; }
static inline ffi_type *plugind_ffi_type_sint32(void) { return &ffi_type_sint32; }
static inline ffi_type *plugind_ffi_type_uint64(void) { return &ffi_type_uint64; }
static inline ffi_type *plugind_ffi_type_sint64(void) { return &ffi_type_sint64; }
static inline ffi_type *plugind_ffi_type_float(void) { return &ffi_type_float; }
static inline ffi_type *plugind_ffi_type_double(void) { return &ffi_type_double; }
static inline ffi_type *plugind_ffi_type_pointer(void) { return &ffi_type_pointer; }
