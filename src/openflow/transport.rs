//! Listening for the switch on a passive target; `pssl:` targets run the TLS handshake
//! (`crate::tls`) on each accepted TCP socket first. Dialling is `crate::stream`'s.

use std::io;
use std::os::unix::fs::FileTypeExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::net::{TcpListener, TcpStream, UnixListener};

pub(crate) use crate::stream::{connect, ReadHalf, Stream, WriteHalf};
use crate::stream::{no_tls, Target};
use crate::tls::TlsConfig;

/// A listening socket for a passive target. A unix socket file is removed when dropped.
#[derive(Debug)]
pub(crate) enum Listener {
    Tcp(TcpListener),
    Unix {
        listener: UnixListener,
        path: PathBuf,
    },
    /// `pssl:`: TCP whose peers must complete [`Listener::secure`] first.
    Tls {
        listener: TcpListener,
        tls: TlsConfig,
    },
}

/// A peer just accepted: for a TLS listener, its handshake has not run yet (it runs in the
/// peer's own task, so a slow peer cannot hold up the accept loop).
#[derive(Debug)]
pub(crate) enum Accepted {
    Ready(Stream),
    NeedsTls(TcpStream, TlsConfig),
}

impl Accepted {
    /// The stream to speak OpenFlow on, after the TLS handshake where one is due.
    pub(crate) async fn secure(self) -> io::Result<Stream> {
        match self {
            Accepted::Ready(stream) => Ok(stream),
            Accepted::NeedsTls(tcp, tls) => Ok(Stream::TlsServer(Box::new(tls.accept(tcp).await?))),
        }
    }
}

impl Listener {
    pub(crate) async fn bind(target: &Target, tls: Option<&TlsConfig>) -> io::Result<Listener> {
        match target {
            Target::PassiveTcp(addr) => Ok(Listener::Tcp(TcpListener::bind(addr).await?)),
            Target::PassiveSsl(addr) => Ok(Listener::Tls {
                tls: tls.ok_or_else(|| no_tls(target))?.clone(),
                listener: TcpListener::bind(addr).await?,
            }),
            Target::PassiveUnix(path) => {
                remove_stale_socket(path)?;
                Ok(Listener::Unix {
                    listener: UnixListener::bind(path)?,
                    path: path.clone(),
                })
            }
            Target::Unix(_) | Target::Tcp { .. } | Target::Ssl { .. } => Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{target} is an active target: dial it, don't listen on it"),
            )),
        }
    }

    /// Wraps a listener bound elsewhere (e.g. on a thread that entered another network
    /// namespace, where the switch can reach it); with `tls`, peers must speak TLS.
    pub(crate) fn from_std_tcp(
        listener: std::net::TcpListener,
        tls: Option<&TlsConfig>,
    ) -> io::Result<Listener> {
        listener.set_nonblocking(true)?;
        let listener = TcpListener::from_std(listener)?;
        Ok(match tls {
            Some(tls) => Listener::Tls {
                listener,
                tls: tls.clone(),
            },
            None => Listener::Tcp(listener),
        })
    }

    /// The next switch that dialled in, and a name for it in logs.
    pub(crate) async fn accept(&self) -> io::Result<(Accepted, String)> {
        match self {
            Listener::Tcp(listener) => {
                let (stream, peer) = listener.accept().await?;
                stream.set_nodelay(true)?;
                Ok((Accepted::Ready(Stream::Tcp(stream)), format!("tcp:{peer}")))
            }
            Listener::Tls { listener, tls } => {
                let (stream, peer) = listener.accept().await?;
                stream.set_nodelay(true)?;
                Ok((
                    Accepted::NeedsTls(stream, tls.clone()),
                    format!("ssl:{peer}"),
                ))
            }
            Listener::Unix { listener, path } => {
                let (stream, _) = listener.accept().await?;
                // Unix peers have no address; number them so log lines can be told apart.
                static PEERS: AtomicU64 = AtomicU64::new(0);
                let n = PEERS.fetch_add(1, Ordering::Relaxed);
                let peer = format!("unix#{n} on {}", path.display());
                Ok((Accepted::Ready(Stream::Unix(stream)), peer))
            }
        }
    }

    pub(crate) fn local_description(&self) -> String {
        match self {
            Listener::Tcp(listener) => listener
                .local_addr()
                .map_or_else(|e| format!("tcp listener ({e})"), |a| format!("ptcp:{a}")),
            Listener::Unix { path, .. } => format!("punix:{}", path.display()),
            Listener::Tls { listener, .. } => listener
                .local_addr()
                .map_or_else(|e| format!("ssl listener ({e})"), |a| format!("pssl:{a}")),
        }
    }
}

impl Drop for Listener {
    fn drop(&mut self) {
        if let Listener::Unix { path, .. } = self {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// A socket file left by an earlier run would make bind fail; anything else at the path is not
/// ours to delete.
fn remove_stale_socket(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_socket() => std::fs::remove_file(path),
        Ok(_) => Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            format!("{} exists and is not a socket", path.display()),
        )),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test]
    async fn passive_unix_accepts_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ctl.sock");
        let target = Target::PassiveUnix(path.clone());
        let listener = Listener::bind(&target, None).await.unwrap();
        let client = tokio::spawn(async move {
            let Stream::Unix(mut s) = connect(&Target::Unix(path), None).await.unwrap() else {
                panic!("not unix")
            };
            s.write_all(b"ping").await.unwrap();
        });
        let (accepted, _) = listener.accept().await.unwrap();
        let (mut read, _write) = accepted.secure().await.unwrap().into_split();
        let mut buf = [0u8; 4];
        read.read_exact(&mut buf).await.unwrap();
        assert_eq!(&buf, b"ping");
        client.await.unwrap();
        let path = dir.path().join("ctl.sock");
        assert!(path.exists());
        // A stale socket from an earlier listener does not stop a new bind.
        let again = Listener::bind(&target, None).await;
        assert!(again.is_ok(), "{again:?}");
        drop(listener);
        drop(again);
        assert!(!path.exists());
    }

    #[tokio::test]
    async fn refuses_to_replace_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("not-a-socket");
        std::fs::write(&path, b"x").unwrap();
        let err = Listener::bind(&Target::PassiveUnix(path.clone()), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not a socket"), "{err}");
        assert!(path.exists());
    }

    #[tokio::test]
    async fn passive_tcp_defaults_to_loopback() {
        let target: Target = "ptcp:0".parse().unwrap();
        let listener = Listener::bind(&target, None).await.unwrap();
        let Listener::Tcp(tcp) = &listener else {
            panic!("not tcp")
        };
        assert!(tcp.local_addr().unwrap().ip().is_loopback());
    }

    #[tokio::test]
    async fn ssl_targets_without_tls_files_are_refused_with_the_fix() {
        let err = Listener::bind(&"pssl:0".parse().unwrap(), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("--private-key"), "{err}");
        let err = connect(&"ssl:127.0.0.1:1".parse().unwrap(), None)
            .await
            .unwrap_err();
        assert!(err.to_string().contains("needs TLS files"), "{err}");
    }

    #[tokio::test]
    async fn active_and_passive_are_not_mixed_up() {
        assert!(connect(&"ptcp:0".parse().unwrap(), None).await.is_err());
        assert!(Listener::bind(&"tcp:127.0.0.1:1".parse().unwrap(), None)
            .await
            .is_err());
    }
}
