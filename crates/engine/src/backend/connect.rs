//! The time each request spent opening a connection. A tower layer around
//! the HTTP client's connector times every connect (TCP, and TLS where
//! there is one) and adds it to the request whose future drove it to its
//! end: [`timed`] runs a request's `execute` in a task-local scope the
//! layer reads. A connect that finishes in the background (the pool handed
//! its request a connection that came back first, and the connect went on
//! to fill the pool) or while opening connections before a run is in no
//! request's scope and counts for none.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

tokio::task_local! {
    static CONNECT_NS: Cell<u64>;
}

/// Runs `request` (a client's `execute`) and returns its output with the
/// nanoseconds spent in the connects it drove to completion (0 when it
/// went out on a connection already open).
pub async fn timed<F: Future>(request: F) -> (F::Output, u64) {
    CONNECT_NS
        .scope(Cell::new(0), async move {
            let out = request.await;
            (out, CONNECT_NS.with(Cell::get))
        })
        .await
}

/// The layer given to `reqwest::ClientBuilder::connector_layer`.
#[derive(Debug, Clone, Copy, Default)]
pub struct ConnectTimer;

impl<S> tower::Layer<S> for ConnectTimer {
    type Service = Timed<S>;

    fn layer(&self, inner: S) -> Timed<S> {
        Timed { inner }
    }
}

/// The connector, timed.
#[derive(Debug, Clone)]
pub struct Timed<S> {
    inner: S,
}

impl<S, R> tower::Service<R> for Timed<S>
where
    S: tower::Service<R>,
    S::Future: Unpin,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Timing<S::Future>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, dst: R) -> Timing<S::Future> {
        Timing {
            inner: self.inner.call(dst),
            started: None,
        }
    }
}

/// A connect in progress: from its first poll to its end.
#[derive(Debug)]
pub struct Timing<F> {
    inner: F,
    started: Option<Instant>,
}

impl<F, T, E> Future for Timing<F>
where
    F: Future<Output = Result<T, E>> + Unpin,
{
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let started = *self.started.get_or_insert_with(Instant::now);
        let out = Pin::new(&mut self.inner).poll(cx);
        if let Poll::Ready(Ok(_)) = &out {
            let ns = started.elapsed().as_nanos() as u64;
            // Outside a request's scope (a background connect), no one's.
            let _ = CONNECT_NS.try_with(|c| c.set(c.get().saturating_add(ns)));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tower::{Layer, Service};

    /// A connector that takes 20 ms.
    #[derive(Clone)]
    struct Slow;

    impl Service<()> for Slow {
        type Response = ();
        type Error = ();
        type Future = Pin<Box<dyn Future<Output = Result<(), ()>> + Send>>;

        fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ()>> {
            Poll::Ready(Ok(()))
        }

        fn call(&mut self, _: ()) -> Self::Future {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(())
            })
        }
    }

    #[tokio::test]
    async fn a_connect_counts_for_the_request_that_drove_it_only() {
        let mut svc = ConnectTimer.layer(Slow);
        let (r, ns) = timed(svc.call(())).await;
        assert_eq!(r, Ok(()));
        assert!((20_000_000..1_000_000_000).contains(&ns), "{ns}");
        // Without a connect: nothing.
        let (_, ns) = timed(async {}).await;
        assert_eq!(ns, 0);
        // Started in one request's scope, finished in another task's: no
        // one's (the request got another connection).
        let mut pending = Box::pin(svc.call(()));
        let (_, ns) = timed(async {
            let _ = futures_poll_once(pending.as_mut()).await;
        })
        .await;
        assert_eq!(ns, 0);
        let background = tokio::spawn(pending);
        assert_eq!(background.await.unwrap(), Ok(()));
    }

    /// Polls a future once.
    async fn futures_poll_once<F: Future + Unpin>(mut f: F) -> Poll<F::Output> {
        std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut f).poll(cx))).await
    }
}
