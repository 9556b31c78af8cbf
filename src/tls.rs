//! TLS for the OpenFlow (`ssl:` / `pssl:`) and OVSDB (`ssl:`) channels, the way Open vSwitch
//! does it: one private key, the certificate that goes with it, and the CA certificate peers
//! must be signed by (ovs-vswitchd's `--private-key`, `--certificate`, `--ca-cert`, or
//! `ovs-vsctl set-ssl`).
//!
//! Both directions are mutual: we present our certificate, and the peer's certificate must chain
//! to the CA. As in OVS (OpenSSL with `SSL_VERIFY_PEER` and no host check), the peer's host name
//! is not compared with the certificate: `ovs-pki` certificates name a switch or controller, not
//! an address. Every other check (signature chain, validity period, key usage) is made.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::WebPkiClientVerifier;
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use tokio::net::TcpStream;
use tokio_rustls::{TlsAcceptor, TlsConnector};

/// Where the PEM files are.
#[derive(Debug, Clone, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsFiles {
    /// Our private key (PKCS#8, PKCS#1 or SEC1 PEM).
    pub private_key: PathBuf,
    /// Our certificate (PEM; a chain may follow it in the same file).
    pub certificate: PathBuf,
    /// The CA certificate(s) a peer's certificate must be signed by (PEM).
    pub ca_cert: PathBuf,
}

#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    #[error("cannot read the {what} {path}: {source}")]
    Pem {
        what: &'static str,
        path: PathBuf,
        source: rustls::pki_types::pem::Error,
    },
    #[error("the {what} {path} holds no PEM certificate")]
    NoCertificate { what: &'static str, path: PathBuf },
    #[error("the CA certificate in {path} is not usable: {source}")]
    BadCa {
        path: PathBuf,
        source: rustls::Error,
    },
    #[error(
        "the private key {key} and certificate {certificate} cannot be used together: {source}"
    )]
    BadIdentity {
        key: PathBuf,
        certificate: PathBuf,
        source: rustls::Error,
    },
    #[error("cannot build the TLS configuration: {0}")]
    Config(String),
}

/// Client and server configurations made from one set of files, shared by every connection.
#[derive(Clone)]
pub struct TlsConfig {
    files: TlsFiles,
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("files", &self.files)
            .finish()
    }
}

impl TlsConfig {
    /// Reads and checks the three files; any problem is reported with the file it is in.
    pub fn load(files: &TlsFiles) -> Result<TlsConfig, TlsError> {
        let certs = read_certs("certificate", &files.certificate)?;
        let key =
            PrivateKeyDer::from_pem_file(&files.private_key).map_err(|source| TlsError::Pem {
                what: "private key",
                path: files.private_key.clone(),
                source,
            })?;
        let roots = Arc::new(read_roots(&files.ca_cert)?);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let bad_identity = |source| TlsError::BadIdentity {
            key: files.private_key.clone(),
            certificate: files.certificate.clone(),
            source,
        };
        let config = |e: rustls::Error| TlsError::Config(e.to_string());

        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(roots.clone(), provider.clone())
                .build()
                .map_err(|e| TlsError::Config(e.to_string()))?;
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(bad_identity)?;

        let server_verifier = WebPkiServerVerifier::builder_with_provider(roots, provider.clone())
            .build()
            .map_err(|e| TlsError::Config(e.to_string()))?;
        let client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(config)?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(CaOnly(server_verifier)))
            .with_client_auth_cert(certs, key)
            .map_err(bad_identity)?;

        Ok(TlsConfig {
            files: files.clone(),
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }

    pub fn files(&self) -> &TlsFiles {
        &self.files
    }

    /// Runs the client side of the handshake on a connected socket. `host` is what was dialled
    /// (sent as SNI when it is a name; not checked against the certificate, see the module).
    pub async fn connect(
        &self,
        host: &str,
        tcp: TcpStream,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let name = ServerName::try_from(host.to_string()).map_err(|e| {
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("`{host}` is not a host name or address: {e}"),
            )
        })?;
        TlsConnector::from(self.client.clone())
            .connect(name, tcp)
            .await
            .map_err(explain)
    }

    /// Runs the server side of the handshake on an accepted socket.
    pub async fn accept(
        &self,
        tcp: TcpStream,
    ) -> std::io::Result<tokio_rustls::server::TlsStream<TcpStream>> {
        TlsAcceptor::from(self.server.clone())
            .accept(tcp)
            .await
            .map_err(explain)
    }
}

/// A handshake error with the likely cause spelled out: rustls names the failed check
/// (`UnknownIssuer`, `received fatal alert: UnknownCA`, …), the operator needs to know which file
/// to look at.
fn explain(error: std::io::Error) -> std::io::Error {
    let text = error.to_string();
    let hint = if text.contains("UnknownIssuer") || text.contains("BadSignature") {
        "; the peer's certificate is not signed by our CA (--ca-cert)"
    } else if text.contains("UnknownCA") || text.contains("BadCertificate") {
        "; the peer does not accept our certificate: is it signed by the CA the peer trusts?"
    } else if text.contains("Expired") || text.contains("NotValidYet") {
        "; check the certificates' validity dates and the clock"
    } else {
        ""
    };
    std::io::Error::new(error.kind(), format!("TLS handshake failed: {text}{hint}"))
}

fn read_certs(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = |source| TlsError::Pem {
        what,
        path: path.to_path_buf(),
        source,
    };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(pem)?
        .collect::<Result<Vec<_>, _>>()
        .map_err(pem)?;
    if certs.is_empty() {
        return Err(TlsError::NoCertificate {
            what,
            path: path.to_path_buf(),
        });
    }
    Ok(certs)
}

fn read_roots(path: &Path) -> Result<RootCertStore, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs("CA certificate", path)? {
        roots.add(cert).map_err(|source| TlsError::BadCa {
            path: path.to_path_buf(),
            source,
        })?;
    }
    Ok(roots)
}

/// WebPKI server verification minus the host-name check (see the module comment). The chain is
/// verified first, so a name mismatch is only reported for a certificate the CA did sign.
#[derive(Debug)]
struct CaOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for CaOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ofnode_harness::Pki;

    fn files(peer: &ofnode_harness::PeerFiles) -> TlsFiles {
        TlsFiles {
            private_key: peer.private_key.clone(),
            certificate: peer.certificate.clone(),
            ca_cert: peer.ca_cert.clone(),
        }
    }

    #[test]
    fn loads_a_good_set_and_names_the_file_of_a_bad_one() {
        let pki = Pki::new("unit CA").unwrap();
        let good = files(&pki.issue("node").unwrap());
        TlsConfig::load(&good).unwrap();

        let missing = TlsFiles {
            ca_cert: pki.dir().join("nope.pem"),
            ..good.clone()
        };
        let err = TlsConfig::load(&missing).unwrap_err().to_string();
        assert!(err.contains("nope.pem"), "{err}");

        // A key that is not the certificate's.
        let other = files(&pki.issue("other").unwrap());
        let mismatched = TlsFiles {
            private_key: other.private_key,
            ..good.clone()
        };
        let err = TlsConfig::load(&mismatched).unwrap_err().to_string();
        assert!(err.contains("cannot be used together"), "{err}");

        // A CA file without a certificate in it.
        let empty = pki.dir().join("empty.pem");
        std::fs::write(&empty, "not pem\n").unwrap();
        let err = TlsConfig::load(&TlsFiles {
            ca_cert: empty,
            ..good
        })
        .unwrap_err()
        .to_string();
        assert!(err.contains("holds no PEM certificate"), "{err}");
    }

    #[tokio::test]
    async fn mutual_handshake_works_within_a_ca_and_fails_across_cas() {
        let pki = Pki::new("unit CA").unwrap();
        let other = Pki::new("other CA").unwrap();
        let server = TlsConfig::load(&files(&pki.issue("server").unwrap())).unwrap();
        let client = TlsConfig::load(&files(&pki.issue("client").unwrap())).unwrap();
        let stranger = TlsConfig::load(&files(&other.issue("client").unwrap())).unwrap();

        for (who, config, ok) in [("same CA", &client, true), ("other CA", &stranger, false)] {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let addr = listener.local_addr().unwrap();
            let accept = {
                let server = server.clone();
                tokio::spawn(async move {
                    let (tcp, _) = listener.accept().await.unwrap();
                    server.accept(tcp).await.map(|_| ())
                })
            };
            let tcp = TcpStream::connect(addr).await.unwrap();
            let dialled = config.connect("127.0.0.1", tcp).await.map(|_| ());
            let accepted = accept.await.unwrap();
            if ok {
                assert!(
                    dialled.is_ok() && accepted.is_ok(),
                    "{who}: {dialled:?} {accepted:?}"
                );
            } else {
                // The client (with a certificate from another CA) is also refused the server's:
                // neither side completes, and the reason is named.
                let err = dialled.unwrap_err().to_string();
                assert!(err.contains("TLS handshake failed"), "{who}: {err}");
                assert!(accepted.is_err(), "{who}: the server accepted a stranger");
            }
        }
    }
}
