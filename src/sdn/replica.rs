//! The HA replica of the desired state in `Bridge.external_ids`, written incrementally: a base
//! (`ofnode-ha-state`, the whole state as JSON) and after it one key per batch holding that
//! batch's changes (`ofnode-ha-change-N`, the journal's own `Change`s), so a pod add costs a
//! few hundred bytes in OVSDB, not the whole state. The base is written anew, with every
//! change key deleted in the same transaction, when the log has grown past the base (so the
//! replica stays below twice the state), when a write may or may not have applied (a failure),
//! and on every new OVSDB session or takeover. A reader applies the change keys to the base in
//! order. Pure: which keys to write, and what the keys mean.

use std::collections::BTreeMap;

use super::state::{replay, Change, NodeState, RecordedChange};

/// The key holding the base.
pub const STATE_KEY: &str = "ofnode-ha-state";
/// The prefix of the keys holding the batches since the base.
pub const CHANGE_PREFIX: &str = "ofnode-ha-change-";
/// A log of more batches than this is folded into a new base even if it is small.
const MAX_LOG_KEYS: u64 = 4096;

/// The key of the `seq`th batch since the base (zero-padded: the keys sort in order).
pub fn change_key(seq: u64) -> String {
    format!("{CHANGE_PREFIX}{seq:020}")
}

/// What one replication writes (under the fencing token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    /// A new base; every change key the bridge holds goes in the same transaction.
    Full { state: String },
    /// One batch's changes after the current base and log.
    Append { key: String, changes: String },
}

/// What this daemon knows of the replica it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Replica {
    /// No base of ours is known to be in place (start, takeover, new session, a failed write).
    full_needed: bool,
    /// The OVSDB session the last write went to.
    session: u64,
    next_seq: u64,
    base_bytes: usize,
    log_bytes: usize,
}

impl Default for Replica {
    fn default() -> Self {
        Replica::new()
    }
}

impl Replica {
    pub fn new() -> Replica {
        Replica {
            full_needed: true,
            session: 0,
            next_seq: 1,
            base_bytes: 0,
            log_bytes: 0,
        }
    }

    /// The write for a batch that made `changes`, leaving the desired state `state`, over the
    /// OVSDB session `session`.
    pub fn plan(
        &self,
        state: &NodeState,
        changes: &[Change],
        session: u64,
    ) -> Result<Write, serde_json::Error> {
        if !self.full_needed && session == self.session && self.next_seq <= MAX_LOG_KEYS {
            let changes = serde_json::to_string(changes)?;
            if self.log_bytes + changes.len() <= self.base_bytes.max(64 * 1024) {
                return Ok(Write::Append {
                    key: change_key(self.next_seq),
                    changes,
                });
            }
        }
        Ok(Write::Full {
            state: serde_json::to_string(state)?,
        })
    }

    /// `write` is in OVSDB.
    pub fn written(&mut self, write: &Write, session: u64) {
        self.session = session;
        self.full_needed = false;
        match write {
            Write::Full { state } => {
                self.next_seq = 1;
                self.base_bytes = state.len();
                self.log_bytes = 0;
            }
            Write::Append { changes, .. } => {
                self.next_seq += 1;
                self.log_bytes += changes.len();
            }
        }
    }

    /// A write failed, or its outcome is unknown, or another daemon may have written since
    /// (a takeover): the next write is a whole base.
    pub fn forget(&mut self) {
        self.full_needed = true;
    }
}

/// The change keys in `ids` (to delete with a new base).
pub fn change_keys(ids: &BTreeMap<String, String>) -> Vec<String> {
    ids.keys()
        .filter(|key| key.starts_with(CHANGE_PREFIX))
        .cloned()
        .collect()
}

/// The state `ids` hold: the base with every change key applied in order; None without a base.
pub fn read(ids: &BTreeMap<String, String>) -> Result<Option<NodeState>, String> {
    let Some(base) = ids.get(STATE_KEY) else {
        return Ok(None);
    };
    let mut state: NodeState = serde_json::from_str(base)
        .map_err(|e| format!("the replicated state ({STATE_KEY}) does not parse: {e}"))?;
    // BTreeMap order is the keys' order, which the zero padding makes the batches' order.
    for (key, json) in ids.range(CHANGE_PREFIX.to_string()..) {
        if !key.starts_with(CHANGE_PREFIX) {
            break;
        }
        let changes: Vec<RecordedChange> = serde_json::from_str(json)
            .map_err(|e| format!("the replicated batch {key} does not parse: {e}"))?;
        replay(&mut state, changes)
            .map_err(|e| format!("the replicated batch {key} cannot be applied: {e}"))?;
    }
    Ok(Some(state))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::core::tests::setup_request;
    use crate::sdn::types::Mode;
    use crate::sdn::types::Pod;
    use crate::value::PodKey;

    fn pod(n: u16) -> (PodKey, Pod) {
        let ip = std::net::Ipv4Addr::new(10, 128, (n >> 8) as u8, n as u8);
        let pod = Pod {
            veth: Some(format!("veth{n}").parse().unwrap()),
            ip,
            mac: "0a:58:0a:80:00:05".parse().unwrap(),
            sandbox: format!("{:02x}", n % 256).repeat(32).parse().unwrap(),
            vnid: crate::value::Vnid::new(0).unwrap(),
            ofport: n + 3,
        };
        (format!("x/pod-{n}").parse::<PodKey>().unwrap(), pod)
    }

    fn set_up(pods: u16) -> NodeState {
        NodeState {
            setup: Some(setup_request(Mode::default())),
            pods: (0..pods).map(pod).collect(),
            ..NodeState::default()
        }
    }

    /// What OVSDB's external_ids become after `write` (as ha.rs's transaction does it).
    fn apply(ids: &mut BTreeMap<String, String>, write: &Write) {
        match write {
            Write::Full { state } => {
                for key in change_keys(ids) {
                    ids.remove(&key);
                }
                ids.insert(STATE_KEY.into(), state.clone());
            }
            Write::Append { key, changes } => {
                ids.insert(key.clone(), changes.clone());
            }
        }
    }

    /// A batch on the leader: its changes applied to `state`, the write planned and applied.
    fn batch(
        replica: &mut Replica,
        state: &mut NodeState,
        ids: &mut BTreeMap<String, String>,
        changes: Vec<Change>,
        session: u64,
    ) -> Write {
        for change in changes.clone() {
            state.apply(change);
        }
        let write = replica.plan(state, &changes, session).unwrap();
        apply(ids, &write);
        replica.written(&write, session);
        write
    }

    #[test]
    fn the_first_write_is_whole_then_each_batch_is_only_its_changes() {
        let mut replica = Replica::new();
        let mut state = set_up(100);
        let mut ids = BTreeMap::from([("other".to_string(), "kept".to_string())]);
        let first = batch(&mut replica, &mut state, &mut ids, vec![], 1);
        assert!(matches!(first, Write::Full { .. }));
        let base_len = ids[STATE_KEY].len();
        for n in 100..110 {
            let (key, p) = pod(n);
            let write = batch(
                &mut replica,
                &mut state,
                &mut ids,
                vec![Change::LocalPod { key, pod: Some(p) }],
                1,
            );
            match write {
                Write::Append { changes, .. } => assert!(changes.len() * 20 < base_len),
                other => panic!("a pod add writes only its change: {other:?}"),
            }
        }
        let (gone, _) = pod(3);
        batch(
            &mut replica,
            &mut state,
            &mut ids,
            vec![Change::LocalPod {
                key: gone,
                pod: None,
            }],
            1,
        );
        assert_eq!(change_keys(&ids).len(), 11);
        assert_eq!(ids["other"], "kept");
        // What a standby taking over reads is exactly the leader's state.
        assert_eq!(read(&ids).unwrap(), Some(state));
    }

    #[test]
    fn a_new_session_a_failure_or_a_grown_log_writes_a_new_base_without_old_batches() {
        let mut replica = Replica::new();
        let mut state = set_up(2);
        let mut ids = BTreeMap::new();
        batch(&mut replica, &mut state, &mut ids, vec![], 1);
        let add = |n| {
            let (key, p) = pod(n);
            vec![Change::LocalPod { key, pod: Some(p) }]
        };
        assert!(matches!(
            batch(&mut replica, &mut state, &mut ids, add(10), 1),
            Write::Append { .. }
        ));
        // OVSDB reconnected: it may be another database.
        assert!(matches!(
            batch(&mut replica, &mut state, &mut ids, add(11), 2),
            Write::Full { .. }
        ));
        assert!(change_keys(&ids).is_empty());
        // A write whose outcome is unknown: the batch was rolled back, the key may be there.
        let (key, p) = pod(12);
        let unacknowledged = vec![Change::LocalPod { key, pod: Some(p) }];
        let write = replica.plan(&state, &unacknowledged, 2).unwrap();
        apply(&mut ids, &write);
        replica.forget();
        assert_ne!(read(&ids).unwrap().as_ref(), Some(&state));
        assert!(matches!(
            batch(&mut replica, &mut state, &mut ids, add(13), 2),
            Write::Full { .. }
        ));
        assert_eq!(read(&ids).unwrap(), Some(state.clone()));
        // The log never grows past the base (64 KiB at least): then a new base.
        let mut fulls = 0;
        for n in 100..1100 {
            if matches!(
                batch(&mut replica, &mut state, &mut ids, add(n), 2),
                Write::Full { .. }
            ) {
                fulls += 1;
                assert!(change_keys(&ids).is_empty());
            }
            let log: usize = change_keys(&ids).iter().map(|k| ids[k].len()).sum();
            assert!(log <= ids[STATE_KEY].len().max(64 * 1024));
        }
        assert!(fulls >= 1);
        assert_eq!(read(&ids).unwrap(), Some(state));
    }

    #[test]
    fn a_replica_that_does_not_parse_is_an_error_naming_the_key() {
        let mut ids = BTreeMap::from([(STATE_KEY.to_string(), "{}".to_string())]);
        assert_eq!(read(&ids).unwrap(), Some(NodeState::default()));
        ids.insert(change_key(1), "[{\"nope\":1}]".into());
        let err = read(&ids).unwrap_err();
        assert!(err.contains(&change_key(1)), "{err}");
        assert_eq!(read(&BTreeMap::new()).unwrap(), None);
    }
}
