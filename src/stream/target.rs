//! Where a connection goes: the target syntax of Open vSwitch's streams (`lib/stream.c`), as
//! `ovs-vsctl set-controller`, `ovs-ofctl` and `ovs-vsctl --db` take it. One parser serves the
//! OpenFlow connection and the OVSDB client.
//!
//! Active targets (`unix:PATH`, `tcp:HOST[:PORT]`, `ssl:HOST[:PORT]`) are dialled; passive ones
//! (`punix:PATH`, `ptcp:[PORT][:IP]`, `pssl:[PORT][:IP]`) listen and the switch dials in. Passive
//! TCP and SSL listen on loopback unless an address is given, so a controller port is never
//! exposed by accident. `ssl:`/`pssl:` need the TLS files (`crate::tls`).

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;

/// The IANA OpenFlow port, OVS's default when an OpenFlow target names none.
pub const DEFAULT_OPENFLOW_PORT: u16 = 6653;

#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Target {
    /// `unix:PATH`: connect to a unix socket (e.g. the bridge's `br0.mgmt`).
    Unix(PathBuf),
    /// `tcp:HOST[:PORT]`: connect over TCP.
    Tcp { host: String, port: u16 },
    /// `punix:PATH`: listen on a unix socket (`set-controller br0 unix:PATH`).
    PassiveUnix(PathBuf),
    /// `ptcp:[PORT][:IP]`: listen on TCP (`set-controller br0 tcp:IP:PORT`).
    PassiveTcp(SocketAddr),
    /// `ssl:HOST[:PORT]`: connect over TLS.
    Ssl { host: String, port: u16 },
    /// `pssl:[PORT][:IP]`: listen for TLS (`set-controller br0 ssl:IP:PORT`).
    PassiveSsl(SocketAddr),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid OpenFlow target `{target}`: {reason} (expected unix:PATH, tcp:HOST[:PORT], ssl:HOST[:PORT], punix:PATH, ptcp:[PORT][:IP] or pssl:[PORT][:IP])")]
pub struct TargetError {
    pub target: String,
    pub reason: String,
}

impl Target {
    /// True for targets where we listen and the switch connects to us.
    pub fn is_passive(&self) -> bool {
        matches!(
            self,
            Target::PassiveUnix(_) | Target::PassiveTcp(_) | Target::PassiveSsl(_)
        )
    }

    /// For a passive target, what the switch must dial (its `set-controller` target):
    /// `ptcp:P:IP` → `tcp:IP:P`, `pssl:P:IP` → `ssl:IP:P`, `punix:PATH` → `unix:PATH`.
    pub fn switch_side(&self) -> Option<String> {
        let host = |addr: &SocketAddr| match addr.ip() {
            IpAddr::V6(ip) => format!("[{ip}]:{}", addr.port()),
            IpAddr::V4(ip) => format!("{ip}:{}", addr.port()),
        };
        match self {
            Target::PassiveTcp(addr) => Some(format!("tcp:{}", host(addr))),
            Target::PassiveSsl(addr) => Some(format!("ssl:{}", host(addr))),
            Target::PassiveUnix(path) => Some(format!("unix:{}", path.display())),
            Target::Unix(_) | Target::Tcp { .. } | Target::Ssl { .. } => None,
        }
    }

    /// True for targets that speak TLS.
    pub fn is_tls(&self) -> bool {
        matches!(self, Target::Ssl { .. } | Target::PassiveSsl(_))
    }
}

/// OpenFlow targets: a TCP or SSL target without a port gets [`DEFAULT_OPENFLOW_PORT`].
impl FromStr for Target {
    type Err = TargetError;

    fn from_str(text: &str) -> Result<Target, TargetError> {
        Target::parse(text, Some(DEFAULT_OPENFLOW_PORT))
    }
}

impl Target {
    /// Parses `text`; a TCP or SSL target without a port gets `default_port`, or is refused
    /// when there is none (OVSDB targets name their port).
    pub fn parse(text: &str, default_port: Option<u16>) -> Result<Target, TargetError> {
        let fail = |reason: &str| TargetError {
            target: text.to_string(),
            reason: reason.to_string(),
        };
        let (kind, rest) = text
            .split_once(':')
            .ok_or_else(|| fail("no `TYPE:` prefix"))?;
        match kind {
            "unix" => Ok(Target::Unix(parse_path(rest).map_err(fail)?)),
            "punix" => Ok(Target::PassiveUnix(parse_path(rest).map_err(fail)?)),
            "tcp" => {
                let (host, port) = parse_host_port(rest, default_port).map_err(|r| fail(&r))?;
                Ok(Target::Tcp { host, port })
            }
            "ssl" => {
                let (host, port) = parse_host_port(rest, default_port).map_err(|r| fail(&r))?;
                Ok(Target::Ssl { host, port })
            }
            "ptcp" => Ok(Target::PassiveTcp(
                parse_listen(rest, default_port).map_err(|r| fail(&r))?,
            )),
            "pssl" => Ok(Target::PassiveSsl(
                parse_listen(rest, default_port).map_err(|r| fail(&r))?,
            )),
            other => Err(fail(&format!("unknown connection type `{other}`"))),
        }
    }
}

fn parse_path(rest: &str) -> Result<PathBuf, &'static str> {
    if rest.is_empty() {
        Err("empty socket path")
    } else {
        Ok(PathBuf::from(rest))
    }
}

fn parse_port(text: &str) -> Result<u16, String> {
    text.parse::<u16>()
        .map_err(|_| format!("bad port `{text}`"))
}

fn default_or_missing(default_port: Option<u16>) -> Result<u16, String> {
    default_port.ok_or_else(|| "missing :PORT".to_string())
}

/// `HOST[:PORT]`, where an IPv6 HOST is written in brackets (`[::1]:6653`).
fn parse_host_port(rest: &str, default_port: Option<u16>) -> Result<(String, u16), String> {
    if let Some(bracketed) = rest.strip_prefix('[') {
        let (host, after) = bracketed
            .split_once(']')
            .ok_or_else(|| "unclosed `[` in IPv6 host".to_string())?;
        let port = match after.strip_prefix(':') {
            Some(port) => parse_port(port)?,
            None if after.is_empty() => default_or_missing(default_port)?,
            None => return Err(format!("unexpected `{after}` after IPv6 host")),
        };
        return Ok((host.to_string(), port));
    }
    let (host, port) = match rest.split_once(':') {
        Some((host, port)) => (host, parse_port(port)?),
        None => (rest, default_or_missing(default_port)?),
    };
    if host.is_empty() {
        return Err("empty host".into());
    }
    Ok((host.to_string(), port))
}

/// `[PORT][:IP]`: both optional, IP defaults to 127.0.0.1 (loopback only).
fn parse_listen(rest: &str, default_port: Option<u16>) -> Result<SocketAddr, String> {
    let (port, ip) = match rest.split_once(':') {
        Some((port, ip)) => (port, Some(ip)),
        None => (rest, None),
    };
    let port = if port.is_empty() {
        default_or_missing(default_port)?
    } else {
        parse_port(port)?
    };
    let ip = match ip {
        None => IpAddr::V4(Ipv4Addr::LOCALHOST),
        Some(ip) => {
            let ip = ip.trim_start_matches('[').trim_end_matches(']');
            ip.parse::<IpAddr>()
                .map_err(|_| format!("bad listen address `{ip}`"))?
        }
    };
    Ok(SocketAddr::new(ip, port))
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Target::Unix(path) => write!(f, "unix:{}", path.display()),
            Target::PassiveUnix(path) => write!(f, "punix:{}", path.display()),
            Target::Tcp { host, port } if host.contains(':') => write!(f, "tcp:[{host}]:{port}"),
            Target::Tcp { host, port } => write!(f, "tcp:{host}:{port}"),
            Target::PassiveTcp(addr) if addr.is_ipv6() => {
                write!(f, "ptcp:{}:[{}]", addr.port(), addr.ip())
            }
            Target::PassiveTcp(addr) => write!(f, "ptcp:{}:{}", addr.port(), addr.ip()),
            Target::Ssl { host, port } if host.contains(':') => write!(f, "ssl:[{host}]:{port}"),
            Target::Ssl { host, port } => write!(f, "ssl:{host}:{port}"),
            Target::PassiveSsl(addr) if addr.is_ipv6() => {
                write!(f, "pssl:{}:[{}]", addr.port(), addr.ip())
            }
            Target::PassiveSsl(addr) => write!(f, "pssl:{}:{}", addr.port(), addr.ip()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Target {
        text.parse().unwrap()
    }

    #[test]
    fn parses_every_kind() {
        let cases: &[(&str, Target)] = &[
            (
                "unix:/run/openvswitch/br0.mgmt",
                Target::Unix("/run/openvswitch/br0.mgmt".into()),
            ),
            (
                "punix:/tmp/ctl.sock",
                Target::PassiveUnix("/tmp/ctl.sock".into()),
            ),
            (
                "tcp:127.0.0.1:6633",
                Target::Tcp {
                    host: "127.0.0.1".into(),
                    port: 6633,
                },
            ),
            (
                "tcp:switch.example",
                Target::Tcp {
                    host: "switch.example".into(),
                    port: 6653,
                },
            ),
            (
                "tcp:[::1]:7000",
                Target::Tcp {
                    host: "::1".into(),
                    port: 7000,
                },
            ),
            (
                "ptcp:6654",
                Target::PassiveTcp("127.0.0.1:6654".parse().unwrap()),
            ),
            (
                "ptcp:",
                Target::PassiveTcp("127.0.0.1:6653".parse().unwrap()),
            ),
            (
                "ptcp::192.0.2.1",
                Target::PassiveTcp("192.0.2.1:6653".parse().unwrap()),
            ),
            (
                "ptcp:6654:192.0.2.1",
                Target::PassiveTcp("192.0.2.1:6654".parse().unwrap()),
            ),
            (
                "ptcp:6654:[::1]",
                Target::PassiveTcp("[::1]:6654".parse().unwrap()),
            ),
            (
                "ssl:192.0.2.1:6653",
                Target::Ssl {
                    host: "192.0.2.1".into(),
                    port: 6653,
                },
            ),
            (
                "pssl:",
                Target::PassiveSsl("127.0.0.1:6653".parse().unwrap()),
            ),
            (
                "pssl:6654:192.0.2.1",
                Target::PassiveSsl("192.0.2.1:6654".parse().unwrap()),
            ),
        ];
        for (text, want) in cases {
            assert_eq!(&parse(text), want, "{text}");
        }
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "unix:/a/b.mgmt",
            "punix:/a/c.sock",
            "tcp:127.0.0.1:6633",
            "tcp:[::1]:7000",
            "ptcp:6654:127.0.0.1",
            "ptcp:6654:[::1]",
            "ssl:127.0.0.1:6653",
            "ssl:[::1]:6653",
            "pssl:6654:127.0.0.1",
            "pssl:6654:[::1]",
        ] {
            assert_eq!(parse(text).to_string(), text);
        }
    }

    #[test]
    fn rejects_bad_targets_with_the_reason() {
        for (text, reason) in [
            ("br0.mgmt", "prefix"),
            ("tls:1.2.3.4:6653", "unknown connection type `tls`"),
            ("ssl:", "empty host"),
            ("pssl:x", "bad port"),
            ("unix:", "empty socket path"),
            ("tcp:", "empty host"),
            ("tcp:h:99999", "bad port `99999`"),
            ("tcp:[::1", "unclosed"),
            ("ptcp:x", "bad port"),
            ("ptcp:1:notanip", "bad listen address"),
        ] {
            let err = text.parse::<Target>().unwrap_err();
            assert!(err.to_string().contains(reason), "{text}: {err}");
            assert!(err.to_string().contains(text), "{text}: {err}");
        }
    }

    #[test]
    fn without_a_default_port_the_port_is_required() {
        let ovsdb = |text: &str| Target::parse(text, None);
        assert_eq!(
            ovsdb("tcp:127.0.0.1:6640").unwrap(),
            Target::Tcp {
                host: "127.0.0.1".into(),
                port: 6640
            }
        );
        assert_eq!(
            ovsdb("ssl:[::1]:6640").unwrap().to_string(),
            "ssl:[::1]:6640"
        );
        for bad in ["tcp:host", "ssl:h", "tcp:[::1]", "tcp::1", "ptcp:"] {
            assert!(ovsdb(bad).is_err(), "{bad:?} accepted");
        }
        assert!(ovsdb("tcp:host")
            .unwrap_err()
            .reason
            .contains("missing :PORT"));
    }

    #[test]
    fn switch_side_of_passive_targets() {
        let side = |text: &str| parse(text).switch_side();
        assert_eq!(side("ptcp:6653"), Some("tcp:127.0.0.1:6653".into()));
        assert_eq!(
            side("pssl:6654:192.0.2.1"),
            Some("ssl:192.0.2.1:6654".into())
        );
        assert_eq!(side("ptcp:6653:[::1]"), Some("tcp:[::1]:6653".into()));
        assert_eq!(side("punix:/x.sock"), Some("unix:/x.sock".into()));
        assert_eq!(side("ssl:h:1"), None);
    }

    #[test]
    fn passive_targets_are_passive() {
        assert!(parse("ptcp:").is_passive());
        assert!(parse("punix:/x").is_passive());
        assert!(!parse("unix:/x").is_passive());
        assert!(!parse("tcp:h").is_passive());
        assert!(parse("pssl:").is_passive() && parse("pssl:").is_tls());
        assert!(!parse("ssl:h").is_passive() && parse("ssl:h").is_tls());
        assert!(!parse("ptcp:").is_tls());
    }
}
