//! A throwaway public-key infrastructure for the TLS tests: a CA and certificates it signs,
//! written as PEM files into a temporary directory (removed on drop), the way `ovs-pki` lays
//! them out. Certificates name a peer, not an address (`ovs-pki` makes them so too).

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, Certificate, CertificateParams, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

use crate::process::CommandError;

/// A CA that signs certificates into its own directory.
pub struct Pki {
    dir: tempfile::TempDir,
    ca: Certificate,
    ca_key: KeyPair,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir.path())
            .finish_non_exhaustive()
    }
}

/// Who a certificate names: Kubernetes reads the common name as the user and the organization
/// as a group; TLS clients check the alternative names (DNS names or IP addresses).
#[derive(Debug, Clone, Default)]
pub struct Subject {
    pub common_name: String,
    /// At most one: rcgen writes one attribute of each type into a distinguished name.
    pub organization: Option<String>,
    pub alt_names: Vec<String>,
}

/// The three files a TLS peer needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFiles {
    pub private_key: PathBuf,
    pub certificate: PathBuf,
    pub ca_cert: PathBuf,
}

fn pki_error(what: &str, e: impl std::fmt::Display) -> CommandError {
    CommandError::Other(format!("test PKI: {what}: {e}"))
}

impl Pki {
    /// A new CA named `name` (its certificate is `DIR/cacert.pem`), in a temporary directory.
    pub fn new(name: &str) -> Result<Pki, CommandError> {
        Pki::new_in(name, &std::env::temp_dir())
    }

    /// A new CA whose directory is made inside `parent` (a state directory the reaper knows).
    pub fn new_in(name: &str, parent: &Path) -> Result<Pki, CommandError> {
        let dir = tempfile::Builder::new()
            .prefix("ofnode-pki")
            .tempdir_in(parent)
            .map_err(|e| pki_error("temporary directory", e))?;
        let ca_key = KeyPair::generate().map_err(|e| pki_error("CA key", e))?;
        let mut params = CertificateParams::new(Vec::<String>::new())
            .map_err(|e| pki_error("CA parameters", e))?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca = params
            .self_signed(&ca_key)
            .map_err(|e| pki_error("CA certificate", e))?;
        let pki = Pki { dir, ca, ca_key };
        write(&pki.ca_cert(), &pki.ca.pem())?;
        Ok(pki)
    }

    pub fn ca_cert(&self) -> PathBuf {
        self.dir.path().join("cacert.pem")
    }

    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// A key and a certificate for `name`, signed by this CA, usable as client and as server.
    pub fn issue(&self, name: &str) -> Result<PeerFiles, CommandError> {
        let subject = Subject {
            common_name: name.to_string(),
            organization: None,
            alt_names: vec![name.to_string()],
        };
        self.issue_for(name, &subject)
    }

    /// A key and a certificate naming `subject`, signed by this CA, usable as client and as
    /// server, written as `<stem>-privkey.pem` and `<stem>-cert.pem`.
    pub fn issue_for(&self, stem: &str, subject: &Subject) -> Result<PeerFiles, CommandError> {
        let key = KeyPair::generate().map_err(|e| pki_error("key", e))?;
        let mut params = CertificateParams::new(subject.alt_names.clone())
            .map_err(|e| pki_error("certificate parameters", e))?;
        params.distinguished_name = distinguished_name(subject);
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let cert = params
            .signed_by(&key, &self.ca, &self.ca_key)
            .map_err(|e| pki_error("certificate", e))?;
        let files = PeerFiles {
            private_key: self.dir.path().join(format!("{stem}-privkey.pem")),
            certificate: self.dir.path().join(format!("{stem}-cert.pem")),
            ca_cert: self.ca_cert(),
        };
        write(&files.private_key, &key.serialize_pem())?;
        write(&files.certificate, &cert.pem())?;
        Ok(files)
    }
}

fn distinguished_name(subject: &Subject) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, subject.common_name.as_str());
    if let Some(organization) = &subject.organization {
        name.push(DnType::OrganizationName, organization.as_str());
    }
    name
}

fn write(path: &Path, pem: &str) -> Result<(), CommandError> {
    std::fs::write(path, pem).map_err(|e| pki_error(&format!("write {}", path.display()), e))
}
