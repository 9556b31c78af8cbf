//! Network sysctls (`/proc/sys/net/...`) in the handle's namespace.
//!
//! A /proc/sys/net file shows the namespace of the thread that opens it, so a handle made with
//! [`Handle::in_netns`] reads and writes its namespace's values through the same dedicated
//! thread that opened its socket there. These calls block for the time of one small file
//! write (plus a thread start for another namespace).

use std::path::{Component, Path, PathBuf};

use super::error::{Error, Result};
use super::handle::Handle;
use super::netns;
use super::types::validate_ifname;

const PROC_SYS: &str = "/proc/sys";

/// `net/...` keys only: other sysctls are not per-namespace, so writing one through a handle of
/// another namespace would silently change the whole machine.
fn sysctl_path(key: &str) -> Result<PathBuf> {
    let relative = Path::new(key);
    let only_names = relative
        .components()
        .all(|component| matches!(component, Component::Normal(_)));
    if !only_names || relative.components().next() != Some(Component::Normal("net".as_ref())) {
        return Err(Error::Sysctl {
            path: relative.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "only relative net/... keys are namespaced and allowed",
            ),
        });
    }
    Ok(Path::new(PROC_SYS).join(relative))
}

fn bool_value(enabled: bool) -> &'static str {
    if enabled {
        "1"
    } else {
        "0"
    }
}

impl Handle {
    /// Writes `value` to the sysctl `key` (`net/ipv4/ip_forward` style) in this handle's
    /// namespace.
    pub fn write_sysctl(&self, key: &str, value: &str) -> Result<()> {
        let path = sysctl_path(key)?;
        netns::run_in(self.netns(), || {
            std::fs::write(&path, value).map_err(|source| Error::Sysctl {
                path: path.clone(),
                source,
            })
        })
    }

    /// Reads the sysctl `key` in this handle's namespace, without the trailing newline.
    pub fn read_sysctl(&self, key: &str) -> Result<String> {
        let path = sysctl_path(key)?;
        netns::run_in(self.netns(), || {
            std::fs::read_to_string(&path)
                .map(|text| text.trim_end().to_string())
                .map_err(|source| Error::Sysctl {
                    path: path.clone(),
                    source,
                })
        })
    }

    /// `net.ipv4.neigh.DEV.app_solicit`: how many times the kernel asks userspace to resolve a
    /// neighbour on `dev` (the seed writes 3).
    pub fn set_app_solicit(&self, dev: &str, probes: u32) -> Result<()> {
        validate_ifname(dev)?;
        self.write_sysctl(
            &format!("net/ipv4/neigh/{dev}/app_solicit"),
            &probes.to_string(),
        )
    }

    /// `net.ipv4.ip_forward`: IPv4 forwarding for the whole namespace.
    pub fn set_ipv4_forwarding(&self, enabled: bool) -> Result<()> {
        self.write_sysctl("net/ipv4/ip_forward", bool_value(enabled))
    }

    /// `net.ipv4.conf.DEV.forwarding`: IPv4 forwarding on one device.
    pub fn set_ipv4_forwarding_on(&self, dev: &str, enabled: bool) -> Result<()> {
        validate_ifname(dev)?;
        self.write_sysctl(
            &format!("net/ipv4/conf/{dev}/forwarding"),
            bool_value(enabled),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_relative_net_keys_are_allowed() {
        assert_eq!(
            sysctl_path("net/ipv4/ip_forward").unwrap(),
            Path::new("/proc/sys/net/ipv4/ip_forward")
        );
        for key in [
            "kernel/hostname",
            "/proc/sys/net/ipv4/ip_forward",
            "net/../kernel/hostname",
            "",
        ] {
            assert!(sysctl_path(key).is_err(), "{key:?}");
        }
    }
}
