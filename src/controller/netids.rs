//! VNIDs (NetNamespace netids) as openshift-sdn's master numbered them: 0 is the global VNID
//! (its admin namespaces), 1 to 9 are reserved, and namespaces get 10 to 16777215 (24 bits,
//! VXLAN's VNI). A netid is in use while any NetNamespace holds it (multitenant projects that
//! were joined share one), so it is counted, and handed out again only when no one holds it —
//! and, from a cursor that moves past every netid given, only after all the others were.

use std::collections::HashMap;

use crate::value::Vnid;

/// The global VNID: pods of such namespaces reach and are reached by all (multitenant mode).
pub const GLOBAL: u32 = Vnid::GLOBAL.get();
/// The first netid a namespace is given; 1 to 9 are reserved, as in openshift-sdn.
pub const FIRST: u32 = 10;
/// The last: VXLAN's VNI is 24 bits.
pub const LAST: u32 = Vnid::MAX;

/// Which netids are held, and how many NetNamespaces hold each.
#[derive(Debug, Clone)]
pub struct Netids {
    holders: HashMap<u32, u32>,
    cursor: u32,
}

impl Default for Netids {
    fn default() -> Self {
        Netids {
            holders: HashMap::new(),
            cursor: FIRST,
        }
    }
}

impl Netids {
    pub fn hold(&mut self, netid: u32) {
        *self.holders.entry(netid).or_default() += 1;
    }

    pub fn release(&mut self, netid: u32) {
        if let Some(n) = self.holders.get_mut(&netid) {
            *n -= 1;
            if *n == 0 {
                self.holders.remove(&netid);
            }
        }
    }

    /// How many NetNamespaces hold `netid`.
    pub fn holders(&self, netid: u32) -> u32 {
        self.holders.get(&netid).copied().unwrap_or(0)
    }

    /// Netids from [`FIRST`] on that are held.
    pub fn allocated(&self) -> usize {
        self.holders.keys().filter(|n| **n >= FIRST).count()
    }

    /// Goes on after the highest netid held (a rebuilt state continues the previous leader's
    /// sequence instead of refilling the holes deletions left).
    pub fn resume_after_highest(&mut self) {
        let highest = self.holders.keys().copied().filter(|n| *n >= FIRST).max();
        self.cursor = match highest {
            Some(n) if n < LAST => n + 1,
            _ => FIRST,
        };
    }

    /// The next netid no one holds, at or after the cursor (wrapping to [`FIRST`]); None when
    /// all 16,777,206 are held. It is not held until the caller holds it.
    pub fn next_free(&mut self) -> Option<u32> {
        let span = LAST - FIRST + 1;
        let found = (0..span)
            .map(|step| FIRST + (self.cursor - FIRST + step) % span)
            .find(|netid| !self.holders.contains_key(netid))?;
        self.cursor = if found == LAST { FIRST } else { found + 1 };
        Some(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hands_out_from_ten_skips_held_ones_and_reuses_only_after_going_round() {
        let mut ids = Netids::default();
        assert_eq!(ids.next_free(), Some(10));
        ids.hold(10);
        ids.hold(11);
        assert_eq!(ids.next_free(), Some(12));
        ids.hold(12);
        ids.release(10);
        assert_eq!(ids.next_free(), Some(13));
        assert_eq!(ids.allocated(), 2);
    }

    #[test]
    fn a_shared_netid_stays_held_until_its_last_holder_goes() {
        let mut ids = Netids::default();
        ids.hold(10);
        ids.hold(10);
        ids.release(10);
        assert_eq!(ids.holders(10), 1);
        ids.resume_after_highest();
        assert_eq!(ids.next_free(), Some(11));
        ids.release(10);
        assert_eq!(ids.holders(10), 0);
    }

    #[test]
    fn the_global_and_reserved_netids_are_never_handed_out() {
        let mut ids = Netids::default();
        ids.hold(GLOBAL);
        ids.hold(5);
        assert_eq!(ids.allocated(), 0);
        ids.resume_after_highest();
        assert_eq!(ids.next_free(), Some(FIRST));
    }

    #[test]
    fn wraps_at_the_top_of_24_bits() {
        let mut ids = Netids::default();
        ids.hold(LAST);
        ids.resume_after_highest();
        assert_eq!(ids.next_free(), Some(FIRST));
        ids.hold(LAST - 1);
        ids.release(LAST);
        ids.resume_after_highest();
        assert_eq!(ids.next_free(), Some(LAST));
        assert_eq!(ids.next_free(), Some(FIRST));
    }
}
