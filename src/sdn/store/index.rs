//! The store's indexes: pods by namespace, by label `key=value` and by address, namespaces by
//! label. They answer "which pods could a new selector group hold" without a scan of every
//! pod, and "which pod has this address" for the operations keyed by IP.

use std::collections::BTreeSet;

use foldhash::HashMap;
use std::net::IpAddr;

use crate::sdn::labels::Selector;
use crate::sdn::objects::{Namespace, PodInfo};
use crate::value::{PodKey, Vnid};

/// A label as an index key.
type LabelPair = (String, String);

#[derive(Debug, Default, Clone)]
pub struct Index {
    pods_by_namespace: HashMap<String, BTreeSet<PodKey>>,
    pods_by_label: HashMap<LabelPair, BTreeSet<PodKey>>,
    pods_by_ip: HashMap<IpAddr, BTreeSet<PodKey>>,
    /// Namespaces by label, the implicit `kubernetes.io/metadata.name` label included.
    namespaces_by_label: HashMap<LabelPair, BTreeSet<String>>,
    /// Namespaces by VNID (one each in the NetworkPolicy mode, which keeps VNIDs unique).
    namespaces_by_vnid: HashMap<Vnid, BTreeSet<String>>,
}

fn insert<K: std::hash::Hash + Eq, V: Ord>(map: &mut HashMap<K, BTreeSet<V>>, key: K, value: V) {
    map.entry(key).or_default().insert(value);
}

fn remove<K: std::hash::Hash + Eq, V: Ord>(map: &mut HashMap<K, BTreeSet<V>>, key: &K, value: &V) {
    if let Some(set) = map.get_mut(key) {
        set.remove(value);
        if set.is_empty() {
            map.remove(key);
        }
    }
}

impl Index {
    /// Follows a pod from `old` to `new` (None: absent).
    pub fn pod(&mut self, key: &PodKey, old: Option<&PodInfo>, new: Option<&PodInfo>) {
        if let Some(old) = old {
            remove(
                &mut self.pods_by_namespace,
                &key.namespace().to_string(),
                key,
            );
            for (k, v) in &old.labels {
                remove(&mut self.pods_by_label, &(k.clone(), v.clone()), key);
            }
            for ip in &old.ips {
                remove(&mut self.pods_by_ip, ip, key);
            }
        }
        if let Some(new) = new {
            insert(
                &mut self.pods_by_namespace,
                key.namespace().to_string(),
                key.clone(),
            );
            for (k, v) in &new.labels {
                insert(&mut self.pods_by_label, (k.clone(), v.clone()), key.clone());
            }
            for ip in &new.ips {
                insert(&mut self.pods_by_ip, *ip, key.clone());
            }
        }
    }

    /// Follows a namespace from `old` to `new`.
    pub fn namespace(&mut self, old: Option<&Namespace>, new: Option<&Namespace>) {
        let pairs = |ns: &Namespace| {
            ns.effective_labels()
                .into_iter()
                .map(|pair| (pair, ns.name.clone()))
                .collect::<Vec<_>>()
        };
        for (pair, name) in old.map(pairs).unwrap_or_default() {
            remove(&mut self.namespaces_by_label, &pair, &name);
        }
        for (pair, name) in new.map(pairs).unwrap_or_default() {
            insert(&mut self.namespaces_by_label, pair, name);
        }
        if let Some(old) = old {
            remove(&mut self.namespaces_by_vnid, &old.vnid, &old.name);
        }
        if let Some(new) = new {
            insert(&mut self.namespaces_by_vnid, new.vnid, new.name.clone());
        }
    }

    /// The namespaces with VNID `vnid`.
    pub fn namespaces_with_vnid(&self, vnid: Vnid) -> impl Iterator<Item = &String> {
        self.namespaces_by_vnid.get(&vnid).into_iter().flatten()
    }

    /// The pods of `namespace`.
    pub fn pods_in(&self, namespace: &str) -> impl Iterator<Item = &PodKey> {
        self.pods_by_namespace.get(namespace).into_iter().flatten()
    }

    pub fn pod_count_in(&self, namespace: &str) -> usize {
        self.pods_by_namespace
            .get(namespace)
            .map_or(0, BTreeSet::len)
    }

    /// The pods with address `ip` (more than one only while an address moves between pods).
    pub fn pods_at(&self, ip: IpAddr) -> impl Iterator<Item = &PodKey> {
        self.pods_by_ip.get(&ip).into_iter().flatten()
    }

    /// The pods of `namespace` that could match `selector`: those with its rarest
    /// `matchLabels` pair when that is fewer than the namespace's pods (a superset of the
    /// matches; the caller still checks each).
    pub fn pod_candidates<'a>(
        &'a self,
        namespace: &'a str,
        selector: Option<&Selector>,
    ) -> Box<dyn Iterator<Item = &'a PodKey> + 'a> {
        let in_namespace = self.pod_count_in(namespace);
        let rarest = selector
            .into_iter()
            .flat_map(|s| s.match_labels.iter())
            .map(|(k, v)| self.pods_by_label.get(&(k.clone(), v.clone())))
            .min_by_key(|set| set.map_or(0, BTreeSet::len));
        match rarest {
            Some(None) => Box::new(std::iter::empty()),
            Some(Some(set)) if set.len() < in_namespace => {
                Box::new(set.iter().filter(move |key| key.namespace() == namespace))
            }
            _ => Box::new(self.pods_in(namespace)),
        }
    }

    /// The namespaces that could match `selector` (its rarest `matchLabels` pair's, or all
    /// of `all` when it has none).
    pub fn namespace_candidates<'a>(
        &'a self,
        selector: &Selector,
        all: impl Iterator<Item = &'a String> + 'a,
    ) -> Box<dyn Iterator<Item = &'a String> + 'a> {
        let rarest = selector
            .match_labels
            .iter()
            .map(|(k, v)| self.namespaces_by_label.get(&(k.clone(), v.clone())))
            .min_by_key(|set| set.map_or(0, BTreeSet::len));
        match rarest {
            Some(None) => Box::new(std::iter::empty()),
            Some(Some(set)) => Box::new(set.iter()),
            None => Box::new(all),
        }
    }
}
