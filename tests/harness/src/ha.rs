//! High availability: `ofnode run` daemons with `[ha]` sections, two peers on one private
//! Open vSwitch, both controllers of br0 (as `tests/ha_failover.rs` and `benches/faults.rs`
//! run them).

use std::path::Path;
use std::time::Duration;

use crate::daemon::Daemon;
use crate::ovs::Ovs;
use crate::process::CommandError;

/// Peer `id`'s OpenFlow port is `PORTS[id - 1]`, on the namespace's loopback.
pub const PORTS: [u16; 2] = [6653, 6654];
/// The `[ha]` timing of the peers: the active daemon's heartbeat period and the silence after
/// which a standby takes over (the daemon's defaults).
pub const HEARTBEAT_MS: u64 = 200;
pub const TAKEOVER_MS: u64 = 1000;

/// Every peer's controller target, as the `controllers` list of an `[ha]` section.
fn controllers() -> String {
    PORTS
        .iter()
        .map(|p| format!("\"tcp:127.0.0.1:{p}\""))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Starts peer `id` (1 or 2) of `binary` on `ovs`: API, state and log under `ovs.dir()/ofnode<id>`,
/// passive OpenFlow on its port, no host network.
pub fn start_peer(ovs: &Ovs, binary: &Path, id: u16) -> Result<Daemon, CommandError> {
    let port = usize::from(id)
        .checked_sub(1)
        .and_then(|i| PORTS.get(i))
        .ok_or_else(|| CommandError::Other(format!("HA peer id {id}: 1 or 2")))?;
    let name = format!("ofnode{id}");
    let config = ovs.dir().join(format!("{name}.toml"));
    let text = format!(
        "[ha]\nid = {id}\ncontrollers = [{}]\nheartbeat_ms = {HEARTBEAT_MS}\ntakeover_ms = {TAKEOVER_MS}\n",
        controllers()
    );
    std::fs::write(&config, text)
        .map_err(|e| CommandError::Other(format!("write {}: {e}", config.display())))?;
    let openflow = format!("ptcp:{port}:127.0.0.1");
    let config = config.display().to_string();
    Daemon::start_named(
        ovs,
        binary,
        &name,
        &openflow,
        &["--config", &config, "--no-host-network"],
    )
}

/// Waits until `daemon` reports HA role `role` ("active", "standby"); how long that took.
pub fn wait_role(daemon: &Daemon, role: &str, limit: Duration) -> Result<Duration, CommandError> {
    daemon
        .wait_status(limit, &format!("HA role {role}"), |s| {
            s["ha"]["role"] == role
        })
        .map(|(_, took)| took)
}

/// Waits until `daemon` is a standby that hears peer `active` (its heartbeats through the
/// switch).
pub fn wait_hears(daemon: &Daemon, active: u16, limit: Duration) -> Result<(), CommandError> {
    daemon
        .wait_status(limit, &format!("standby hearing peer {active}"), |s| {
            s["ha"]["role"] == "standby" && s["ha"]["active_peer"] == active
        })
        .map(|_| ())
}
