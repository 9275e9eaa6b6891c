//! A loopback TCP proxy in front of etcd that injects network faults on command: cut every
//! connection ([`FaultProxy::cut`]) or hang them without closing ([`FaultProxy::blackhole`]).
//!
//! Invariants: all proxy tasks are owned by the [`FaultProxy`] (the accept task owns the
//! per-connection tasks in a `JoinSet`), so dropping the proxy aborts every one of them; no byte
//! moves while the mode is not [`Mode::Forward`]; bytes held up by a blackhole are delivered, in
//! order, after [`FaultProxy::restore`].

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use tokio::task::{JoinHandle, JoinSet};

/// What the proxy does with traffic; broadcast to every connection through a `watch` channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Forward bytes both ways.
    Forward,
    /// Reset every open connection and refuse new ones (accept, then close at once).
    Cut,
    /// Keep connections open, accept new ones, forward nothing.
    Blackhole,
}

/// A TCP proxy on a free 127.0.0.1 port that forwards to one target (an etcd client port) and
/// can cut or blackhole the traffic. Point clients at [`FaultProxy::endpoint`].
#[derive(Debug)]
pub struct FaultProxy {
    /// The proxy's listening address.
    addr: SocketAddr,
    /// Sends mode changes to the accept task and every connection.
    mode_tx: watch::Sender<Mode>,
    /// Connections being proxied right now.
    open: Arc<AtomicUsize>,
    /// How many times [`FaultProxy::cut`] was called.
    cuts: AtomicUsize,
    /// The accept task; it owns the connection tasks, so aborting it ends them all.
    accept_task: JoinHandle<()>,
}

impl FaultProxy {
    /// Starts forwarding from a fresh 127.0.0.1 port to `target`. The target is dialled once per
    /// accepted connection, so it may be down (or restarted) meanwhile.
    pub async fn start(target: SocketAddr) -> FaultProxy {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .await
            .expect("bind proxy listener on 127.0.0.1:0");
        let addr = listener.local_addr().expect("proxy listener address");
        let (mode_tx, mode_rx) = watch::channel(Mode::Forward);
        let open = Arc::new(AtomicUsize::new(0));
        let accept_task = tokio::spawn(accept_loop(listener, target, mode_rx, open.clone()));
        FaultProxy {
            addr,
            mode_tx,
            open,
            cuts: AtomicUsize::new(0),
            accept_task,
        }
    }

    /// The proxy's URL, `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Resets every proxied connection at once (both directions, with RST) and refuses new ones
    /// until [`FaultProxy::restore`]: "the network to etcd went away".
    pub fn cut(&self) {
        self.cuts.fetch_add(1, Ordering::SeqCst);
        self.mode_tx.send_replace(Mode::Cut);
    }

    /// Keeps every connection open and accepts new ones, but forwards no bytes in either
    /// direction until [`FaultProxy::restore`]: "etcd hangs without closing", which only
    /// keepalives or timeouts detect.
    pub fn blackhole(&self) {
        self.mode_tx.send_replace(Mode::Blackhole);
    }

    /// Forwards again: new connections go through, and blackholed ones resume where they stopped.
    pub fn restore(&self) {
        self.mode_tx.send_replace(Mode::Forward);
    }

    /// Connections the proxy holds open right now (forwarding or blackholed).
    pub fn open_connections(&self) -> usize {
        self.open.load(Ordering::SeqCst)
    }

    /// How many times [`FaultProxy::cut`] was called.
    pub fn cuts(&self) -> usize {
        self.cuts.load(Ordering::SeqCst)
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        // Dropping the accept task's future drops its JoinSet, which aborts every connection.
        self.accept_task.abort();
    }
}

/// Accepts connections and hands each to a task in `connections`, which this loop owns.
async fn accept_loop(
    listener: TcpListener,
    target: SocketAddr,
    mode_rx: watch::Receiver<Mode>,
    open: Arc<AtomicUsize>,
) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((client, _)) = accepted else { continue };
                if *mode_rx.borrow() == Mode::Cut {
                    // Refused: close it at once, with RST like the cut connections.
                    let _ = client.set_zero_linger();
                    continue;
                }
                let guard = OpenGuard::new(open.clone());
                connections.spawn(proxy_connection(client, target, mode_rx.clone(), guard));
            }
            // Reap finished connections so the set does not grow without bound.
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

/// Counts a connection as open for as long as it lives (also when its task is aborted).
struct OpenGuard(Arc<AtomicUsize>);

impl OpenGuard {
    fn new(open: Arc<AtomicUsize>) -> OpenGuard {
        open.fetch_add(1, Ordering::SeqCst);
        OpenGuard(open)
    }
}

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Why a pump stopped forwarding.
enum Stop {
    /// The proxy was cut: reset both sides.
    Cut,
    /// One side failed (e.g. reset by peer): close both sides.
    Failed,
}

async fn proxy_connection(
    mut client: TcpStream,
    target: SocketAddr,
    mut mode_rx: watch::Receiver<Mode>,
    _guard: OpenGuard,
) {
    // Dial the target only once traffic may flow, so a connection accepted into a blackhole
    // reaches etcd late (after restore), like a SYN that was stuck in the network.
    if wait_forward(&mut mode_rx).await.is_err() {
        let _ = client.set_zero_linger();
        return;
    }
    let mut upstream = tokio::select! {
        connected = TcpStream::connect(target) => match connected {
            Ok(upstream) => upstream,
            // The target is down: close the client's side, as a refused connection would.
            Err(_) => return,
        },
        () = wait_for_cut(&mut mode_rx) => {
            let _ = client.set_zero_linger();
            return;
        }
    };
    let _ = upstream.set_nodelay(true);
    let _ = client.set_nodelay(true);
    let result = {
        let (client_read, client_write) = client.split();
        let (upstream_read, upstream_write) = upstream.split();
        tokio::try_join!(
            pump(client_read, upstream_write, mode_rx.clone()),
            pump(upstream_read, client_write, mode_rx),
        )
    };
    if let Err(Stop::Cut) = result {
        // SO_LINGER 0 makes the close below send RST, so both peers see the connection die at
        // once instead of a polite end of stream.
        let _ = client.set_zero_linger();
        let _ = upstream.set_zero_linger();
    }
}

/// Copies `from` to `to` while the mode is [`Mode::Forward`], pausing (without reading, so
/// nothing is lost) while it is [`Mode::Blackhole`]. Returns `Ok` at end of stream, after
/// passing the half-close on.
async fn pump(
    mut from: tokio::net::tcp::ReadHalf<'_>,
    mut to: tokio::net::tcp::WriteHalf<'_>,
    mut mode_rx: watch::Receiver<Mode>,
) -> Result<(), Stop> {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        wait_forward(&mut mode_rx).await?;
        // Both `read` and `write` on tokio TCP halves are cancel-safe: when a mode change wins
        // the select, no byte was consumed or half-written.
        let n = tokio::select! {
            read = from.read(&mut buf) => read.map_err(|_| Stop::Failed)?,
            changed = mode_rx.changed() => {
                changed.map_err(|_| Stop::Cut)?;
                continue;
            }
        };
        if n == 0 {
            let _ = to.shutdown().await;
            return Ok(());
        }
        let mut written = 0;
        while written < n {
            wait_forward(&mut mode_rx).await?;
            tokio::select! {
                wrote = to.write(&buf[written..n]) => match wrote {
                    Ok(0) | Err(_) => return Err(Stop::Failed),
                    Ok(k) => written += k,
                },
                changed = mode_rx.changed() => changed.map_err(|_| Stop::Cut)?,
            }
        }
    }
}

/// Waits until the mode is [`Mode::Forward`]; `Err(Stop::Cut)` if it becomes [`Mode::Cut`] (or
/// the proxy is gone) first.
async fn wait_forward(mode_rx: &mut watch::Receiver<Mode>) -> Result<(), Stop> {
    loop {
        match *mode_rx.borrow_and_update() {
            Mode::Forward => return Ok(()),
            Mode::Cut => return Err(Stop::Cut),
            Mode::Blackhole => {}
        }
        mode_rx.changed().await.map_err(|_| Stop::Cut)?;
    }
}

/// Resolves once the mode is [`Mode::Cut`] (or the proxy is gone).
async fn wait_for_cut(mode_rx: &mut watch::Receiver<Mode>) {
    while *mode_rx.borrow_and_update() != Mode::Cut {
        if mode_rx.changed().await.is_err() {
            return;
        }
    }
}
