//! Host subnets: the cluster network cut into blocks of the host subnet's size, and how many
//! existing subnets cover each block. A block is free only while nothing covers it, so a
//! subnet someone else made (of any size, even overlapping another) is never handed out again.
//!
//! Blocks are handed out from a cursor that moves past each one given (as openshift-sdn's
//! allocator did): a subnet freed by a deleted node is the last to be given again, which leaves
//! every node time to forget its routes to it.

pub use crate::cluster::subnet::subnet_count;
use crate::value::Cidr;

/// The cluster network in blocks of `/len`.
#[derive(Debug, Clone)]
pub struct SubnetSpace {
    network: Cidr,
    len: u8,
    /// How many existing subnets cover each block.
    covered: Vec<u32>,
    cursor: usize,
}

impl SubnetSpace {
    /// The settings checked that `len` is at least the network's prefix and that the blocks
    /// are not too many to count.
    pub fn new(network: Cidr, len: u8) -> SubnetSpace {
        let blocks = subnet_count(network, len);
        SubnetSpace {
            network,
            len,
            covered: vec![0; usize::try_from(blocks).unwrap_or(0)],
            cursor: 0,
        }
    }

    pub fn network(&self) -> Cidr {
        self.network
    }

    /// The prefix length of its subnets.
    pub fn subnet_len(&self) -> u8 {
        self.len
    }

    pub fn capacity(&self) -> usize {
        self.covered.len()
    }

    /// Blocks covered by at least one subnet.
    pub fn used(&self) -> usize {
        self.covered.iter().filter(|n| **n > 0).count()
    }

    /// Counts `subnet` as covering its blocks (none when it lies outside the network).
    pub fn cover(&mut self, subnet: Cidr) {
        for block in self.blocks_of(subnet) {
            self.covered[block] += 1;
        }
    }

    /// Undoes one [`SubnetSpace::cover`] of `subnet`.
    pub fn uncover(&mut self, subnet: Cidr) {
        for block in self.blocks_of(subnet) {
            self.covered[block] = self.covered[block].saturating_sub(1);
        }
    }

    /// True when `subnet` lies wholly inside the cluster network.
    pub fn holds(&self, subnet: Cidr) -> bool {
        subnet.prefix() >= self.network.prefix() && self.network.contains(subnet.addr())
    }

    /// Starts handing out after the highest covered block (a rebuilt state goes on where the
    /// previous leader stopped, rather than refilling the holes deletions left).
    pub fn resume_after_highest(&mut self) {
        self.cursor = self
            .covered
            .iter()
            .rposition(|n| *n > 0)
            .map_or(0, |last| (last + 1) % self.covered.len().max(1));
    }

    /// The next free block at or after the cursor (wrapping), or None when all are covered.
    /// It is not taken: the caller covers it once it reserves it.
    pub fn next_free(&mut self) -> Option<Cidr> {
        let blocks = self.covered.len();
        let found = (0..blocks)
            .map(|step| (self.cursor + step) % blocks)
            .find(|block| self.covered[*block] == 0)?;
        self.cursor = (found + 1) % blocks;
        Some(self.block(found))
    }

    fn block(&self, index: usize) -> Cidr {
        let shift = 32 - u32::from(self.len);
        let offset = u32::try_from(index).unwrap_or(0) << shift;
        let addr = u32::from(self.network.addr()).wrapping_add(offset);
        Cidr::new(addr.into(), self.len).unwrap_or(self.network)
    }

    /// The indices of the blocks `subnet` shares any address with.
    fn blocks_of(&self, subnet: Cidr) -> std::ops::Range<usize> {
        if !subnet.overlaps(&self.network) || self.covered.is_empty() {
            return 0..0;
        }
        let start = u32::from(self.network.addr());
        let lo = u32::from(subnet.addr()).max(start);
        let hi = last_address(subnet).min(last_address(self.network));
        let shift = 32 - u32::from(self.len);
        let index = |addr: u32| usize::try_from((addr - start) >> shift).unwrap_or(0);
        index(lo)..index(hi) + 1
    }
}

/// The highest address of `cidr`.
pub fn last_address(cidr: Cidr) -> u32 {
    let host_bits = 32 - u32::from(cidr.prefix());
    let span = if host_bits == 32 {
        u32::MAX
    } else {
        (1u32 << host_bits) - 1
    };
    u32::from(cidr.addr()) | span
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap()
    }

    #[test]
    fn hands_out_blocks_in_order_from_a_cursor_and_never_a_covered_one() {
        let mut space = SubnetSpace::new(cidr("10.128.0.0/14"), 23);
        assert_eq!(space.capacity(), 512);
        let first = space.next_free().unwrap();
        assert_eq!(first, cidr("10.128.0.0/23"));
        space.cover(first);
        // Someone else's /24 inside the second block makes it taken too.
        space.cover(cidr("10.128.3.0/24"));
        assert_eq!(space.next_free().unwrap(), cidr("10.128.4.0/23"));
        space.cover(cidr("10.128.4.0/23"));
        // Freed blocks come back only after the cursor went round.
        space.uncover(first);
        assert_eq!(space.next_free().unwrap(), cidr("10.128.6.0/23"));
        assert_eq!(space.used(), 2);
    }

    #[test]
    fn a_full_network_says_none_and_a_freed_block_comes_back() {
        let mut space = SubnetSpace::new(cidr("10.128.0.0/22"), 23);
        assert_eq!(space.capacity(), 2);
        for _ in 0..2 {
            let s = space.next_free().unwrap();
            space.cover(s);
        }
        assert_eq!(space.next_free(), None);
        space.uncover(cidr("10.128.2.0/23"));
        assert_eq!(space.next_free(), Some(cidr("10.128.2.0/23")));
    }

    #[test]
    fn subnets_wider_than_a_block_or_reaching_outside_cover_only_what_they_share() {
        let mut space = SubnetSpace::new(cidr("10.128.0.0/22"), 24);
        space.cover(cidr("10.0.0.0/8"));
        assert_eq!(space.used(), 4);
        space.uncover(cidr("10.0.0.0/8"));
        space.cover(cidr("192.0.2.0/24"));
        assert_eq!(space.used(), 0);
        space.cover(cidr("10.128.2.0/23"));
        assert_eq!(space.used(), 2);
        assert!(space.holds(cidr("10.128.2.0/23")));
        assert!(!space.holds(cidr("10.0.0.0/8")));
    }

    #[test]
    fn a_rebuilt_space_resumes_after_the_highest_subnet() {
        let mut space = SubnetSpace::new(cidr("10.128.0.0/14"), 23);
        space.cover(cidr("10.128.8.0/23"));
        space.resume_after_highest();
        assert_eq!(space.next_free().unwrap(), cidr("10.128.10.0/23"));
    }
}
