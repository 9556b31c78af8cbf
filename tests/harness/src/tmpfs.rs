//! A small tmpfs mounted over a test's directory (to run a daemon out of disk space), unmounted
//! on drop. Mount it before starting a daemon that uses the directory: `ip netns exec` gives the
//! daemon a copy of the mount table taken when it starts.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::{run, run_ok, CommandError};

#[derive(Debug)]
pub struct Tmpfs {
    path: PathBuf,
}

impl Tmpfs {
    /// Mounts a tmpfs of `size_kib` KiB on `path` (created if missing).
    pub fn mount(path: &Path, size_kib: u64) -> Result<Tmpfs, CommandError> {
        std::fs::create_dir_all(path)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", path.display())))?;
        run_ok(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k,mode=0700")])
                .arg("ofnode-test")
                .arg(path),
        )?;
        Ok(Tmpfs {
            path: path.to_path_buf(),
        })
    }

    /// Fills the file system until a write fails with ENOSPC; returns the filler file, whose
    /// removal gives the space back.
    pub fn fill(&self) -> Result<PathBuf, CommandError> {
        use std::io::Write;
        let filler = self.path.join("filler");
        let mut file = std::fs::File::create(&filler)
            .map_err(|e| CommandError::Other(format!("create {}: {e}", filler.display())))?;
        let chunk = [0u8; 512];
        loop {
            match file.write(&chunk) {
                Ok(0) => return Ok(filler),
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ENOSPC) => return Ok(filler),
                Err(e) => {
                    return Err(CommandError::Other(format!(
                        "fill {}: {e}",
                        filler.display()
                    )))
                }
            }
        }
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: a daemon still holding files in it cannot keep the mount alive.
        let _ = run(Command::new("umount").arg("-l").arg(&self.path));
    }
}
