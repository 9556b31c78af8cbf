//! `other_config:flow-restore-wait`: Open vSwitch's hot restart. An ovs-vswitchd started with
//! the key set to true forwards nothing (it does not even read packets from the datapath) and
//! dials no controller until the key is removed; only its management socket (`br0.mgmt`) is
//! served. Whoever restores the flows must clear the key, and a key left set means no
//! forwarding at all (Antrea #1600).
//!
//! ofnode restores its own table: while the key is set, the switch connection reaches
//! ovs-vswitchd on the management socket (an active target dials it anyway; a passive one
//! dials it while no switch has dialled in), dialled again every `REDIAL` and at every OVSDB
//! change while no session is up; the connect resync installs the whole desired table there
//! (one bundle); then this task checks the table once more and removes the key. The key is
//! removed only after the table was verified on a session that began after the key was first
//! seen set: a key set on a running ovs-vswitchd (the first step of a restart) is left for the
//! ovs-vswitchd that starts next, which is the one that honours it.
//!
//! A bridge with Controller rows (a passive target: the bridge dials ofnode) loses that table
//! once more when the key goes: ovs-vswitchd configures no controller while the key is set,
//! and a bridge that goes from no controller to some has every flow deleted (OVS's
//! `connmgr_set_controllers`). The removal waits until ovs-vswitchd has applied it, so the
//! flush is over when it returns; the table is then installed again on whatever session is up
//! (the one on the management socket, or the bridge's own once it dialled in). With an active
//! target on `br0.mgmt` and no Controller row nothing is flushed: the table installed before
//! the removal is the one that forwards.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::mpsc;

use super::ha::HaShared;
use super::request::{self, Envelope, Request};
use super::writer::Published;
use crate::openflow::{Switch, Target};
use crate::ovsdb::txn::{Mutation, Mutator, Operation};
use crate::ovsdb::{self, Datum};

/// The key, in `Open_vSwitch.other_config`.
pub const FLOW_RESTORE_WAIT: &str = "flow-restore-wait";

/// While the key is set, how often the task looks again without being told of a change (a
/// setup that has just given the node a table, a retry after a failure).
const RECHECK: Duration = Duration::from_millis(500);
/// While the key is set and no session is up, how often ovs-vswitchd is dialled: a restarted
/// ovs-vswitchd need not write anything in OVSDB that ofnode follows (a plain restart changes
/// no monitored column), so OVSDB changes alone would not tell when it is back. A failed dial
/// of a local socket costs microseconds.
const REDIAL: Duration = Duration::from_millis(100);

/// The bridge's management socket: next to the OVSDB socket when that is a unix socket (both
/// live in ovs-vswitchd's run directory), else in Open vSwitch's default run directory.
pub fn management_target(ovsdb: &str, bridge: &str) -> String {
    let dir = ovsdb
        .strip_prefix("unix:")
        .and_then(|path| std::path::Path::new(path).parent())
        .and_then(|dir| dir.to_str())
        .filter(|dir| !dir.is_empty())
        .unwrap_or("/run/openvswitch");
    format!("unix:{dir}/{bridge}.mgmt")
}

/// Whether OVSDB's cache shows `other_config:flow-restore-wait=true`.
fn key_set(ovsdb: &ovsdb::Client) -> bool {
    ovsdb.with_cache(|cache| {
        cache.open_vswitch().is_some_and(|(_, row)| {
            row.get("other_config").is_some_and(|c| {
                c.string_map().get(FLOW_RESTORE_WAIT).map(String::as_str) == Some("true")
            })
        })
    })
}

/// Whether OVSDB's cache shows Controller rows on `bridge`.
fn has_controllers(ovsdb: &ovsdb::Client, bridge: &str) -> bool {
    ovsdb.with_cache(|cache| {
        cache
            .column("Bridge", bridge, "controller")
            .is_some_and(|controllers| !controllers.is_empty())
    })
}

/// Removes the key (a mutate: the rest of other_config stays as it is) and waits until
/// ovs-vswitchd has applied it: it forwards from then on (and has flushed a bridge that gained
/// its controllers).
async fn clear_key(ovsdb: &ovsdb::Client) -> Result<(), ovsdb::Error> {
    let op = Operation::Mutate {
        table: "Open_vSwitch".into(),
        conditions: vec![],
        mutations: vec![Mutation::new(
            "other_config",
            Mutator::Delete,
            Datum::set([FLOW_RESTORE_WAIT]),
        )],
    };
    ovsdb.transact_applied(&[op]).await.map(|_| ())
}

/// The task: keeps the key from staying set once this node's table is on the switch.
pub struct FlowRestoreWait {
    pub ovsdb: ovsdb::Client,
    pub switch: Switch,
    pub bridge: String,
    /// Dialled while the key is set and no switch dialled in (passive targets only; an active
    /// target is the management socket or another way to the same ovs-vswitchd).
    pub management: Option<Target>,
    pub requests: mpsc::WeakSender<Envelope>,
    pub published: Arc<Mutex<Published>>,
    /// Under HA only the active daemon restores (a standby's resync does nothing).
    pub ha: Option<Arc<HaShared>>,
}

impl FlowRestoreWait {
    pub async fn run(self) {
        let mut changes = self.ovsdb.cache_changes();
        let mut sessions = self.switch.sessions();
        // The session in use when the key was first seen set (None: seen before any session,
        // e.g. at start): the table must be verified on a later one.
        let mut seen_during: Option<Option<u64>> = None;
        let mut warned_not_set_up = false;
        loop {
            let standby = self.ha.as_ref().is_some_and(|ha| !ha.is_active());
            if key_set(&self.ovsdb) && !standby {
                let since = *seen_during.get_or_insert_with(|| {
                    let session = self.switch.session();
                    tracing::info!(
                        ?session,
                        "other_config:flow-restore-wait is set: this node restores its table, then removes the key"
                    );
                    session
                });
                // Again at every change: ovs-vswitchd coming up writes OVSDB, so it is dialled
                // at once, not after a grown backoff.
                match &self.management {
                    Some(management) => self.switch.dial_while_unserved(Some(management.clone())),
                    None if !self.switch.is_connected() => self.switch.dial_now(),
                    None => {}
                }
                match self.restore(since).await {
                    Ok(true) => {
                        seen_during = None;
                        warned_not_set_up = false;
                    }
                    Ok(false) => {}
                    Err(Skip::NotSetUp) if !warned_not_set_up => {
                        warned_not_set_up = true;
                        tracing::warn!("other_config:flow-restore-wait is set but this node is not set up: the key stays until setup has installed the table");
                    }
                    Err(Skip::NotSetUp) => {}
                    Err(Skip::Failed(error)) => {
                        tracing::warn!(%error, "restoring the table under flow-restore-wait failed; trying again")
                    }
                }
            } else if seen_during.take().is_some() {
                self.switch.dial_while_unserved(None);
            }
            let recheck = match seen_during {
                Some(_) if !self.switch.is_connected() => Some(REDIAL),
                Some(_) => Some(RECHECK),
                None => None,
            };
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                changed = sessions.changed() => if changed.is_err() { return },
                () = tokio::time::sleep(recheck.unwrap_or(RECHECK)), if recheck.is_some() => {}
            }
            if self.requests.upgrade().is_none() {
                return;
            }
        }
    }

    /// When the current session began after `since`: makes the switch's table the desired one
    /// and removes the key. True when the key was removed.
    async fn restore(&self, since: Option<u64>) -> Result<bool, Skip> {
        let Some(session) = self.switch.session() else {
            return Ok(false);
        };
        if since.is_some_and(|since| session <= since) {
            return Ok(false);
        }
        let set_up = self
            .published
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .setup
            .is_some();
        if !set_up {
            return Err(Skip::NotSetUp);
        }
        let requests = self
            .requests
            .upgrade()
            .ok_or(Skip::Failed("node stopped".into()))?;
        request::call(&requests, |reply| Request::Resync {
            force: false,
            reply,
        })
        .await
        .map_err(|e| Skip::Failed(e.to_string()))?;
        if self.switch.session() != Some(session) {
            // Verified on a session that is gone: verify again on the next.
            return Ok(false);
        }
        // Read before the removal: the bridge's controllers are what makes it flush.
        let flushes = has_controllers(&self.ovsdb, &self.bridge);
        if let Err(error) = clear_key(&self.ovsdb).await {
            if key_set(&self.ovsdb) {
                return Err(Skip::Failed(format!(
                    "removing other_config:flow-restore-wait: {error}"
                )));
            }
            tracing::warn!(%error, "removed other_config:flow-restore-wait, but ovs-vswitchd was not seen applying it");
        }
        tracing::info!(
            session,
            "the desired table is on the switch: removed other_config:flow-restore-wait"
        );
        if flushes {
            self.reinstall_after_flush().await;
        }
        Ok(true)
    }

    /// The bridge has Controller rows, which ovs-vswitchd configured only now that the key is
    /// gone, flushing every flow (a bridge that goes from no controller to some is flushed):
    /// installs the table again on whatever session is up, without waiting for the bridge to
    /// dial in. A failure is left to the resync of the next session (the bridge's own). On a
    /// local `ptcp:` controller the bridge's session usually wins (it is up within a
    /// millisecond of the flush: `make bench`); this covers a controller connection that is
    /// slower to come up (TLS, another host, ovs-vswitchd's own reconnect backoff).
    async fn reinstall_after_flush(&self) {
        tracing::info!(
            bridge = %self.bridge,
            "ovs-vswitchd flushed the bridge's flows as it configured its controllers (the key kept them unconfigured): installing the table again"
        );
        let Some(requests) = self.requests.upgrade() else {
            return;
        };
        let result = request::call(&requests, |reply| Request::Resync {
            force: false,
            reply,
        })
        .await;
        match result {
            Ok(()) => tracing::info!(bridge = %self.bridge, "the table is back after the flush"),
            // Usually the bridge dialled in within a millisecond of the flush and its session
            // replaced the one this ran on: that session's connect resync installs the table.
            Err(error) => {
                tracing::debug!(%error, "installing the table after the flush failed: the next session's resync installs it")
            }
        }
    }
}

enum Skip {
    NotSetUp,
    Failed(String),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_management_socket_sits_beside_a_unix_ovsdb_socket() {
        assert_eq!(
            management_target("unix:/tmp/ovs/db.sock", "br0"),
            "unix:/tmp/ovs/br0.mgmt"
        );
        assert_eq!(
            management_target("unix:/run/openvswitch/db.sock", "br1"),
            "unix:/run/openvswitch/br1.mgmt"
        );
        assert_eq!(
            management_target("tcp:127.0.0.1:6640", "br0"),
            "unix:/run/openvswitch/br0.mgmt"
        );
    }
}
