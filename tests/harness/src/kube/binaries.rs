//! Where `scripts/install-deps.sh` leaves the builds of kube-apiserver, kubectl and etcd: one
//! directory per release under the tools cache, named after the versions that `tools/kube/go.mod`
//! and `tools/etcd/go.mod` require (the one place each release is written down).

use std::path::{Path, PathBuf};

use super::KubeError;

/// Overrides [`DEFAULT_TOOLS_CACHE`] (the build script reads the same variable).
pub const TOOLS_CACHE_ENV: &str = "OFNODE_TOOLS_CACHE";
/// Where the builds live unless [`TOOLS_CACHE_ENV`] says otherwise.
pub const DEFAULT_TOOLS_CACHE: &str = "/var/cache/ofnode";

const KUBE_GO_MOD: &str = include_str!("../../../../tools/kube/go.mod");
const ETCD_GO_MOD: &str = include_str!("../../../../tools/etcd/go.mod");

/// The Kubernetes release the tests run (`v1.34.4`): what `tools/kube/go.mod` requires.
pub fn kubernetes_release() -> &'static str {
    required_version(KUBE_GO_MOD, "k8s.io/kubernetes").unwrap_or("unknown")
}

/// The etcd release the API server runs on (`v3.6.17`): what `tools/etcd/go.mod` requires.
pub fn etcd_release() -> &'static str {
    required_version(ETCD_GO_MOD, "go.etcd.io/etcd/server/v3").unwrap_or("unknown")
}

/// The version a go.mod requires `module` at (in a `require` line or block).
fn required_version<'a>(go_mod: &'a str, module: &str) -> Option<&'a str> {
    go_mod.lines().find_map(|line| {
        let mut words = line.split_whitespace().skip_while(|w| *w == "require");
        (words.next() == Some(module))
            .then(|| words.next())
            .flatten()
            .filter(|version| version.starts_with('v'))
    })
}

/// The cached builds one test run uses.
#[derive(Debug, Clone)]
pub struct KubeBinaries {
    pub kube_apiserver: PathBuf,
    pub kubectl: PathBuf,
    pub etcd: PathBuf,
}

impl KubeBinaries {
    /// The builds of this checkout's releases, or an error naming the missing file and the
    /// command that builds it.
    pub fn from_cache() -> Result<KubeBinaries, KubeError> {
        let root = std::env::var_os(TOOLS_CACHE_ENV)
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_TOOLS_CACHE));
        let kube = root.join(format!("kube-{}", kubernetes_release()));
        let etcd = root.join(format!("etcd-{}", etcd_release()));
        let binaries = KubeBinaries {
            kube_apiserver: kube.join("kube-apiserver"),
            kubectl: kube.join("kubectl"),
            etcd: etcd.join("etcd"),
        };
        for path in [&binaries.kube_apiserver, &binaries.kubectl, &binaries.etcd] {
            require_executable(path)?;
        }
        Ok(binaries)
    }
}

fn require_executable(path: &Path) -> Result<(), KubeError> {
    use std::os::unix::fs::PermissionsExt;
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_file() && meta.permissions().mode() & 0o111 != 0 => Ok(()),
        _ => Err(KubeError::NotBuilt(path.to_path_buf())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_a_requirement_in_a_block_or_a_line() {
        let go_mod = "module m\n\ngo 1.24.0\n\nrequire (\n\tk8s.io/api v0.34.4 // indirect\n\
                      \tk8s.io/kubernetes v1.34.4 // indirect\n)\nrequire go.etcd.io/etcd/server/v3 v3.6.17\n";
        assert_eq!(
            required_version(go_mod, "k8s.io/kubernetes"),
            Some("v1.34.4")
        );
        assert_eq!(
            required_version(go_mod, "go.etcd.io/etcd/server/v3"),
            Some("v3.6.17")
        );
        assert_eq!(required_version(go_mod, "k8s.io/kube"), None);
    }

    #[test]
    fn this_checkout_names_both_releases() {
        assert!(kubernetes_release().starts_with("v1."), "{KUBE_GO_MOD}");
        assert!(etcd_release().starts_with("v3."), "{ETCD_GO_MOD}");
    }
}
