//! Where and how the audit log is written: the daemon's `audit_log*` and `audit_syslog` keys,
//! checked once (a bad value is refused with what was expected) before anything starts.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::str::FromStr;

/// The log's line format (`audit_log_format`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum LineFormat {
    /// One JSON object a line, fields as documented in `line.rs` (the default).
    #[default]
    Json,
    /// One line like Antrea's np.log, for people reading with `tail -f`.
    Text,
}

impl LineFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            LineFormat::Json => "json",
            LineFormat::Text => "text",
        }
    }
}

impl FromStr for LineFormat {
    type Err = String;

    fn from_str(s: &str) -> Result<LineFormat, String> {
        match s {
            "json" => Ok(LineFormat::Json),
            "text" => Ok(LineFormat::Text),
            other => Err(format!(
                "audit_log_format {other:?} is neither \"json\" nor \"text\""
            )),
        }
    }
}

/// Where RFC 5424 syslog messages go (`audit_syslog`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyslogTarget {
    /// `unix:PATH`: a datagram socket such as `/dev/log`.
    Unix(PathBuf),
    /// `udp:HOST:PORT` (an IP address: no name is looked up).
    Udp(SocketAddr),
}

impl FromStr for SyslogTarget {
    type Err = String;

    fn from_str(s: &str) -> Result<SyslogTarget, String> {
        let expected = "expected unix:PATH or udp:IP:PORT, e.g. unix:/dev/log or udp:127.0.0.1:514";
        if let Some(path) = s.strip_prefix("unix:") {
            if !path.starts_with('/') {
                return Err(format!(
                    "audit_syslog {s:?}: the socket path must be absolute ({expected})"
                ));
            }
            return Ok(SyslogTarget::Unix(PathBuf::from(path)));
        }
        if let Some(addr) = s.strip_prefix("udp:") {
            return addr
                .parse()
                .map(SyslogTarget::Udp)
                .map_err(|e| format!("audit_syslog {s:?}: {e} ({expected})"));
        }
        Err(format!("audit_syslog {s:?}: {expected}"))
    }
}

impl std::fmt::Display for SyslogTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SyslogTarget::Unix(path) => write!(f, "unix:{}", path.display()),
            SyslogTarget::Udp(addr) => write!(f, "udp:{addr}"),
        }
    }
}

/// The smallest `audit_log_max_bytes`: a file must hold a few lines before it rotates.
pub const MIN_MAX_BYTES: u64 = 4096;
/// The most rotated files kept (`audit_log_keep`).
pub const MAX_KEEP: u32 = 100;

/// How the node writes its audit log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuditLogConfig {
    /// The file lines are appended to (`audit_log`); None: events are counted, not written
    /// to a file.
    pub path: Option<PathBuf>,
    /// The file is rotated before it would grow past this (`audit_log_max_bytes`).
    pub max_bytes: u64,
    /// Rotated files kept: `PATH.1` (newest) … `PATH.keep` (`audit_log_keep`; 0: none).
    pub keep: u32,
    pub format: LineFormat,
    pub syslog: Option<SyslogTarget>,
    /// The node's name in every line.
    pub node_name: String,
    /// Lines waiting for the writer beyond which new ones are dropped (and counted).
    pub queue: usize,
    /// Packet-ins waiting for the audit task beyond which the connection drops them.
    pub switch_queue: usize,
}

impl Default for AuditLogConfig {
    fn default() -> AuditLogConfig {
        AuditLogConfig {
            path: None,
            max_bytes: 100 << 20,
            keep: 5,
            format: LineFormat::Json,
            syslog: None,
            node_name: host_node_name(),
            queue: 10_000,
            switch_queue: 10_000,
        }
    }
}

impl AuditLogConfig {
    /// Refuses sizes that cannot work.
    pub fn check(&self) -> Result<(), String> {
        if self.max_bytes < MIN_MAX_BYTES {
            return Err(format!(
                "audit_log_max_bytes {} is below {MIN_MAX_BYTES}",
                self.max_bytes
            ));
        }
        if self.keep > MAX_KEEP {
            return Err(format!("audit_log_keep {} is above {MAX_KEEP}", self.keep));
        }
        if let Some(path) = self.path.as_ref().filter(|p| !p.is_absolute()) {
            return Err(format!(
                "audit_log {} must be an absolute path",
                path.display()
            ));
        }
        Ok(())
    }

    /// Where the log goes, for `ofnode status` and `--check-config`.
    pub fn describe(&self) -> String {
        let file = match &self.path {
            Some(path) => format!(
                "{} ({}, rotated at {} bytes, {} kept)",
                path.display(),
                self.format.as_str(),
                self.max_bytes,
                self.keep
            ),
            None => "no file (set audit_log)".to_string(),
        };
        match &self.syslog {
            Some(target) => format!("{file}, syslog {target}"),
            None => file,
        }
    }
}

/// The node's name when nothing else says it: `$NODE_NAME`, else the host name (lowercased,
/// as kubelet names its Node), else "unknown".
pub fn host_node_name() -> String {
    if let Some(name) = std::env::var("NODE_NAME").ok().filter(|n| !n.is_empty()) {
        return name;
    }
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_ascii_lowercase())
        .ok()
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syslog_targets_parse_and_bad_ones_say_what_is_expected() {
        assert_eq!(
            "unix:/dev/log".parse(),
            Ok(SyslogTarget::Unix("/dev/log".into()))
        );
        assert_eq!(
            "udp:127.0.0.1:514".parse(),
            Ok(SyslogTarget::Udp("127.0.0.1:514".parse().unwrap()))
        );
        for bad in ["tcp:127.0.0.1:514", "udp:localhost:514", "unix:dev/log", ""] {
            let err = bad.parse::<SyslogTarget>().unwrap_err();
            assert!(err.contains("expected unix:PATH or udp:IP:PORT"), "{err}");
        }
    }

    #[test]
    fn formats_and_sizes_are_checked() {
        assert_eq!("text".parse(), Ok(LineFormat::Text));
        assert!("xml".parse::<LineFormat>().unwrap_err().contains("json"));
        let mut cfg = AuditLogConfig::default();
        assert!(cfg.check().is_ok());
        cfg.max_bytes = 10;
        assert!(cfg.check().unwrap_err().contains("audit_log_max_bytes"));
        cfg.max_bytes = MIN_MAX_BYTES;
        cfg.keep = 1000;
        assert!(cfg.check().unwrap_err().contains("audit_log_keep"));
        cfg.keep = 2;
        cfg.path = Some("relative.log".into());
        assert!(cfg.check().unwrap_err().contains("absolute"));
    }
}
