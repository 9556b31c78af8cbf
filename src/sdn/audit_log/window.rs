//! The dedup window: identical events (same rule and verdict, protocol, source and
//! destination address and port) seen within one window — one second, flushed by the audit
//! task's tick — become one line with their count. The window holds at most `capacity`
//! distinct events; an event that would make one more is refused (the caller counts it).

use std::collections::HashMap;
use std::time::SystemTime;

use super::packet::FiveTuple;
use crate::sdn::audit::RuleRef;

/// One packet-in, decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Event {
    pub rule: RuleRef,
    pub tuple: FiveTuple,
}

/// Identical events folded: when the first was seen, and how many there were.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Folded {
    pub event: Event,
    pub first_seen: SystemTime,
    pub count: u64,
}

#[derive(Debug)]
pub struct Window {
    /// Index into `folded` by event.
    index: HashMap<Event, usize>,
    /// In the order first seen.
    folded: Vec<Folded>,
    capacity: usize,
}

impl Window {
    pub fn new(capacity: usize) -> Window {
        Window {
            index: HashMap::new(),
            folded: Vec::new(),
            capacity: capacity.max(1),
        }
    }

    /// Adds an event seen at `now`; false when it is new and the window is full.
    pub fn add(&mut self, event: Event, now: SystemTime) -> bool {
        if let Some(&at) = self.index.get(&event) {
            self.folded[at].count += 1;
            return true;
        }
        if self.folded.len() >= self.capacity {
            return false;
        }
        self.index.insert(event, self.folded.len());
        self.folded.push(Folded {
            event,
            first_seen: now,
            count: 1,
        });
        true
    }

    pub fn is_empty(&self) -> bool {
        self.folded.is_empty()
    }

    /// Everything folded so far, in the order first seen; the window starts empty again.
    pub fn take(&mut self) -> Vec<Folded> {
        self.index.clear();
        std::mem::take(&mut self.folded)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::audit::{AuditTier, Dir, Verdict};
    use crate::sdn::audit_log::packet::{parse, tests::tcp};
    use std::time::Duration;

    fn event(id: u32, sport: u16) -> Event {
        Event {
            rule: RuleRef {
                tier: AuditTier::NetworkPolicy,
                dir: Dir::Ingress,
                verdict: Verdict::Deny,
                id,
            },
            tuple: parse(&tcp(sport, 80)).unwrap(),
        }
    }

    #[test]
    fn identical_events_fold_into_one_with_their_count() {
        let mut w = Window::new(10);
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(100);
        for i in 0..50 {
            assert!(w.add(event(7, 1000), t0 + Duration::from_millis(i)));
        }
        assert!(w.add(event(7, 1001), t0));
        assert!(w.add(event(8, 1000), t0));
        let folded = w.take();
        assert_eq!(folded.len(), 3);
        assert_eq!(folded[0].count, 50);
        assert_eq!(folded[0].first_seen, t0, "the time of the first of them");
        assert_eq!((folded[1].count, folded[2].count), (1, 1));
        assert!(
            w.is_empty() && w.take().is_empty(),
            "a new window after take"
        );
    }

    #[test]
    fn a_full_window_refuses_new_events_but_still_counts_known_ones() {
        let mut w = Window::new(2);
        let now = SystemTime::now();
        assert!(w.add(event(1, 1), now));
        assert!(w.add(event(2, 1), now));
        assert!(!w.add(event(3, 1), now));
        assert!(w.add(event(1, 1), now));
        let folded = w.take();
        assert_eq!(folded.len(), 2);
        assert_eq!(folded[0].count, 2);
    }
}
