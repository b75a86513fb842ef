//! Write plugind plugins in Rust.
//!
//! A plugin is a type implementing [`Plugin`]; [`export_plugin!`] exports it as the library's
//! `plugind_plugin_entry`, with the ABI note `plugind verify` reads:
//!
//! ```no_run
//! use plugind_plugin::{export_plugin, Error, Host, Plugin, Request};
//!
//! struct Greeter;
//!
//! impl Plugin for Greeter {
//!     fn new(_host: Host) -> Result<Self, Error> {
//!         Ok(Greeter)
//!     }
//!
//!     fn handle(&self, request: &Request) -> Result<Vec<u8>, Error> {
//!         let name = request.ask(b"name?")?;                 // asks the host, waits for the answer
//!         Ok([b"Hello, ".as_slice(), &name, b": ", request.bytes()].concat())
//!     }
//! }
//!
//! export_plugin!(Greeter, name = "Greeter", version = "1.0.0", point = "com.example.editor.greeters");
//! ```
//!
//! Every failure is a `Result`; a panic in `new`, `handle`, `accept` or `close` is caught at the
//! boundary and reaches the host as a plugin error ("panicked: …"), never unwinding into the
//! worker. An answer over the worker's message limit is an error naming both sizes. All `unsafe`
//! code is in the `ffi` module.
#![deny(unsafe_code)]

use std::any::Any;
use std::fmt;
use std::time::Duration;

#[doc(hidden)]
pub mod ffi;

/// `EREMOTEIO`: the host's handler failed the ask.
pub const EREMOTEIO: i32 = 121;
/// `ECONNRESET`: the connection is closed.
pub const ECONNRESET: i32 = 104;

/// A plugin error: a positive code and a message, as the host receives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    code: i32,
    message: String,
}

impl Error {
    /// An error with code 1.
    pub fn new(message: impl Into<String>) -> Error {
        Error { code: 1, message: message.into() }
    }

    /// An error with `code` (a value of 0 or below becomes 1: those are plugind's).
    pub fn with_code(code: i32, message: impl Into<String>) -> Error {
        Error { code: if code > 0 { code } else { 1 }, message: message.into() }
    }

    pub fn code(&self) -> i32 {
        self.code
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl fmt::Display for Error {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} (code {})", self.message, self.code)
    }
}

impl From<AskError> for Error {
    fn from(error: AskError) -> Error {
        Error::new(format!("asking the host failed: {}", error))
    }
}

impl From<std::str::Utf8Error> for Error {
    fn from(error: std::str::Utf8Error) -> Error {
        Error::new(format!("the request is not UTF-8: {}", error))
    }
}

impl From<std::io::Error> for Error {
    fn from(error: std::io::Error) -> Error {
        Error::new(error.to_string())
    }
}

/// Why an ask has no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AskError {
    /// The errno value: ENOTSUP (the host gave the connection no handler), EREMOTEIO (its
    /// handler failed: `code` and `message`), ETIMEDOUT, ECONNRESET (the connection is closed),
    /// EBUSY, EMSGSIZE, ELOOP, EINVAL; see plugind_plugin.h.
    pub status: i32,
    /// With EREMOTEIO, the code the host's handler failed with.
    pub code: i32,
    pub message: String,
}

impl AskError {
    /// Whether the connection was closed (or the host is going away).
    pub fn is_closed(&self) -> bool {
        self.status == ECONNRESET
    }
}

impl fmt::Display for AskError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "{} (errno {})", self.message, self.status)
    }
}

impl std::error::Error for AskError {}

/// Severity of a log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogLevel {
    Debug = 0,
    Info = 1,
    Warning = 2,
    Error = 3,
}

/// The worker's services, for the plugin's lifetime; `Clone`, `Send` and `Sync`.
#[derive(Clone, Copy)]
pub struct Host {
    pub(crate) handle: ffi::HostHandle,
}

impl Host {
    pub fn log(&self, level: LogLevel, message: &str) {
        self.handle.log(level as i32, message)
    }

    /// Asks the host on `connection` (a [`Connection`]'s identifier); `timeout` None: the
    /// request timeout.
    pub fn ask(&self, connection: u32, question: &[u8], timeout: Option<Duration>) -> Result<Vec<u8>, AskError> {
        self.handle.ask(connection, question, timeout)
    }
}

/// A connection, to ask the host on from any thread, also after the request returned (a closed
/// connection answers with an error whose `is_closed()` is true).
#[derive(Clone, Copy)]
pub struct Connection {
    pub(crate) host: ffi::HostHandle,
    pub(crate) identifier: u32,
}

impl Connection {
    pub fn identifier(&self) -> u32 {
        self.identifier
    }

    pub fn ask(&self, question: &[u8], timeout: Option<Duration>) -> Result<Vec<u8>, AskError> {
        self.host.ask(self.identifier, question, timeout)
    }
}

/// A connection as `accept` and `close` see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionInfo {
    pub identifier: u32,
    /// The identifier of the host application that opened it.
    pub host_identifier: String,
}

/// One request, valid while `handle` runs.
pub struct Request<'a> {
    pub(crate) identifier: u64,
    pub(crate) bytes: &'a [u8],
    pub(crate) connection: Option<Connection>,
    pub(crate) info: Option<&'a ConnectionInfo>,
    pub(crate) state: Option<&'a (dyn Any + Send + Sync)>,
    pub(crate) host: ffi::HostHandle,
}

impl<'a> Request<'a> {
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    pub fn text(&self) -> Result<&'a str, Error> {
        Ok(std::str::from_utf8(self.bytes)?)
    }

    pub fn identifier(&self) -> u64 {
        self.identifier
    }

    /// The connection the request came on, if any.
    pub fn connection(&self) -> Option<Connection> {
        self.connection
    }

    /// The connection's host identifier and identifier, as `accept` saw them.
    pub fn connection_info(&self) -> Option<&'a ConnectionInfo> {
        self.info
    }

    /// The state `accept` returned for the connection, as `T`.
    pub fn state<T: Any>(&self) -> Option<&'a T> {
        self.state.and_then(|state| state.downcast_ref::<T>())
    }

    /// Asks the host on the request's connection and waits for the answer.
    pub fn ask(&self, question: &[u8]) -> Result<Vec<u8>, AskError> {
        match self.connection {
            Some(connection) => connection.ask(question, None),
            None => Err(AskError { status: 95, code: 0, message: "the request came on no connection".into() }),
        }
    }

    /// True once the host cancelled the request or gave up on it: return early.
    pub fn is_cancelled(&self) -> bool {
        self.host.is_cancelled(self.identifier)
    }

    pub fn report_progress(&self, completed: u64, total: u64) {
        self.host.report_progress(self.identifier, completed, total)
    }

    /// Sends an event tied to this request.
    pub fn post(&self, bytes: &[u8]) {
        self.host.post(self.identifier, bytes);
    }
}

/// A plugin: made once when the worker loads the library; `handle` may run on several threads
/// at once (the concurrency given to `export_plugin!`), so it takes `&self`.
pub trait Plugin: Send + Sync + Sized + 'static {
    fn new(host: Host) -> Result<Self, Error>;

    /// Answers one request.
    fn handle(&self, request: &Request) -> Result<Vec<u8>, Error>;

    /// A host opened a connection: return state for it (read back with `Request::state`), or an
    /// error to refuse it (the host's makeConnection fails with connectionRefused and the
    /// message).
    fn accept(&self, connection: &ConnectionInfo) -> Result<Option<Box<dyn Any + Send + Sync>>, Error> {
        let _ = connection;
        Ok(None)
    }

    /// The host closed the connection; its state is dropped after this returns.
    fn close(&self, connection: &ConnectionInfo) {
        let _ = connection;
    }
}

/// Exports `$plugin` as the library's plugin:
/// `export_plugin!(MyPlugin, name = "…", version = "…")`, optionally followed by
/// `concurrency = N` (requests at once; 1 by default) and `point = "…"` (the extension point,
/// recorded where `plugind verify` compares it with the manifest).
#[macro_export]
macro_rules! export_plugin {
    ($plugin:ty, name = $name:literal, version = $version:literal $(, concurrency = $concurrency:literal)? $(, point = $point:literal)? $(,)?) => {
        #[no_mangle]
        pub extern "C" fn plugind_plugin_entry() -> *const ::std::ffi::c_void {
            static DESCRIPTOR: $crate::ffi::SharedDescriptor =
                $crate::ffi::SharedDescriptor::new::<$plugin>(concat!($name, "\0"), concat!($version, "\0"), {
                    #[allow(unused_mut, unused_assignments)]
                    let mut concurrency: u32 = 1;
                    $(concurrency = $concurrency;)?
                    concurrency
                });
            DESCRIPTOR.as_ptr()
        }

        #[used]
        #[link_section = ".note.plugind"]
        static PLUGIND_ABI_NOTE: $crate::ffi::AbiNote = $crate::ffi::AbiNote::CURRENT;

        $(
            #[used]
            #[link_section = ".note.plugind"]
            static PLUGIND_BINDING_NOTE: $crate::ffi::BindingNote<{ $crate::ffi::binding_length($point) }> =
                $crate::ffi::BindingNote::new($point);
        )?
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_keep_positive_codes() {
        assert_eq!(Error::with_code(7, "x").code(), 7);
        assert_eq!(Error::with_code(0, "x").code(), 1);
        assert_eq!(Error::with_code(-3, "x").code(), 1);
        assert_eq!(Error::new("plain").to_string(), "plain (code 1)");
    }

    #[test]
    fn ask_errors_convert_with_their_reason() {
        let closed = AskError { status: ECONNRESET, code: 0, message: "Connection reset by peer".into() };
        assert!(closed.is_closed());
        let error: Error = closed.into();
        assert!(error.message().contains("asking the host failed: Connection reset by peer (errno 104)"));
    }

    #[test]
    fn text_of_invalid_utf8_is_an_error() {
        let error: Error = std::str::from_utf8(&[0xff, 0xfe]).unwrap_err().into();
        assert!(error.message().starts_with("the request is not UTF-8"));
    }
}
