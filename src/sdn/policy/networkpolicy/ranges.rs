//! Ranges cut into prefixes: an ipBlock minus its excepts as CIDRs, a port range as
//! value/mask pairs. Both are the same aligned-block split of an integer interval.

use std::net::Ipv4Addr;

use crate::value::Cidr;

/// The aligned blocks `(start, size_log2)` covering `first..=last` exactly, over `bits` bits.
fn aligned_blocks(first: u64, last: u64, bits: u32) -> Vec<(u64, u32)> {
    let mut out = Vec::new();
    let mut start = first;
    while start <= last {
        let mut k = 0;
        while k < bits && start % (1u64 << (k + 1)) == 0 && start + (1u64 << (k + 1)) - 1 <= last {
            k += 1;
        }
        out.push((start, k));
        start += 1u64 << k;
    }
    out
}

/// `cidr` minus every network of `except`, as the fewest CIDRs (never drop flows).
pub fn subtract(cidr: Cidr, except: &[Cidr]) -> Vec<Cidr> {
    let range = |c: &Cidr| {
        let start = u64::from(u32::from(c.network()));
        (start, start + (1u64 << (32 - u32::from(c.prefix()))) - 1)
    };
    let mut pieces = vec![range(&cidr)];
    for e in except {
        let (lo, hi) = range(e);
        pieces = pieces
            .into_iter()
            .flat_map(|(a, b)| {
                let mut left = Vec::new();
                if lo > a {
                    left.push((a, (lo - 1).min(b)));
                }
                if hi < b {
                    left.push(((hi + 1).max(a), b));
                }
                if hi < a || lo > b {
                    left = vec![(a, b)];
                }
                left
            })
            .collect();
    }
    pieces
        .into_iter()
        .flat_map(|(a, b)| aligned_blocks(a, b, 32))
        .filter_map(|(start, k)| {
            let addr = Ipv4Addr::from(u32::try_from(start).ok()?);
            Cidr::new(addr, u8::try_from(32 - k).ok()?).ok()
        })
        .collect()
}

/// `first..=last` as `(value, mask)` pairs for a 16-bit port field (mask 0xffff = exact).
pub fn port_masks(first: u16, last: u16) -> Vec<(u16, u16)> {
    aligned_blocks(u64::from(first), u64::from(last), 16)
        .into_iter()
        .map(|(start, k)| {
            let mask = !((1u32 << k) - 1) & 0xffff;
            (start as u16, mask as u16)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cidrs(list: &[&str]) -> Vec<Cidr> {
        list.iter().map(|c| c.parse().unwrap()).collect()
    }

    #[test]
    fn except_is_subtraction() {
        let got = subtract("10.0.0.0/24".parse().unwrap(), &cidrs(&["10.0.0.5/32"]));
        assert_eq!(
            got,
            cidrs(&[
                "10.0.0.0/30",
                "10.0.0.4/32",
                "10.0.0.6/31",
                "10.0.0.8/29",
                "10.0.0.16/28",
                "10.0.0.32/27",
                "10.0.0.64/26",
                "10.0.0.128/25"
            ])
        );
        assert!(subtract(
            "10.0.0.0/24".parse().unwrap(),
            &cidrs(&["10.0.0.0/25", "10.0.0.128/25"])
        )
        .is_empty());
        assert_eq!(
            subtract("0.0.0.0/0".parse().unwrap(), &[]),
            cidrs(&["0.0.0.0/0"])
        );
        assert_eq!(
            subtract("0.0.0.0/0".parse().unwrap(), &cidrs(&["128.0.0.0/1"])),
            cidrs(&["0.0.0.0/1"])
        );
    }

    #[test]
    fn port_ranges_at_their_boundaries() {
        assert_eq!(port_masks(1, 1), vec![(1, 0xffff)]);
        assert_eq!(port_masks(80, 81), vec![(80, 0xfffe)]);
        assert_eq!(
            port_masks(81, 90),
            vec![
                (81, 0xffff),
                (82, 0xfffe),
                (84, 0xfffc),
                (88, 0xfffe),
                (90, 0xffff)
            ]
        );
        assert_eq!(
            port_masks(1024, 65535),
            vec![
                (1024, 0xfc00),
                (2048, 0xf800),
                (4096, 0xf000),
                (8192, 0xe000),
                (16384, 0xc000),
                (32768, 0x8000)
            ]
        );
        // Every port of 1..=65535 is covered exactly once, in at most 30 pairs.
        let masks = port_masks(1, 65535);
        assert!(masks.len() <= 30);
        let covered: u32 = masks.iter().map(|(_, m)| u32::from(!m) + 1).sum();
        assert_eq!(covered, 65535);
    }
}
