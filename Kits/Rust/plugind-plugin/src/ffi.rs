//! The C ABI of `plugind_plugin.h` (version 2), and the only module of the crate with `unsafe`
//! code: the worker's pointers become safe types here, and nothing else touches them. Every
//! block says why it is sound.
#![allow(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn)]

use std::any::Any;
use std::ffi::{c_void, CStr, CString};
use std::os::raw::{c_char, c_int};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::Duration;

use crate::{AskError, ConnectionInfo, Error, Plugin, Request};

/// `PLUGIND_PLUGIN_ABI_VERSION` of the header this crate mirrors.
pub const ABI_VERSION: u32 = 2;
const ENOTSUP: i32 = 95;
const EMSGSIZE: i32 = 90;
const ENOMEM: i32 = 12;

/// `plugind_plugin_response`: opaque, owned by the worker.
#[repr(C)]
pub struct RawResponse {
    _private: [u8; 0],
}

#[repr(C)]
pub struct RawRequest {
    identifier: u64,
    bytes: *const u8,
    length: usize,
    connection: u32,
    connection_state: *mut c_void,
}

#[repr(C)]
pub struct RawConnection {
    identifier: u32,
    host_identifier: *const c_char,
}

#[repr(C)]
struct RawAnswer {
    bytes: *const u8,
    length: usize,
    code: i32,
    message: *const c_char,
}

#[repr(C)]
pub struct RawHost {
    abi_version: u32,
    size: u32,
    context: *mut c_void,
    log: unsafe extern "C" fn(*mut c_void, c_int, *const c_char),
    post_message: unsafe extern "C" fn(*mut c_void, u64, *const u8, usize) -> i32,
    report_progress: unsafe extern "C" fn(*mut c_void, u64, u64, u64) -> i32,
    is_cancelled: unsafe extern "C" fn(*mut c_void, u64) -> bool,
    append: unsafe extern "C" fn(*mut RawResponse, *const u8, usize) -> i32,
    reserve: unsafe extern "C" fn(*mut RawResponse, usize) -> *mut u8,
    set_error: unsafe extern "C" fn(*mut RawResponse, *const c_char),
    ask: Option<unsafe extern "C" fn(*mut c_void, u32, *const u8, usize, u32, *mut RawAnswer) -> i32>,
    release_answer: Option<unsafe extern "C" fn(*mut c_void, *mut RawAnswer)>,
}

/// `plugind_plugin`, the descriptor the entry point returns.
#[repr(C)]
pub struct Descriptor {
    abi_version: u32,
    size: u32,
    name: *const c_char,
    version: *const c_char,
    init: Option<unsafe extern "C" fn(*const RawHost, *mut *mut c_void, *mut RawResponse) -> i32>,
    handle: unsafe extern "C" fn(*mut c_void, *const RawRequest, *mut RawResponse) -> i32,
    deinit: Option<unsafe extern "C" fn(*mut c_void)>,
    concurrency: u32,
    reserved: u32,
    accept: Option<unsafe extern "C" fn(*mut c_void, *const RawConnection, *mut *mut c_void, *mut RawResponse) -> i32>,
    close: Option<unsafe extern "C" fn(*mut c_void, *const RawConnection, *mut c_void)>,
}

/// The descriptor in a `static`: it holds pointers to static strings and functions only.
#[repr(transparent)]
pub struct SharedDescriptor(Descriptor);

// SAFETY: the pointers are to `'static` NUL-terminated literals and to functions; nothing in
// the descriptor is ever written after it is built, so sharing it between threads is sound.
unsafe impl Sync for SharedDescriptor {}

impl SharedDescriptor {
    /// The descriptor of plugin `P`. `name` and `version` must end in NUL (the macro adds it).
    pub const fn new<P: Plugin>(name: &'static str, version: &'static str, concurrency: u32) -> SharedDescriptor {
        SharedDescriptor(Descriptor {
            abi_version: ABI_VERSION,
            size: std::mem::size_of::<Descriptor>() as u32,
            name: name.as_ptr() as *const c_char,
            version: version.as_ptr() as *const c_char,
            init: Some(init::<P>),
            handle: handle::<P>,
            deinit: Some(deinit::<P>),
            concurrency,
            reserved: 0,
            accept: Some(accept::<P>),
            close: Some(close::<P>),
        })
    }

    pub fn as_ptr(&'static self) -> *const c_void {
        &self.0 as *const Descriptor as *const c_void
    }
}

/// The note recording the ABI version ("plugind", type 1), as plugind_plugin.h adds to a C plugin.
#[repr(C, align(4))]
pub struct AbiNote {
    name_size: u32,
    description_size: u32,
    kind: u32,
    name: [u8; 8],
    abi_version: u32,
}

impl AbiNote {
    pub const CURRENT: AbiNote = AbiNote { name_size: 8, description_size: 4, kind: 1, name: *b"plugind\0", abi_version: ABI_VERSION };
}

/// The binding note ("plugind", type 2: "extensionPoint=<point>"), `N` bytes of description.
#[repr(C, align(4))]
pub struct BindingNote<const N: usize> {
    name_size: u32,
    description_size: u32,
    kind: u32,
    name: [u8; 8],
    description: [u8; N],
}

const BINDING_PREFIX: &[u8] = b"extensionPoint=";

/// The description length of the binding note of `point`.
pub const fn binding_length(point: &str) -> usize {
    BINDING_PREFIX.len() + point.len()
}

impl<const N: usize> BindingNote<N> {
    pub const fn new(point: &str) -> BindingNote<N> {
        let mut description = [0u8; N];
        let point = point.as_bytes();
        let mut index = 0;
        while index < BINDING_PREFIX.len() {
            description[index] = BINDING_PREFIX[index];
            index += 1;
        }
        let mut offset = 0;
        while offset < point.len() {
            description[BINDING_PREFIX.len() + offset] = point[offset];
            offset += 1;
        }
        BindingNote { name_size: 8, description_size: N as u32, kind: 2, name: *b"plugind\0", description }
    }
}

/// The worker's services: a pointer that stays valid until `deinit` returns.
#[derive(Clone, Copy)]
pub struct HostHandle(*const RawHost);

// SAFETY: plugind_plugin.h: the host pointer and everything it points to stays valid until
// deinit returns, and its callbacks may be called from any thread.
unsafe impl Send for HostHandle {}
// SAFETY: as above; the callbacks are thread-safe.
unsafe impl Sync for HostHandle {}

impl HostHandle {
    fn raw(&self) -> &RawHost {
        // SAFETY: valid until deinit (plugind_plugin.h), and no `HostHandle` outlives the plugin
        // (the plugin value, which holds every copy, is dropped in deinit).
        unsafe { &*self.0 }
    }

    pub fn log(&self, level: i32, message: &str) {
        let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
        let host = self.raw();
        // SAFETY: `text` is NUL-terminated and lives across the call, which copies it.
        unsafe { (host.log)(host.context, level, text.as_ptr()) }
    }

    pub fn ask(&self, connection: u32, question: &[u8], timeout: Option<Duration>) -> Result<Vec<u8>, AskError> {
        let host = self.raw();
        let (ask, release) = match (host.ask, host.release_answer) {
            (Some(ask), Some(release)) if host.abi_version >= 2 => (ask, release),
            _ => return Err(AskError { status: ENOTSUP, code: 0, message: "this worker cannot ask its host (plugin ABI 1)".into() }),
        };
        let milliseconds = timeout.map(|t| t.as_millis().clamp(1, u32::MAX as u128) as u32).unwrap_or(0);
        let mut answer = RawAnswer { bytes: std::ptr::null(), length: 0, code: 0, message: std::ptr::null() };
        // SAFETY: `question` is valid for its length during the call; `answer` is ours to fill.
        let status = unsafe { ask(host.context, connection, question.as_ptr(), question.len(), milliseconds, &mut answer) };
        let result = if status == 0 {
            // SAFETY: on 0 the worker set `bytes` (never NULL) and `length`, valid until release.
            Ok(unsafe { std::slice::from_raw_parts(answer.bytes, answer.length) }.to_vec())
        } else {
            let message = if answer.message.is_null() {
                std::io::Error::from_raw_os_error(status).to_string()
            } else {
                // SAFETY: a non-NULL message is NUL-terminated and valid until release.
                unsafe { CStr::from_ptr(answer.message) }.to_string_lossy().into_owned()
            };
            Err(AskError { status, code: answer.code, message })
        };
        if status == 0 || status == crate::EREMOTEIO {
            // SAFETY: the answer was filled by `ask` and is released once.
            unsafe { release(host.context, &mut answer) };
        }
        result
    }

    pub fn is_cancelled(&self, request: u64) -> bool {
        let host = self.raw();
        // SAFETY: a plain call with the worker's context.
        unsafe { (host.is_cancelled)(host.context, request) }
    }

    pub fn report_progress(&self, request: u64, completed: u64, total: u64) {
        let host = self.raw();
        // SAFETY: a plain call with the worker's context.
        unsafe { (host.report_progress)(host.context, request, completed, total) };
    }

    pub fn post(&self, request: u64, bytes: &[u8]) -> i32 {
        let host = self.raw();
        // SAFETY: `bytes` is valid for its length during the call, which copies it.
        unsafe { (host.post_message)(host.context, request, bytes.as_ptr(), bytes.len()) }
    }
}

/// What `init` stores: the plugin value and the host.
struct Instance<P> {
    plugin: P,
    host: HostHandle,
}

/// What `accept` stores for a connection.
struct ConnectionRecord {
    info: ConnectionInfo,
    state: Option<Box<dyn Any + Send + Sync>>,
}

/// The message of a panic's payload.
pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(text) = payload.downcast_ref::<&str>() {
        format!("panicked: {}", text)
    } else if let Some(text) = payload.downcast_ref::<String>() {
        format!("panicked: {}", text)
    } else {
        "panicked".to_string()
    }
}

fn set_error(host: HostHandle, response: *mut RawResponse, message: &str) {
    let text = CString::new(message.replace('\0', " ")).unwrap_or_default();
    let raw = host.raw();
    // SAFETY: `response` is the worker's, valid during the call this runs in; the message is copied.
    unsafe { (raw.set_error)(response, text.as_ptr()) }
}

/// Runs `body`, catching a panic: never unwinds into the worker.
fn guarded(host: HostHandle, response: *mut RawResponse, body: impl FnOnce() -> Result<i32, Error>) -> i32 {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(status)) => status,
        Ok(Err(error)) => {
            set_error(host, response, &error.message);
            error.code
        }
        Err(payload) => {
            set_error(host, response, &panic_message(payload.as_ref()));
            1
        }
    }
}

unsafe extern "C" fn init<P: Plugin>(raw: *const RawHost, state: *mut *mut c_void, error: *mut RawResponse) -> i32 {
    let host = HostHandle(raw);
    guarded(host, error, || {
        let plugin = P::new(crate::Host { handle: host })?;
        let instance = Box::new(Instance { plugin, host });
        // SAFETY: `state` is the worker's out-parameter, valid during init.
        unsafe { *state = Box::into_raw(instance) as *mut c_void };
        Ok(0)
    })
}

fn instance<'a, P>(state: *mut c_void) -> &'a Instance<P> {
    // SAFETY: `state` is what init stored (a Box<Instance<P>>), alive until deinit, and the
    // worker calls nothing else after deinit.
    unsafe { &*(state as *const Instance<P>) }
}

unsafe extern "C" fn handle<P: Plugin>(state: *mut c_void, raw: *const RawRequest, response: *mut RawResponse) -> i32 {
    let instance = instance::<P>(state);
    // SAFETY: the request and its bytes are valid until handle returns (plugind_plugin.h);
    // bytes is never NULL.
    let raw = unsafe { &*raw };
    let bytes = unsafe { std::slice::from_raw_parts(raw.bytes, raw.length) };
    let record = if raw.connection_state.is_null() {
        None
    } else {
        // SAFETY: a non-NULL connection state is the ConnectionRecord accept stored; the worker
        // frees it (through close) only after the connection's last request returned.
        Some(unsafe { &*(raw.connection_state as *const ConnectionRecord) })
    };
    let host = instance.host;
    guarded(host, response, || {
        let request = Request {
            identifier: raw.identifier,
            bytes,
            connection: record.map(|record| crate::Connection { host, identifier: record.info.identifier }),
            info: record.map(|record| &record.info),
            state: record.and_then(|record| record.state.as_deref()),
            host,
        };
        let answer = instance.plugin.handle(&request)?;
        let raw_host = host.raw();
        // SAFETY: `response` is the worker's, valid during handle; `answer` is valid for its length.
        let status = unsafe { (raw_host.append)(response, answer.as_ptr(), answer.len()) };
        if status == EMSGSIZE || status == ENOMEM {
            return Err(Error::with_code(
                EMSGSIZE,
                format!("the answer of {} bytes is over the worker's message limit", answer.len()),
            ));
        }
        Ok(status)
    })
}

unsafe extern "C" fn deinit<P: Plugin>(state: *mut c_void) {
    if state.is_null() {
        return;
    }
    // SAFETY: `state` is the Box init made; deinit is called once, after every other call.
    let instance = unsafe { Box::from_raw(state as *mut Instance<P>) };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(instance)));
}

unsafe extern "C" fn accept<P: Plugin>(
    state: *mut c_void, raw: *const RawConnection, connection_state: *mut *mut c_void, refusal: *mut RawResponse,
) -> i32 {
    let instance = instance::<P>(state);
    // SAFETY: the connection and its host identifier (NUL-terminated) are valid during accept.
    let raw = unsafe { &*raw };
    let host_identifier = unsafe { CStr::from_ptr(raw.host_identifier) }.to_string_lossy().into_owned();
    guarded(instance.host, refusal, || {
        let info = ConnectionInfo { identifier: raw.identifier, host_identifier };
        let state = instance.plugin.accept(&info)?;
        let record = Box::new(ConnectionRecord { info, state });
        // SAFETY: the worker's out-parameter, valid during accept.
        unsafe { *connection_state = Box::into_raw(record) as *mut c_void };
        Ok(0)
    })
}

unsafe extern "C" fn close<P: Plugin>(state: *mut c_void, _raw: *const RawConnection, connection_state: *mut c_void) {
    if connection_state.is_null() {
        return;
    }
    let instance = instance::<P>(state);
    // SAFETY: the record accept made; close is the last call for the connection.
    let record = unsafe { Box::from_raw(connection_state as *mut ConnectionRecord) };
    let host = instance.host;
    if let Err(payload) = catch_unwind(AssertUnwindSafe(|| instance.plugin.close(&record.info))) {
        host.log(3, &format!("close {}", panic_message(payload.as_ref())));
    }
    let _ = catch_unwind(AssertUnwindSafe(move || drop(record)));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layouts_match_the_header() {
        // sizeof(plugind_plugin) and sizeof(plugind_host) on LP64, as the worker reads them.
        assert_eq!(std::mem::size_of::<Descriptor>(), 72);
        assert_eq!(std::mem::size_of::<RawHost>(), 88);
        assert_eq!(std::mem::size_of::<RawAnswer>(), 32);
        assert_eq!(std::mem::size_of::<RawRequest>(), 40);
        assert_eq!(std::mem::size_of::<AbiNote>(), 24);
    }

    #[test]
    fn binding_note_spells_the_point() {
        const POINT: &str = "com.example.editor.filters";
        let note = BindingNote::<{ binding_length(POINT) }>::new(POINT);
        assert_eq!(note.description_size as usize, binding_length(POINT));
        assert_eq!(&note.description[..], b"extensionPoint=com.example.editor.filters");
        assert_eq!(note.kind, 2);
    }

    #[test]
    fn panic_messages_name_the_payload() {
        let text: Box<dyn Any + Send> = Box::new("boom");
        assert_eq!(panic_message(text.as_ref()), "panicked: boom");
        let owned: Box<dyn Any + Send> = Box::new(String::from("owned boom"));
        assert_eq!(panic_message(owned.as_ref()), "panicked: owned boom");
        let other: Box<dyn Any + Send> = Box::new(7);
        assert_eq!(panic_message(other.as_ref()), "panicked");
    }
}
