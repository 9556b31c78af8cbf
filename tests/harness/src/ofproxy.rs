//! A fault-injecting OpenFlow proxy between a controller (ofnode) and a REAL ovs-vswitchd.
//!
//! ```text
//!   ofnode ──unix:DIR/br0.proxy──▶ OfProxy ──DIR/br0.mgmt──▶ ovs-vswitchd
//! ```
//!
//! ofnode dials the proxy (`--openflow unix:PATH`, or `SwitchConfig` with [`OfProxy::target`]);
//! for every connection it accepts, the proxy dials the switch and relays whole messages both
//! ways. On the way it
//! - logs every message that passed, so a test can count at the switch side what an operation
//!   sent (bundles, the flow mods in each, how each ended, flow mods outside bundles): see
//!   [`OfProxy::traffic_since`] and [`Traffic`];
//! - holds switch messages a test names until released ([`OfProxy::hold`]), or delays them
//!   ([`OfProxy::delay`]): a reply that never comes, or comes late;
//! - cuts the connection before or after a message a test names ([`OfProxy::cut_before`],
//!   [`OfProxy::cut_after`]): a connection lost mid-bundle, or right after the COMMIT;
//! - reorders: holds switch messages until another one passed ([`OfProxy::reorder`]);
//! - injects bytes toward the controller on the live session ([`OfProxy::inject`]): garbage,
//!   unsolicited messages;
//! - stops reading from the controller ([`OfProxy::pause_reading_from_controller`]): a switch
//!   that stops reading, with the real switch behind it.
//!
//! Faults apply to the connection that is current when they are set (or the next one when none
//! is), so the session ofnode dials after a fault is a clean one. Everything is plain threads;
//! dropping the proxy closes every connection and joins them.

mod frame;
mod traffic;

use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub use frame::{msg_type, BundleCtrl, Direction, Frame};
pub use traffic::{Bundle, BundleEnd, Traffic};

use crate::ovs::Ovs;
use crate::process::CommandError;

/// What [`OfProxy::wait_until`] shows its predicate.
pub struct View<'a> {
    /// Every message that passed, in order.
    pub log: &'a [Frame],
    /// Connections accepted so far.
    pub connections: usize,
    /// The newest open connection.
    pub current: Option<usize>,
    /// Switch messages held right now.
    pub held: &'a [Frame],
}

/// Which messages a fault applies to.
pub type Matcher = Box<dyn Fn(&Frame) -> bool + Send>;

/// A running proxy. See the module documentation.
pub struct OfProxy {
    path: PathBuf,
    shared: Arc<Shared>,
    /// A clone of the listening socket, to wake the acceptor when dropped (its path may be
    /// gone by then).
    listener: UnixListener,
    acceptor: Option<JoinHandle<()>>,
}

struct Shared {
    switch: PathBuf,
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    stopping: bool,
    log: Vec<Frame>,
    conns: Vec<Conn>,
    holds: Vec<Hold>,
    cuts: Vec<Cut>,
    reorders: Vec<Reorder>,
    /// Switch messages held by a `hold` fault, in arrival order.
    held: Vec<Frame>,
    /// The controller → switch pump of these connections reads nothing while set.
    paused: Option<usize>,
}

struct Conn {
    id: usize,
    /// The controller's side, shared by everyone who writes to it (the switch pump, releases,
    /// injections) so that messages never interleave.
    to_controller: Arc<Mutex<UnixStream>>,
    /// Clones used only to shut both sides down.
    controller: UnixStream,
    switch: UnixStream,
    open: bool,
    pumps: Vec<JoinHandle<()>>,
}

/// The connection a fault belongs to: `None` until one is open.
type Scope = Option<usize>;

struct Hold {
    scope: Scope,
    matcher: Matcher,
    /// Deliver after this long instead of holding until released.
    delay: Option<Duration>,
    /// Messages still to catch; `None` for every one.
    remaining: Option<usize>,
}

struct Cut {
    scope: Scope,
    matcher: Matcher,
    /// Forward the matching message to the switch before cutting.
    forward_first: bool,
}

struct Reorder {
    scope: Scope,
    first: Matcher,
    after: Matcher,
    waiting: Vec<Frame>,
}

fn in_scope(scope: Scope, conn: usize) -> bool {
    scope.is_none_or(|s| s == conn)
}

impl OfProxy {
    /// A proxy at `DIR/<bridge>.proxy` in front of `ovs`'s `DIR/<bridge>.mgmt`.
    pub fn in_front_of(ovs: &Ovs, bridge: &str) -> Result<OfProxy, CommandError> {
        let listen = ovs.dir().join(format!("{bridge}.proxy"));
        OfProxy::start(&listen, &ovs.mgmt_sock(bridge))
            .map_err(|e| CommandError::Other(format!("start OpenFlow proxy: {e}")))
    }

    /// A proxy listening on the unix socket `listen`, relaying to the switch at `switch`.
    pub fn start(listen: &Path, switch: &Path) -> std::io::Result<OfProxy> {
        let _ = std::fs::remove_file(listen);
        let listener = UnixListener::bind(listen)?;
        let shared = Arc::new(Shared {
            switch: switch.to_path_buf(),
            state: Mutex::new(State::default()),
            changed: Condvar::new(),
        });
        let wake = listener.try_clone()?;
        let acceptor = {
            let shared = shared.clone();
            std::thread::spawn(move || accept_loop(&listener, &shared))
        };
        Ok(OfProxy {
            path: listen.to_path_buf(),
            shared,
            listener: wake,
            acceptor: Some(acceptor),
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `unix:PATH`, the target a controller dials.
    pub fn target(&self) -> String {
        format!("unix:{}", self.path.display())
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.shared.lock().conns.len()
    }

    /// The newest connection that is still open.
    pub fn current(&self) -> Option<usize> {
        self.shared.lock().current()
    }

    /// A position in the log, for [`OfProxy::traffic_since`].
    pub fn mark(&self) -> usize {
        self.shared.lock().log.len()
    }

    /// Everything that passed since `mark`.
    pub fn traffic_since(&self, mark: usize) -> Traffic {
        let state = self.shared.lock();
        Traffic {
            frames: state.log.get(mark..).unwrap_or_default().to_vec(),
        }
    }

    /// Everything that passed.
    pub fn traffic(&self) -> Traffic {
        self.traffic_since(0)
    }

    /// Holds every switch message `matcher` accepts until [`OfProxy::release_held`].
    pub fn hold(&self, matcher: impl Fn(&Frame) -> bool + Send + 'static) {
        self.add_hold(Box::new(matcher), None, None);
    }

    /// Holds the next switch message `matcher` accepts until [`OfProxy::release_held`].
    pub fn hold_once(&self, matcher: impl Fn(&Frame) -> bool + Send + 'static) {
        self.add_hold(Box::new(matcher), None, Some(1));
    }

    /// Delivers the next switch message `matcher` accepts `delay` late (others pass meanwhile).
    pub fn delay(&self, matcher: impl Fn(&Frame) -> bool + Send + 'static, delay: Duration) {
        self.add_hold(Box::new(matcher), Some(delay), Some(1));
    }

    fn add_hold(&self, matcher: Matcher, delay: Option<Duration>, remaining: Option<usize>) {
        let mut state = self.shared.lock();
        let scope = state.current();
        state.holds.push(Hold {
            scope,
            matcher,
            delay,
            remaining,
        });
    }

    /// Stops holding (every hold fault is removed) and delivers what was held, in order, on
    /// connections still open. Returns how many messages it delivered.
    pub fn release_held(&self) -> usize {
        let held = {
            let mut state = self.shared.lock();
            state.holds.clear();
            std::mem::take(&mut state.held)
        };
        held.into_iter()
            .filter(|frame| self.shared.deliver(frame.clone()))
            .count()
    }

    /// Switch messages held right now.
    pub fn held(&self) -> Vec<Frame> {
        self.shared.lock().held.clone()
    }

    /// Cuts the connection (both sides) when the controller sends a message `matcher`
    /// accepts, before it reaches the switch.
    pub fn cut_before(&self, matcher: impl Fn(&Frame) -> bool + Send + 'static) {
        self.add_cut(Box::new(matcher), false);
    }

    /// Cuts the connection right after a message `matcher` accepts went to the switch.
    pub fn cut_after(&self, matcher: impl Fn(&Frame) -> bool + Send + 'static) {
        self.add_cut(Box::new(matcher), true);
    }

    fn add_cut(&self, matcher: Matcher, forward_first: bool) {
        let mut state = self.shared.lock();
        let scope = state.current();
        state.cuts.push(Cut {
            scope,
            matcher,
            forward_first,
        });
    }

    /// Cuts the current connection now.
    pub fn cut_now(&self) {
        let mut state = self.shared.lock();
        if let Some(conn) = state.current() {
            state.close(conn);
        }
    }

    /// Holds switch messages `first` accepts until one `after` accepts has been delivered,
    /// then delivers them right behind it (once).
    pub fn reorder(
        &self,
        first: impl Fn(&Frame) -> bool + Send + 'static,
        after: impl Fn(&Frame) -> bool + Send + 'static,
    ) {
        let mut state = self.shared.lock();
        let scope = state.current();
        state.reorders.push(Reorder {
            scope,
            first: Box::new(first),
            after: Box::new(after),
            waiting: Vec::new(),
        });
    }

    /// Writes `bytes` to the controller on the current connection, as if the switch sent them.
    /// They are not logged (they never came from the switch).
    pub fn inject(&self, bytes: &[u8]) -> std::io::Result<()> {
        let writer = {
            let state = self.shared.lock();
            let conn = state
                .current()
                .and_then(|id| state.conn(id))
                .ok_or_else(|| std::io::Error::other("no open connection to inject into"))?;
            conn.to_controller.clone()
        };
        let mut writer = writer.lock().unwrap_or_else(|e| e.into_inner());
        writer.write_all(bytes)
    }

    /// The current connection's controller → switch pump reads nothing more until
    /// [`OfProxy::resume_reading_from_controller`]: the controller's writes back up.
    pub fn pause_reading_from_controller(&self) {
        let mut state = self.shared.lock();
        state.paused = state.current();
    }

    pub fn resume_reading_from_controller(&self) {
        self.shared.lock().paused = None;
        self.shared.changed.notify_all();
    }

    /// Waits until `ready` holds for what the proxy has seen; false when `timeout` passed
    /// first. `ready` runs with the proxy locked: it must not call the proxy.
    pub fn wait_until(&self, timeout: Duration, ready: impl Fn(&View<'_>) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            let view = View {
                log: &state.log,
                connections: state.conns.len(),
                current: state.current(),
                held: &state.held,
            };
            if ready(&view) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }
}

impl Drop for OfProxy {
    fn drop(&mut self) {
        let pumps = {
            let mut state = self.shared.lock();
            state.stopping = true;
            state.paused = None;
            let ids: Vec<usize> = state.conns.iter().map(|c| c.id).collect();
            for id in ids {
                state.close(id);
            }
            state
                .conns
                .iter_mut()
                .flat_map(|c| std::mem::take(&mut c.pumps))
                .collect::<Vec<_>>()
        };
        self.shared.changed.notify_all();
        // Wakes the acceptor (Linux fails a blocked accept on a listener shut down for
        // reading), which then sees `stopping`.
        // SAFETY: shutdown(2) on a socket descriptor this proxy owns; no memory is involved.
        unsafe {
            libc::shutdown(self.listener.as_raw_fd(), libc::SHUT_RD);
        }
        if let Some(acceptor) = self.acceptor.take() {
            let _ = acceptor.join();
        }
        for pump in pumps {
            let _ = pump.join();
        }
        let _ = std::fs::remove_file(&self.path);
    }
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Writes a switch message to its controller and logs it; false when that connection is
    /// gone.
    fn deliver(&self, frame: Frame) -> bool {
        let writer = {
            let mut state = self.lock();
            let Some(writer) = state.conn(frame.conn).map(|c| c.to_controller.clone()) else {
                return false;
            };
            state.log.push(frame.clone());
            writer
        };
        self.changed.notify_all();
        let mut writer = writer.lock().unwrap_or_else(|e| e.into_inner());
        writer.write_all(&frame.bytes).is_ok()
    }
}

impl State {
    fn current(&self) -> Option<usize> {
        self.conns.iter().rev().find(|c| c.open).map(|c| c.id)
    }

    fn conn(&self, id: usize) -> Option<&Conn> {
        self.conns.iter().find(|c| c.id == id && c.open)
    }

    /// Shuts both sides of connection `id` down (its pumps then end) and forgets what it held.
    fn close(&mut self, id: usize) {
        if let Some(conn) = self.conns.iter_mut().find(|c| c.id == id) {
            conn.open = false;
            let _ = conn.controller.shutdown(std::net::Shutdown::Both);
            let _ = conn.switch.shutdown(std::net::Shutdown::Both);
        }
        self.held.retain(|f| f.conn != id);
        for reorder in &mut self.reorders {
            reorder.waiting.retain(|f| f.conn != id);
        }
    }
}

fn accept_loop(listener: &UnixListener, shared: &Arc<Shared>) {
    for controller in listener.incoming() {
        if shared.lock().stopping {
            return;
        }
        let Ok(controller) = controller else {
            // Not a stop: e.g. out of descriptors. Do not spin.
            std::thread::sleep(Duration::from_millis(10));
            continue;
        };
        // A controller whose switch cannot be reached sees its connection closed at once,
        // as it would dialling the switch itself.
        let Ok(switch) = UnixStream::connect(&shared.switch) else {
            continue;
        };
        if let Err(e) = start_connection(shared, controller, switch) {
            eprintln!("OpenFlow proxy: cannot relay a connection: {e}");
        }
    }
}

fn start_connection(
    shared: &Arc<Shared>,
    controller: UnixStream,
    switch: UnixStream,
) -> std::io::Result<()> {
    let to_controller = Arc::new(Mutex::new(controller.try_clone()?));
    let (controller_read, switch_read) = (controller.try_clone()?, switch.try_clone()?);
    let switch_write = switch.try_clone()?;
    let mut state = shared.lock();
    let id = state.conns.len() + 1;
    // Faults set while no connection was open belong to this one.
    for hold in &mut state.holds {
        hold.scope.get_or_insert(id);
    }
    for cut in &mut state.cuts {
        cut.scope.get_or_insert(id);
    }
    for reorder in &mut state.reorders {
        reorder.scope.get_or_insert(id);
    }
    let up = {
        let shared = shared.clone();
        std::thread::spawn(move || pump_to_switch(&shared, id, controller_read, switch_write))
    };
    let down = {
        let shared = shared.clone();
        std::thread::spawn(move || pump_to_controller(&shared, id, switch_read))
    };
    state.conns.push(Conn {
        id,
        to_controller,
        controller,
        switch,
        open: true,
        pumps: vec![up, down],
    });
    drop(state);
    shared.changed.notify_all();
    Ok(())
}

/// Controller → switch: log each message, apply cut faults, forward.
fn pump_to_switch(shared: &Shared, id: usize, mut from: UnixStream, mut to: UnixStream) {
    loop {
        wait_while_paused(shared, id);
        let Ok(Some(bytes)) = frame::read_message(&mut from) else {
            break;
        };
        let frame = Frame {
            conn: id,
            direction: Direction::ToSwitch,
            bytes,
        };
        let cut = {
            let mut state = shared.lock();
            let at = state
                .cuts
                .iter()
                .position(|c| in_scope(c.scope, id) && (c.matcher)(&frame));
            let cut = at.map(|at| state.cuts.remove(at));
            if cut.as_ref().is_none_or(|c| c.forward_first) {
                state.log.push(frame.clone());
            }
            cut
        };
        shared.changed.notify_all();
        if let Some(cut) = cut {
            // Forwarded and closed under the lock: the switch's answer to it, delivered only
            // to an open connection, can never slip through before the cut.
            let mut state = shared.lock();
            if cut.forward_first {
                let _ = to.write_all(&frame.bytes);
            }
            state.close(id);
            break;
        }
        if to.write_all(&frame.bytes).is_err() {
            break;
        }
    }
    shared.lock().close(id);
    shared.changed.notify_all();
}

fn wait_while_paused(shared: &Shared, id: usize) {
    let mut state = shared.lock();
    while state.paused == Some(id) && !state.stopping {
        state = shared
            .changed
            .wait(state)
            .unwrap_or_else(|e| e.into_inner());
    }
}

/// Switch → controller: apply hold, delay and reorder faults, deliver the rest.
fn pump_to_controller(shared: &Arc<Shared>, id: usize, mut from: UnixStream) {
    while let Ok(Some(bytes)) = frame::read_message(&mut from) {
        let frame = Frame {
            conn: id,
            direction: Direction::ToController,
            bytes,
        };
        let deliver_now = route_from_switch(shared, frame);
        if !deliver_now.into_iter().all(|f| shared.deliver(f)) {
            break;
        }
    }
    shared.lock().close(id);
    shared.changed.notify_all();
}

/// Decides what becomes of a switch message: held, delayed, kept for a reorder, or delivered
/// now (with whatever a reorder released behind it). Returns what to deliver now, in order.
fn route_from_switch(shared: &Arc<Shared>, frame: Frame) -> Vec<Frame> {
    let mut state = shared.lock();
    let id = frame.conn;
    if let Some(at) = state
        .holds
        .iter()
        .position(|h| in_scope(h.scope, id) && (h.matcher)(&frame))
    {
        let hold = &mut state.holds[at];
        let delay = hold.delay;
        let used_up = hold.remaining.as_mut().is_some_and(|remaining| {
            *remaining -= 1;
            *remaining == 0
        });
        if used_up {
            state.holds.remove(at);
        }
        match delay {
            Some(delay) => {
                let shared = shared.clone();
                std::thread::spawn(move || {
                    std::thread::sleep(delay);
                    shared.deliver(frame);
                });
            }
            None => state.held.push(frame),
        }
        return Vec::new();
    }
    let mut out = Vec::new();
    let mut finished = None;
    for (at, reorder) in state.reorders.iter_mut().enumerate() {
        if !in_scope(reorder.scope, id) {
            continue;
        }
        if (reorder.first)(&frame) {
            reorder.waiting.push(frame);
            return Vec::new();
        }
        if (reorder.after)(&frame) {
            finished = Some(at);
            break;
        }
    }
    out.push(frame);
    if let Some(at) = finished {
        out.extend(state.reorders.remove(at).waiting);
    }
    out
}
