//! Known Open vSwitch bugs that keep ofnode's flows from doing what they say, told from what
//! OVSDB holds: the version ovs-vswitchd writes into `Open_vSwitch.ovs_version` and the
//! bridge's datapath type.
//!
//! The stale-megaflow bug: dpif-netdev (the userspace datapath) before "dpif-netdev: Fix
//! dpif_netdev_flow_put" (upstream 21410ff80) modified the datapath flow it found by key
//! lookup rather than by UFID. After an OpenFlow flow change, overlapping megaflows exist and
//! the revalidator can update the wrong one: the stale one keeps its old actions for as long
//! as traffic keeps hitting it. The kernel datapath (`system`) does not have it. On Debian 12's
//! 3.1.0 the NetworkPolicy e2e test saw a denied pair connect seconds after the change, its SYN
//! megaflow still allowing after two full revalidator rounds (`revalidator/wait`), in about one
//! run in six; `dpctl/del-flows` after each change (the harness's `settle_datapaths`) cleared it.

/// The first release of each series with the fix (backports: a74b7dfb9 in 2.17.8, bd3a2e812
/// in 3.0.5, 9c600710b in 3.1.3). Series after the last have it; series before the first
/// never got it.
const STALE_MEGAFLOWS_FIXED_IN: [OvsVersion; 4] = [
    OvsVersion::new(2, 17, 8),
    OvsVersion::new(3, 0, 5),
    OvsVersion::new(3, 1, 3),
    OvsVersion::new(3, 2, 0),
];

/// The datapath type served by dpif-netdev (ofnode's config allows only it and `system`).
const USERSPACE_DATAPATH: &str = "netdev";

/// An upstream Open vSwitch release, `major.minor.patch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct OvsVersion {
    major: u32,
    minor: u32,
    patch: u32,
}

impl OvsVersion {
    const fn new(major: u32, minor: u32, patch: u32) -> OvsVersion {
        OvsVersion {
            major,
            minor,
            patch,
        }
    }

    /// `"3.1.0"`, tolerating what may follow the patch number (`"3.1.0-2+deb12u1"`,
    /// `"3.1.90.1"`). `None` when the three numbers are not there.
    fn parse(text: &str) -> Option<OvsVersion> {
        let mut parts = text.trim().splitn(3, '.');
        let major = number(parts.next()?)?;
        let minor = number(parts.next()?)?;
        let rest = parts.next()?;
        let end = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let patch = number(&rest[..end])?;
        Some(OvsVersion::new(major, minor, patch))
    }

    fn has_stale_megaflow_fix(self) -> bool {
        let series = STALE_MEGAFLOWS_FIXED_IN
            .iter()
            .find(|fixed| (fixed.major, fixed.minor) == (self.major, self.minor));
        match series {
            Some(fixed) => self >= *fixed,
            // A series without a fixed release has the fix only when it came after them all.
            None => STALE_MEGAFLOWS_FIXED_IN.iter().all(|fixed| self > *fixed),
        }
    }
}

/// Plain decimal digits only (`u32::from_str` would also take a leading `+`).
fn number(text: &str) -> Option<u32> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Whether a bridge of `datapath_type` on ovs-vswitchd `ovs_version` has the stale-megaflow
/// bug. A version that does not parse counts as not affected: no alarm without evidence.
pub fn has_stale_megaflow_bug(ovs_version: &str, datapath_type: &str) -> bool {
    datapath_type == USERSPACE_DATAPATH
        && OvsVersion::parse(ovs_version).is_some_and(|v| !v.has_stale_megaflow_fix())
}

/// What the operator is told when the bug applies (the daemon's log and `ofnode status`).
pub fn stale_megaflow_warning(ovs_version: &str, datapath_type: &str) -> Option<String> {
    let ovs_version = ovs_version.trim();
    has_stale_megaflow_bug(ovs_version, datapath_type).then(|| {
        format!(
            "Open vSwitch {ovs_version} with datapath type {datapath_type} has the dpif-netdev \
             stale-megaflow bug: a flow change may not reach datapath flows that traffic keeps \
             hitting; NetworkPolicy changes can take effect late. Upgrade Open vSwitch to \
             2.17.8, 3.0.5, 3.1.3, 3.2.0 or later; until then `ovs-appctl dpctl/del-flows` \
             after a change drops the stale datapath flows"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_series_is_affected_up_to_its_fix() {
        let table = [
            // (ovs_version, affected on netdev)
            ("2.13.0", true),
            ("2.17.0", true),
            ("2.17.7", true),
            ("2.17.8", false),
            ("2.17.9", false),
            ("3.0.0", true),
            ("3.0.4", true),
            ("3.0.5", false),
            ("3.1.0", true),
            ("3.1.2", true),
            ("3.1.3", false),
            ("3.2.0", false),
            ("3.3.4", false),
            ("4.0.0", false),
        ];
        for (version, affected) in table {
            assert_eq!(
                has_stale_megaflow_bug(version, "netdev"),
                affected,
                "{version} netdev"
            );
        }
    }

    #[test]
    fn only_the_userspace_datapath_is_affected() {
        for datapath_type in ["system", ""] {
            assert!(
                !has_stale_megaflow_bug("3.1.0", datapath_type),
                "{datapath_type:?}"
            );
        }
        assert!(has_stale_megaflow_bug("3.1.0", "netdev"));
    }

    #[test]
    fn suffixes_after_the_patch_number_are_tolerated() {
        let table = [
            ("3.1.0-2+deb12u1", true),
            (" 3.1.0\n", true),
            ("3.0.4.1", true),
            ("2.17.8-1ubuntu1", false),
            // Development versions between series: the fix is in the series they lead to.
            ("3.1.90", false),
        ];
        for (version, affected) in table {
            assert_eq!(
                has_stale_megaflow_bug(version, "netdev"),
                affected,
                "{version:?}"
            );
        }
    }

    #[test]
    fn an_unparseable_version_raises_no_alarm() {
        for version in [
            "",
            "3",
            "3.1",
            "3.1.",
            "3.x.0",
            "+3.1.0",
            "-3.1.0",
            "3.-1.0",
            "v3.1.0",
            "unknown",
            "99999999999.1.0",
        ] {
            assert!(!has_stale_megaflow_bug(version, "netdev"), "{version:?}");
        }
    }

    #[test]
    fn the_warning_names_version_datapath_effect_and_fix() {
        assert_eq!(stale_megaflow_warning("3.1.3", "netdev"), None);
        assert_eq!(stale_megaflow_warning("3.1.0", "system"), None);
        let text = stale_megaflow_warning("3.1.0", "netdev").expect("affected");
        for part in [
            "Open vSwitch 3.1.0",
            "datapath type netdev",
            "NetworkPolicy changes can take effect late",
            "2.17.8, 3.0.5, 3.1.3, 3.2.0 or later",
            "ovs-appctl dpctl/del-flows",
        ] {
            assert!(text.contains(part), "{part:?} in {text}");
        }
    }
}
