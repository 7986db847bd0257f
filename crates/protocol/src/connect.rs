//! The connects of the HTTP client's pool: timed, charged to the request
//! that waited for them, and not made while a connection is on its way
//! back.
//!
//! A tower layer around the client's connector times every connect (TCP,
//! and TLS where there is one) and adds it to the request whose future
//! drove it to its end: [`timed`] runs a request's `execute` in a
//! task-local scope the layer reads. A connect that finishes in the
//! background, or one made while opening connections before a run, is in
//! no request's scope and counts for none.
//!
//! The pool (hyper's) serves a request that finds no idle connection by
//! starting a connect *and* waiting for a connection to come back; the
//! first wins, and a connect that lost goes on in the background to fill
//! the pool. A closed-loop slot sends its next request the moment its last
//! one saw `[DONE]`, before that connection is back (its body's end is
//! read on a task of its own), so every slot would open a spare. While
//! connections are on their way back ([`Returning`]), a request's connect
//! first waits for one of them (at most [`GRACE`]); if the pool then hands
//! the request a connection, the connect, not yet begun, is dropped.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use tokio::sync::Notify;

/// The errors of reqwest's connector.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The longest a request's connect waits for a connection on its way back
/// to the pool before it begins. The end of a response follows its
/// `[DONE]` within microseconds from a well-behaved server; this bounds
/// the wait for one slow to close.
pub const GRACE: Duration = Duration::from_millis(5);

/// After a connection is back from its response, the pool's own task puts
/// it back (a turn or two of the scheduler): a waiting connect gives it
/// this long to reach its request.
const SETTLE: Duration = Duration::from_millis(1);

tokio::task_local! {
    static CONNECT_NS: Cell<u64>;
}

/// Runs `request` (a client's `execute`) and returns its output with the
/// nanoseconds spent in the connects it drove to completion (0 when it
/// went out on a connection already open), the wait for a returning one
/// included.
pub async fn timed<F: Future>(request: F) -> (F::Output, u64) {
    CONNECT_NS
        .scope(Cell::new(0), async move {
            let out = request.await;
            (out, CONNECT_NS.with(Cell::get))
        })
        .await
}

/// Connections on their way back to the pool: responses whose end is
/// being read.
#[derive(Debug, Default)]
pub struct Returning {
    n: AtomicUsize,
    back: Notify,
}

/// One connection on its way back; dropped once it is back.
#[derive(Debug)]
pub struct OnItsWay(Arc<Returning>);

impl Returning {
    /// Counts a connection on its way back until the guard is dropped.
    pub fn start(self: &Arc<Self>) -> OnItsWay {
        self.n.fetch_add(1, Ordering::SeqCst);
        OnItsWay(self.clone())
    }

    /// Waits until a connection on its way back is back, and then
    /// [`SETTLE`] for the pool to hand it over, at most `grace` in all; at
    /// once when none is on its way.
    async fn wait(&self, grace: Duration) {
        let until = tokio::time::Instant::now() + grace;
        let back = self.back.notified();
        tokio::pin!(back);
        back.as_mut().enable();
        if self.n.load(Ordering::SeqCst) == 0 {
            return;
        }
        if tokio::time::timeout_at(until, back).await.is_ok() {
            let settled = tokio::time::Instant::now() + SETTLE;
            tokio::time::sleep_until(settled.min(until)).await;
        }
    }
}

impl Drop for OnItsWay {
    fn drop(&mut self) {
        self.0.n.fetch_sub(1, Ordering::SeqCst);
        self.0.back.notify_waiters();
    }
}

/// The layer given to `reqwest::ClientBuilder::connector_layer`.
#[derive(Debug, Clone)]
pub struct ConnectTimer {
    returning: Arc<Returning>,
    grace: Duration,
}

impl ConnectTimer {
    pub fn new(returning: Arc<Returning>) -> ConnectTimer {
        ConnectTimer {
            returning,
            grace: GRACE,
        }
    }
}

impl<S> tower::Layer<S> for ConnectTimer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed {
            inner,
            returning: self.returning.clone(),
            grace: self.grace,
        }
    }
}

/// The connector, timed.
#[derive(Debug, Clone)]
pub struct Timed<S> {
    inner: S,
    returning: Arc<Returning>,
    grace: Duration,
}

impl<S, R> tower::Service<R> for Timed<S>
where
    S: tower::Service<R, Error = BoxError>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
{
    type Response = S::Response;
    type Error = BoxError;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: R) -> Self::Future {
        // The connector's future does nothing until polled.
        let connect = self.inner.call(dst);
        let returning = self.returning.clone();
        let grace = self.grace;
        Box::pin(async move {
            let started = Instant::now();
            let in_request = CONNECT_NS.try_with(|_| ()).is_ok();
            if in_request && returning.n.load(Ordering::SeqCst) > 0 {
                returning.wait(grace).await;
                // Polled from elsewhere than its request: the pool gave
                // the request a connection that came back, and carries
                // this connect on in the background. It is not needed.
                if CONNECT_NS.try_with(|_| ()).is_err() {
                    return Err("not needed: a pooled connection came back first".into());
                }
            }
            let out = connect.await;
            if out.is_ok() {
                let ns = started.elapsed().as_nanos() as u64;
                // Outside a request's scope (a background connect), no one's.
                let _ = CONNECT_NS.try_with(|c| c.set(c.get().saturating_add(ns)));
            }
            out
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tower::{Layer, Service};

    /// A connector that takes 20 ms and counts the connects it began.
    #[derive(Clone, Default)]
    struct Slow(Arc<AtomicUsize>);

    impl Service<()> for Slow {
        type Response = ();
        type Error = BoxError;
        type Future = Pin<Box<dyn Future<Output = Result<(), BoxError>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            let begun = self.0.clone();
            Box::pin(async move {
                begun.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(())
            })
        }
    }

    /// Polls a future once.
    async fn poll_once<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }

    #[tokio::test]
    async fn a_connect_counts_for_the_request_that_drove_it_only() {
        let mut svc = ConnectTimer::new(Arc::default()).layer(Slow::default());
        let (r, ns) = timed(svc.call(())).await;
        assert!(r.is_ok());
        assert!((20_000_000..1_000_000_000).contains(&ns), "{ns}");
        // Without a connect: nothing.
        let (_, ns) = timed(async {}).await;
        assert_eq!(ns, 0);
        // Started in one request's scope, finished in another task's: no
        // one's (the request got another connection).
        let mut pending = svc.call(());
        let (_, ns) = timed(async {
            let _ = poll_once(pending.as_mut()).await;
        })
        .await;
        assert_eq!(ns, 0);
        let background = tokio::spawn(pending);
        assert!(background.await.unwrap().is_ok());
    }

    #[tokio::test]
    async fn a_connect_waits_for_a_returning_connection_and_is_dropped_if_not_needed() {
        let returning = Arc::new(Returning::default());
        let slow = Slow::default();
        // A long grace, so that waiting or not is plain to see.
        let grace = Duration::from_millis(300);
        let mut svc = ConnectTimer {
            returning: returning.clone(),
            grace,
        }
        .layer(slow.clone());

        // A connection on its way back: the connect waits; the pool gives
        // the request that connection, and carries the connect on in the
        // background, where it ends without ever connecting.
        let on_its_way = returning.start();
        let mut pending = svc.call(());
        let (_, ns) = timed(async {
            assert!(poll_once(pending.as_mut()).await.is_pending());
        })
        .await;
        assert_eq!(ns, 0);
        drop(on_its_way);
        let r = tokio::spawn(pending).await.unwrap();
        assert!(r.unwrap_err().to_string().starts_with("not needed"));
        assert_eq!(slow.0.load(Ordering::SeqCst), 0, "no connect began");

        // Back without the request being served: the connect goes ahead
        // once the connection is back (and SETTLE after), its wait
        // counted in its time.
        let on_its_way = returning.start();
        let release = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            drop(on_its_way);
        });
        let (r, ns) = timed(svc.call(())).await;
        release.await.unwrap();
        assert!(r.is_ok());
        assert!(ns >= 22_000_000, "{ns}");
        assert_eq!(slow.0.load(Ordering::SeqCst), 1);

        // Never back: the connect waits its grace, then goes ahead.
        let _stuck = returning.start();
        let (r, ns) = timed(svc.call(())).await;
        assert!(r.is_ok());
        assert!(ns >= 320_000_000, "{ns}");
        assert_eq!(slow.0.load(Ordering::SeqCst), 2);

        // Outside any request (opening connections before a run, or in
        // the background): no wait.
        let t = Instant::now();
        assert!(svc.call(()).await.is_ok());
        assert!(t.elapsed() < grace, "{:?}", t.elapsed());
        assert_eq!(slow.0.load(Ordering::SeqCst), 3);
    }
}
