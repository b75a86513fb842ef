//! The Rust kit's probe for KitProbeTests; it answers what the C++ probe does
//! (ExamplePlugins/Testing/CppKitProbe/probe.cpp), with a panic for "throw".
use std::any::Any;
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};

use plugind_plugin::{export_plugin, ConnectionInfo, Error, Host, Plugin, Request};

struct KitProbe {
    host: Host,
    remembered: AtomicU32,
}

struct Counter(AtomicUsize);

impl Plugin for KitProbe {
    fn new(host: Host) -> Result<Self, Error> {
        Ok(KitProbe { host, remembered: AtomicU32::new(0) })
    }

    fn accept(&self, connection: &ConnectionInfo) -> Result<Option<Box<dyn Any + Send + Sync>>, Error> {
        if connection.host_identifier.ends_with(".untrusted") {
            return Err(Error::new(format!("KitProbe does not serve {}", connection.host_identifier)));
        }
        Ok(Some(Box::new(Counter(AtomicUsize::new(0)))))
    }

    fn handle(&self, request: &Request) -> Result<Vec<u8>, Error> {
        let text = request.text()?;
        match text {
            "" => Ok(Vec::new()),
            "count" => {
                let counter = request.state::<Counter>().ok_or_else(|| Error::new("no connection state"))?;
                Ok((counter.0.fetch_add(1, Ordering::SeqCst) + 1).to_string().into_bytes())
            }
            "host" => Ok(request.connection_info().map(|info| info.host_identifier.clone()).unwrap_or_default().into_bytes()),
            "throw" => panic!("asked to panic"),
            "error" => Err(Error::with_code(7, "asked to fail")),
            "oversized" => Ok(vec![b'x'; 2 << 20]),
            "remember" => {
                self.remembered.store(request.connection().map(|c| c.identifier()).unwrap_or(0), Ordering::SeqCst);
                Ok(b"remembered".to_vec())
            }
            "ask-remembered" => Ok(match self.host.ask(self.remembered.load(Ordering::SeqCst), b"still there?", None) {
                Ok(answer) => [b"answered:".as_slice(), &answer].concat(),
                Err(error) => format!("ask failed:{}", error.status).into_bytes(),
            }),
            _ if text.starts_with("ask:") => {
                let answer = request.ask(&request.bytes()[4..]).map_err(|error| Error::with_code(5, format!("the ask failed: {}", error)))?;
                Ok([b"answer:".as_slice(), &answer].concat())
            }
            _ => Err(Error::new(format!("unknown request '{}'", text))),
        }
    }
}

export_plugin!(KitProbe, name = "KitProbe (Rust)", version = "1.0.0", concurrency = 4);
