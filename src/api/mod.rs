//! The daemon's control API: HTTP/1.1 + JSON over a unix socket, and the CLI's client for it.

pub mod client;
pub mod server;
pub mod wire;
