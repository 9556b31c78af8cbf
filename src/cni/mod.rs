//! `ofnode-cni`: the CNI plugin (specification 1.0.0) through which a container runtime hands
//! pod networking to the ofnode daemon, as OpenShift SDN's CNI plugin handed it to its node
//! process.
//!
//! ADD delegates the address to the IPAM plugin named in `ipam.type` (found in `CNI_PATH`),
//! creates the pod's veth over rtnetlink (the pod end, `CNI_IFNAME`, inside `CNI_NETNS`, with
//! the address, a default route via the gateway, the MTU), then asks the daemon to attach it
//! (port and flows, and the `bandwidth` capability's rates). A failure half-way undoes every
//! step that was done. DEL is idempotent; CHECK compares the pod with `prevResult` and asks the
//! daemon whether its port and flows are in place.
//!
//! - [`spec`]: the specification's JSON; [`env`]: the `CNI_*` variables; [`error`]: errors and
//!   their codes; [`ipam`]: delegation; [`plugin`]: the commands.

pub mod env;
pub mod error;
pub mod ipam;
pub mod plugin;
pub mod spec;

pub use env::{CniEnv, Command, VNID_ARG};
pub use error::CniError;
pub use spec::{CniResult, ErrorObject, NetConf, VersionInfo, SUPPORTED_VERSIONS};

/// What a call prints on stdout, and whether it succeeded.
#[derive(Debug)]
pub enum Outcome {
    /// Success with a JSON document to print (ADD's result, VERSION's answer).
    Print(serde_json::Value),
    /// Success with nothing to print (DEL, CHECK).
    Silent,
    /// Failure: the error object to print, and a non-zero exit.
    Failed(ErrorObject),
}

/// Runs one call: `var` reads the environment, `stdin` is the network configuration.
pub async fn run(var: impl Fn(&str) -> Option<String>, stdin: &[u8]) -> Outcome {
    let requested = requested_version(stdin);
    match dispatch(&var, stdin).await {
        Ok(outcome) => outcome,
        Err((err, rollback_failures)) => {
            Outcome::Failed(err.to_object(&requested, &rollback_failures))
        }
    }
}

/// The `cniVersion` the caller speaks, for the error object (the newest we know otherwise).
fn requested_version(stdin: &[u8]) -> String {
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Versioned {
        cni_version: String,
    }
    serde_json::from_slice::<Versioned>(stdin)
        .ok()
        .map(|v| v.cni_version)
        .filter(|v| SUPPORTED_VERSIONS.contains(&v.as_str()))
        .unwrap_or_else(|| VersionInfo::this_plugin().cni_version)
}

async fn dispatch(
    var: &impl Fn(&str) -> Option<String>,
    stdin: &[u8],
) -> Result<Outcome, (CniError, Vec<String>)> {
    let plain = |err: CniError| (err, Vec::new());
    if env::command(var).map_err(plain)? == Command::Version {
        return to_json(&VersionInfo::this_plugin()).map_err(plain);
    }
    let env = CniEnv::from_vars(var).map_err(plain)?;
    let conf = parse_config(stdin).map_err(plain)?;
    let call = plugin::Call {
        env: &env,
        conf: &conf,
        raw: stdin,
    };
    match env.command {
        Command::Add => to_json(&call.add().await?).map_err(plain),
        Command::Del => call.del().await.map(|()| Outcome::Silent).map_err(plain),
        Command::Check => call.check().await.map(|()| Outcome::Silent).map_err(plain),
        Command::Version => to_json(&VersionInfo::this_plugin()).map_err(plain),
    }
}

fn parse_config(stdin: &[u8]) -> Result<NetConf, CniError> {
    let conf: NetConf =
        serde_json::from_slice(stdin).map_err(|e| CniError::Decode(e.to_string()))?;
    if !SUPPORTED_VERSIONS.contains(&conf.cni_version.as_str()) {
        return Err(CniError::IncompatibleVersion {
            requested: conf.cni_version,
        });
    }
    if conf.kind != "ofnode" {
        return Err(CniError::Config(format!(
            "type is {:?}; this plugin is \"ofnode\"",
            conf.kind
        )));
    }
    if !(68..=65535).contains(&conf.mtu) {
        return Err(CniError::Config(format!(
            "mtu {} is outside 68..65535",
            conf.mtu
        )));
    }
    Ok(conf)
}

fn to_json(value: &impl serde::Serialize) -> Result<Outcome, CniError> {
    serde_json::to_value(value)
        .map(Outcome::Print)
        .map_err(|e| CniError::Decode(format!("encoding the answer: {e}")))
}
