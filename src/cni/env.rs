//! The CNI environment variables a runtime sets for every call (specification 1.0.0, section
//! "Parameters"), read and validated once.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::error::CniError;
use crate::value::{IfName, PodKey, SandboxId, Vnid};

/// The CNI_ARGS key that carries the pod's VNID (its namespace's NetID); it overrides the
/// network configuration's `vnid`.
pub const VNID_ARG: &str = "OFNODE_VNID";
/// The CNI_ARGS keys kubelet names the pod with.
pub const NAMESPACE_ARG: &str = "K8S_POD_NAMESPACE";
pub const NAME_ARG: &str = "K8S_POD_NAME";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command {
    Add,
    Del,
    Check,
    Version,
}

/// The parameters of one call.
#[derive(Debug, Clone)]
pub struct CniEnv {
    pub command: Command,
    /// `CNI_CONTAINERID`: the pod's sandbox id (64 hex digits, as the daemon's notes need).
    pub container_id: SandboxId,
    /// `CNI_NETNS`: required by ADD and CHECK; DEL may come after the namespace is gone.
    pub netns: Option<PathBuf>,
    pub ifname: IfName,
    /// `CNI_PATH`: where to look for the IPAM plugin.
    pub path: Vec<PathBuf>,
    /// `CNI_ARGS`: `KEY=VALUE` pairs separated by `;`.
    pub args: BTreeMap<String, String>,
}

impl Command {
    fn parse(text: &str) -> Result<Command, CniError> {
        match text {
            "ADD" => Ok(Command::Add),
            "DEL" => Ok(Command::Del),
            "CHECK" => Ok(Command::Check),
            "VERSION" => Ok(Command::Version),
            other => Err(env_error(
                "CNI_COMMAND",
                format!("{other:?} is not ADD, DEL, CHECK or VERSION"),
            )),
        }
    }
}

fn env_error(name: &'static str, reason: impl Into<String>) -> CniError {
    CniError::Env {
        name,
        reason: reason.into(),
    }
}

/// The command alone (VERSION needs nothing else).
pub fn command(var: &impl Fn(&str) -> Option<String>) -> Result<Command, CniError> {
    let text = var("CNI_COMMAND").ok_or_else(|| env_error("CNI_COMMAND", "not set"))?;
    Command::parse(&text)
}

impl CniEnv {
    /// Reads the parameters through `var` (the process environment in the binary).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<CniEnv, CniError> {
        let command = command(&var)?;
        let required = |name: &'static str| {
            var(name)
                .filter(|v| !v.is_empty())
                .ok_or_else(|| env_error(name, "not set"))
        };
        let container_id = required("CNI_CONTAINERID")?
            .parse()
            .map_err(|e| env_error("CNI_CONTAINERID", format!("{e}")))?;
        let netns = var("CNI_NETNS")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from);
        if netns.is_none() && command != Command::Del {
            return Err(env_error("CNI_NETNS", "not set"));
        }
        let ifname = required("CNI_IFNAME")?
            .parse()
            .map_err(|e| env_error("CNI_IFNAME", format!("{e}")))?;
        let path = required("CNI_PATH")?
            .split(':')
            .filter(|dir| !dir.is_empty())
            .map(PathBuf::from)
            .collect();
        let args = parse_args(&var("CNI_ARGS").unwrap_or_default())?;
        Ok(CniEnv {
            command,
            container_id,
            netns,
            ifname,
            path,
            args,
        })
    }

    /// The pod's key from `CNI_ARGS` (`K8S_POD_NAMESPACE`, `K8S_POD_NAME`, which kubelet
    /// always sends): the daemon knows pods by it.
    pub fn pod(&self) -> Result<PodKey, CniError> {
        let arg = |key: &str| self.args.get(key).filter(|v| !v.is_empty());
        match (arg(NAMESPACE_ARG), arg(NAME_ARG)) {
            (Some(namespace), Some(name)) => PodKey::new(namespace, name)
                .map_err(|e| env_error("CNI_ARGS", format!("{NAMESPACE_ARG}/{NAME_ARG}: {e}"))),
            _ => Err(env_error(
                "CNI_ARGS",
                format!(
                    "{NAMESPACE_ARG} and {NAME_ARG} are required: ofnode knows pods by \
                     namespace and name, as kubelet passes them"
                ),
            )),
        }
    }

    /// The VNID from `CNI_ARGS` (`OFNODE_VNID=N`), else `configured`.
    pub fn vnid(&self, configured: u32) -> Result<Vnid, CniError> {
        let value = match self.args.get(VNID_ARG) {
            Some(text) => text.parse::<u32>().map_err(|_| {
                env_error("CNI_ARGS", format!("{VNID_ARG}={text:?} is not a number"))
            })?,
            None => configured,
        };
        Vnid::new(value).map_err(|e| CniError::Config(e.to_string()))
    }
}

/// `K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;OFNODE_VNID=7` → a map. Keys this plugin does not use
/// are kept and ignored (runtimes always send their own).
fn parse_args(text: &str) -> Result<BTreeMap<String, String>, CniError> {
    text.split(';')
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            pair.split_once('=')
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .ok_or_else(|| env_error("CNI_ARGS", format!("{pair:?} is not KEY=VALUE")))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

    fn vars(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let map: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| map.get(name).cloned()
    }

    fn add_vars(args: &str) -> Vec<(&'static str, String)> {
        vec![
            ("CNI_COMMAND", "ADD".into()),
            ("CNI_CONTAINERID", ID.into()),
            ("CNI_NETNS", "/run/netns/p".into()),
            ("CNI_IFNAME", "eth0".into()),
            ("CNI_PATH", "/usr/lib/cni:/opt/cni/bin".into()),
            ("CNI_ARGS", args.into()),
        ]
    }

    fn parse(pairs: &[(&'static str, String)]) -> Result<CniEnv, CniError> {
        let pairs: Vec<(&str, &str)> = pairs.iter().map(|(k, v)| (*k, v.as_str())).collect();
        CniEnv::from_vars(vars(&pairs))
    }

    #[test]
    fn add_environment_with_a_vnid_argument() {
        let env = parse(&add_vars("K8S_POD_NAMESPACE=ns1;OFNODE_VNID=42")).unwrap();
        assert_eq!(env.command, Command::Add);
        assert_eq!(env.path.len(), 2);
        assert_eq!(env.vnid(7).unwrap(), Vnid::new(42).unwrap());
        let env = parse(&add_vars("K8S_POD_NAMESPACE=ns1")).unwrap();
        assert_eq!(env.vnid(7).unwrap(), Vnid::new(7).unwrap());
    }

    #[test]
    fn the_pod_is_named_by_kubelets_arguments() {
        let env = parse(&add_vars("K8S_POD_NAMESPACE=ns1;K8S_POD_NAME=web-0")).unwrap();
        assert_eq!(env.pod().unwrap().to_string(), "ns1/web-0");
        for args in [
            "K8S_POD_NAMESPACE=ns1",
            "K8S_POD_NAME=web-0",
            "",
            "K8S_POD_NAMESPACE=NS;K8S_POD_NAME=a",
        ] {
            let err = parse(&add_vars(args))
                .unwrap()
                .pod()
                .unwrap_err()
                .to_string();
            assert!(err.contains("CNI_ARGS"), "{args}: {err}");
        }
    }

    #[test]
    fn bad_parameters_name_the_variable() {
        let mut bad = add_vars("OFNODE_VNID=x");
        let err = parse(&bad).unwrap().vnid(0).unwrap_err();
        assert!(err.to_string().contains("OFNODE_VNID"), "{err}");
        bad[5].1 = "OFNODE_VNID=16777216".into();
        assert!(parse(&bad).unwrap().vnid(0).is_err());
        bad[5].1 = "novalue".into();
        assert!(parse(&bad).unwrap_err().to_string().contains("CNI_ARGS"));
        bad[1].1 = "short".into();
        assert!(parse(&bad)
            .unwrap_err()
            .to_string()
            .contains("CNI_CONTAINERID"));
        let mut no_netns = add_vars("");
        no_netns.remove(2);
        assert!(parse(&no_netns)
            .unwrap_err()
            .to_string()
            .contains("CNI_NETNS"));
        no_netns[0].1 = "DEL".into();
        assert!(parse(&no_netns).unwrap().netns.is_none());
        no_netns[0].1 = "GET".into();
        assert!(parse(&no_netns).is_err());
    }
}
