//! What the API server says, joined the way the store needs it, and the store inputs each
//! change of it makes. Pure: no client, no clock, no core.
//!
//! The joins:
//! - a namespace is known to the store once both its Namespace (labels) and its NetNamespace
//!   (VNID) exist; its pods, policies, services and egress policies wait for it (they are kept
//!   here, not sent) and follow it in and out — in before them, out after them;
//! - a pod is local when its `spec.nodeName` is this node;
//! - a VNID's egress input is every EgressNetworkPolicy of every known namespace with that VNID
//!   (the seed's UpdateEgressNetworkPolicyRules takes them together);
//! - a service carries its namespace's VNID (the seed's AddServiceRules);
//! - admin policies are cluster-scoped and wait for nothing; an AdminNetworkPolicy that leaves
//!   a priority (deleted, moved, refused) lets the others at that priority be applied again
//!   (the core refuses a second one at a priority while the first holds it).
//!
//! Each setter compares the new facts with the old: an object that did not change (a relist,
//! a status write that changed nothing the data plane sees) makes no input.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use super::convert::{NamespaceFacts, PodFacts, PolicyFacts, ServiceFacts};
use super::input::{Expected, Input, Kind, ObjectRef, PodWant};
use crate::sdn::objects::Namespace;
use crate::sdn::policy::admin::{AdminPolicy, Tier};
use crate::sdn::state::EgressState;
use crate::sdn::types::{EgressNetworkPolicy, HostSubnet, Service};
use crate::value::{PodKey, Vnid};

/// The API's objects, as far as the node's data plane depends on them.
#[derive(Debug, Default)]
pub struct Mirror {
    node: String,
    namespaces: BTreeMap<String, NamespaceFacts>,
    vnids: BTreeMap<String, Vnid>,
    /// Known namespaces by VNID (the egress join).
    by_vnid: BTreeMap<Vnid, BTreeSet<String>>,
    pods: BTreeMap<PodKey, PodFacts>,
    policies: BTreeMap<String, PolicyFacts>,
    services: BTreeMap<String, ServiceFacts>,
    egress: BTreeMap<String, EgressNetworkPolicy>,
    /// Other nodes' subnets by HostSubnet name; this node's own apart.
    host_subnets: BTreeMap<String, HostSubnet>,
    own_subnet: Option<HostSubnet>,
    /// AdminNetworkPolicies and the BaselineAdminNetworkPolicy, by kind and name.
    admin: BTreeMap<Kind, BTreeMap<String, AdminPolicy>>,
}

/// Keys of `map` in namespace `ns` (`ns/…`).
fn in_namespace<'a, K, V>(map: &'a BTreeMap<K, V>, ns: &str) -> impl Iterator<Item = (&'a K, &'a V)>
where
    K: Ord + std::borrow::Borrow<str>,
{
    let prefix = format!("{ns}/");
    map.range::<str, _>((
        std::ops::Bound::Included(prefix.as_str()),
        std::ops::Bound::Unbounded,
    ))
    .take_while(move |(k, _)| k.borrow().starts_with(&prefix))
}

fn namespace_of(key: &str) -> &str {
    key.split_once('/').map_or(key, |(ns, _)| ns)
}

impl Mirror {
    /// The mirror of node `node`'s view (its name is what makes a pod local).
    pub fn new(node: &str) -> Mirror {
        Mirror {
            node: node.to_string(),
            ..Mirror::default()
        }
    }

    pub fn node_name(&self) -> &str {
        &self.node
    }

    /// The VNID of namespace `ns` when the store knows it (both objects exist).
    pub fn vnid(&self, ns: &str) -> Option<Vnid> {
        self.namespaces
            .contains_key(ns)
            .then(|| self.vnids.get(ns).copied())?
    }

    /// What the API says of pod `key`.
    pub fn pod(&self, key: &PodKey) -> Option<&PodFacts> {
        self.pods.get(key)
    }

    /// This node's own HostSubnet.
    pub fn own_subnet(&self) -> Option<&HostSubnet> {
        self.own_subnet.as_ref()
    }

    /// The keys the mirror holds of `kind` (what a relist that does not list them deletes).
    pub fn keys(&self, kind: Kind) -> Vec<String> {
        fn keys<K: ToString, V>(map: &BTreeMap<K, V>) -> Vec<String> {
            map.keys().map(ToString::to_string).collect()
        }
        match kind {
            Kind::Namespace => keys(&self.namespaces),
            Kind::NetNamespace => keys(&self.vnids),
            Kind::Pod => keys(&self.pods),
            Kind::NetworkPolicy => keys(&self.policies),
            Kind::Service => keys(&self.services),
            Kind::EgressNetworkPolicy => keys(&self.egress),
            Kind::AdminNetworkPolicy | Kind::BaselineAdminNetworkPolicy => {
                self.admin.get(&kind).map(keys).unwrap_or_default()
            }
            Kind::HostSubnet => {
                let mut all = keys(&self.host_subnets);
                all.extend(self.own_subnet.as_ref().map(|_| self.node.clone()));
                all
            }
        }
    }

    /// How many objects of `kind` the mirror holds.
    pub fn count(&self, kind: Kind) -> usize {
        match kind {
            Kind::Namespace => self.namespaces.len(),
            Kind::NetNamespace => self.vnids.len(),
            Kind::Pod => self.pods.len(),
            Kind::NetworkPolicy => self.policies.len(),
            Kind::Service => self.services.len(),
            Kind::EgressNetworkPolicy => self.egress.len(),
            Kind::AdminNetworkPolicy | Kind::BaselineAdminNetworkPolicy => {
                self.admin.get(&kind).map_or(0, BTreeMap::len)
            }
            Kind::HostSubnet => self.host_subnets.len() + usize::from(self.own_subnet.is_some()),
        }
    }

    /// The input that makes object `object` in the store what the API says now (a retry after
    /// a failed batch: the latest state, whatever it was when the batch was sent).
    pub fn input_for(&self, object: &ObjectRef) -> Vec<Input> {
        let key = object.key.as_str();
        let ns_known = || self.vnid(namespace_of(key)).is_some();
        match object.kind {
            Kind::Namespace | Kind::NetNamespace => self.namespace_inputs(key),
            Kind::Pod => match key.parse::<PodKey>() {
                Ok(pod) if ns_known() => vec![self.pod_input(&pod)],
                _ => Vec::new(),
            },
            Kind::NetworkPolicy if ns_known() => vec![self.policy_input(key)],
            Kind::Service if ns_known() => vec![self.service_input(key, None)],
            Kind::EgressNetworkPolicy => match self.vnid(namespace_of(key)) {
                Some(vnid) => vec![self.egress_input(vnid)],
                None => Vec::new(),
            },
            Kind::HostSubnet => match self.host_subnets.get(key) {
                Some(hs) => vec![Input::HostSubnet {
                    name: key.to_string(),
                    old: None,
                    want: Some(*hs),
                }],
                None => Vec::new(),
            },
            Kind::AdminNetworkPolicy | Kind::BaselineAdminNetworkPolicy => {
                vec![self.admin_input(object.kind, key)]
            }
            _ => Vec::new(),
        }
    }

    // ----- namespaces -----

    /// A Namespace created, changed (labels, audit setting) or deleted (None).
    /// A bad audit annotation changes nothing: the namespace keeps the audit it had (none when
    /// it is new), and the refusal is reported.
    pub fn set_namespace(&mut self, name: &str, mut facts: Option<NamespaceFacts>) -> Vec<Input> {
        if let Some(facts) = facts.as_mut().filter(|f| f.refused.is_some()) {
            facts.audit = self
                .namespaces
                .get(name)
                .map_or(facts.audit, |old| old.audit);
        }
        if self.namespaces.get(name) == facts.as_ref() {
            return Vec::new();
        }
        let was = self.vnid(name);
        match facts {
            Some(facts) => drop(self.namespaces.insert(name.to_string(), facts)),
            None => drop(self.namespaces.remove(name)),
        }
        self.namespace_changed(name, was)
    }

    /// A NetNamespace created, changed (netid) or deleted (None).
    pub fn set_netnamespace(&mut self, name: &str, vnid: Option<Vnid>) -> Vec<Input> {
        if self.vnids.get(name) == vnid.as_ref() {
            return Vec::new();
        }
        let was = self.vnid(name);
        match vnid {
            Some(vnid) => drop(self.vnids.insert(name.to_string(), vnid)),
            None => drop(self.vnids.remove(name)),
        }
        self.namespace_changed(name, was)
    }

    /// The inputs after namespace `name`, known with VNID `was` (None: unknown), changed.
    fn namespace_changed(&mut self, name: &str, was: Option<Vnid>) -> Vec<Input> {
        let now = self.vnid(name);
        if let Some(old) = was {
            if let Some(set) = self.by_vnid.get_mut(&old) {
                set.remove(name);
                if set.is_empty() {
                    self.by_vnid.remove(&old);
                }
            }
        }
        if let Some(new) = now {
            self.by_vnid
                .entry(new)
                .or_default()
                .insert(name.to_string());
        }
        let mut inputs = Vec::new();
        match (was, now) {
            // Labels changed: the namespace alone.
            (Some(old), Some(new)) if old == new => inputs.extend(self.namespace_inputs(name)),
            // Appeared: the namespace, then what waited for it.
            (None, Some(new)) => {
                inputs.extend(self.namespace_inputs(name));
                inputs.extend(self.dependents(name));
                inputs.push(self.egress_input(new));
            }
            // Went: what depends on it, then the namespace.
            (Some(old), None) => {
                inputs.extend(self.dependents_gone(name));
                inputs.push(self.egress_input(old));
                inputs.extend(self.namespace_inputs(name));
            }
            // Moved to another VNID: the namespace, its pods (their VNID) and services, both
            // VNIDs' egress.
            (Some(old), Some(new)) => {
                inputs.extend(self.namespace_inputs(name));
                let pods: Vec<PodKey> = in_namespace(&self.pods, name)
                    .map(|(k, _)| k.clone())
                    .collect();
                inputs.extend(pods.iter().map(|key| self.pod_input(key)));
                let services: Vec<String> = in_namespace(&self.services, name)
                    .map(|(k, _)| k.clone())
                    .collect();
                inputs.extend(services.iter().map(|key| self.service_input(key, None)));
                inputs.push(self.egress_input(old));
                inputs.push(self.egress_input(new));
            }
            (None, None) => {}
        }
        inputs
    }

    /// Namespace `name` as the store should hold it now (None: not at all).
    fn namespace_inputs(&self, name: &str) -> Vec<Input> {
        let facts = self.namespaces.get(name).cloned().unwrap_or_default();
        let want = self.vnid(name).map(|vnid| Namespace {
            name: name.to_string(),
            vnid,
            labels: facts.labels,
            audit: facts.audit,
        });
        vec![Input::Namespace {
            name: name.to_string(),
            want,
            refused: facts.refused,
        }]
    }

    /// Everything of namespace `ns` that waited for it, as the store should hold it.
    fn dependents(&self, ns: &str) -> Vec<Input> {
        let mut inputs: Vec<Input> = in_namespace(&self.pods, ns)
            .map(|(key, _)| self.pod_input(key))
            .collect();
        inputs.extend(in_namespace(&self.policies, ns).map(|(key, _)| self.policy_input(key)));
        inputs
            .extend(in_namespace(&self.services, ns).map(|(key, _)| self.service_input(key, None)));
        inputs
    }

    /// Everything of namespace `ns`, gone from the store.
    fn dependents_gone(&self, ns: &str) -> Vec<Input> {
        let mut inputs: Vec<Input> = in_namespace(&self.pods, ns)
            .map(|(key, facts)| Input::Pod {
                key: key.clone(),
                local: self.is_local(facts),
                want: None,
            })
            .collect();
        inputs.extend(
            in_namespace(&self.policies, ns).map(|(key, _)| Input::NetPol {
                key: key.clone(),
                want: None,
            }),
        );
        inputs.extend(
            in_namespace(&self.services, ns).map(|(key, facts)| Input::Service {
                name: key.clone(),
                old_ip: Some(facts.ip),
                want: None,
            }),
        );
        inputs
    }

    // ----- pods -----

    fn is_local(&self, facts: &PodFacts) -> bool {
        facts.node.as_deref() == Some(self.node.as_str())
    }

    /// A pod created, changed or deleted (None; also a host-network or finished pod).
    pub fn set_pod(&mut self, key: PodKey, facts: Option<PodFacts>) -> Vec<Input> {
        if self.pods.get(&key) == facts.as_ref() {
            return Vec::new();
        }
        let old_local = self.pods.get(&key).is_some_and(|f| self.is_local(f));
        match facts {
            Some(facts) => drop(self.pods.insert(key.clone(), facts)),
            None => drop(self.pods.remove(&key)),
        }
        if self.vnid(key.namespace()).is_none() {
            // Waits for its namespace; one that goes goes with nothing to undo.
            return Vec::new();
        }
        match self.pods.get(&key) {
            Some(_) => vec![self.pod_input(&key)],
            None => vec![Input::Pod {
                key,
                local: old_local,
                want: None,
            }],
        }
    }

    fn pod_input(&self, key: &PodKey) -> Input {
        let facts = self.pods.get(key);
        let vnid = self.vnid(key.namespace());
        let want = facts.zip(vnid).map(|(facts, vnid)| PodWant {
            labels: facts.labels.clone(),
            ips: facts.ips.clone(),
            ports: facts.ports.clone(),
            vnid,
        });
        Input::Pod {
            key: key.clone(),
            local: facts.is_some_and(|f| self.is_local(f)),
            want,
        }
    }

    // ----- policies -----

    /// A NetworkPolicy created, changed or deleted (None), keyed `namespace/name`.
    pub fn set_policy(&mut self, key: &str, facts: Option<PolicyFacts>) -> Vec<Input> {
        if self.policies.get(key) == facts.as_ref() {
            return Vec::new();
        }
        let existed = match facts {
            Some(facts) => self.policies.insert(key.to_string(), facts).is_some(),
            None => self.policies.remove(key).is_some(),
        };
        if self.vnid(namespace_of(key)).is_none() || !(existed || self.policies.contains_key(key)) {
            return Vec::new();
        }
        vec![self.policy_input(key)]
    }

    fn policy_input(&self, key: &str) -> Input {
        Input::NetPol {
            key: key.to_string(),
            want: self.policies.get(key).cloned(),
        }
    }

    // ----- services -----

    /// A Service created, changed or deleted (None; also one without a cluster IP).
    pub fn set_service(&mut self, key: &str, facts: Option<ServiceFacts>) -> Vec<Input> {
        if self.services.get(key) == facts.as_ref() {
            return Vec::new();
        }
        let old_ip = match facts {
            Some(facts) => self.services.insert(key.to_string(), facts),
            None => self.services.remove(key),
        }
        .map(|old| old.ip);
        if self.vnid(namespace_of(key)).is_none() {
            return Vec::new();
        }
        vec![self.service_input(key, old_ip)]
    }

    fn service_input(&self, key: &str, old_ip: Option<Ipv4Addr>) -> Input {
        let vnid = self.vnid(namespace_of(key));
        let want = self
            .services
            .get(key)
            .zip(vnid)
            .map(|(facts, vnid)| Service {
                ip: facts.ip,
                vnid,
                ports: facts.ports.clone(),
            });
        Input::Service {
            name: key.to_string(),
            old_ip,
            want,
        }
    }

    // ----- egress -----

    /// An EgressNetworkPolicy created, changed or deleted (None), keyed `namespace/name`.
    pub fn set_egress(&mut self, key: &str, policy: Option<EgressNetworkPolicy>) -> Vec<Input> {
        if self.egress.get(key) == policy.as_ref() {
            return Vec::new();
        }
        match policy {
            Some(policy) => drop(self.egress.insert(key.to_string(), policy)),
            None => drop(self.egress.remove(key)),
        }
        match self.vnid(namespace_of(key)) {
            Some(vnid) => vec![self.egress_input(vnid)],
            None => Vec::new(),
        }
    }

    /// The egress input of `vnid`: the seed's call with every policy of the VNID's known
    /// namespaces (None when they have none).
    fn egress_input(&self, vnid: Vnid) -> Input {
        let namespaces: Vec<String> = self
            .by_vnid
            .get(&vnid)
            .map(|set| set.iter().cloned().collect())
            .unwrap_or_default();
        let policies: Vec<EgressNetworkPolicy> = namespaces
            .iter()
            .flat_map(|ns| in_namespace(&self.egress, ns).map(|(_, p)| p.clone()))
            .collect();
        let objects = namespaces
            .iter()
            .flat_map(|ns| in_namespace(&self.egress, ns).map(|(k, _)| k.clone()))
            .collect();
        let want = (!policies.is_empty()).then(|| EgressState {
            namespaces,
            policies,
            dns: BTreeMap::new(),
            resolver_error: None,
        });
        Input::Egress {
            vnid,
            objects,
            want,
        }
    }

    // ----- host subnets -----

    /// A HostSubnet created, changed or deleted (None), by name. This node's own is kept apart
    /// (it sets the node up; `own_changed` says whether it changed); another's is an input.
    pub fn set_host_subnet(&mut self, name: &str, hs: Option<HostSubnet>) -> (Vec<Input>, bool) {
        if name == self.node {
            let changed = self.own_subnet != hs;
            self.own_subnet = hs;
            return (Vec::new(), changed);
        }
        if self.host_subnets.get(name) == hs.as_ref() {
            return (Vec::new(), false);
        }
        let old = match hs {
            Some(hs) => self.host_subnets.insert(name.to_string(), hs),
            None => self.host_subnets.remove(name),
        };
        let input = Input::HostSubnet {
            name: name.to_string(),
            old,
            want: hs,
        };
        (vec![input], false)
    }
}

impl Mirror {
    // ----- admin policies -----

    /// An AdminNetworkPolicy or the BaselineAdminNetworkPolicy (`kind`) created, changed or
    /// deleted (None; also one refused), by name.
    pub fn set_admin(&mut self, kind: Kind, name: &str, policy: Option<AdminPolicy>) -> Vec<Input> {
        let policies = self.admin.entry(kind).or_default();
        if policies.get(name) == policy.as_ref() {
            return Vec::new();
        }
        let new_tier = policy.as_ref().map(|p| p.tier);
        let old = match policy {
            Some(policy) => policies.insert(name.to_string(), policy),
            None => policies.remove(name),
        };
        let mut inputs = vec![self.admin_input(kind, name)];
        // The priority it left: the others there may hold it now, in name order.
        if let Some(left @ Tier::Admin { .. }) =
            old.map(|p| p.tier).filter(|t| Some(*t) != new_tier)
        {
            inputs.extend(
                self.admin
                    .get(&kind)
                    .into_iter()
                    .flatten()
                    .filter(|(other, p)| other.as_str() != name && p.tier == left)
                    .map(|(other, _)| self.admin_input(kind, other)),
            );
        }
        inputs
    }

    fn admin_input(&self, kind: Kind, name: &str) -> Input {
        Input::Admin {
            kind,
            name: name.to_string(),
            want: self.admin.get(&kind).and_then(|p| p.get(name)).cloned(),
        }
    }
}

impl Input {
    /// The API objects whose state this input carries (to whom its outcome belongs).
    pub fn objects(&self) -> Vec<ObjectRef> {
        match self {
            Input::Namespace { name, .. } => vec![ObjectRef::new(Kind::Namespace, name)],
            Input::Pod { key, .. } => vec![ObjectRef::new(Kind::Pod, key.as_str())],
            Input::NetPol { key, .. } => vec![ObjectRef::new(Kind::NetworkPolicy, key)],
            Input::Service { name, .. } => vec![ObjectRef::new(Kind::Service, name)],
            Input::HostSubnet { name, .. } => vec![ObjectRef::new(Kind::HostSubnet, name)],
            Input::Egress { objects, .. } => objects
                .iter()
                .map(|key| ObjectRef::new(Kind::EgressNetworkPolicy, key))
                .collect(),
            Input::Admin { kind, name, .. } => vec![ObjectRef::new(*kind, name)],
            Input::Sweep(_) => Vec::new(),
        }
    }
}

impl Expected {
    /// What the store may hold of what `mirror` holds.
    pub fn of(mirror: &Mirror) -> Expected {
        let known = |key: &str| mirror.vnid(namespace_of(key)).is_some();
        Expected {
            namespaces: mirror
                .namespaces
                .keys()
                .filter(|ns| known(ns))
                .cloned()
                .collect(),
            remote_pods: mirror
                .pods
                .iter()
                .filter(|(key, facts)| {
                    known(key.as_str()) && !mirror.is_local(facts) && !facts.ips.is_empty()
                })
                .map(|(key, _)| key.clone())
                .collect(),
            netpols: mirror
                .policies
                .keys()
                .filter(|k| known(k))
                .cloned()
                .collect(),
            service_ips: mirror
                .services
                .iter()
                .filter(|(key, _)| known(key))
                .map(|(_, facts)| facts.ip)
                .collect(),
            subnets: mirror.host_subnets.values().map(|hs| hs.subnet).collect(),
            egress: mirror
                .by_vnid
                .keys()
                .filter(|vnid| {
                    matches!(
                        mirror.egress_input(**vnid),
                        Input::Egress { want: Some(_), .. }
                    )
                })
                .copied()
                .collect(),
            admin: mirror
                .admin
                .values()
                .flatten()
                .map(|(_, p)| p.key())
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::policy::networkpolicy::model::NetPol;

    fn vnid(n: u32) -> Vnid {
        Vnid::new(n).unwrap()
    }

    fn key(text: &str) -> PodKey {
        text.parse().unwrap()
    }

    fn pod(node: &str, ip: &str) -> PodFacts {
        PodFacts {
            node: Some(node.into()),
            labels: [("app".to_string(), "web".to_string())].into(),
            ips: vec![ip.parse().unwrap()],
            ports: Vec::new(),
        }
    }

    fn policy(ns: &str, name: &str) -> PolicyFacts {
        PolicyFacts {
            policy: NetPol {
                namespace: ns.into(),
                name: name.into(),
                pod_selector: Default::default(),
                ingress: Some(Vec::new()),
                egress: None,
                audit: None,
            },
            refused: None,
        }
    }

    /// A short name of each input, in order: `ns+a` (set), `pod-ns/p` (removed), ….
    fn names(inputs: &[Input]) -> Vec<String> {
        inputs
            .iter()
            .map(|input| {
                let (what, key, set) = match input {
                    Input::Namespace { name, want, .. } => ("ns", name.clone(), want.is_some()),
                    Input::Pod { key, want, .. } => ("pod", key.to_string(), want.is_some()),
                    Input::NetPol { key, want } => ("np", key.clone(), want.is_some()),
                    Input::Service { name, want, .. } => ("svc", name.clone(), want.is_some()),
                    Input::Egress { vnid, want, .. } => {
                        ("egress", vnid.to_string(), want.is_some())
                    }
                    Input::HostSubnet { name, want, .. } => ("hs", name.clone(), want.is_some()),
                    Input::Admin { name, want, .. } => ("admin", name.clone(), want.is_some()),
                    Input::Sweep(_) => ("sweep", String::new(), true),
                };
                format!("{what}{}{key}", if set { "+" } else { "-" })
            })
            .collect()
    }

    #[test]
    fn a_namespace_is_known_once_both_objects_exist_and_its_objects_wait_for_it() {
        let mut m = Mirror::new("node-0");
        assert!(m
            .set_pod(key("a/p"), Some(pod("node-1", "10.128.2.5")))
            .is_empty());
        assert!(m.set_policy("a/deny", Some(policy("a", "deny"))).is_empty());
        assert!(m
            .set_namespace("a", Some(NamespaceFacts::default()))
            .is_empty());
        let inputs = m.set_netnamespace("a", Some(vnid(7)));
        assert_eq!(names(&inputs), ["ns+a", "pod+a/p", "np+a/deny", "egress-7"]);
        // Gone: its objects first, then the namespace.
        let inputs = m.set_namespace("a", None);
        assert_eq!(names(&inputs), ["pod-a/p", "np-a/deny", "egress-7", "ns-a"]);
        assert_eq!(m.vnid("a"), None);
    }

    #[test]
    fn a_bad_audit_annotation_keeps_the_namespaces_audit_and_is_reported() {
        let mut m = Mirror::new("node-0");
        m.set_netnamespace("a", Some(vnid(7)));
        let facts = |audit: &str, refused: Option<&str>| NamespaceFacts {
            audit: audit.parse().unwrap(),
            refused: refused.map(str::to_string),
            ..NamespaceFacts::default()
        };
        let audit_of = |inputs: &[Input]| match inputs {
            [Input::Namespace {
                want: Some(ns),
                refused,
                ..
            }, ..] => (ns.audit.to_string(), refused.clone()),
            _ => panic!("not a namespace input: {}", names(inputs).join(" ")),
        };
        let inputs = m.set_namespace("a", Some(facts("deny", None)));
        assert_eq!(audit_of(&inputs), ("deny".into(), None));
        let inputs = m.set_namespace("a", Some(facts("none", Some("bad value"))));
        assert_eq!(audit_of(&inputs), ("deny".into(), Some("bad value".into())));
        let inputs = m.set_namespace("a", Some(facts("none", None)));
        assert_eq!(audit_of(&inputs), ("none".into(), None));
    }

    #[test]
    fn the_same_facts_again_make_no_input() {
        let mut m = Mirror::new("node-0");
        m.set_namespace("a", Some(NamespaceFacts::default()));
        m.set_netnamespace("a", Some(vnid(7)));
        assert_eq!(
            m.set_pod(key("a/p"), Some(pod("node-1", "10.128.2.5")))
                .len(),
            1
        );
        assert!(m
            .set_pod(key("a/p"), Some(pod("node-1", "10.128.2.5")))
            .is_empty());
        assert!(m.set_netnamespace("a", Some(vnid(7))).is_empty());
        assert!(m
            .set_namespace("a", Some(NamespaceFacts::default()))
            .is_empty());
    }

    #[test]
    fn a_pod_is_local_when_scheduled_here_and_carries_its_namespaces_vnid() {
        let mut m = Mirror::new("node-0");
        m.set_namespace("a", Some(NamespaceFacts::default()));
        m.set_netnamespace("a", Some(vnid(7)));
        let inputs = m.set_pod(key("a/p"), Some(pod("node-0", "10.128.0.5")));
        let [Input::Pod {
            local,
            want: Some(want),
            ..
        }] = inputs.as_slice()
        else {
            panic!("{inputs:?}")
        };
        assert!(*local);
        assert_eq!(want.vnid, vnid(7));
        // Another VNID: the namespace and its pod again (multitenant moves the pod).
        let inputs = m.set_netnamespace("a", Some(vnid(9)));
        assert_eq!(names(&inputs), ["ns+a", "pod+a/p", "egress-7", "egress-9"]);
    }

    #[test]
    fn egress_joins_every_policy_of_a_vnids_namespaces() {
        let mut m = Mirror::new("node-0");
        for ns in ["a", "b"] {
            m.set_namespace(ns, Some(NamespaceFacts::default()));
            m.set_netnamespace(ns, Some(vnid(5)));
        }
        let enp = |ns: &str| EgressNetworkPolicy {
            namespace: ns.into(),
            name: "e".into(),
            spec: crate::sdn::types::EgressNetworkPolicySpec { egress: Vec::new() },
        };
        m.set_egress("a/e", Some(enp("a")));
        let inputs = m.set_egress("b/e", Some(enp("b")));
        let [Input::Egress {
            vnid: v,
            want: Some(state),
            objects,
        }] = inputs.as_slice()
        else {
            panic!("{inputs:?}")
        };
        assert_eq!(*v, vnid(5));
        assert_eq!(state.namespaces, ["a", "b"]);
        assert_eq!(state.policies.len(), 2);
        assert_eq!(objects, &["a/e".to_string(), "b/e".to_string()]);
    }

    #[test]
    fn this_nodes_host_subnet_sets_it_up_and_the_others_are_inputs() {
        let mut m = Mirror::new("node-0");
        let hs = |subnet: &str| HostSubnet {
            host_ip: "192.0.2.11".parse().unwrap(),
            subnet: subnet.parse().unwrap(),
            fixed_vnid: None,
            vtep_mac: None,
        };
        let (inputs, own) = m.set_host_subnet("node-0", Some(hs("10.128.0.0/23")));
        assert!(inputs.is_empty() && own);
        let (inputs, own) = m.set_host_subnet("node-1", Some(hs("10.128.2.0/23")));
        assert!(!own);
        assert_eq!(names(&inputs), ["hs+node-1"]);
        let (inputs, _) = m.set_host_subnet("node-1", Some(hs("10.128.4.0/23")));
        let [Input::HostSubnet { old: Some(old), .. }] = inputs.as_slice() else {
            panic!("{inputs:?}")
        };
        assert_eq!(old.subnet.to_string(), "10.128.2.0/23");
        assert_eq!(m.keys(Kind::HostSubnet), ["node-1", "node-0"]);
    }

    #[test]
    fn an_admin_policy_leaving_a_priority_lets_the_others_there_be_applied_again() {
        let anp = |name: &str, priority: u16| {
            let yaml = format!(
                "apiVersion: policy.networking.k8s.io/v1alpha1\nkind: AdminNetworkPolicy\n\
                 metadata: {{name: {name}}}\nspec: {{priority: {priority}, subject: {{namespaces: {{}}}}}}\n"
            );
            crate::sdn::policy::admin::parse_admin_policy(yaml.as_bytes()).unwrap()
        };
        let mut m = Mirror::new("node-0");
        let kind = Kind::AdminNetworkPolicy;
        assert_eq!(
            names(&m.set_admin(kind, "a", Some(anp("a", 10)))),
            ["admin+a"]
        );
        assert_eq!(
            names(&m.set_admin(kind, "b", Some(anp("b", 10)))),
            ["admin+b"]
        );
        assert!(m.set_admin(kind, "b", Some(anp("b", 10))).is_empty());
        // a moves away from 10: b, refused while a held it, is sent again.
        assert_eq!(
            names(&m.set_admin(kind, "a", Some(anp("a", 20)))),
            ["admin+a", "admin+b"]
        );
        assert_eq!(names(&m.set_admin(kind, "b", None)), ["admin-b"]);
        assert_eq!(m.keys(kind), ["a"]);
        assert_eq!(Expected::of(&m).admin, ["anp/a".to_string()].into());
    }
}
