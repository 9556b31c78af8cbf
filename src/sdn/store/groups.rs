//! Selector groups: each distinct selection of pods (by namespace and labels) or of
//! namespaces, computed once and shared by every rule that uses it, its members kept up to
//! date as pods and namespaces change (as Antrea's controller keeps its AddressGroups and
//! AppliedToGroups). A change re-checks only the groups that can take the objects it names and
//! says which members joined and left ([`Delta`]); a group's users turn those into the flows
//! they add or remove, without recomputing anything else.
//!
//! Groups are counted by their users: [`Groups::acquire`] makes one (its members found through
//! the [`Index`]) or shares it, [`Groups::release`] drops it with its last user.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use foldhash::{HashMap, HashSet, HashSetExt};
use std::net::Ipv4Addr;

use slab::Slab;

use super::index::Index;
use crate::sdn::labels::Selector;
use crate::sdn::objects::{NamedPort, Namespace, NodeInfo, PodInfo};
use crate::value::PodKey;
use crate::value::Vnid;

/// Which namespaces a pod group takes pods from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Scope {
    /// One namespace, by name (a policy's own).
    Named(String),
    /// Every namespace whose labels the selector selects.
    Selected(Selector),
}

/// What a group selects; equal keys are one group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum GroupKey {
    /// The pods of the namespaces `scope` takes whose labels `pods` selects (None: all of
    /// them); with `local`, only pods on this node.
    Pods {
        scope: Scope,
        pods: Option<Selector>,
        local: bool,
    },
    /// The namespaces whose labels the selector selects.
    Namespaces(Selector),
}

impl GroupKey {
    /// A pod group, in one spelling (an empty pod selector is "all pods").
    pub fn pods(scope: Scope, pods: Option<&Selector>, local: bool) -> GroupKey {
        let scope = match scope {
            Scope::Selected(s) => Scope::Selected(s.canonical()),
            named => named,
        };
        GroupKey::Pods {
            scope,
            pods: pods.filter(|s| !s.is_empty()).map(Selector::canonical),
            local,
        }
    }

    pub fn namespaces(selector: &Selector) -> GroupKey {
        GroupKey::Namespaces(selector.canonical())
    }
}

/// A group, as its users name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct GroupId(usize);

/// A member as a group's users render it: a pod with its IPv4 addresses and its namespace's
/// VNID, or a namespace with its VNID (as they were when it joined or left).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Member {
    Pod {
        key: PodKey,
        ipv4s: Vec<Ipv4Addr>,
        vnid: Vnid,
        /// Its named container ports (what a named port of a rule resolves to).
        ports: Vec<NamedPort>,
    },
    Namespace {
        name: String,
        vnid: Vnid,
    },
}

/// A member joined or left a group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Delta {
    pub group: GroupId,
    pub member: Member,
    pub joined: bool,
}

/// What groups read of the store: the objects and their index.
#[derive(Clone, Copy)]
pub struct World<'a> {
    pub pods: &'a BTreeMap<PodKey, PodInfo>,
    pub namespaces: &'a BTreeMap<String, Namespace>,
    pub index: &'a Index,
    /// The cluster's nodes (what admin policies' node peers read; no group holds nodes).
    pub nodes: &'a BTreeMap<String, NodeInfo>,
}

#[derive(Debug)]
enum Members {
    Pods(HashSet<PodKey>),
    Namespaces(BTreeSet<String>),
}

#[derive(Debug)]
struct Group {
    key: GroupKey,
    users: u32,
    members: Members,
    /// The IPv4 addresses of all its pods (the matches a group of pods renders to).
    ipv4s: usize,
}

#[derive(Debug, Default)]
pub struct Groups {
    groups: Slab<Group>,
    by_key: HashMap<GroupKey, usize>,
    /// Pod groups scoped to one namespace, by that namespace.
    named: HashMap<String, BTreeSet<usize>>,
    /// Pod groups scoped by a namespace selector.
    selected: BTreeSet<usize>,
    /// For each namespace, the selector-scoped pod groups that take it now.
    selected_taking: HashMap<String, BTreeSet<usize>>,
    /// Namespace groups.
    namespace_groups: BTreeSet<usize>,
    /// Members computed by [`Groups::preview`] for groups no one uses yet: a policy is checked
    /// (previewed) and then applied (acquired) with no store change between, so the applying
    /// takes them instead of computing them again. Forgotten at every store change.
    previewed: RefCell<HashMap<GroupKey, (Members, usize)>>,
}

fn pod_member(key: &PodKey, info: &PodInfo, vnid: Vnid) -> Member {
    Member::Pod {
        key: key.clone(),
        ipv4s: info.ipv4s().collect(),
        vnid,
        ports: info.ports.clone(),
    }
}

fn selects_namespace(selector: &Selector, ns: &Namespace) -> bool {
    selector.matches_with(|key| ns.label(key))
}

/// Whether a pod group takes `info` among the pods of a namespace it takes.
fn takes(pods: &Option<Selector>, local: bool, info: &PodInfo) -> bool {
    (!local || info.local) && pods.as_ref().is_none_or(|s| s.matches(&info.labels))
}

impl Groups {
    pub fn len(&self) -> usize {
        self.groups.len()
    }

    pub fn is_empty(&self) -> bool {
        self.groups.is_empty()
    }

    /// The group `key` selects, made (with its members) if no one uses it yet.
    pub fn acquire(&mut self, key: GroupKey, world: World) -> GroupId {
        if let Some(&id) = self.by_key.get(&key) {
            self.groups[id].users += 1;
            return GroupId(id);
        }
        let previewed = self.previewed.get_mut().remove(&key);
        let (members, ipv4s) = previewed.unwrap_or_else(|| self.initial_members(&key, world));
        let id = self.groups.insert(Group {
            key: key.clone(),
            users: 1,
            members,
            ipv4s,
        });
        match &key {
            GroupKey::Pods {
                scope: Scope::Named(ns),
                ..
            } => {
                self.named.entry(ns.clone()).or_default().insert(id);
            }
            GroupKey::Pods {
                scope: Scope::Selected(selector),
                ..
            } => {
                self.selected.insert(id);
                for ns in world.namespaces.values() {
                    if selects_namespace(selector, ns) {
                        self.selected_taking
                            .entry(ns.name.clone())
                            .or_default()
                            .insert(id);
                    }
                }
            }
            GroupKey::Namespaces(_) => {
                self.namespace_groups.insert(id);
            }
        }
        self.by_key.insert(key, id);
        GroupId(id)
    }

    /// One user fewer; the group goes with its last.
    pub fn release(&mut self, GroupId(id): GroupId) {
        let Some(group) = self.groups.get_mut(id) else {
            return;
        };
        group.users -= 1;
        if group.users > 0 {
            return;
        }
        let group = self.groups.remove(id);
        self.by_key.remove(&group.key);
        match &group.key {
            GroupKey::Pods {
                scope: Scope::Named(ns),
                ..
            } => {
                if let Some(set) = self.named.get_mut(ns) {
                    set.remove(&id);
                    if set.is_empty() {
                        self.named.remove(ns);
                    }
                }
            }
            GroupKey::Pods { .. } => {
                self.selected.remove(&id);
                self.selected_taking.retain(|_, set| {
                    set.remove(&id);
                    !set.is_empty()
                });
            }
            GroupKey::Namespaces(_) => {
                self.namespace_groups.remove(&id);
            }
        }
    }

    pub fn key(&self, GroupId(id): GroupId) -> Option<&GroupKey> {
        self.groups.get(id).map(|g| &g.key)
    }

    /// How many members it has.
    pub fn len_of(&self, GroupId(id): GroupId) -> usize {
        match self.groups.get(id).map(|g| &g.members) {
            Some(Members::Pods(set)) => set.len(),
            Some(Members::Namespaces(set)) => set.len(),
            None => 0,
        }
    }

    /// How many matches its members render to: their IPv4 addresses (pods), or themselves
    /// (namespaces).
    pub fn matches_of(&self, GroupId(id): GroupId) -> usize {
        match self.groups.get(id) {
            Some(Group {
                members: Members::Pods(_),
                ipv4s,
                ..
            }) => *ipv4s,
            Some(Group {
                members: Members::Namespaces(set),
                ..
            }) => set.len(),
            None => 0,
        }
    }

    /// Its members now, rendered from `world`.
    pub fn members(&self, GroupId(id): GroupId, world: World) -> Vec<Member> {
        self.groups
            .get(id)
            .map(|g| render(&g.members, world))
            .unwrap_or_default()
    }

    /// The members the group `key` selects has (or would have, when no one uses it), without
    /// making it.
    pub fn preview(&self, key: &GroupKey, world: World) -> Vec<Member> {
        if let Some(&id) = self.by_key.get(key) {
            return self.members(GroupId(id), world);
        }
        let mut previewed = self.previewed.borrow_mut();
        let (members, _) = previewed
            .entry(key.clone())
            .or_insert_with(|| self.initial_members(key, world));
        render(members, world)
    }

    /// Forgets what [`Groups::preview`] computed: the store is about to change.
    pub fn forget_previews(&mut self) {
        self.previewed.get_mut().clear();
    }

    fn initial_members(&self, key: &GroupKey, world: World) -> (Members, usize) {
        match key {
            GroupKey::Pods { scope, pods, local } => {
                let namespaces: Vec<&String> = match scope {
                    Scope::Named(ns) => world
                        .namespaces
                        .get_key_value(ns)
                        .map(|(name, _)| name)
                        .into_iter()
                        .collect(),
                    Scope::Selected(selector) => world
                        .index
                        .namespace_candidates(selector, world.namespaces.keys())
                        .filter(|name| {
                            world
                                .namespaces
                                .get(*name)
                                .is_some_and(|ns| selects_namespace(selector, ns))
                        })
                        .collect(),
                };
                let mut set = HashSet::new();
                let mut ipv4s = 0;
                for ns in namespaces {
                    for key in world.index.pod_candidates(ns, pods.as_ref()) {
                        let Some(info) = world.pods.get(key) else {
                            continue;
                        };
                        if takes(pods, *local, info) {
                            ipv4s += info.ipv4s().count();
                            set.insert(key.clone());
                        }
                    }
                }
                (Members::Pods(set), ipv4s)
            }
            GroupKey::Namespaces(selector) => {
                let set = world
                    .index
                    .namespace_candidates(selector, world.namespaces.keys())
                    .filter(|name| {
                        world
                            .namespaces
                            .get(*name)
                            .is_some_and(|ns| selects_namespace(selector, ns))
                    })
                    .cloned()
                    .collect();
                (Members::Namespaces(set), 0)
            }
        }
    }

    /// The pod groups that take pods of namespace `ns` now.
    fn pod_groups_taking(&self, ns: &str) -> Vec<usize> {
        let named = self.named.get(ns).into_iter().flatten();
        let selected = self.selected_taking.get(ns).into_iter().flatten();
        named.chain(selected).copied().collect()
    }

    /// Follows a pod from `old` to `new` (None: absent); `world` holds the new state. Its
    /// namespace does not change (it is part of its key).
    pub fn pod_changed(
        &mut self,
        key: &PodKey,
        old: Option<&PodInfo>,
        new: Option<&PodInfo>,
        world: World,
        out: &mut Vec<Delta>,
    ) {
        let Some(ns) = world.namespaces.get(key.namespace()) else {
            // A pod of a namespace the node does not know is in no group.
            return;
        };
        for id in self.pod_groups_taking(key.namespace()) {
            let group = &mut self.groups[id];
            let GroupKey::Pods { pods, local, .. } = &group.key else {
                continue;
            };
            let Members::Pods(members) = &mut group.members else {
                continue;
            };
            let was = members.contains(key);
            let now = new.is_some_and(|info| takes(pods, *local, info));
            // New addresses or ports: it leaves as it was and joins as it is.
            let moved =
                was && now && old.map(|o| (&o.ips, &o.ports)) != new.map(|n| (&n.ips, &n.ports));
            if was && (!now || moved) {
                let old = old.map(|info| pod_member(key, info, ns.vnid));
                if let Some(member) = old {
                    leave(group, GroupId(id), member, out);
                }
            }
            if now && (!was || moved) {
                if let Some(info) = new {
                    join(group, GroupId(id), pod_member(key, info, ns.vnid), out);
                }
            }
        }
    }

    /// Follows a namespace from `old` to `new`; `world` holds the new state (the namespace's
    /// pods included).
    pub fn namespace_changed(
        &mut self,
        name: &str,
        old: Option<&Namespace>,
        new: Option<&Namespace>,
        world: World,
        out: &mut Vec<Delta>,
    ) {
        let vnid_changed = old.map(|o| o.vnid) != new.map(|n| n.vnid);
        // Pod groups scoped by a selector: does each take the namespace, before and after?
        for id in self.selected.clone() {
            let GroupKey::Pods {
                scope: Scope::Selected(selector),
                ..
            } = &self.groups[id].key
            else {
                continue;
            };
            let was = self
                .selected_taking
                .get(name)
                .is_some_and(|set| set.contains(&id));
            let now = new.is_some_and(|ns| selects_namespace(selector, ns));
            if now {
                self.selected_taking
                    .entry(name.to_string())
                    .or_default()
                    .insert(id);
            } else if let Some(set) = self.selected_taking.get_mut(name) {
                set.remove(&id);
                if set.is_empty() {
                    self.selected_taking.remove(name);
                }
            }
            self.repopulate(id, name, was, now, vnid_changed, old, new, world, out);
        }
        // Pod groups of this namespace by name: they take its pods while it exists.
        let named: Vec<usize> = self
            .named
            .get(name)
            .into_iter()
            .flatten()
            .copied()
            .collect();
        for id in named {
            self.repopulate(
                id,
                name,
                old.is_some(),
                new.is_some(),
                vnid_changed,
                old,
                new,
                world,
                out,
            );
        }
        // Namespace groups.
        for &id in &self.namespace_groups {
            let group = &mut self.groups[id];
            let GroupKey::Namespaces(selector) = &group.key else {
                continue;
            };
            let Members::Namespaces(members) = &mut group.members else {
                continue;
            };
            let was = members.contains(name);
            let now = new.is_some_and(|ns| selects_namespace(selector, ns));
            let member = |ns: &Namespace| Member::Namespace {
                name: ns.name.clone(),
                vnid: ns.vnid,
            };
            if was && (!now || vnid_changed) {
                members.remove(name);
                if let Some(old) = old {
                    out.push(Delta {
                        group: GroupId(id),
                        member: member(old),
                        joined: false,
                    });
                }
            }
            if now && (!was || vnid_changed) {
                members.insert(name.to_string());
                if let Some(new) = new {
                    out.push(Delta {
                        group: GroupId(id),
                        member: member(new),
                        joined: true,
                    });
                }
            }
        }
    }

    /// A pod group's members of namespace `name`, after the group started or stopped taking
    /// the namespace (`was`, `now`) or the namespace's VNID changed: they leave with the old
    /// VNID and join with the new.
    #[allow(clippy::too_many_arguments)]
    fn repopulate(
        &mut self,
        id: usize,
        name: &str,
        was: bool,
        now: bool,
        vnid_changed: bool,
        old: Option<&Namespace>,
        new: Option<&Namespace>,
        world: World,
        out: &mut Vec<Delta>,
    ) {
        let group = &mut self.groups[id];
        let GroupKey::Pods { pods, local, .. } = &group.key else {
            return;
        };
        let (pods, local) = (pods.clone(), *local);
        let Members::Pods(members) = &mut group.members else {
            return;
        };
        if was && (!now || vnid_changed) {
            if let Some(old) = old {
                let leaving: Vec<PodKey> = members
                    .iter()
                    .filter(|key| key.namespace() == name)
                    .cloned()
                    .collect();
                for key in leaving {
                    // The pod itself did not change: its info is the same in `world`.
                    if let Some(info) = world.pods.get(&key) {
                        leave(group, GroupId(id), pod_member(&key, info, old.vnid), out);
                    }
                }
            }
        }
        if now && (!was || vnid_changed) {
            if let Some(new) = new {
                for key in world.index.pod_candidates(name, pods.as_ref()) {
                    if let Some(info) = world.pods.get(key).filter(|i| takes(&pods, local, i)) {
                        join(group, GroupId(id), pod_member(key, info, new.vnid), out);
                    }
                }
            }
        }
    }
}

fn join(group: &mut Group, id: GroupId, member: Member, out: &mut Vec<Delta>) {
    if let (Members::Pods(set), Member::Pod { key, ipv4s, .. }) = (&mut group.members, &member) {
        if set.insert(key.clone()) {
            group.ipv4s += ipv4s.len();
            out.push(Delta {
                group: id,
                member,
                joined: true,
            });
        }
    }
}

fn leave(group: &mut Group, id: GroupId, member: Member, out: &mut Vec<Delta>) {
    if let (Members::Pods(set), Member::Pod { key, ipv4s, .. }) = (&mut group.members, &member) {
        if set.remove(key) {
            group.ipv4s -= ipv4s.len();
            out.push(Delta {
                group: id,
                member,
                joined: false,
            });
        }
    }
}

/// Members as their users render them, from `world`.
fn render(members: &Members, world: World) -> Vec<Member> {
    let vnid_of = |ns: &str| world.namespaces.get(ns).map(|n| n.vnid);
    match members {
        Members::Pods(set) => set
            .iter()
            .filter_map(|key| {
                let info = world.pods.get(key)?;
                Some(pod_member(key, info, vnid_of(key.namespace())?))
            })
            .collect(),
        Members::Namespaces(set) => set
            .iter()
            .filter_map(|name| {
                Some(Member::Namespace {
                    name: name.clone(),
                    vnid: vnid_of(name)?,
                })
            })
            .collect(),
    }
}
