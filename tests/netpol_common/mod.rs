//! What the NetworkPolicy e2e tests share: a two-node cluster in networkpolicy mode with the
//! x, y, z × a, b, c model on it, policies written as `kubectl get networkpolicy -o json`
//! prints them, and a session that applies a case's policies, checks its tables, and removes
//! them again so the next case starts from no policy.

#![allow(dead_code)]

use ofnode_harness::cluster::{Cluster, ClusterOptions, Control, Mode};
use ofnode_harness::reachability::{Model, Probe, Reachability};
use serde_json::{json, Value};

pub fn vnid(namespace: &str) -> u32 {
    match namespace {
        "x" => 11,
        "y" => 12,
        _ => 13,
    }
}

pub fn start() -> (Cluster, Model) {
    let cluster = Cluster::start(ClusterOptions {
        nodes: 2,
        mode: Mode::NetworkPolicy,
        control: Control::Ofnode(env!("CARGO_BIN_EXE_ofnode").into()),
        echo: false,
    })
    .unwrap();
    let model = Model::create(&cluster, vnid).unwrap();
    (cluster, model)
}

/// A `networking.k8s.io/v1` NetworkPolicy object as kubectl prints it (with the server-side
/// fields a real one carries, which ofnode must tolerate). Namespace x's policies audit allow
/// and deny (the policy audit): its verdicts go through table 24 and the meters, and the
/// cases' tables must not change for it.
pub fn policy(namespace: &str, name: &str, spec: Value) -> Value {
    let audit = if namespace == "x" {
        "allow,deny"
    } else {
        "none"
    };
    json!({
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "annotations": {"ofnode.io/audit": audit},
            "uid": "8d4b1d2e-0000-4000-8000-000000000014",
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": "2026-12-03T00:00:00Z"
        },
        "spec": spec,
        "status": {}
    })
}

/// One case's result, kept so that every case runs and all failures are reported together.
pub struct Session<'a> {
    pub cluster: &'a Cluster,
    pub model: &'a Model,
    failures: Vec<String>,
    passed: Vec<String>,
    /// Cases during which a node held a table 24 (policy audit) flow.
    pub audited: usize,
}

impl<'a> Session<'a> {
    pub fn new(cluster: &'a Cluster, model: &'a Model) -> Session<'a> {
        Session {
            cluster,
            model,
            failures: Vec::new(),
            passed: Vec::new(),
            audited: 0,
        }
    }

    /// Applies `policies`, checks every `(probe, table)`, then deletes the policies and checks
    /// that everything connects again.
    pub fn case(&mut self, name: &str, policies: &[Value], expected: &[(Probe, Reachability)]) {
        println!("case {name}");
        let result = self.run(policies, expected);
        let cleanup = self.reset(policies);
        match result.and(cleanup) {
            Ok(()) => self.passed.push(name.to_string()),
            Err(report) => {
                println!("case {name} FAILED:\n{report}");
                self.failures.push(format!("=== case {name}\n{report}"));
            }
        }
    }

    /// [`Session::case`] with the same table for TCP and UDP on both ports.
    pub fn case_all(&mut self, name: &str, policies: &[Value], expected: Reachability) {
        let expected: Vec<(Probe, Reachability)> = Probe::ALL
            .iter()
            .map(|probe| (*probe, expected.clone()))
            .collect();
        self.case(name, policies, &expected);
    }

    fn run(
        &mut self,
        policies: &[Value],
        expected: &[(Probe, Reachability)],
    ) -> Result<(), String> {
        for policy in policies {
            self.cluster
                .netpol_apply(policy)
                .map_err(|e| format!("netpol apply: {e}"))?;
        }
        let audits = |node: &ofnode_harness::cluster::Node| {
            node.flows()
                .is_ok_and(|flows| flows.iter().any(|f| f.contains("table=24,")))
        };
        if self.cluster.nodes().iter().any(audits) {
            self.audited += 1;
        }
        let expected: Vec<(Probe, &Reachability)> = expected
            .iter()
            .map(|(probe, table)| (*probe, table))
            .collect();
        self.model.check(&expected)
    }

    fn reset(&self, policies: &[Value]) -> Result<(), String> {
        for policy in policies {
            let meta = &policy["metadata"];
            let (namespace, name) = (
                meta["namespace"].as_str().unwrap_or_default(),
                meta["name"].as_str().unwrap_or_default(),
            );
            self.cluster
                .netpol_del(namespace, name)
                .map_err(|e| format!("netpol del: {e}"))?;
        }
        self.model
            .check(&[(Probe::TCP80, &self.model.all_connected())])
            .map_err(|report| format!("after the policies were deleted:\n{report}"))
    }

    /// Fails listing every failed case with its tables, and the nodes' state.
    pub fn finish(self) {
        println!(
            "{} cases passed: {}",
            self.passed.len(),
            self.passed.join(", ")
        );
        assert!(
            self.failures.is_empty(),
            "{} cases failed:\n{}\n{}",
            self.failures.len(),
            self.failures.join("\n"),
            self.cluster.diagnostics()
        );
    }
}
