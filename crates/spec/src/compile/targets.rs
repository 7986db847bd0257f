//! The `[targets.*]` section: simulator and OpenAI-compatible targets,
//! their launch blocks and the placeholders launch commands may use.

use super::Cx;
use super::is_slug;
use crate::Duration;
use crate::catalog;
use crate::diag::suggestion;
use crate::model::*;
use crate::raw::*;

const PLACEHOLDERS: &[&str] = &[
    "port",
    "host",
    "model",
    "model.served_name",
    "model.weights",
    "model.tokenizer",
    "precision",
    "precision.arg",
    "precision.weights",
    "precision.dtype",
    "spec.dir",
];

/// The `{...}` placeholders in a template string.
pub fn placeholders(s: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(open) = rest.find('{') {
        let after = &rest[open + 1..];
        match after.find('}') {
            Some(close) => {
                out.push(&after[..close]);
                rest = &after[close + 1..];
            }
            None => break,
        }
    }
    out
}
impl Cx<'_> {
    pub(super) fn target(&mut self, name: &str, t: RawTarget) -> Option<Target> {
        let k = |f: &str| format!("targets.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("targets.{name}"),
                format!(
                    "expected a target name of letters, digits, `-`, `_` or `.`, found \"{name}\""
                ),
                None,
            );
        }
        let before = self.errors.len();
        let mut sim = None;
        match t.kind {
            TargetKind::Sim => {
                let openai_only: [(&str, bool); 7] = [
                    ("base_url", t.base_url.is_some()),
                    ("api_key_env", t.api_key_env.is_some()),
                    ("headers", !t.headers.is_empty()),
                    ("tls_insecure", t.tls_insecure.is_some()),
                    ("ca_cert", t.ca_cert.is_some()),
                    ("launch", t.launch.is_some()),
                    ("metrics_url", t.metrics_url.is_some()),
                ];
                for (key, given) in openai_only {
                    if given {
                        self.key_err(&k(key), format!("`{key}` is not a setting of a simulator target"), Some("kind = \"sim\" runs in-process; remove the key or use kind = \"openai\"".into()));
                    }
                }
                let gpu = t.gpu.clone().unwrap_or_else(|| "h100-sxm".into());
                if catalog::gpu(&gpu).is_none() {
                    let ids: Vec<&str> = catalog::GPUS.iter().map(|g| g.id).collect();
                    self.err(
                        &k("gpu"),
                        format!(
                            "unknown GPU \"{gpu}\"; the simulator knows: {}",
                            ids.join(", ")
                        ),
                        suggestion(&gpu, ids.iter().copied()),
                    );
                }
                let tune = t.sim.clone().unwrap_or_default();
                let sk = |f: &str| format!("targets.{name}.sim.{f}");
                sim = Some(SimTarget {
                    gpu,
                    gpus: t.gpus.unwrap_or(1),
                    max_num_seqs: tune.max_num_seqs.unwrap_or(256),
                    max_batched_tokens: tune.max_batched_tokens.unwrap_or(8192),
                    memory_fraction: self.positive(
                        &sk("memory_fraction"),
                        tune.memory_fraction,
                        0.9,
                        Some(1.0),
                    ),
                    compute_efficiency: self.positive(
                        &sk("compute_efficiency"),
                        tune.compute_efficiency,
                        0.6,
                        Some(1.0),
                    ),
                    bandwidth_efficiency: self.positive(
                        &sk("bandwidth_efficiency"),
                        tune.bandwidth_efficiency,
                        0.75,
                        Some(1.0),
                    ),
                    step_overhead: tune.step_overhead.unwrap_or(Duration::from_millis(1)),
                    slowdown: self.positive(&sk("slowdown"), tune.slowdown, 1.0, None),
                    noise: match tune.noise {
                        Some(n) if !(0.0..0.5).contains(&n) => {
                            self.err(
                                &sk("noise"),
                                format!("expected a number in [0, 0.5), found {n}"),
                                None,
                            );
                            0.0
                        }
                        n => n.unwrap_or(0.0),
                    },
                    kv_cache_tokens: tune.kv_cache_tokens,
                    tokens_per_event: tune.tokens_per_event.unwrap_or(1),
                });
                if t.gpus == Some(0) {
                    self.err(&k("gpus"), "expected at least 1 GPU, found 0", None);
                }
            }
            TargetKind::Openai => {
                for (key, given) in [
                    ("gpu", t.gpu.is_some()),
                    ("gpus", t.gpus.is_some()),
                    ("sim", t.sim.is_some()),
                ] {
                    if given {
                        self.key_err(
                            &k(key),
                            format!("`{key}` is a setting of simulator targets only"),
                            Some("remove it, or set kind = \"sim\"".into()),
                        );
                    }
                }
                match (&t.base_url, &t.launch) {
                    (None, None) => self.key_err(
                        &format!("targets.{name}"),
                        "an openai target needs `base_url`",
                        Some("e.g. base_url = \"http://127.0.0.1:8000/v1\"".into()),
                    ),
                    (Some(url), _)
                        if !(url.starts_with("http://") || url.starts_with("https://")) =>
                    {
                        self.err(
                            &k("base_url"),
                            format!("expected an http:// or https:// URL, found \"{url}\""),
                            None,
                        )
                    }
                    (Some(url), None) if url.contains("{port}") => self.err(
                        &k("base_url"),
                        "`{port}` in base_url needs a [launch] block that starts the server",
                        None,
                    ),
                    _ => {}
                }
                if let Some(url) = &t.metrics_url {
                    if !(url.starts_with("http://") || url.starts_with("https://")) {
                        self.err(
                            &k("metrics_url"),
                            format!("expected an http:// or https:// URL, found \"{url}\""),
                            None,
                        );
                    }
                }
                if let Some(env) = &t.api_key_env {
                    if env.is_empty() || env.contains(['=', ' ']) {
                        self.err(&k("api_key_env"), format!("expected the name of an environment variable, found \"{env}\""), Some("the key itself never goes in a spec: api_key_env = \"OPENAI_API_KEY\"".into()));
                    }
                }
            }
        }
        let launch = t.launch.map(|l| {
            if l.command.is_empty() {
                self.err(
                    &k("launch.command"),
                    "expected a program and its arguments, found an empty list",
                    None,
                );
            }
            for (i, arg) in l.command.iter().enumerate() {
                for p in placeholders(arg) {
                    if !PLACEHOLDERS.contains(&p) && !p.starts_with("env.") {
                        self.err(
                            &format!("targets.{name}.launch.command[{i}]"),
                            format!(
                                "unknown placeholder `{{{p}}}`; expected one of: {}, {{env.NAME}}",
                                PLACEHOLDERS
                                    .iter()
                                    .map(|p| format!("{{{p}}}"))
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            ),
                            suggestion(p, PLACEHOLDERS.iter().copied())
                                .map(|s| s.replace('`', "`{").replace("{`?", "}`?")),
                        );
                    }
                }
            }
            let ready = l.ready.unwrap_or_else(|| "/health".into());
            if !ready.starts_with('/') {
                self.err(
                    &k("launch.ready"),
                    format!("expected an HTTP path such as \"/health\", found \"{ready}\""),
                    None,
                );
            }
            Launch {
                command: l.command,
                env: l.env,
                cwd: l.cwd,
                ready,
                startup_timeout: l.startup_timeout.unwrap_or(Duration::from_secs(600)),
                stop_grace: l.stop_grace.unwrap_or(Duration::from_secs(10)),
            }
        });
        let base_url = match (&t.kind, t.base_url, &launch) {
            (TargetKind::Openai, None, Some(_)) => Some("http://127.0.0.1:{port}/v1".to_string()),
            (_, url, _) => url.map(|u| u.trim_end_matches('/').to_string()),
        };
        (self.errors.len() == before).then(|| Target {
            name: name.to_string(),
            kind: t.kind,
            base_url,
            api_key_env: t.api_key_env,
            headers: t.headers,
            metrics_url: t.metrics_url,
            tls_insecure: t.tls_insecure.unwrap_or(false),
            ca_cert: t.ca_cert,
            launch,
            gpu_ids: t.gpu_ids,
            sim,
        })
    }
}
