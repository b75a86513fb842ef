/// Layouts of glibc's structs on x86-64 as a manifest's `structs` declares them, for the tests
/// that call libc.so.6 with one (offsets from `offsetof` in C on this machine).
public enum GlibcStructLayouts {
    /// `struct tm`: 56 bytes, 8-aligned; `tm_zone` a string the library sets.
    public static var tm: [String: Any] {
        [
            "size": 56, "alignment": 8,
            "fields": [
                ["name": "tm_sec", "offset": 0, "type": "int32"], ["name": "tm_min", "offset": 4, "type": "int32"],
                ["name": "tm_hour", "offset": 8, "type": "int32"], ["name": "tm_mday", "offset": 12, "type": "int32"],
                ["name": "tm_mon", "offset": 16, "type": "int32"], ["name": "tm_year", "offset": 20, "type": "int32"],
                ["name": "tm_wday", "offset": 24, "type": "int32"], ["name": "tm_yday", "offset": 28, "type": "int32"],
                ["name": "tm_isdst", "offset": 32, "type": "int32"], ["name": "tm_gmtoff", "offset": 40, "type": "int64"],
                ["name": "tm_zone", "offset": 48, "type": "string"],
            ],
        ]
    }
}
