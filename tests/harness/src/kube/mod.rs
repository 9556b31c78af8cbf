//! A real Kubernetes API server for the tests: the kube-apiserver, kubectl and etcd that
//! `scripts/install-deps.sh` builds once per machine (see `tools/kube/README.md`), started per
//! test and stopped with it.
//!
//! ```text
//!   namespace NS (a cluster's underlay, or one of its own)
//!     kube-apiserver  https://192.0.2.1:6443   TLS, client certificates, Node+RBAC
//!       └─ etcd       http://127.0.0.1:2379    (loopback of NS: only the API server uses it)
//! ```
//!
//! The API server listens on [`API_SERVER_IP`] only: in a cluster that address sits on the
//! underlay bridge, where every node's namespace reaches it (see
//! [`Cluster::start_with_kube_api`](crate::Cluster::start_with_kube_api)); standalone it is an
//! address of the loopback device of a namespace of its own ([`KubeApiServer::start`]), and
//! whatever talks to it runs inside that namespace ([`Kubectl`] does; Rust code can use
//! [`Netns::run_in`]).
//!
//! Clients authenticate with certificates signed by the server's CA: the admin is in
//! `system:masters`; [`KubeApiServer::kubeconfig_for`] mints one for any user and group, and
//! [`KubeApiServer::kubeconfig_for_service_account`] one with a service account's token.
//! There is no controller-manager, scheduler or kubelet: a test plays their part (it sets
//! `spec.nodeName` and `status.podIP` itself, see [`PodObject`]). One consequence: a deleted
//! Namespace stays `Terminating` (nobody empties it and removes its finalizer) unless the test
//! does what the namespace controller would ([`KubeApiServer::finalize_namespace`]).
//!
//! Every process's PID is written into the namespace's state directory, so the reaper of killed
//! runs ([`crate::reap_stale`]) stops them; on drop both are killed by PID and waited for.

mod binaries;
mod controller;
mod kubeconfig;
mod kubectl;
mod objects;

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use crate::etcd::Etcd;
use crate::netns::Netns;
use crate::pki::{PeerFiles, Pki, Subject};
use crate::process::{tail_lines, terminate_child, CommandError};
use kubeconfig::Credentials;

pub use binaries::{
    etcd_release, kubernetes_release, KubeBinaries, DEFAULT_TOOLS_CACHE, TOOLS_CACHE_ENV,
};
pub use controller::{in_netns, ControllerOptions, ControllerProcess};
pub use kubeconfig::CONTEXT;
pub use kubectl::Kubectl;
pub use objects::{NodeObject, PodObject};

/// Where the API server listens (the same address as the cluster's etcd: the one service
/// address of the underlay).
pub const API_SERVER_IP: Ipv4Addr = crate::cluster::ETCD_IP;
pub const API_SERVER_PORT: u16 = 6443;
/// `--service-cluster-ip-range`: the cluster's service network.
pub const SERVICE_CLUSTER_IP_RANGE: &str = crate::cluster::SERVICE_NETWORK;
pub const SERVICE_ACCOUNT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// The group whose members may do anything (bound to cluster-admin by the bootstrap policy).
pub const ADMIN_GROUP: &str = "system:masters";
/// A cold start on a busy 2-core machine takes seconds; this bound is for a broken one.
const READY_TIMEOUT: Duration = Duration::from_secs(120);
const PROGRAM: &str = "kube-apiserver";

#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    #[error(
        "{} is not built: scripts/install-deps.sh (run by `make test`) builds kube-apiserver \
         and kubectl {} and etcd {} into {} once per machine (see tools/kube/README.md)",
        .0.display(),
        kubernetes_release(),
        etcd_release(),
        .0.parent().and_then(Path::parent).unwrap_or(Path::new("?")).display()
    )]
    NotBuilt(PathBuf),
    #[error("{what}: {source}")]
    Step {
        what: String,
        #[source]
        source: CommandError,
    },
    #[error("`kubectl {args}` as {user} failed ({status}): {stderr}")]
    Kubectl {
        user: String,
        args: String,
        status: String,
        stderr: String,
    },
    #[error("`kubectl {args}` printed no JSON ({error}): {stdout}")]
    Json {
        args: String,
        error: String,
        stdout: String,
    },
    #[error("{0}")]
    Other(String),
}

impl KubeError {
    /// The API server refused the request: authenticated, but RBAC (or Node) said no (403).
    pub fn is_forbidden(&self) -> bool {
        self.kubectl_stderr()
            .is_some_and(|e| e.contains("(Forbidden)"))
    }

    /// The API server did not accept the client's credentials (401).
    pub fn is_unauthorized(&self) -> bool {
        // kubectl's words for a 401, depending on which request met it.
        self.kubectl_stderr().is_some_and(|e| {
            e.contains("(Unauthorized)")
                || e.contains("You must be logged in to the server")
                || e.contains("the server has asked for the client to provide credentials")
        })
    }

    /// The client did not trust the API server's certificate (its CA is not the server's).
    pub fn is_untrusted_server(&self) -> bool {
        self.kubectl_stderr()
            .is_some_and(|e| e.contains("certificate signed by unknown authority"))
    }

    fn kubectl_stderr(&self) -> Option<&str> {
        match self {
            KubeError::Kubectl { stderr, .. } => Some(stderr),
            _ => None,
        }
    }
}

trait Context<T> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, KubeError>;
}

impl<T> Context<T> for Result<T, CommandError> {
    fn context(self, what: impl FnOnce() -> String) -> Result<T, KubeError> {
        self.map_err(|source| KubeError::Step {
            what: what(),
            source,
        })
    }
}

/// How to start an API server beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct KubeOptions {
    /// More kube-apiserver flags, after the harness's own (a later flag wins): say
    /// `--watch-cache=false`, or `--feature-gates=…`.
    pub extra_flags: Vec<String>,
}

/// A running kube-apiserver and its etcd. Both are killed (by PID) and their state removed on
/// drop, also when the test panics.
#[derive(Debug)]
pub struct KubeApiServer {
    binaries: KubeBinaries,
    netns: String,
    ip: Ipv4Addr,
    dir: PathBuf,
    pki: Pki,
    serving: PeerFiles,
    service_account: ServiceAccountKey,
    admin: Kubectl,
    minted: AtomicU32,
    options: KubeOptions,
    apiserver: Option<Child>,
    etcd: Option<Etcd>,
    /// The namespace of a standalone server, deleted last.
    own_netns: Option<Netns>,
}

impl KubeApiServer {
    /// Starts a standalone API server in a namespace of its own, on [`API_SERVER_IP`] (an address
    /// of that namespace's loopback device), for tests that need no nodes. Returns once
    /// `/readyz` says ready.
    pub fn start() -> Result<KubeApiServer, KubeError> {
        KubeApiServer::start_with(KubeOptions::default())
    }

    /// [`KubeApiServer::start`] with `options`.
    pub fn start_with(options: KubeOptions) -> Result<KubeApiServer, KubeError> {
        let binaries = KubeBinaries::from_cache()?;
        let netns = Netns::new("k").context(|| "create the API server's namespace".into())?;
        netns
            .exec_ok(&[
                "ip",
                "addr",
                "add",
                &format!("{API_SERVER_IP}/32"),
                "dev",
                "lo",
            ])
            .context(|| format!("put {API_SERVER_IP} on lo"))?;
        KubeApiServer::launch(binaries, &netns, API_SERVER_IP, options).map(|mut api| {
            api.own_netns = Some(netns);
            api
        })
    }

    /// Starts an API server inside `netns` (which stays the caller's) on `ip`, an address that
    /// namespace already has. Returns once `/readyz` says ready.
    pub fn start_in(
        netns: &Netns,
        ip: Ipv4Addr,
        options: KubeOptions,
    ) -> Result<KubeApiServer, KubeError> {
        KubeApiServer::launch(KubeBinaries::from_cache()?, netns, ip, options)
    }

    fn launch(
        binaries: KubeBinaries,
        netns: &Netns,
        ip: Ipv4Addr,
        options: KubeOptions,
    ) -> Result<KubeApiServer, KubeError> {
        let dir = crate::process::state_dir_for(netns.name()).join("kube");
        std::fs::create_dir_all(&dir)
            .map_err(|e| KubeError::Other(format!("create {}: {e}", dir.display())))?;
        let pki = Pki::new_in("ofnode-harness kubernetes CA", &dir)
            .context(|| "make the cluster CA".into())?;
        let admin_kubeconfig = dir.join("admin.kubeconfig");
        let admin_subject = client_subject("ofnode-harness-admin", Some(ADMIN_GROUP));
        let admin_files = pki
            .issue_for("admin", &admin_subject)
            .context(|| "issue the admin certificate".into())?;
        kubeconfig::write(
            &admin_kubeconfig,
            &url_of(ip),
            &pki.ca_cert(),
            &admin_subject.common_name,
            Credentials::Certificate(&admin_files),
        )?;
        let serving = issue_serving_certificate(&pki, ip)?;
        let service_account = write_service_account_key(&dir)?;
        let admin = Kubectl::new(
            &binaries.kubectl,
            &admin_kubeconfig,
            netns.name(),
            &dir.join("kubectl-cache"),
            &admin_subject.common_name,
        );
        let etcd =
            Etcd::start_program_in(&binaries.etcd, netns, Ipv4Addr::LOCALHOST, dir.join("etcd"))
                .context(|| format!("start etcd {} for the API server", etcd_release()))?;
        let mut api = KubeApiServer {
            binaries,
            netns: netns.name().to_string(),
            ip,
            dir,
            pki,
            serving,
            service_account,
            admin,
            minted: AtomicU32::new(0),
            options,
            apiserver: None,
            etcd: Some(etcd),
            own_netns: None,
        };
        api.spawn()?;
        Ok(api)
    }

    /// (Re)starts kube-apiserver on the same etcd, certificates and keys, and waits until it is
    /// ready. After [`KubeApiServer::stop`] or [`KubeApiServer::kill`], this is a restart.
    pub fn spawn(&mut self) -> Result<(), KubeError> {
        if self.apiserver.is_some() {
            return Err(KubeError::Other("kube-apiserver is already running".into()));
        }
        let log_path = self.dir.join("kube-apiserver.log");
        let open_log = || {
            std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(&log_path)
                .map_err(|e| KubeError::Other(format!("open {}: {e}", log_path.display())))
        };
        let path = |file: &Path| file.display().to_string();
        let flags = [
            format!("--etcd-servers=http://{}:2379", Ipv4Addr::LOCALHOST),
            format!("--bind-address={}", self.ip),
            format!("--advertise-address={}", self.ip),
            format!("--secure-port={API_SERVER_PORT}"),
            format!("--cert-dir={}", path(&self.dir.join("serving"))),
            format!("--tls-cert-file={}", path(&self.serving.certificate)),
            format!("--tls-private-key-file={}", path(&self.serving.private_key)),
            format!("--client-ca-file={}", path(&self.pki.ca_cert())),
            format!("--service-cluster-ip-range={SERVICE_CLUSTER_IP_RANGE}"),
            "--authorization-mode=Node,RBAC".to_string(),
            "--allow-privileged=true".to_string(),
            // No controller-manager creates the `default` ServiceAccount a pod would need.
            "--disable-admission-plugins=ServiceAccount".to_string(),
            format!("--service-account-issuer={SERVICE_ACCOUNT_ISSUER}"),
            format!(
                "--service-account-key-file={}",
                path(&self.service_account.public)
            ),
            format!(
                "--service-account-signing-key-file={}",
                path(&self.service_account.private)
            ),
            "--profiling=false".to_string(),
        ];
        // `ip netns exec` execs the program: the child's PID is kube-apiserver's own.
        let child = std::process::Command::new("ip")
            .args(["netns", "exec", &self.netns])
            .arg(&self.binaries.kube_apiserver)
            .args(flags)
            .args(&self.options.extra_flags)
            .stdin(Stdio::null())
            .stdout(open_log()?)
            .stderr(open_log()?)
            .spawn()
            .map_err(|e| {
                KubeError::Other(format!(
                    "run {}: {e}",
                    self.binaries.kube_apiserver.display()
                ))
            })?;
        // Where the reaper finds it if this process dies before its guard runs.
        let _ = std::fs::write(self.dir.join("kube-apiserver.pid"), child.id().to_string());
        self.apiserver = Some(child);
        self.wait_ready(READY_TIMEOUT)
    }

    /// Polls `/readyz` (every check, post-start hooks included: RBAC's bootstrap roles exist,
    /// CRD informers synced) until it answers ok, then waits for the `default` namespace, which
    /// the server creates itself just after.
    fn wait_ready(&mut self, timeout: Duration) -> Result<(), KubeError> {
        let deadline = Instant::now() + timeout;
        loop {
            let ready = self.admin.run(&["get", "--raw", "/readyz"]);
            let last = match ready.and_then(|_| self.admin.run(&["get", "namespace", "default"])) {
                Ok(_) => return Ok(()),
                Err(e) => e.to_string(),
            };
            if let Some(Ok(Some(status))) = self.apiserver.as_mut().map(Child::try_wait) {
                self.apiserver = None;
                return Err(KubeError::Other(format!(
                    "kube-apiserver exited ({status}); log:\n{}",
                    self.log_tail(30)
                )));
            }
            if Instant::now() >= deadline {
                return Err(KubeError::Other(format!(
                    "kube-apiserver {} not ready within {timeout:?} ({last}); log:\n{}",
                    self.url(),
                    self.log_tail(30)
                )));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM and wait for kube-apiserver to exit (an orderly stop; etcd keeps running and
    /// [`KubeApiServer::spawn`] starts it again on the same data).
    pub fn stop(&mut self) {
        if let Some(child) = self.apiserver.take() {
            terminate_child(child, Duration::from_secs(30));
        }
    }

    /// SIGKILL kube-apiserver (a crash) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.apiserver.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// `https://IP:6443`.
    pub fn url(&self) -> String {
        url_of(self.ip)
    }

    pub fn ip(&self) -> Ipv4Addr {
        self.ip
    }

    /// The namespace the API server runs in (where its address is reachable).
    pub fn netns(&self) -> &str {
        &self.netns
    }

    /// The namespace of a standalone server ([`KubeApiServer::start`]).
    pub fn own_netns(&self) -> Option<&Netns> {
        self.own_netns.as_ref()
    }

    /// kube-apiserver's PID while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.apiserver.as_ref().map(Child::id)
    }

    /// The etcd the API server stores its objects in (on the namespace's loopback).
    pub fn etcd(&self) -> &Etcd {
        self.etcd.as_ref().expect("etcd runs until drop")
    }

    pub fn etcd_mut(&mut self) -> &mut Etcd {
        self.etcd.as_mut().expect("etcd runs until drop")
    }

    /// The cluster CA's certificate (what clients trust, and what signs client certificates).
    pub fn ca_cert(&self) -> PathBuf {
        self.pki.ca_cert()
    }

    /// The state directory: certificates, keys, kubeconfigs and both logs.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn binaries(&self) -> &KubeBinaries {
        &self.binaries
    }

    /// kubectl as the cluster admin (`system:masters`).
    pub fn admin(&self) -> &Kubectl {
        &self.admin
    }

    /// The admin's kubeconfig.
    pub fn admin_kubeconfig(&self) -> &Path {
        self.admin.kubeconfig()
    }

    /// A kubeconfig for `user` (and `group`, if any; every authenticated user is also in
    /// `system:authenticated`) with a client certificate signed by the cluster CA. A node is
    /// `system:node:<name>` in `system:nodes`.
    pub fn kubeconfig_for(&self, user: &str, group: Option<&str>) -> Result<PathBuf, KubeError> {
        self.mint(user, group, &self.pki, &self.pki)
    }

    /// kubectl as `user` in `group` (see [`KubeApiServer::kubeconfig_for`]).
    pub fn kubectl_as(&self, user: &str, group: Option<&str>) -> Result<Kubectl, KubeError> {
        let kubeconfig = self.kubeconfig_for(user, group)?;
        Ok(self.kubectl_with(&kubeconfig, user))
    }

    /// kubectl with any kubeconfig (`user` names it in errors).
    pub fn kubectl_with(&self, kubeconfig: &Path, user: &str) -> Kubectl {
        Kubectl::new(
            &self.binaries.kubectl,
            kubeconfig,
            &self.netns,
            &self.dir.join("kubectl-cache"),
            user,
        )
    }

    /// A kubeconfig whose client certificate the cluster CA signed but which trusts another CA:
    /// the client must refuse the server's certificate.
    pub fn kubeconfig_trusting_another_ca(&self, user: &str) -> Result<PathBuf, KubeError> {
        let stranger = Pki::new_in("another CA", &self.dir).context(|| "make another CA".into())?;
        self.mint(user, Some(ADMIN_GROUP), &self.pki, &stranger)
    }

    /// A kubeconfig that trusts the cluster CA but whose client certificate another CA signed
    /// (claiming `system:masters`): the server must not accept it.
    pub fn kubeconfig_signed_by_another_ca(&self, user: &str) -> Result<PathBuf, KubeError> {
        let stranger = Pki::new_in("another CA", &self.dir).context(|| "make another CA".into())?;
        self.mint(user, Some(ADMIN_GROUP), &stranger, &self.pki)
    }

    /// Writes a kubeconfig with a client certificate from `signer` that trusts `trusted`'s CA.
    fn mint(
        &self,
        user: &str,
        group: Option<&str>,
        signer: &Pki,
        trusted: &Pki,
    ) -> Result<PathBuf, KubeError> {
        let n = self.minted.fetch_add(1, Ordering::Relaxed);
        let stem: String = format!("user{n}-{user}")
            .chars()
            .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
            .collect();
        let files = signer
            .issue_for(&stem, &client_subject(user, group))
            .context(|| format!("issue a client certificate for {user}"))?;
        let path = self.dir.join(format!("{stem}.kubeconfig"));
        kubeconfig::write(
            &path,
            &self.url(),
            &trusted.ca_cert(),
            user,
            Credentials::Certificate(&files),
        )?;
        Ok(path)
    }

    /// A token of the service account `namespace/name` (created if missing), signed with the
    /// server's service-account key through the TokenRequest API, valid for a day: what a pod
    /// finds in `/var/run/secrets/kubernetes.io/serviceaccount/token`.
    pub fn service_account_token(&self, namespace: &str, name: &str) -> Result<String, KubeError> {
        let exists = self
            .admin
            .run(&["get", "serviceaccount", name, "-n", namespace]);
        if exists.is_err() {
            self.admin
                .run(&["create", "serviceaccount", name, "-n", namespace])?;
        }
        let token =
            self.admin
                .run(&["create", "token", name, "-n", namespace, "--duration=24h"])?;
        Ok(token.trim().to_string())
    }

    /// A kubeconfig that authenticates as the service account `namespace/name` with a token
    /// ([`KubeApiServer::service_account_token`]); the user is
    /// `system:serviceaccount:<namespace>:<name>`.
    pub fn kubeconfig_for_service_account(
        &self,
        namespace: &str,
        name: &str,
    ) -> Result<PathBuf, KubeError> {
        let token = self.service_account_token(namespace, name)?;
        let user = format!("system:serviceaccount:{namespace}:{name}");
        let n = self.minted.fetch_add(1, Ordering::Relaxed);
        let path = self
            .dir
            .join(format!("serviceaccount{n}-{namespace}-{name}.kubeconfig"));
        kubeconfig::write(
            &path,
            &self.url(),
            &self.pki.ca_cert(),
            &user,
            Credentials::Token(&token),
        )?;
        Ok(path)
    }

    /// `kubectl apply -f DIR` of the CustomResourceDefinitions in `dist/kubernetes/crds/`
    /// (HostSubnet, NetNamespace, EgressNetworkPolicy), waiting until each is established
    /// (served), so objects of those kinds can be created at once.
    pub fn install_crds(&self) -> Result<(), KubeError> {
        let dir = crds_dir();
        self.admin.apply_file(&dir)?;
        self.admin.run(&[
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            "-f",
            &dir.to_string_lossy(),
        ])?;
        Ok(())
    }

    /// Does what the namespace controller would after `kubectl delete namespace NAME`: deletes
    /// the objects the harness creates in it (pods, network policies, services, endpoint
    /// slices, egress policies) and removes the `kubernetes` finalizer, so the Namespace is
    /// really gone (watchers see it deleted).
    pub fn finalize_namespace(&self, name: &str) -> Result<(), KubeError> {
        let mut kinds = vec!["pods", "networkpolicies", "services", "endpointslices"];
        if self
            .admin
            .run(&["get", "crd", "egressnetworkpolicies.network.openshift.io"])
            .is_ok()
        {
            kinds.push("egressnetworkpolicies");
        }
        self.admin.run(&[
            "delete",
            &kinds.join(","),
            "--all",
            "-n",
            name,
            "--wait=false",
        ])?;
        let mut namespace = self.admin.get_json(&["namespace", name])?;
        namespace["spec"]["finalizers"] = serde_json::json!([]);
        let path = format!("/api/v1/namespaces/{name}/finalize");
        self.admin.run_with_input(
            &["replace", "--raw", &path, "-f", "-"],
            Some(&namespace.to_string()),
        )?;
        Ok(())
    }

    pub fn log_tail(&self, lines: usize) -> String {
        tail_lines(&self.dir.join("kube-apiserver.log"), lines)
    }
}

impl Drop for KubeApiServer {
    fn drop(&mut self) {
        self.kill();
        drop(self.etcd.take());
        let _ = std::fs::remove_dir_all(&self.dir);
        // The namespace (of a standalone server) goes last, with the processes gone.
        drop(self.own_netns.take());
    }
}

fn url_of(ip: Ipv4Addr) -> String {
    format!("https://{ip}:{API_SERVER_PORT}")
}

/// The `kubernetes` Service's cluster IP: the first address of the service range.
fn kubernetes_service_ip() -> Result<Ipv4Addr, KubeError> {
    SERVICE_CLUSTER_IP_RANGE
        .split_once('/')
        .and_then(|(network, _)| network.parse::<Ipv4Addr>().ok())
        .map(|network| Ipv4Addr::from(u32::from(network) + 1))
        .ok_or_else(|| KubeError::Other(format!("service range {SERVICE_CLUSTER_IP_RANGE}")))
}

/// `dist/kubernetes/` of this checkout: the manifests (crds/, rbac.yaml).
pub fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../dist/kubernetes")
}

/// `dist/kubernetes/crds/` of this checkout.
pub fn crds_dir() -> PathBuf {
    manifests_dir().join("crds")
}

fn client_subject(user: &str, group: Option<&str>) -> Subject {
    Subject {
        common_name: user.to_string(),
        organization: group.map(str::to_string),
        alt_names: Vec::new(),
    }
}

/// The serving certificate: for `ip` and what in-cluster clients use (the `kubernetes`
/// Service's cluster IP and names, as kubeadm's certificate has them).
fn issue_serving_certificate(pki: &Pki, ip: Ipv4Addr) -> Result<PeerFiles, KubeError> {
    let subject = Subject {
        common_name: PROGRAM.to_string(),
        organization: None,
        alt_names: [
            &ip.to_string(),
            &kubernetes_service_ip()?.to_string(),
            "kubernetes",
            "kubernetes.default",
            "kubernetes.default.svc",
            "kubernetes.default.svc.cluster.local",
        ]
        .map(str::to_string)
        .to_vec(),
    };
    pki.issue_for(PROGRAM, &subject)
        .context(|| "issue the serving certificate".into())
}

/// The service-account token signing key pair (ECDSA P-256: ES256 tokens). The API server
/// reads the public half from a file of its own (not from a PKCS#8 private key).
#[derive(Debug)]
struct ServiceAccountKey {
    private: PathBuf,
    public: PathBuf,
}

fn write_service_account_key(dir: &Path) -> Result<ServiceAccountKey, KubeError> {
    let key = rcgen::KeyPair::generate()
        .map_err(|e| KubeError::Other(format!("service-account key: {e}")))?;
    let files = ServiceAccountKey {
        private: dir.join("service-account-key.pem"),
        public: dir.join("service-account-pub.pem"),
    };
    for (path, pem) in [
        (&files.private, key.serialize_pem()),
        (&files.public, key.public_key_pem()),
    ] {
        std::fs::write(path, pem)
            .map_err(|e| KubeError::Other(format!("write {}: {e}", path.display())))?;
    }
    Ok(files)
}
