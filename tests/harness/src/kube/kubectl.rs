//! The cached kubectl, run with one kubeconfig inside one network namespace (where the API
//! server is reachable): the way a test, an operator or a kubelet's owner talks to the cluster.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use super::KubeError;

/// kubectl as one user: `kubectl --kubeconfig FILE --request-timeout=20s ARGS…` inside a
/// namespace. A request never hangs a test; ARGS may override the timeout (the last one counts).
#[derive(Debug, Clone)]
pub struct Kubectl {
    program: PathBuf,
    kubeconfig: PathBuf,
    netns: String,
    /// Its own discovery cache, so that nothing is written under `$HOME` and a cache of another
    /// API server (same address, another namespace, other CRDs) is never read.
    cache_dir: PathBuf,
    /// Who this is, for error messages.
    user: String,
}

impl Kubectl {
    pub(crate) fn new(
        program: &Path,
        kubeconfig: &Path,
        netns: &str,
        cache_dir: &Path,
        user: &str,
    ) -> Kubectl {
        Kubectl {
            program: program.to_path_buf(),
            kubeconfig: kubeconfig.to_path_buf(),
            netns: netns.to_string(),
            cache_dir: cache_dir.to_path_buf(),
            user: user.to_string(),
        }
    }

    /// The same user, run from inside another namespace (a node's, say).
    pub fn in_netns(&self, netns: &str) -> Kubectl {
        Kubectl {
            netns: netns.to_string(),
            ..self.clone()
        }
    }

    /// The kubeconfig file (self-contained: certificates embedded).
    pub fn kubeconfig(&self) -> &Path {
        &self.kubeconfig
    }

    pub fn user(&self) -> &str {
        &self.user
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns])
            .arg(&self.program)
            .arg("--kubeconfig")
            .arg(&self.kubeconfig)
            .arg("--cache-dir")
            .arg(&self.cache_dir)
            .arg("--request-timeout=20s")
            .args(args);
        cmd
    }

    /// Runs `kubectl ARGS…` and returns its stdout, or [`KubeError::Kubectl`] with its stderr.
    pub fn run(&self, args: &[&str]) -> Result<String, KubeError> {
        self.run_with_input(args, None)
    }

    /// Runs `kubectl ARGS…` with `input` on its standard input (for `-f -`).
    pub fn run_with_input(&self, args: &[&str], input: Option<&str>) -> Result<String, KubeError> {
        let out = self.output(args, input)?;
        if out.status.success() {
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        Err(self.failed(args, &out))
    }

    fn failed(&self, args: &[&str], out: &Output) -> KubeError {
        KubeError::Kubectl {
            user: self.user.clone(),
            args: args.join(" "),
            status: out.status.to_string(),
            stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
        }
    }

    /// Runs kubectl to the end, whatever its exit status.
    fn output(&self, args: &[&str], input: Option<&str>) -> Result<Output, KubeError> {
        let spawn_error = |e: std::io::Error| {
            KubeError::Other(format!(
                "run {} {}: {e}",
                self.program.display(),
                args.join(" ")
            ))
        };
        let stdin = if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        };
        let mut child = self
            .command(args)
            .stdin(stdin)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        if let (Some(text), Some(mut stdin)) = (input, child.stdin.take()) {
            stdin.write_all(text.as_bytes()).map_err(spawn_error)?;
        }
        child.wait_with_output().map_err(spawn_error)
    }

    /// `kubectl apply -f -` of a manifest (YAML or JSON, one or more documents).
    pub fn apply(&self, manifest: &str) -> Result<String, KubeError> {
        self.run_with_input(&["apply", "-f", "-"], Some(manifest))
    }

    /// `kubectl apply -f PATH` (a file or a directory of manifests).
    pub fn apply_file(&self, path: &Path) -> Result<String, KubeError> {
        let path = path.to_string_lossy();
        self.run(&["apply", "-f", &path])
    }

    /// `kubectl create -f -` of a manifest: fails when the object exists.
    pub fn create(&self, manifest: &str) -> Result<String, KubeError> {
        self.run_with_input(&["create", "-f", "-"], Some(manifest))
    }

    /// `kubectl get ARGS… -o json`, parsed.
    pub fn get_json(&self, args: &[&str]) -> Result<serde_json::Value, KubeError> {
        let mut full = vec!["get"];
        full.extend_from_slice(args);
        full.extend_from_slice(&["-o", "json"]);
        self.json(&full)
    }

    /// Runs `kubectl ARGS…` (which must print JSON: `-o json`, `get --raw`) and parses stdout.
    pub fn json(&self, args: &[&str]) -> Result<serde_json::Value, KubeError> {
        parse_json(args, self.run(args)?)
    }

    /// Whether the API server lets this user `verb` `resource` in `namespace`, as
    /// `kubectl auth can-i` asks it (a SelfSubjectAccessReview).
    pub fn can_i(&self, verb: &str, resource: &str, namespace: &str) -> Result<bool, KubeError> {
        let args = ["auth", "can-i", verb, resource, "-n", namespace];
        let out = self.output(&args, None)?;
        // It prints "yes" (exit 0) or "no" (exit 1); anything else is a failure to ask.
        match String::from_utf8_lossy(&out.stdout).trim() {
            "yes" => Ok(true),
            answer if answer.starts_with("no") => Ok(false),
            _ => Err(self.failed(&args, &out)),
        }
    }
}

/// Parses what `kubectl ARGS…` printed as JSON.
pub(super) fn parse_json(args: &[&str], text: String) -> Result<serde_json::Value, KubeError> {
    serde_json::from_str(&text).map_err(|e| KubeError::Json {
        args: args.join(" "),
        error: e.to_string(),
        stdout: text.chars().take(2000).collect(),
    })
}
