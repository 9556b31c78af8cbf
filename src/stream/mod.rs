//! Byte streams to Open vSwitch's daemons, shared by the OpenFlow connection and the OVSDB
//! client: the target syntax ([`Target`]), dialling an active target over unix, TCP or TLS
//! ([`connect`]; the TLS setup itself is `crate::tls`), and the reconnect delays ([`Backoff`]).
//! Listening for a switch that dials in is the OpenFlow connection's own (`openflow::transport`).

pub mod backoff;
pub mod target;

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpStream, UnixStream};

pub use backoff::Backoff;
pub use target::{Target, TargetError, DEFAULT_OPENFLOW_PORT};

use crate::tls::TlsConfig;

pub type ReadHalf = Box<dyn AsyncRead + Send + Unpin>;
pub type WriteHalf = Box<dyn AsyncWrite + Send + Unpin>;

/// One byte stream, whatever carries it.
#[derive(Debug)]
pub enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
    TlsClient(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    TlsServer(Box<tokio_rustls::server::TlsStream<TcpStream>>),
}

impl Stream {
    /// Owned halves (no lock between reader and writer, unlike `tokio::io::split`).
    pub fn into_split(self) -> (ReadHalf, WriteHalf) {
        match self {
            Stream::Tcp(stream) => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            Stream::Unix(stream) => {
                let (read, write) = stream.into_split();
                (Box::new(read), Box::new(write))
            }
            // One TLS session state serves both directions, so these halves share a lock.
            Stream::TlsClient(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (Box::new(read), Box::new(write))
            }
            Stream::TlsServer(stream) => {
                let (read, write) = tokio::io::split(*stream);
                (Box::new(read), Box::new(write))
            }
        }
    }
}

/// Calls `$method` on whichever stream `$self` holds (every one is `Unpin`).
macro_rules! delegate {
    ($self:ident, $method:ident($($arg:expr),*)) => {
        match $self.get_mut() {
            Stream::Tcp(s) => Pin::new(s).$method($($arg),*),
            Stream::Unix(s) => Pin::new(s).$method($($arg),*),
            Stream::TlsClient(s) => Pin::new(s.as_mut()).$method($($arg),*),
            Stream::TlsServer(s) => Pin::new(s.as_mut()).$method($($arg),*),
        }
    };
}

impl AsyncRead for Stream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        delegate!(self, poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        delegate!(self, poll_write(cx, buf))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, poll_flush(cx))
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        delegate!(self, poll_shutdown(cx))
    }
}

/// The error for an `ssl:`/`pssl:` target without TLS files.
pub fn no_tls(target: &Target) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("{target} needs TLS files: give --private-key, --certificate and --ca-cert"),
    )
}

async fn dial_tcp(host: &str, port: u16) -> io::Result<TcpStream> {
    let stream = TcpStream::connect((host, port)).await?;
    // Small requests must leave at once: OpenFlow and OVSDB are latency-bound request/reply.
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// Dials an active target (`tls` is required for `ssl:`).
pub async fn connect(target: &Target, tls: Option<&TlsConfig>) -> io::Result<Stream> {
    match target {
        Target::Unix(path) => Ok(Stream::Unix(UnixStream::connect(path).await?)),
        Target::Tcp { host, port } => Ok(Stream::Tcp(dial_tcp(host, *port).await?)),
        Target::Ssl { host, port } => {
            let tls = tls.ok_or_else(|| no_tls(target))?;
            let tcp = dial_tcp(host, *port).await?;
            Ok(Stream::TlsClient(Box::new(tls.connect(host, tcp).await?)))
        }
        Target::PassiveUnix(_) | Target::PassiveTcp(_) | Target::PassiveSsl(_) => {
            Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{target} is a passive target: listen on it, don't dial it"),
            ))
        }
    }
}
