//! What the audit log counted, for /metrics and `ofnode status`: updated without locks by the
//! audit task, the line writer and the connection (its packet-in tap).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use crate::sdn::audit::Verdict;

/// Where events were lost (the `where` label of `ofnode_audit_dropped_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DropPlace {
    /// The connection's packet-in tap was full (the audit task fell behind).
    SwitchChannel,
    /// The one-second dedup window or the queue of lines to write was full.
    Queue,
    /// The file could not be written.
    File,
    /// The syslog socket refused the message (absent, or its buffer full).
    Syslog,
}

impl DropPlace {
    pub const ALL: [DropPlace; 4] = [
        DropPlace::SwitchChannel,
        DropPlace::Queue,
        DropPlace::File,
        DropPlace::Syslog,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DropPlace::SwitchChannel => "switch_channel",
            DropPlace::Queue => "queue",
            DropPlace::File => "file",
            DropPlace::Syslog => "syslog",
        }
    }
}

#[derive(Debug, Default)]
pub struct AuditCounters {
    /// Packet-ins of audited rules, by verdict (allow, deny, pass).
    events: [AtomicU64; 3],
    /// Lines written (to the file, or to syslog when there is no file).
    lines: AtomicU64,
    queue_drops: AtomicU64,
    file_drops: AtomicU64,
    syslog_drops: AtomicU64,
    /// Packet-ins whose packet (or userdata) could not be read.
    bad_packets: AtomicU64,
    /// The connection's count of packet-ins its tap dropped, once the tap is taken.
    switch_channel: Mutex<Option<Arc<AtomicU64>>>,
}

fn verdict_index(verdict: Verdict) -> usize {
    match verdict {
        Verdict::Allow => 0,
        Verdict::Deny => 1,
        Verdict::Pass => 2,
    }
}

impl AuditCounters {
    pub fn event(&self, verdict: Verdict) {
        self.events[verdict_index(verdict)].fetch_add(1, Ordering::Relaxed);
    }

    pub fn events(&self, verdict: Verdict) -> u64 {
        self.events[verdict_index(verdict)].load(Ordering::Relaxed)
    }

    pub fn line(&self) {
        self.lines.fetch_add(1, Ordering::Relaxed);
    }

    pub fn lines(&self) -> u64 {
        self.lines.load(Ordering::Relaxed)
    }

    pub fn bad_packet(&self) {
        self.bad_packets.fetch_add(1, Ordering::Relaxed);
    }

    pub fn bad_packets(&self) -> u64 {
        self.bad_packets.load(Ordering::Relaxed)
    }

    pub fn dropped(&self, place: DropPlace) {
        let counter = match place {
            DropPlace::Queue => &self.queue_drops,
            DropPlace::File => &self.file_drops,
            DropPlace::Syslog => &self.syslog_drops,
            // Counted by the connection itself.
            DropPlace::SwitchChannel => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn drops(&self, place: DropPlace) -> u64 {
        let counter = match place {
            DropPlace::Queue => &self.queue_drops,
            DropPlace::File => &self.file_drops,
            DropPlace::Syslog => &self.syslog_drops,
            DropPlace::SwitchChannel => {
                let tap = self
                    .switch_channel
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                return tap.as_ref().map_or(0, |c| c.load(Ordering::Relaxed));
            }
        };
        counter.load(Ordering::Relaxed)
    }

    /// Follows the connection's count of packet-ins its tap dropped.
    pub fn follow_switch_channel(&self, dropped: Arc<AtomicU64>) {
        *self
            .switch_channel
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(dropped);
    }

    /// The status section; `log` says where the lines go.
    pub fn status(&self, log: String) -> AuditStatus {
        AuditStatus {
            log,
            events_allow: self.events(Verdict::Allow),
            events_deny: self.events(Verdict::Deny),
            events_pass: self.events(Verdict::Pass),
            lines: self.lines(),
            dropped_switch_channel: self.drops(DropPlace::SwitchChannel),
            dropped_queue: self.drops(DropPlace::Queue),
            dropped_file: self.drops(DropPlace::File),
            dropped_syslog: self.drops(DropPlace::Syslog),
            bad_packets: self.bad_packets(),
        }
    }
}

/// The policy audit log in `ofnode status`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuditStatus {
    /// Where lines go (file, format, rotation, syslog), or why nowhere.
    pub log: String,
    pub events_allow: u64,
    pub events_deny: u64,
    pub events_pass: u64,
    pub lines: u64,
    pub dropped_switch_channel: u64,
    pub dropped_queue: u64,
    pub dropped_file: u64,
    pub dropped_syslog: u64,
    pub bad_packets: u64,
}
