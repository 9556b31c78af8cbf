//! RFC 5424 syslog: each line one message, one datagram, to a unix datagram socket (such as
//! `/dev/log`) or a UDP address. Facility local0; severity warning for deny, notice for
//! the rest; APP-NAME `ofnode`, MSGID `audit`, no structured data.

use std::io;
use std::net::UdpSocket;
use std::os::unix::net::UnixDatagram;
use std::time::SystemTime;

use super::config::SyslogTarget;
use super::line::rfc3339;

/// local0 (16).
const FACILITY: u8 = 16;
pub const SEVERITY_WARNING: u8 = 4;
pub const SEVERITY_NOTICE: u8 = 5;

#[derive(Debug)]
enum Socket {
    Unix(UnixDatagram),
    Udp(UdpSocket),
}

#[derive(Debug)]
pub struct Syslog {
    target: SyslogTarget,
    socket: Option<Socket>,
    hostname: String,
    procid: u32,
}

impl Syslog {
    /// Sends to `target`, naming `hostname` as the sender. The socket is opened at the first
    /// message (and again after a failure), so a syslog daemon started later is reached.
    pub fn new(target: SyslogTarget, hostname: &str) -> Syslog {
        Syslog {
            target,
            socket: None,
            hostname: header_field(hostname),
            procid: std::process::id(),
        }
    }

    fn connect(&self) -> io::Result<Socket> {
        match &self.target {
            SyslogTarget::Unix(path) => {
                let socket = UnixDatagram::unbound()?;
                socket.connect(path)?;
                Ok(Socket::Unix(socket))
            }
            SyslogTarget::Udp(addr) => {
                let bind = if addr.is_ipv4() {
                    "0.0.0.0:0"
                } else {
                    "[::]:0"
                };
                let socket = UdpSocket::bind(bind)?;
                socket.connect(addr)?;
                Ok(Socket::Udp(socket))
            }
        }
    }

    /// Sends one message; never waits for a full socket buffer (the message is lost and the
    /// error returned).
    pub fn send(&mut self, severity: u8, now: SystemTime, message: &str) -> io::Result<()> {
        let frame = frame(severity, now, &self.hostname, self.procid, message);
        if self.socket.is_none() {
            let socket = self.connect()?;
            match &socket {
                Socket::Unix(s) => s.set_nonblocking(true)?,
                Socket::Udp(s) => s.set_nonblocking(true)?,
            }
            self.socket = Some(socket);
        }
        let sent = match &self.socket {
            Some(Socket::Unix(s)) => s.send(frame.as_bytes()),
            Some(Socket::Udp(s)) => s.send(frame.as_bytes()),
            None => Ok(0),
        };
        if let Err(e) = sent {
            if e.kind() != io::ErrorKind::WouldBlock {
                self.socket = None;
            }
            return Err(e);
        }
        Ok(())
    }
}

/// `<PRI>1 TIMESTAMP HOSTNAME ofnode PROCID audit - MESSAGE`.
pub fn frame(severity: u8, now: SystemTime, hostname: &str, procid: u32, message: &str) -> String {
    let pri = u16::from(FACILITY) * 8 + u16::from(severity.min(7));
    format!(
        "<{pri}>1 {} {hostname} ofnode {procid} audit - {message}",
        rfc3339(now)
    )
}

/// A header field: printable ASCII without spaces, at most 255 bytes, `-` when empty.
fn header_field(value: &str) -> String {
    let field: String = value
        .chars()
        .filter(|c| c.is_ascii_graphic())
        .take(255)
        .collect();
    if field.is_empty() {
        "-".into()
    } else {
        field
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn messages_reach_a_unix_datagram_receiver_with_an_rfc5424_header() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("log.sock");
        let receiver = UnixDatagram::bind(&path).unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut syslog = Syslog::new(SyslogTarget::Unix(path), "node 1");
        let at = UNIX_EPOCH + Duration::from_micros(1_796_593_200_123_456);
        syslog
            .send(SEVERITY_WARNING, at, "{\"verdict\":\"deny\"}")
            .unwrap();
        let mut buf = [0u8; 1024];
        let n = receiver.recv(&mut buf).unwrap();
        let got = std::str::from_utf8(&buf[..n]).unwrap();
        assert_eq!(
            got,
            format!(
                "<132>1 2026-12-06T21:40:00.123456Z node1 ofnode {} audit - {{\"verdict\":\"deny\"}}",
                std::process::id()
            )
        );
    }

    #[test]
    fn a_missing_socket_is_an_error_and_is_tried_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("later.sock");
        let mut syslog = Syslog::new(SyslogTarget::Unix(path.clone()), "n");
        assert!(syslog
            .send(SEVERITY_NOTICE, SystemTime::now(), "x")
            .is_err());
        let receiver = UnixDatagram::bind(&path).unwrap();
        syslog
            .send(SEVERITY_NOTICE, SystemTime::now(), "y")
            .unwrap();
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).unwrap();
        assert!(std::str::from_utf8(&buf[..n])
            .unwrap()
            .starts_with("<133>1 "));
    }

    #[test]
    fn udp_gets_one_datagram_a_message() {
        let receiver = UdpSocket::bind("127.0.0.1:0").unwrap();
        receiver
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let target = SyslogTarget::Udp(receiver.local_addr().unwrap());
        let mut syslog = Syslog::new(target, "n");
        syslog
            .send(SEVERITY_NOTICE, SystemTime::now(), "hello")
            .unwrap();
        let mut buf = [0u8; 256];
        let n = receiver.recv(&mut buf).unwrap();
        let got = std::str::from_utf8(&buf[..n]).unwrap();
        assert!(
            got.starts_with("<133>1 ")
                && got.ends_with(&format!(" n ofnode {} audit - hello", std::process::id())),
            "{got}"
        );
    }
}
