//! Known Open vSwitch bugs that keep ofnode's flows from doing what they say, told from the
//! version ovs-vswitchd writes into OVSDB (`Open_vSwitch.ovs_version`) and the bridge's
//! datapath type, which comes from ofnode's config or, when it has none, from detection at
//! start (`config::detect_datapath_type`).
//!
//! The stale-megaflow bug: dpif-netdev (the userspace datapath, DPDK included) before
//! "dpif-netdev: Fix dpif_netdev_flow_put." (upstream 21410ff800cc) modified the datapath flow
//! it found by key lookup rather than by UFID. After an OpenFlow flow change, overlapping
//! megaflows exist and the revalidator can update the wrong one: the stale one keeps its old
//! actions for as long as traffic keeps hitting it. The kernel datapath (`system`) does not
//! have it. The bug came with 2.8.0 ("userspace: Switching of L3 packets in L2 pipeline").
//! ofnode purges the datapath's cache after every change on an affected switch
//! (`megaflows.rs`).

/// The upstream fix, as `ofnode status` names it.
pub const STALE_MEGAFLOWS_FIX: &str = "\"dpif-netdev: Fix dpif_netdev_flow_put.\" \
     (21410ff800cc on main, first released in 3.3.0; backports 9c600710b in 3.1.3, \
     150b0fb00 in 3.2.0, bd3a2e812 in 3.0.5, a74b7dfb9 in 2.17.8)";

/// The versions that have the bug, as `ofnode status` says it.
pub const STALE_MEGAFLOWS_AFFECTED: &str = "the userspace datapath (netdev, DPDK included) of \
     every release before 2.17.8, 3.0.0 to 3.0.4 and 3.1.0 to 3.1.2 (2.13 to 2.16 never got \
     the fix), and development builds 2.17.90 to 3.1.90 and 3.2.90 before 2023-08-14; not the \
     kernel datapath";

/// The first release of each series with the fix. Series after the last have it; series
/// before the first never got it.
const STALE_MEGAFLOWS_FIXED_IN: [OvsVersion; 4] = [
    OvsVersion::new(2, 17, 8),
    OvsVersion::new(3, 0, 5),
    OvsVersion::new(3, 1, 3),
    OvsVersion::new(3, 2, 0),
];

/// The patch number of a development build on main (`3.2.90`: main after branch-3.2 was cut,
/// before 3.3.0 was).
const DEVELOPMENT_PATCH: u32 = 90;

/// The first series whose development builds all have the fix: main was 3.2.90 from
/// 2023-07-17 to 2024-01-17 and took the fix on 2023-08-14, so 3.2.90 cannot be told; 3.3.90
/// (from 2024-01-17) and later have it.
const FIXED_DEVELOPMENT_SERIES: (u32, u32) = (3, 3);
/// The development series that had the fix for only part of its life.
const MIXED_DEVELOPMENT_SERIES: (u32, u32) = (3, 2);

/// The datapath type served by dpif-netdev (ofnode's config allows only it and `system`).
const USERSPACE_DATAPATH: &str = "netdev";

/// Whether a switch has the stale-megaflow bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StaleMegaflows {
    /// The kernel datapath: the bug is in dpif-netdev only.
    KernelDatapath,
    /// A release or development build with the fix.
    Fixed,
    /// A release or development build without it.
    Affected,
    /// The userspace datapath at a version that does not say (not written into OVSDB yet,
    /// not parseable, or a 3.2.90 build that may predate the fix): taken as affected.
    Unknown,
}

impl StaleMegaflows {
    /// The bug's presence on a bridge of `datapath_type` under ovs-vswitchd `ovs_version`
    /// (`None`: ovs-vswitchd has not written it).
    pub fn of(ovs_version: Option<&str>, datapath_type: &str) -> StaleMegaflows {
        if datapath_type != USERSPACE_DATAPATH {
            return StaleMegaflows::KernelDatapath;
        }
        match ovs_version.and_then(OvsVersion::parse) {
            None => StaleMegaflows::Unknown,
            Some(version) => version.stale_megaflows(),
        }
    }

    /// Whether the datapath's cache must be purged after a change.
    pub fn affects_switch(self) -> bool {
        matches!(self, StaleMegaflows::Affected | StaleMegaflows::Unknown)
    }

    /// One line for `ofnode status`: the verdict and why.
    pub fn describe(self, ovs_version: Option<&str>, datapath_type: &str) -> String {
        let version = ovs_version.map(str::trim).unwrap_or("");
        match self {
            StaleMegaflows::KernelDatapath => format!(
                "not affected: datapath type {datapath_type:?} (only the userspace datapath \
                 has the bug)"
            ),
            StaleMegaflows::Fixed => format!("not affected: Open vSwitch {version} has the fix"),
            StaleMegaflows::Affected => format!(
                "affected: Open vSwitch {version} with datapath type {datapath_type} predates \
                 the fix"
            ),
            StaleMegaflows::Unknown if version.is_empty() => format!(
                "assumed affected: datapath type {datapath_type}, and ovs-vswitchd has not \
                 written its version into OVSDB (Open_vSwitch.ovs_version)"
            ),
            StaleMegaflows::Unknown => format!(
                "assumed affected: datapath type {datapath_type}, and version {version:?} \
                 does not tell whether it has the fix"
            ),
        }
    }
}

/// An upstream Open vSwitch version, `major.minor.patch` (patch 90: a development build).
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

    fn series(self) -> (u32, u32) {
        (self.major, self.minor)
    }

    fn stale_megaflows(self) -> StaleMegaflows {
        if self.patch >= DEVELOPMENT_PATCH {
            return match self.series() {
                series if series >= FIXED_DEVELOPMENT_SERIES => StaleMegaflows::Fixed,
                MIXED_DEVELOPMENT_SERIES => StaleMegaflows::Unknown,
                _ => StaleMegaflows::Affected,
            };
        }
        let fixed_in = STALE_MEGAFLOWS_FIXED_IN
            .iter()
            .find(|fixed| fixed.series() == self.series());
        let has_fix = match fixed_in {
            Some(fixed) => self >= *fixed,
            // A series without a fixed release has the fix only when it came after them all.
            None => STALE_MEGAFLOWS_FIXED_IN.iter().all(|fixed| self > *fixed),
        };
        if has_fix {
            StaleMegaflows::Fixed
        } else {
            StaleMegaflows::Affected
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

/// What the operator is told when the bug applies (the daemon's log and `ofnode status`'s
/// warnings), in every mode: a late flow change matters to every mode's narrowing changes
/// (a NetworkPolicy or egress policy, multitenant isolation, a pod deleted). `purging` says
/// whether ofnode's mitigation is on.
pub fn stale_megaflow_warning(
    verdict: StaleMegaflows,
    ovs_version: Option<&str>,
    datapath_type: &str,
    purging: bool,
) -> Option<String> {
    if !verdict.affects_switch() {
        return None;
    }
    let what = verdict.describe(ovs_version, datapath_type);
    let consequence = if purging {
        "ofnode purges the datapath's cached flows (revalidator/purge) after every change, \
         before it answers, so that no change waits for them; each purge makes the next packet \
         of every cached flow take the slow path once"
    } else {
        "the mitigation is off (stale_megaflow_purge = false): a change that narrows what is \
         allowed can be ignored by a cached datapath flow for as long as traffic keeps hitting \
         it, and a pair a new policy denies keeps connecting"
    };
    Some(format!(
        "Open vSwitch's dpif-netdev stale-megaflow bug: {what}; {consequence}. Upgrade Open \
         vSwitch to 2.17.8, 3.0.5, 3.1.3, 3.2.0 or later (fix: {STALE_MEGAFLOWS_FIX})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn on_netdev(version: &str) -> StaleMegaflows {
        StaleMegaflows::of(Some(version), "netdev")
    }

    #[test]
    fn each_series_is_affected_up_to_its_fix() {
        use StaleMegaflows::{Affected, Fixed};
        let table = [
            ("2.13.0", Affected),
            ("2.16.9", Affected),
            ("2.17.0", Affected),
            ("2.17.7", Affected),
            ("2.17.8", Fixed),
            ("2.17.9", Fixed),
            ("3.0.0", Affected),
            ("3.0.4", Affected),
            ("3.0.5", Fixed),
            ("3.1.0", Affected),
            ("3.1.2", Affected),
            ("3.1.3", Fixed),
            ("3.2.0", Fixed),
            ("3.3.4", Fixed),
            ("4.0.0", Fixed),
        ];
        for (version, verdict) in table {
            assert_eq!(on_netdev(version), verdict, "{version} netdev");
        }
    }

    #[test]
    fn development_builds_count_by_the_date_the_fix_reached_main() {
        use StaleMegaflows::{Affected, Fixed, Unknown};
        // Main's version in the months before 2023-08-14 (the fix's date on main).
        let table = [
            ("2.17.90", Affected),
            ("3.0.90", Affected),
            ("3.1.90", Affected),
            ("3.1.90.1", Affected),
            // 3.2.90 spans 2023-07-17 to 2024-01-17: its first four weeks lack the fix.
            ("3.2.90", Unknown),
            ("3.3.90", Fixed),
            ("3.4.90", Fixed),
            ("4.0.90", Fixed),
        ];
        for (version, verdict) in table {
            assert_eq!(on_netdev(version), verdict, "{version}");
        }
    }

    #[test]
    fn only_the_userspace_datapath_is_affected() {
        for datapath_type in ["system", ""] {
            assert_eq!(
                StaleMegaflows::of(Some("3.1.0"), datapath_type),
                StaleMegaflows::KernelDatapath,
                "{datapath_type:?}"
            );
            assert_eq!(
                StaleMegaflows::of(None, datapath_type),
                StaleMegaflows::KernelDatapath
            );
        }
        assert!(on_netdev("3.1.0").affects_switch());
        assert!(!StaleMegaflows::KernelDatapath.affects_switch());
        assert!(!StaleMegaflows::Fixed.affects_switch());
    }

    #[test]
    fn suffixes_after_the_patch_number_are_tolerated() {
        let table = [
            ("3.1.0-2+deb12u1", true),
            (" 3.1.0\n", true),
            ("3.0.4.1", true),
            ("2.17.8-1ubuntu1", false),
        ];
        for (version, affected) in table {
            assert_eq!(on_netdev(version).affects_switch(), affected, "{version:?}");
        }
    }

    #[test]
    fn a_version_that_does_not_tell_is_taken_as_affected_on_netdev() {
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
            assert_eq!(on_netdev(version), StaleMegaflows::Unknown, "{version:?}");
            assert!(on_netdev(version).affects_switch(), "{version:?}");
        }
        assert_eq!(StaleMegaflows::of(None, "netdev"), StaleMegaflows::Unknown);
    }

    #[test]
    fn the_verdict_says_why() {
        let say = |version: Option<&str>, datapath: &str| {
            StaleMegaflows::of(version, datapath).describe(version, datapath)
        };
        assert!(say(Some("3.1.0"), "netdev").starts_with("affected: Open vSwitch 3.1.0"));
        assert!(say(Some("3.1.3"), "netdev").starts_with("not affected: Open vSwitch 3.1.3"));
        assert!(say(Some("3.1.0"), "system").contains("\"system\""));
        assert!(say(None, "netdev").contains("has not written its version"));
        assert!(say(Some("3.2.90"), "netdev").contains("\"3.2.90\" does not tell"));
    }

    #[test]
    fn the_warning_names_the_bug_the_verdict_the_mitigation_and_the_fix() {
        let warn = |version: &str, datapath: &str, purging: bool| {
            let verdict = StaleMegaflows::of(Some(version), datapath);
            stale_megaflow_warning(verdict, Some(version), datapath, purging)
        };
        assert_eq!(warn("3.1.3", "netdev", true), None);
        assert_eq!(warn("3.1.0", "system", true), None);
        let on = warn("3.1.0", "netdev", true).expect("affected");
        for part in [
            "stale-megaflow bug",
            "Open vSwitch 3.1.0 with datapath type netdev",
            "revalidator/purge",
            "2.17.8, 3.0.5, 3.1.3, 3.2.0 or later",
            "21410ff800cc",
        ] {
            assert!(on.contains(part), "{part:?} in {on}");
        }
        let off = warn("3.1.0", "netdev", false).expect("affected");
        assert!(off.contains("stale_megaflow_purge = false"), "{off}");
        assert!(off.contains("keeps connecting"), "{off}");
    }
}
