//! Transaction ids: one counter per `Switch`, shared by every task and every connection.

use std::sync::atomic::{AtomicU32, Ordering};

/// Hands out blocks of consecutive xids. 0 is never used (OVS sends its own asynchronous
/// messages with xid 0) and a block never wraps, so a transaction's replies can be routed by
/// one range check.
#[derive(Debug)]
pub(crate) struct XidAllocator(AtomicU32);

impl XidAllocator {
    pub(crate) fn new() -> XidAllocator {
        XidAllocator(AtomicU32::new(1))
    }

    pub(crate) fn next(&self) -> u32 {
        self.block(1)
    }

    /// The first of `count` (>= 1) consecutive xids.
    pub(crate) fn block(&self, count: u32) -> u32 {
        let count = count.max(1);
        let mut current = self.0.load(Ordering::Relaxed);
        loop {
            let start = match current.checked_add(count) {
                Some(_) if current != 0 => current,
                _ => 1,
            };
            // start + count cannot overflow for start = 1 unless count = u32::MAX, which the
            // callers' bounds (bundle limit) rule out; saturate rather than wrap regardless.
            let after = start.saturating_add(count);
            match self
                .0
                .compare_exchange_weak(current, after, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => return start,
                Err(actual) => current = actual,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_are_consecutive_and_disjoint() {
        let xids = XidAllocator::new();
        assert_eq!(xids.next(), 1);
        assert_eq!(xids.block(10), 2);
        assert_eq!(xids.next(), 12);
    }

    #[test]
    fn never_wraps_inside_a_block_and_skips_zero() {
        let xids = XidAllocator(AtomicU32::new(u32::MAX - 3));
        assert_eq!(xids.block(10), 1);
        assert_eq!(xids.next(), 11);
        let xids = XidAllocator(AtomicU32::new(u32::MAX - 1));
        assert_eq!(xids.next(), u32::MAX - 1);
        assert_eq!(xids.next(), 1);
    }

    #[test]
    fn concurrent_blocks_do_not_overlap() {
        let xids = std::sync::Arc::new(XidAllocator::new());
        let handles: Vec<_> = (0..4)
            .map(|_| {
                let xids = xids.clone();
                std::thread::spawn(move || (0..1000).map(|_| xids.block(3)).collect::<Vec<_>>())
            })
            .collect();
        let mut starts: Vec<u32> = handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect();
        starts.sort_unstable();
        assert!(starts.windows(2).all(|w| w[1] - w[0] >= 3));
    }
}
