//! Which subnet a node asks for: the one it had, else the first free one of the cluster network.

use std::collections::BTreeSet;

use ipnet::Ipv4Net;

use super::error::ClusterError;
use crate::value::Cidr;

/// The subnet this node should try to lease, given the subnets other nodes hold.
pub fn choose(
    network: Cidr,
    len: u8,
    taken: &BTreeSet<Cidr>,
    remembered: Option<Cidr>,
) -> Result<Cidr, ClusterError> {
    if let Some(subnet) = remembered.filter(|s| fits(network, len, *s) && !taken.contains(s)) {
        return Ok(subnet);
    }
    first_free(network, len, taken)
}

/// True when `subnet` is one of the cluster network's subnets of length `len`.
pub fn fits(network: Cidr, len: u8, subnet: Cidr) -> bool {
    subnet.prefix() == len && network.contains(subnet.addr()) && len >= network.prefix()
}

/// The lowest subnet of length `len` in `network` that nobody holds.
pub fn first_free(network: Cidr, len: u8, taken: &BTreeSet<Cidr>) -> Result<Cidr, ClusterError> {
    let exhausted = || ClusterError::Exhausted {
        network,
        len,
        total: subnet_count(network, len),
    };
    let net = Ipv4Net::from(network);
    let subnets = net.subnets(len).map_err(|_| exhausted())?;
    subnets
        .map(Cidr::containing)
        .find(|s| !taken.contains(s))
        .ok_or_else(exhausted)
}

/// How many subnets of length `len` the network has.
pub fn subnet_count(network: Cidr, len: u8) -> u64 {
    len.checked_sub(network.prefix())
        .and_then(|bits| 1u64.checked_shl(u32::from(bits)))
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidr(text: &str) -> Cidr {
        text.parse().unwrap()
    }

    fn set(items: &[&str]) -> BTreeSet<Cidr> {
        items.iter().map(|s| cidr(s)).collect()
    }

    #[test]
    fn first_free_skips_taken_subnets_in_order() {
        let net = cidr("10.128.0.0/14");
        assert_eq!(
            first_free(net, 23, &set(&[])).unwrap(),
            cidr("10.128.0.0/23")
        );
        let taken = set(&["10.128.0.0/23", "10.128.2.0/23", "10.128.6.0/23"]);
        assert_eq!(first_free(net, 23, &taken).unwrap(), cidr("10.128.4.0/23"));
        assert_eq!(subnet_count(net, 23), 512);
    }

    #[test]
    fn the_remembered_subnet_wins_while_it_is_free_and_fits() {
        let net = cidr("10.128.0.0/14");
        let mine = Some(cidr("10.128.8.0/23"));
        assert_eq!(
            choose(net, 23, &set(&[]), mine).unwrap(),
            cidr("10.128.8.0/23")
        );
        let taken = set(&["10.128.8.0/23"]);
        assert_eq!(
            choose(net, 23, &taken, mine).unwrap(),
            cidr("10.128.0.0/23")
        );
        // From another configuration: a different length, or outside the network.
        for stale in ["10.128.8.0/24", "10.200.0.0/23"] {
            assert_eq!(
                choose(net, 23, &set(&[]), Some(cidr(stale))).unwrap(),
                cidr("10.128.0.0/23"),
                "{stale}"
            );
        }
    }

    #[test]
    fn an_exhausted_network_says_so() {
        let net = cidr("10.128.0.0/22");
        let taken = set(&["10.128.0.0/23", "10.128.2.0/23"]);
        let err = first_free(net, 23, &taken).unwrap_err().to_string();
        assert_eq!(
            err,
            "cluster network 10.128.0.0/22 is exhausted: all 2 /23 subnets are leased by other nodes"
        );
        assert!(choose(net, 23, &taken, Some(cidr("10.128.2.0/23"))).is_err());
    }
}
