//! The bounded queue between the audit task and the writer of lines, and the writer: a thread
//! of its own (file and socket writes block; the connection and the node's writer never wait
//! for them). A full queue drops the line and counts it; once a second the writer writes what
//! was lost since its last such line, as a line of its own.

use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::config::{AuditLogConfig, LineFormat};
use super::counters::{AuditCounters, DropPlace};
use super::file::RotatingFile;
use super::line;
use super::syslog::{Syslog, SEVERITY_WARNING};

/// A line ready to write.
#[derive(Debug, Clone)]
pub struct Record {
    pub line: String,
    /// Its syslog severity.
    pub severity: u8,
}

/// The sending side: never waits.
#[derive(Debug, Clone)]
pub struct LineQueue {
    tx: SyncSender<Record>,
    counters: Arc<AuditCounters>,
}

impl LineQueue {
    pub fn new(capacity: usize, counters: Arc<AuditCounters>) -> (LineQueue, Receiver<Record>) {
        let (tx, rx) = mpsc::sync_channel(capacity.max(1));
        (LineQueue { tx, counters }, rx)
    }

    /// Queues `record`; when the queue is full it is dropped and counted. False when the
    /// writer is gone.
    pub fn push(&self, record: Record) -> bool {
        match self.tx.try_send(record) {
            Ok(()) => true,
            Err(TrySendError::Full(_)) => {
                self.counters.dropped(DropPlace::Queue);
                true
            }
            Err(TrySendError::Disconnected(_)) => false,
        }
    }
}

/// Where lines go, and what it reported lost so far.
#[derive(Debug)]
pub struct Writer {
    file: Option<RotatingFile>,
    syslog: Option<Syslog>,
    format: LineFormat,
    node: String,
    counters: Arc<AuditCounters>,
    /// Drops (switch channel, queue) already reported in a dropped line.
    reported: (u64, u64),
}

impl Writer {
    /// Opens the file (a file that cannot be opened is refused now, not at the first event).
    pub fn open(cfg: &AuditLogConfig, counters: Arc<AuditCounters>) -> std::io::Result<Writer> {
        let file = match &cfg.path {
            Some(path) => Some(RotatingFile::open(path, cfg.max_bytes, cfg.keep)?),
            None => None,
        };
        let syslog = cfg
            .syslog
            .clone()
            .map(|target| Syslog::new(target, &cfg.node_name));
        Ok(Writer {
            file,
            syslog,
            format: cfg.format,
            node: cfg.node_name.clone(),
            counters,
            reported: (0, 0),
        })
    }

    /// Writes lines from `rx` until every sender is gone, and once a second what was lost.
    pub fn run(mut self, rx: Receiver<Record>) {
        let mut next_report = Instant::now() + Duration::from_secs(1);
        loop {
            let wait = next_report.saturating_duration_since(Instant::now());
            match rx.recv_timeout(wait) {
                Ok(record) => self.write(&record),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.report_drops(SystemTime::now());
                    return;
                }
            }
            if Instant::now() >= next_report {
                self.report_drops(SystemTime::now());
                next_report = Instant::now() + Duration::from_secs(1);
            }
        }
    }

    pub fn write(&mut self, record: &Record) {
        let mut written = false;
        if let Some(file) = &mut self.file {
            match file.write_line(&record.line) {
                Ok(()) => written = true,
                Err(error) => {
                    self.counters.dropped(DropPlace::File);
                    warn_sometimes(self.counters.drops(DropPlace::File), "file", &error);
                }
            }
        }
        if let Some(syslog) = &mut self.syslog {
            match syslog.send(record.severity, SystemTime::now(), &record.line) {
                Ok(()) => written |= self.file.is_none(),
                Err(error) => {
                    self.counters.dropped(DropPlace::Syslog);
                    warn_sometimes(self.counters.drops(DropPlace::Syslog), "syslog", &error);
                }
            }
        }
        if written {
            self.counters.line();
        }
    }

    /// Writes a dropped line when events were lost since the last one.
    pub fn report_drops(&mut self, now: SystemTime) {
        let switch_channel = self.counters.drops(DropPlace::SwitchChannel);
        let queue = self.counters.drops(DropPlace::Queue);
        let (new_switch, new_queue) = (
            switch_channel.saturating_sub(self.reported.0),
            queue.saturating_sub(self.reported.1),
        );
        if new_switch + new_queue == 0 {
            return;
        }
        self.reported = (switch_channel, queue);
        let line = line::dropped(self.format, now, &self.node, new_switch, new_queue);
        self.write(&Record {
            line,
            severity: SEVERITY_WARNING,
        });
    }
}

/// Logged at the 1st, 2nd, 4th, 8th … failure: a broken disk cannot flood the daemon's log.
fn warn_sometimes(failures: u64, sink: &str, error: &std::io::Error) {
    if failures.is_power_of_two() {
        tracing::warn!(sink, failures, %error, "audit log: a line could not be written");
    }
}

/// Starts the writer thread for `cfg`; the queue holds at most `cfg.queue` lines.
pub fn start(cfg: &AuditLogConfig, counters: Arc<AuditCounters>) -> std::io::Result<LineQueue> {
    let writer = Writer::open(cfg, counters.clone())?;
    let (queue, rx) = LineQueue::new(cfg.queue, counters);
    std::thread::Builder::new()
        .name("ofnode-audit".into())
        .spawn(move || writer.run(rx))?;
    Ok(queue)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    fn cfg(dir: &std::path::Path, format: LineFormat) -> AuditLogConfig {
        AuditLogConfig {
            path: Some(dir.join("audit.log")),
            format,
            node_name: "node-1".into(),
            ..AuditLogConfig::default()
        }
    }

    fn record(line: &str) -> Record {
        Record {
            line: line.into(),
            severity: 5,
        }
    }

    #[test]
    fn a_full_queue_drops_and_counts_and_the_writer_says_so_once() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(AuditCounters::default());
        let tap = Arc::new(AtomicU64::new(0));
        counters.follow_switch_channel(tap.clone());
        let (queue, rx) = LineQueue::new(2, counters.clone());
        for i in 0..5 {
            assert!(queue.push(record(&format!("event {i}"))));
        }
        tap.fetch_add(4, Ordering::Relaxed);
        assert_eq!(counters.drops(DropPlace::Queue), 3);
        let mut writer =
            Writer::open(&cfg(dir.path(), LineFormat::Json), counters.clone()).unwrap();
        while let Ok(r) = rx.try_recv() {
            writer.write(&r);
        }
        writer.report_drops(SystemTime::now());
        writer.report_drops(SystemTime::now());
        let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3, "{text}");
        assert_eq!(&lines[..2], ["event 0", "event 1"]);
        let dropped: serde_json::Value = serde_json::from_str(lines[2]).unwrap();
        assert_eq!(
            (
                dropped["dropped"].clone(),
                dropped["switch_channel"].clone(),
                dropped["queue"].clone()
            ),
            (7.into(), 4.into(), 3.into())
        );
        assert_eq!(counters.lines(), 3);
        // Only what is new is reported next time.
        assert!(queue.push(record("x")));
        assert!(queue.push(record("y")));
        assert!(queue.push(record("z")));
        writer.report_drops(SystemTime::now());
        let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        assert!(
            text.lines().last().unwrap().contains("\"dropped\":1,"),
            "{text}"
        );
    }

    #[test]
    fn the_writer_thread_writes_what_is_queued_and_stops_with_the_queue() {
        let dir = tempfile::tempdir().unwrap();
        let counters = Arc::new(AuditCounters::default());
        let cfg = cfg(dir.path(), LineFormat::Text);
        let writer = Writer::open(&cfg, counters.clone()).unwrap();
        let (queue, rx) = LineQueue::new(10, counters.clone());
        let thread = std::thread::spawn(move || writer.run(rx));
        queue.push(record("one"));
        queue.push(record("two"));
        drop(queue);
        thread.join().unwrap();
        let text = std::fs::read_to_string(dir.path().join("audit.log")).unwrap();
        assert_eq!(text, "one\ntwo\n");
    }

    #[test]
    fn a_file_that_cannot_be_opened_is_refused_at_start() {
        let counters = Arc::new(AuditCounters::default());
        let cfg = AuditLogConfig {
            path: Some("/proc/ofnode-audit-test/audit.log".into()),
            ..AuditLogConfig::default()
        };
        assert!(start(&cfg, counters).is_err());
    }
}
