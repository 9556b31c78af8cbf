//! Durable desired state under `state_dir`: a snapshot plus an append-only journal.
//!
//! Every acknowledged batch of [`Change`]s is one journal line, written and `fdatasync`ed before
//! the operations it holds return success; one sync covers a whole batch, so concurrent
//! operations share it. When the journal grows, the state is written as a new snapshot
//! atomically (temp file, fsync, rename, fsync of the directory) and the journal starts over.
//! Loading replays the journal on top of the snapshot; a torn last line (a write cut short by a
//! crash, never acknowledged) is dropped, damage anywhere else is an error.

use std::fs::{File, OpenOptions};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::state::{replay, Change, NodeState, RecordedChange};

const SNAPSHOT: &str = "state.json";
const SNAPSHOT_TMP: &str = "state.json.tmp";
const JOURNAL: &str = "journal.jsonl";
/// Written at the top of the snapshot so that a future format can be told apart.
const FORMAT: u32 = 1;
/// Journal lines after which the next append also writes a snapshot.
const SNAPSHOT_EVERY: u64 = 2048;
/// A journal line longer than this is damage, not data (bounds what a bad file can allocate).
const MAX_LINE: usize = 64 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StateError {
    #[error("state directory {path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("state file {path} is damaged at line {line}: {reason}")]
    Damaged {
        path: PathBuf,
        line: u64,
        reason: String,
    },
    #[error("state file {path} has format {found}, this ofnode reads format {FORMAT}")]
    Format { path: PathBuf, found: u32 },
}

#[derive(Serialize, Deserialize)]
struct Snapshot {
    format: u32,
    /// The sequence number of the last journal record the snapshot includes.
    seq: u64,
    state: NodeState,
}

#[derive(Serialize, Deserialize)]
struct Record {
    seq: u64,
    changes: Vec<Change>,
}

/// A record as any ofnode wrote it (older ones name pods by address: `legacy.rs`).
#[derive(Deserialize)]
struct RecordRead {
    seq: u64,
    changes: Vec<RecordedChange>,
}

/// The open store; one writer (the node's writer task) owns it.
#[derive(Debug)]
pub struct Journal {
    dir: PathBuf,
    journal: File,
    seq: u64,
    lines_since_snapshot: u64,
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> StateError + '_ {
    move |source| StateError::Io {
        path: path.to_path_buf(),
        source,
    }
}

impl Journal {
    /// Opens (creating if needed) the store in `dir` and returns it with the loaded state.
    pub fn open(dir: &Path) -> Result<(Journal, NodeState), StateError> {
        std::fs::create_dir_all(dir).map_err(io_err(dir))?;
        let (mut state, snapshot_seq) = load_snapshot(&dir.join(SNAPSHOT))?;
        let journal_path = dir.join(JOURNAL);
        let (seq, lines, valid_len) = replay_journal(&journal_path, snapshot_seq, &mut state)?;
        let journal = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&journal_path)
            .map_err(io_err(&journal_path))?;
        // Cut a torn tail off so that the next record starts on a line of its own.
        if journal.metadata().map_err(io_err(&journal_path))?.len() != valid_len {
            journal.set_len(valid_len).map_err(io_err(&journal_path))?;
            journal.sync_all().map_err(io_err(&journal_path))?;
        }
        let store = Journal {
            dir: dir.to_path_buf(),
            journal,
            seq,
            lines_since_snapshot: lines,
        };
        Ok((store, state))
    }

    /// Appends one batch of changes and syncs it to disk. True when the journal has grown long
    /// enough that the caller should write a snapshot.
    pub fn append(&mut self, changes: &[Change]) -> Result<bool, StateError> {
        if changes.is_empty() {
            return Ok(false);
        }
        let path = self.dir.join(JOURNAL);
        let record = Record {
            seq: self.seq + 1,
            changes: changes.to_vec(),
        };
        let mut line = serde_json::to_vec(&record).map_err(|e| StateError::Io {
            path: path.clone(),
            source: std::io::Error::other(e),
        })?;
        line.push(b'\n');
        let before = self.journal.metadata().map_err(io_err(&path))?.len();
        let written = self
            .journal
            .write_all(&line)
            .and_then(|()| self.journal.sync_data());
        if let Err(e) = written {
            // A disk that is full takes part of a line. Once a later append succeeds, that part
            // would be damage in the middle of the journal, so cut it off now (best effort: a
            // part left at the end is dropped as a torn tail at load).
            let _ = self.journal.set_len(before);
            return Err(io_err(&path)(e));
        }
        self.seq += 1;
        self.lines_since_snapshot += 1;
        Ok(self.lines_since_snapshot >= SNAPSHOT_EVERY)
    }

    /// Writes `state` as the snapshot (atomically) and empties the journal.
    pub fn snapshot(&mut self, state: &NodeState) -> Result<(), StateError> {
        let snapshot = Snapshot {
            format: FORMAT,
            seq: self.seq,
            state: state.clone(),
        };
        let tmp = self.dir.join(SNAPSHOT_TMP);
        let bytes = serde_json::to_vec(&snapshot).map_err(|e| StateError::Io {
            path: tmp.clone(),
            source: std::io::Error::other(e),
        })?;
        write_atomically(&self.dir, &tmp, &self.dir.join(SNAPSHOT), &bytes)?;
        // Only now may the journal go: a crash before this line replays records the snapshot
        // already holds, which is harmless because changes are idempotent and seq-filtered.
        let journal_path = self.dir.join(JOURNAL);
        self.journal.set_len(0).map_err(io_err(&journal_path))?;
        self.journal.sync_all().map_err(io_err(&journal_path))?;
        self.lines_since_snapshot = 0;
        Ok(())
    }
}

fn write_atomically(dir: &Path, tmp: &Path, target: &Path, bytes: &[u8]) -> Result<(), StateError> {
    let mut file = File::create(tmp).map_err(io_err(tmp))?;
    file.write_all(bytes).map_err(io_err(tmp))?;
    file.sync_all().map_err(io_err(tmp))?;
    drop(file);
    std::fs::rename(tmp, target).map_err(io_err(target))?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err(dir))
}

fn load_snapshot(path: &Path) -> Result<(NodeState, u64), StateError> {
    let bytes = match std::fs::read(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((NodeState::default(), 0)),
        Err(e) => return Err(io_err(path)(e)),
    };
    let snapshot: Snapshot = serde_json::from_slice(&bytes).map_err(|e| StateError::Damaged {
        path: path.to_path_buf(),
        line: e.line() as u64,
        reason: e.to_string(),
    })?;
    if snapshot.format != FORMAT {
        return Err(StateError::Format {
            path: path.to_path_buf(),
            found: snapshot.format,
        });
    }
    Ok((snapshot.state, snapshot.seq))
}

/// Replays the journal's records newer than `after` into `state`. Returns the last sequence
/// number, the number of lines, and the length of the valid prefix of the file.
fn replay_journal(
    path: &Path,
    after: u64,
    state: &mut NodeState,
) -> Result<(u64, u64, u64), StateError> {
    let file = match File::open(path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok((after, 0, 0)),
        Err(e) => return Err(io_err(path)(e)),
    };
    let mut reader = BufReader::new(file);
    let (mut seq, mut lines, mut valid_len) = (after, 0u64, 0u64);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = (&mut reader)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .map_err(io_err(path))?;
        if n == 0 {
            break;
        }
        if n > MAX_LINE {
            return Err(StateError::Damaged {
                path: path.to_path_buf(),
                line: lines + 1,
                reason: format!("line longer than {MAX_LINE} bytes"),
            });
        }
        // A line without its newline is a write a crash cut short: it was never acknowledged,
        // and nothing can follow it.
        if line.last() != Some(&b'\n') {
            tracing::warn!(path = %path.display(), "dropping a torn last journal line");
            break;
        }
        let damaged = |reason: String| StateError::Damaged {
            path: path.to_path_buf(),
            line: lines + 1,
            reason,
        };
        let record: RecordRead =
            serde_json::from_slice(&line).map_err(|e| damaged(e.to_string()))?;
        if record.seq > seq {
            replay(state, record.changes).map_err(damaged)?;
            seq = record.seq;
        }
        lines += 1;
        valid_len += n as u64;
    }
    Ok((seq, lines, valid_len))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sdn::objects::PodInfo;
    use crate::sdn::types::Pod;
    use crate::value::PodKey;
    use std::net::Ipv4Addr;

    fn pod_change(last: u8) -> Change {
        let ip = Ipv4Addr::new(10, 128, 0, last);
        Change::LocalPod {
            key: format!("x/pod-{last}").parse().unwrap(),
            pod: Some(Pod {
                veth: Some(format!("veth{last}").parse().unwrap()),
                ip,
                mac: "0a:58:0a:80:00:05".parse().unwrap(),
                sandbox: "ab".repeat(32).parse().unwrap(),
                vnid: Default::default(),
                ofport: u16::from(last),
            }),
        }
    }

    fn tempdir() -> PathBuf {
        let dir = std::env::temp_dir().join(format!(
            "ofnode-store-test-{}-{}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn appended_changes_survive_reopen() {
        let dir = tempdir();
        let (mut store, mut state) = Journal::open(&dir).unwrap();
        for last in 2..6 {
            let change = pod_change(last);
            state.apply(change.clone());
            store.append(&[change]).unwrap();
        }
        drop(store);
        let (_, loaded) = Journal::open(&dir).unwrap();
        assert_eq!(loaded, state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn snapshot_then_journal_and_torn_tail() {
        let dir = tempdir();
        let (mut store, mut state) = Journal::open(&dir).unwrap();
        let first = pod_change(2);
        state.apply(first.clone());
        store.append(&[first]).unwrap();
        store.snapshot(&state).unwrap();
        let second = pod_change(3);
        state.apply(second.clone());
        store.append(&[second]).unwrap();
        drop(store);
        // A crash in the middle of the next write leaves half a line.
        let mut journal = OpenOptions::new()
            .append(true)
            .open(dir.join(JOURNAL))
            .unwrap();
        journal.write_all(b"{\"seq\":3,\"changes\":[{\"ki").unwrap();
        drop(journal);
        let (mut store, loaded) = Journal::open(&dir).unwrap();
        assert_eq!(loaded, state);
        // The torn tail is gone, so the next record is readable.
        let third = pod_change(4);
        state.apply(third.clone());
        store.append(&[third]).unwrap();
        drop(store);
        assert_eq!(Journal::open(&dir).unwrap().1, state);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// A journal as ofnode wrote it before pods had names (pods by address, their namespace
    /// and labels apart, other nodes' pods by address) loads: every pod named
    /// `NAMESPACE/ip-A-B-C-D`, its labels and attachment kept.
    #[test]
    fn a_journal_of_pods_by_address_loads_with_pods_by_name() {
        let sandbox = "ab".repeat(32);
        let pod = format!(
            r#"{{"veth":"veth5","ip":"10.128.0.5","mac":"0a:58:0a:80:00:05","sandbox":"{sandbox}","vnid":11,"ofport":5}}"#
        );
        let lines = [
            format!(r#"{{"seq":1,"changes":[{{"kind":"pod","ip":"10.128.0.5","pod":{pod}}},{{"kind":"host_subnet","subnet":"10.128.2.0/23","host_subnet":{{"host_ip":"192.0.2.2","subnet":"10.128.2.0/23","fixed_vnid":7,"vtep_mac":"02:00:00:00:00:02"}}}}]}}"#),
            r#"{"seq":2,"changes":[{"kind":"pod_meta","ip":"10.128.0.5","meta":{"namespace":"x","labels":{"app":"web"}}}]}"#.to_string(),
            r#"{"seq":3,"changes":[{"kind":"remote_pod","ip":"10.128.2.9","pod":{"ip":"10.128.2.9","namespace":"y","labels":{"app":"db"}}}]}"#.to_string(),
            r#"{"seq":4,"changes":[{"kind":"remote_pod","ip":"10.128.2.8","pod":{"ip":"10.128.2.8","namespace":"y"}}]}"#.to_string(),
            r#"{"seq":5,"changes":[{"kind":"remote_pod","ip":"10.128.2.8","pod":null}]}"#.to_string(),
        ];
        let old = tempdir();
        std::fs::write(old.join(JOURNAL), lines.join("\n") + "\n").unwrap();
        let (_, state) = Journal::open(&old).unwrap();
        let local: PodKey = "x/ip-10-128-0-5".parse().unwrap();
        assert_eq!(state.pods.keys().collect::<Vec<_>>(), [&local]);
        assert_eq!(state.pods[&local].ofport, 5);
        assert_eq!(state.host_subnets.len(), 1);
        let infos: Vec<String> = state
            .pod_infos
            .iter()
            .map(|(k, i)| format!("{k} local={} {:?}", i.local, i.labels))
            .collect();
        assert_eq!(
            infos,
            [
                r#"x/ip-10-128-0-5 local=true {"app": "web"}"#,
                r#"y/ip-10-128-2-9 local=false {"app": "db"}"#,
            ]
        );
        std::fs::remove_dir_all(&old).unwrap();
    }

    /// Today's records, written as the format says (a change of it shows here).
    #[test]
    fn the_journal_format_is_pinned() {
        let sandbox = "ab".repeat(32);
        let record = format!(
            r#"{{"seq":1,"changes":[{{"kind":"local_pod","key":"x/pod-5","pod":{{"veth":"veth5","ip":"10.128.0.5","mac":"0a:58:0a:80:00:05","sandbox":"{sandbox}","vnid":0,"ofport":5}}}},{{"kind":"pod_info","key":"x/pod-5","info":{{"labels":{{"app":"web"}},"ips":["10.128.0.5"],"local":true}}}}]}}"#
        );
        let info = PodInfo {
            labels: [("app".to_string(), "web".to_string())].into(),
            ips: vec!["10.128.0.5".parse().unwrap()],
            local: true,
            ports: Vec::new(),
        };
        let changes = [
            pod_change(5),
            Change::PodInfo {
                key: "x/pod-5".parse().unwrap(),
                info: Some(info),
            },
        ];
        let new = tempdir();
        let (mut store, _) = Journal::open(&new).unwrap();
        store.append(&changes).unwrap();
        let written = std::fs::read_to_string(new.join(JOURNAL)).unwrap();
        assert_eq!(written, format!("{record}\n"));
        let (_, state) = Journal::open(&new).unwrap();
        assert_eq!(state.pod_infos.len(), 1);
        std::fs::remove_dir_all(&new).unwrap();
    }

    #[test]
    fn damage_in_the_middle_is_an_error() {
        let dir = tempdir();
        std::fs::write(dir.join(JOURNAL), b"not json\n{\"seq\":1,\"changes\":[]}\n").unwrap();
        let err = Journal::open(&dir).unwrap_err();
        assert!(matches!(err, StateError::Damaged { line: 1, .. }), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
