//! A TCP relay that counts the connections it accepts: put it in front of
//! a test server to see how many connections a client opened (the server
//! itself cannot tell a kept-alive connection from a new one). Each
//! accepted connection is relayed byte for byte to the target on a
//! connection of its own, and closed when either side closes.

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use parking_lot::Mutex;

use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// A running relay; dropping it stops accepting (relayed connections end
/// with their runtime).
#[derive(Debug)]
pub struct CountingProxy {
    addr: SocketAddr,
    accepted: Arc<Mutex<Vec<Instant>>>,
    open: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl CountingProxy {
    /// Binds `127.0.0.1:0` and relays every connection to `target`, on the
    /// current tokio runtime.
    pub async fn start(target: SocketAddr) -> io::Result<CountingProxy> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let accepted = Arc::new(Mutex::new(Vec::new()));
        let open = Arc::new(AtomicU64::new(0));
        let (a, o) = (accepted.clone(), open.clone());
        let task = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                a.lock().push(Instant::now());
                o.fetch_add(1, Ordering::SeqCst);
                let o = o.clone();
                tokio::spawn(async move {
                    let _ = inbound.set_nodelay(true);
                    if let Ok(mut outbound) = TcpStream::connect(target).await {
                        let _ = outbound.set_nodelay(true);
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
                    }
                    o.fetch_sub(1, Ordering::SeqCst);
                });
            }
        });
        Ok(CountingProxy {
            addr,
            accepted,
            open,
            task,
        })
    }

    /// `http://127.0.0.1:PORT/v1`.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.accepted.lock().len() as u64
    }

    /// When each connection was accepted, in order (on the clock a client
    /// and a scripted server in this process read).
    pub fn accept_times(&self) -> Vec<Instant> {
        self.accepted.lock().clone()
    }

    /// Connections accepted and not yet closed by either side.
    pub fn open(&self) -> u64 {
        self.open.load(Ordering::SeqCst)
    }
}

impl Drop for CountingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
