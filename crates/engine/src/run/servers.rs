//! The servers points run against: an external one (already running), the
//! built-in simulator (started in-process), or one launched per group of
//! points that share (target, model, precision). Every kind gives the engine
//! a base URL and is stopped when its group is done.

use std::path::Path;

use crate::error::{LaunchError, ServerError};
use infer_bench_results::ServerInfo;
use infer_bench_spec::plan::PointConfig;
use infer_bench_spec::raw::TargetKind;

/// A running (or reachable) server.
pub enum Server {
    External {
        base_url: String,
    },
    Sim(infer_bench_sim::server::SimServer),
    /// The simulator in virtual time: no server runs; each run is a
    /// discrete-event simulation (`virtual_time.rs`).
    Virtual(ServerInfo),
    Launched(super::launch::Launched),
}

/// The base URL a virtual-time point's client is built with: never
/// contacted (`.invalid` cannot resolve).
const VIRTUAL_BASE_URL: &str = "http://simulator.invalid/v1";

impl Server {
    /// Starts what the point's target needs. `log_dir` receives server logs.
    pub fn start(
        cfg: &PointConfig,
        spec_dir: &Path,
        log_dir: &Path,
        handle: &tokio::runtime::Handle,
        interrupt: &super::context::Interrupt,
    ) -> Result<Server, ServerError> {
        match cfg.target.kind {
            TargetKind::Sim
                if cfg
                    .target
                    .sim
                    .as_ref()
                    .is_some_and(|s| s.clock == infer_bench_spec::raw::SimClock::Virtual) =>
            {
                infer_bench_sim::request::Setup::of(cfg)
                    .map(|s| Server::Virtual(s.info))
                    .map_err(ServerError::Simulator)
            }
            TargetKind::Sim => infer_bench_sim::server::SimServer::start(cfg)
                .map(Server::Sim)
                .map_err(ServerError::Simulator),
            TargetKind::Openai => match &cfg.target.launch {
                Some(_) => {
                    super::launch::Launched::start(cfg, spec_dir, log_dir, handle, interrupt)
                        .map(Server::Launched)
                        .map_err(ServerError::Launch)
                }
                None => Ok(Server::External {
                    base_url: cfg.target.base_url.clone().unwrap_or_default(),
                }),
            },
        }
    }

    pub fn base_url(&self) -> String {
        match self {
            Server::External { base_url } => base_url.clone(),
            Server::Sim(s) => s.base_url(),
            Server::Virtual(_) => VIRTUAL_BASE_URL.into(),
            Server::Launched(l) => l.base_url(),
        }
    }

    /// The Prometheus endpoint, if any.
    pub fn metrics_url(&self, cfg: &PointConfig) -> Option<String> {
        match self {
            Server::Sim(s) => Some(s.metrics_url()),
            Server::Virtual(_) => None,
            Server::Launched(l) => l.metrics_url(cfg),
            Server::External { .. } => cfg.target.metrics_url.clone(),
        }
    }

    /// Whether the server is still there (a launched process may die).
    pub fn check_alive(&mut self) -> Result<(), LaunchError> {
        match self {
            Server::Launched(l) => l.check_alive(),
            _ => Ok(()),
        }
    }

    /// Why a launched server runs without the watchdog that stops it if
    /// infer-bench is killed, when it does.
    pub fn watchdog_error(&self) -> Option<&str> {
        match self {
            Server::Launched(l) => l.watchdog_error(),
            _ => None,
        }
    }

    /// A launched server's process id.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Server::Launched(l) => l.pid(),
            _ => None,
        }
    }

    pub fn info(&self) -> Option<ServerInfo> {
        match self {
            Server::External { .. } => None,
            Server::Sim(s) => Some(s.info()),
            Server::Virtual(info) => Some(info.clone()),
            Server::Launched(l) => Some(l.info()),
        }
    }

    /// Called before each run: the simulator draws its run-to-run noise.
    pub fn begin_run(&self, run: u32) {
        if let Server::Sim(s) = self {
            s.begin_run(run);
        }
    }

    pub fn stop(self, handle: &tokio::runtime::Handle) {
        match self {
            Server::External { .. } | Server::Virtual(_) => {}
            Server::Sim(s) => s.stop(),
            Server::Launched(l) => l.stop(handle),
        }
    }
}
