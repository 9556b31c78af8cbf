//! The log file with size-based rotation: before a line would take the file past
//! `max_bytes`, `PATH.keep` goes, `PATH.N` becomes `PATH.N+1`, `PATH` becomes `PATH.1`, and a
//! new `PATH` is started (as logrotate's numbered scheme; `keep` 0: the old file is removed).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

#[derive(Debug)]
pub struct RotatingFile {
    path: PathBuf,
    max_bytes: u64,
    keep: u32,
    file: Option<File>,
    size: u64,
}

impl RotatingFile {
    /// Opens (creating it and its directory) `path` for appending.
    pub fn open(path: &Path, max_bytes: u64, keep: u32) -> io::Result<RotatingFile> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)?;
        }
        let mut file = RotatingFile {
            path: path.to_path_buf(),
            max_bytes,
            keep,
            file: None,
            size: 0,
        };
        file.reopen()?;
        Ok(file)
    }

    fn reopen(&mut self) -> io::Result<()> {
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)?;
        self.size = file.metadata()?.len();
        self.file = Some(file);
        Ok(())
    }

    /// Appends `line` and a newline, rotating first when it would not fit. A file that could
    /// not be (re)opened is tried again at the next line.
    pub fn write_line(&mut self, line: &str) -> io::Result<()> {
        let len = line.len() as u64 + 1;
        if self.size > 0 && self.size + len > self.max_bytes {
            self.rotate()?;
        }
        if self.file.is_none() {
            self.reopen()?;
        }
        let file = self
            .file
            .as_mut()
            .ok_or_else(|| io::Error::other("the log file is not open"))?;
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        file.write_all(&bytes)?;
        self.size += len;
        Ok(())
    }

    fn numbered(&self, n: u32) -> PathBuf {
        let mut name = self.path.clone().into_os_string();
        name.push(format!(".{n}"));
        PathBuf::from(name)
    }

    fn rotate(&mut self) -> io::Result<()> {
        self.file = None;
        if self.keep == 0 {
            remove_if_there(&self.path)?;
        } else {
            remove_if_there(&self.numbered(self.keep))?;
            for n in (1..self.keep).rev() {
                rename_if_there(&self.numbered(n), &self.numbered(n + 1))?;
            }
            rename_if_there(&self.path, &self.numbered(1))?;
        }
        self.reopen()
    }
}

fn remove_if_there(path: &Path) -> io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

fn rename_if_there(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(path: &Path) -> String {
        std::fs::read_to_string(path).unwrap_or_default()
    }

    #[test]
    fn the_file_rotates_before_it_passes_its_size_and_keeps_that_many() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        // Lines of 9 bytes + newline: three fit in 30 bytes.
        let mut file = RotatingFile::open(&path, 30, 2).unwrap();
        for i in 0..10 {
            file.write_line(&format!("line-{i:04}")).unwrap();
        }
        assert_eq!(read(&path), "line-0009\n");
        assert_eq!(
            read(&dir.path().join("audit.log.1")),
            "line-0006\nline-0007\nline-0008\n"
        );
        assert_eq!(
            read(&dir.path().join("audit.log.2")),
            "line-0003\nline-0004\nline-0005\n"
        );
        assert!(!dir.path().join("audit.log.3").exists(), "only 2 kept");
        for f in [path.clone(), dir.path().join("audit.log.1")] {
            assert!(std::fs::metadata(f).unwrap().len() <= 30);
        }
    }

    #[test]
    fn a_missing_directory_is_made_and_a_file_in_the_way_is_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ofnode/audit/audit.log");
        RotatingFile::open(&path, 4096, 1)
            .unwrap()
            .write_line("x")
            .unwrap();
        assert_eq!(read(&path), "x\n");
        let blocked = dir.path().join("ofnode/audit/audit.log/inner.log");
        assert!(RotatingFile::open(&blocked, 4096, 1).is_err());
    }

    #[test]
    fn an_existing_file_is_appended_to_and_counted() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        std::fs::write(&path, "old-line-\n").unwrap();
        let mut file = RotatingFile::open(&path, 25, 0).unwrap();
        file.write_line("new-line-").unwrap();
        assert_eq!(read(&path), "old-line-\nnew-line-\n");
        file.write_line("third----").unwrap();
        assert_eq!(read(&path), "third----\n", "keep 0: the old file is gone");
        assert!(!dir.path().join("audit.log.1").exists());
    }

    #[test]
    fn a_file_moved_away_is_followed_by_a_new_one_at_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.log");
        let mut file = RotatingFile::open(&path, 20, 1).unwrap();
        file.write_line("aaaaaaaaa").unwrap();
        std::fs::remove_file(&path).unwrap();
        file.write_line("bbbbbbbbb").unwrap();
        file.write_line("ccccccccc").unwrap();
        assert_eq!(read(&path), "ccccccccc\n");
    }
}
