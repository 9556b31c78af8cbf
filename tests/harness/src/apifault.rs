//! A fault-injecting proxy for ofnode's control API (HTTP/1.1 on a unix socket, one request per
//! connection as the ofnode clients make them): every request is relayed to the real daemon
//! except those for one path, which get an error answer as if the daemon had failed them. Lets
//! a test fail a client half-way, after the daemon accepted earlier requests.

use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// Requests bigger than this in their head are not ofnode's; the connection is dropped.
const MAX_HEAD: usize = 64 * 1024;

/// A running API proxy; see the module documentation.
pub struct ApiFault {
    path: PathBuf,
    listener: UnixListener,
    /// Request lines (`METHOD PATH HTTP/1.1`) seen, in order, with whether they were relayed.
    seen: Arc<Mutex<Vec<(String, bool)>>>,
    acceptor: Option<JoinHandle<()>>,
}

impl ApiFault {
    /// Listens at `listen` and relays to the daemon's socket `api`, answering requests for
    /// `fail_path` with HTTP 503 and `{"error": "injected fault …"}` instead.
    pub fn start(listen: &Path, api: &Path, fail_path: &str) -> std::io::Result<ApiFault> {
        let _ = std::fs::remove_file(listen);
        let listener = UnixListener::bind(listen)?;
        let seen = Arc::new(Mutex::new(Vec::new()));
        let acceptor = {
            let (listener, seen) = (listener.try_clone()?, seen.clone());
            let (api, fail_path) = (api.to_path_buf(), fail_path.to_string());
            std::thread::spawn(move || {
                for client in listener.incoming() {
                    let Ok(client) = client else { return };
                    let (api, fail_path, seen) = (api.clone(), fail_path.clone(), seen.clone());
                    std::thread::spawn(move || serve(client, &api, &fail_path, &seen));
                }
            })
        };
        Ok(ApiFault {
            path: listen.to_path_buf(),
            listener,
            seen,
            acceptor: Some(acceptor),
        })
    }

    /// The socket clients should use instead of the daemon's.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Every request line seen so far and whether it was relayed (false: failed here).
    pub fn requests(&self) -> Vec<(String, bool)> {
        self.seen.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

impl Drop for ApiFault {
    fn drop(&mut self) {
        // SAFETY: shutdown(2) on a socket this proxy owns; a blocked accept then fails.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RD);
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

fn serve(mut client: UnixStream, api: &Path, fail_path: &str, seen: &Mutex<Vec<(String, bool)>>) {
    let Some(head) = read_head(&mut client) else {
        return;
    };
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let path = line.split_whitespace().nth(1).unwrap_or_default();
    let relay = path != fail_path;
    if let Ok(mut seen) = seen.lock() {
        seen.push((line.clone(), relay));
    }
    if !relay {
        let body = format!(r#"{{"error":"injected fault: {line} failed on purpose"}}"#);
        let reply = format!(
            "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        let _ = client.write_all(reply.as_bytes());
        return;
    }
    let Ok(mut daemon) = UnixStream::connect(api) else {
        return;
    };
    if daemon.write_all(&head).is_err() {
        return;
    }
    let (Ok(mut client_read), Ok(mut daemon_read)) = (client.try_clone(), daemon.try_clone())
    else {
        return;
    };
    let upstream = std::thread::spawn(move || {
        let _ = std::io::copy(&mut client_read, &mut daemon);
        let _ = daemon.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut daemon_read, &mut client);
    let _ = client.shutdown(std::net::Shutdown::Both);
    let _ = upstream.join();
}

/// The request head up to and including the blank line (what follows stays in the socket).
fn read_head(client: &mut UnixStream) -> Option<Vec<u8>> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEAD || client.read(&mut byte).ok()? == 0 {
            return None;
        }
        head.push(byte[0]);
    }
    Some(head)
}
