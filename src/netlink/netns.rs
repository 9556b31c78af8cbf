//! Running a short piece of work inside another network namespace.
//!
//! `setns(2)` changes the namespace of the calling *thread* only. Doing it on a tokio worker or
//! a pooled blocking thread would leave that thread in the wrong namespace for whatever runs on
//! it next, so the work runs on a dedicated thread that enters the namespace and then ends: the
//! switch back is the thread's exit, and nothing else ever runs on it. What the work creates
//! keeps its namespace: a netlink socket stays bound to the namespace it was opened in, and a
//! /proc/sys/net file resolves in the namespace of the thread that opens it.

use std::fs::File;
use std::io;
use std::path::Path;

use nix::sched::{setns, CloneFlags};

use super::error::{Error, Result};

/// Runs `work` in the network namespace at `netns` (a path such as `/run/netns/NAME`), or in the
/// current one when `netns` is `None`.
pub(crate) fn run_in<T, F>(netns: Option<&Path>, work: F) -> Result<T>
where
    T: Send,
    F: FnOnce() -> Result<T> + Send,
{
    let Some(path) = netns else {
        return work();
    };
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| {
            enter(path)?;
            work()
        });
        thread.join().unwrap_or_else(|_| {
            Err(Error::Netns {
                path: path.to_path_buf(),
                source: io::Error::other("the namespace worker thread panicked"),
            })
        })
    })
}

fn enter(path: &Path) -> Result<()> {
    let netns_error = |source| Error::Netns {
        path: path.to_path_buf(),
        source,
    };
    let file = File::open(path).map_err(netns_error)?;
    setns(&file, CloneFlags::CLONE_NEWNET).map_err(|errno| netns_error(errno.into()))
}
