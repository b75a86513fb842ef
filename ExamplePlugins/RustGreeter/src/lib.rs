//! The greeter in Rust, on plugind's Rust kit: asks its host whom to greet, then greets them
//! with the request ("Hello, Ada: good morning"). A host that gives the connection no request
//! handler gets an error saying so.
#![allow(non_snake_case)]

use plugind_plugin::{export_plugin, Error, Host, Plugin, Request};

struct Greeter;

impl Plugin for Greeter {
    fn new(_host: Host) -> Result<Self, Error> {
        Ok(Greeter)
    }

    fn handle(&self, request: &Request) -> Result<Vec<u8>, Error> {
        let name = request.ask(b"name?").map_err(|error| Error::with_code(2, format!("cannot learn whom to greet: {}", error)))?;
        Ok([b"Hello, ".as_slice(), &name, b": ", request.bytes()].concat())
    }
}

export_plugin!(Greeter, name = "Greeter (Rust)", version = "1.0.0", point = "org.plugind.examples.greeters");
