//! The `[targets.*]` section: simulator and OpenAI-compatible targets,
//! their launch blocks and the placeholders launch commands may use.

use super::Cx;
use super::{is_slug, shown};
use crate::Duration;
use crate::catalog;
use crate::diag::suggestion;
use crate::dialect::Dialect;
use crate::model::*;
use crate::raw::*;
use std::collections::BTreeMap;

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
    "server_args",
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
    /// Checks `[targets.NAME]` and builds its [`Target`]. One function, as
    /// each section's check is (see `compile/mod.rs`): it reads the table's
    /// keys top to bottom, each a few lines that add to the one error list,
    /// and the keys of one target kind depend on each other (a launched
    /// server's port is its base URL's), so pieces would pass the half-built
    /// target and the error list through every call.
    pub(super) fn target(&mut self, name: &str, t: RawTarget) -> Option<Target> {
        let k = |f: &str| format!("targets.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("targets.{name}"),
                format!(
                    "expected a target name of at most 64 letters, digits, `-`, `_` or `.` (not starting with `.`), found \"{}\"",
                    shown(name)
                ),
                None,
            );
        }
        let before = self.errors.len();
        let mut sim = None;
        match t.kind {
            TargetKind::Sim => {
                let openai_only: [(&str, bool); 10] = [
                    ("dialect", t.dialect.is_some()),
                    ("base_url", t.base_url.is_some()),
                    ("api_key_env", t.api_key_env.is_some()),
                    ("headers", !t.headers.is_empty()),
                    ("tls_insecure", t.tls_insecure.is_some()),
                    ("ca_cert", t.ca_cert.is_some()),
                    ("launch", t.launch.is_some()),
                    ("metrics_url", t.metrics_url.is_some()),
                    ("gpu_metrics_url", t.gpu_metrics_url.is_some()),
                    ("gpu_metrics_match", !t.gpu_metrics_match.is_empty()),
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
                {
                    use crate::limits::*;
                    let c = |v: Option<u32>| v.map(u64::from);
                    self.count_in(
                        &k("gpus"),
                        c(t.gpus),
                        1,
                        MAX_GPUS.into(),
                        "a number of GPUs",
                    );
                    self.count_in(
                        &sk("max_num_seqs"),
                        c(tune.max_num_seqs),
                        1,
                        MAX_SIM_COUNT.into(),
                        "a number of sequences",
                    );
                    self.count_in(
                        &sk("max_batched_tokens"),
                        c(tune.max_batched_tokens),
                        1,
                        MAX_BATCHED_TOKENS.into(),
                        "a number of tokens",
                    );
                    self.count_in(
                        &sk("tokens_per_event"),
                        c(tune.tokens_per_event),
                        1,
                        MAX_SIM_COUNT.into(),
                        "a number of tokens",
                    );
                    self.count_in(
                        &sk("kv_cache_tokens"),
                        tune.kv_cache_tokens,
                        MIN_KV_CACHE_TOKENS,
                        MAX_KV_CACHE_TOKENS,
                        "a KV cache size in tokens (at least one block)",
                    );
                    for (key, v) in [
                        ("memory_fraction", tune.memory_fraction),
                        ("compute_efficiency", tune.compute_efficiency),
                        ("bandwidth_efficiency", tune.bandwidth_efficiency),
                    ] {
                        self.float_in(&sk(key), v, MIN_EFFICIENCY, 1.0);
                    }
                    self.float_in(&sk("slowdown"), tune.slowdown, 0.001, MAX_SLOWDOWN);
                }
                self.count_in(
                    &sk("replicas"),
                    tune.replicas.map(u64::from),
                    1,
                    1024,
                    "a number of replicas",
                );
                self.count_in(
                    &sk("pipeline"),
                    tune.pipeline.map(u64::from),
                    1,
                    64,
                    "a number of pipeline stages",
                );
                self.count_in(
                    &sk("scheduler_steps"),
                    tune.scheduler_steps.map(u64::from),
                    1,
                    1024,
                    "a number of steps",
                );
                sim = Some(SimTarget {
                    gpu,
                    gpus: t.gpus.unwrap_or(1),
                    profile: Some(tune.profile.unwrap_or_default()),
                    scheduler: tune.scheduler,
                    max_num_seqs: tune.max_num_seqs,
                    max_batched_tokens: tune.max_batched_tokens,
                    memory_fraction: tune.memory_fraction,
                    memory_fraction_of: tune.memory_fraction_of,
                    compute_efficiency: tune.compute_efficiency,
                    bandwidth_efficiency: tune.bandwidth_efficiency,
                    step_overhead: tune.step_overhead,
                    step_overhead_per_seq: tune.step_overhead_per_seq,
                    request_overhead: tune.request_overhead,
                    scheduler_steps: tune.scheduler_steps,
                    replicas: tune.replicas,
                    pipeline: tune.pipeline,
                    slowdown: tune.slowdown.unwrap_or(1.0),
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
                    clock: tune.clock.unwrap_or_default(),
                    admission: tune.admission,
                });
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
                    (Some(url), _) if check_url(url).is_err() => self.err(
                        &k("base_url"),
                        format!(
                            "expected an http:// or https:// URL, found \"{}\": {}",
                            shown(url),
                            check_url(url).unwrap_err()
                        ),
                        None,
                    ),
                    (Some(url), None) if url.contains("{port}") => self.err(
                        &k("base_url"),
                        "`{port}` in base_url needs a [launch] block that starts the server",
                        None,
                    ),
                    _ => {}
                }
                if let Some(url) = &t.metrics_url {
                    if let Err(why) = check_url(url) {
                        self.err(
                            &k("metrics_url"),
                            format!(
                                "expected an http:// or https:// URL, found \"{}\": {why}",
                                shown(url)
                            ),
                            None,
                        );
                    }
                }
                if let Some(url) = &t.gpu_metrics_url {
                    if let Err(why) = check_url(url) {
                        self.err(
                            &k("gpu_metrics_url"),
                            format!(
                                "expected an http:// or https:// URL, found \"{}\": {why}",
                                shown(url)
                            ),
                            Some("dcgm-exporter listens on port 9400: gpu_metrics_url = \"http://gpu-node:9400/metrics\"".into()),
                        );
                    }
                } else if !t.gpu_metrics_match.is_empty() {
                    self.err(
                        &k("gpu_metrics_match"),
                        "`gpu_metrics_match` picks GPUs among a dcgm-exporter's, but the target has no `gpu_metrics_url`",
                        Some("add gpu_metrics_url = \"http://gpu-node:9400/metrics\", or remove gpu_metrics_match".into()),
                    );
                }
                for (label, value) in &t.gpu_metrics_match {
                    let key = format!("targets.{name}.gpu_metrics_match.{label}");
                    let mut c = label.chars();
                    let valid = c
                        .next()
                        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                        && c.all(|c| c.is_ascii_alphanumeric() || c == '_');
                    if !valid {
                        self.key_err(
                            &key,
                            format!(
                                "expected a Prometheus label name (letters, digits, `_`), found \"{}\"",
                                shown(label)
                            ),
                            Some("dcgm-exporter's labels: gpu, UUID, device, modelName, Hostname, pod, namespace, container".into()),
                        );
                    } else if value.chars().any(char::is_control) {
                        self.err(&key, "a label value cannot hold a control character", None);
                    }
                }
                if let Some(env) = &t.api_key_env {
                    if !is_env_name(env) {
                        self.err(&k("api_key_env"), format!("expected the name of an environment variable, found \"{}\"", shown(env)), Some("the key itself never goes in a spec: api_key_env = \"OPENAI_API_KEY\"".into()));
                    }
                }
                for (h, v) in &t.headers {
                    let key = format!("targets.{name}.headers.{h}");
                    if !is_header_name(h) {
                        self.key_err(
                            &key,
                            format!("expected a header name of letters, digits and !#$%&'*+-.^_`|~, found \"{}\"", shown(h)),
                            None,
                        );
                    } else if v.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
                        // The value is not quoted: headers hold secrets.
                        self.err(
                            &key,
                            "a header value cannot hold control characters (CR, LF, NUL...)",
                            Some(
                                "write the value on one line, without escapes such as \\r or \\n"
                                    .into(),
                            ),
                        );
                    }
                }
                if let Some(ca) = &t.ca_cert {
                    self.check_ca_cert(&k("ca_cert"), ca);
                }
            }
        }
        self.env_placeholders(name, &t);
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
            for (i, arg) in l.command.iter().enumerate() {
                if arg.contains("{server_args}") && arg != "{server_args}" {
                    self.err(
                        &format!("targets.{name}.launch.command[{i}]"),
                        "`{server_args}` stands for several arguments, so it must be an argument of its own",
                        Some("write it as its own list item: \"{server_args}\"".into()),
                    );
                }
                if arg.contains('\0') {
                    self.err(
                        &format!("targets.{name}.launch.command[{i}]"),
                        "an argument cannot hold a NUL character",
                        None,
                    );
                }
            }
            for (var, v) in &l.env {
                if !is_env_name(var) {
                    self.key_err(
                        &format!("targets.{name}.launch.env.{var}"),
                        format!(
                            "expected the name of an environment variable, found \"{}\"",
                            shown(var)
                        ),
                        None,
                    );
                } else if v.contains('\0') {
                    self.err(
                        &format!("targets.{name}.launch.env.{var}"),
                        "a value cannot hold a NUL character",
                        None,
                    );
                }
            }
            if let Some(cwd) = &l.cwd {
                self.check_cwd(&k("launch.cwd"), cwd);
            }
            if l.startup_timeout.is_some_and(|d| d.is_zero()) {
                self.err(
                    &k("launch.startup_timeout"),
                    "expected a timeout > 0, found 0s",
                    Some("the server needs time to start; the default is \"10m\"".into()),
                );
            }
            let ready = l.ready.unwrap_or_else(|| "/health".into());
            if !ready.starts_with('/') || ready.chars().any(|c| c.is_control() || c == ' ') {
                self.err(
                    &k("launch.ready"),
                    format!(
                        "expected an HTTP path such as \"/health\", found \"{}\"",
                        shown(&ready)
                    ),
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
                allow_env: l.allow_env,
            }
        });
        if let Some(x) = t.gpu_hour_usd {
            if !(x >= 0.0 && x.is_finite()) {
                self.err(
                    &k("gpu_hour_usd"),
                    format!("expected a price >= 0, found {x}"),
                    None,
                );
            }
        }
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
            // Resolved against the spec's folder, like every other path.
            ca_cert: t
                .ca_cert
                .map(|c| self.base_dir.join(c).display().to_string()),
            dialect: t.dialect,
            launch,
            gpu_ids: t.gpu_ids,
            gpu_metrics_url: t.gpu_metrics_url,
            gpu_metrics_match: t.gpu_metrics_match,
            sim,
            gpu_hour_usd: t.gpu_hour_usd,
        })
    }
}

impl Cx<'_> {
    /// `{env.NAME}` reads this machine's environment, so it is allowed only
    /// where a launch block fills placeholders, and only for names the
    /// block lists in `allow_env`: a spec from a pull request cannot read a
    /// variable the repository did not name.
    fn env_placeholders(&mut self, name: &str, t: &RawTarget) {
        let k = |f: &str| format!("targets.{name}.{f}");
        let mut filled: Vec<(String, &str)> = Vec::new();
        for (key, value) in [("base_url", &t.base_url), ("metrics_url", &t.metrics_url)] {
            if let Some(v) = value {
                filled.push((k(key), v));
            }
        }
        if let Some(l) = &t.launch {
            for (i, arg) in l.command.iter().enumerate() {
                filled.push((k(&format!("launch.command[{i}]")), arg));
            }
            for (var, v) in &l.env {
                filled.push((k(&format!("launch.env.{var}")), v));
            }
            if let Some(cwd) = &l.cwd {
                filled.push((k("launch.cwd"), cwd));
            }
            for (i, var) in l.allow_env.iter().enumerate() {
                if !is_env_name(var) {
                    self.err(
                        &k(&format!("launch.allow_env[{i}]")),
                        format!(
                            "expected the name of an environment variable (letters, digits, `_`), found \"{}\"",
                            var.escape_debug()
                        ),
                        None,
                    );
                }
            }
        }
        for (key, text) in filled {
            for p in placeholders(text) {
                let Some(var) = p.strip_prefix("env.") else {
                    continue;
                };
                match &t.launch {
                    None => self.err(
                        &key,
                        format!("`{{{p}}}` is filled in only for targets with a [launch] block"),
                        Some(if key.ends_with("_url") {
                            "write the URL out; an API key goes in api_key_env".into()
                        } else {
                            "remove the placeholder".into()
                        }),
                    ),
                    Some(l) if !l.allow_env.iter().any(|a| a == var) => self.err(
                        &key,
                        format!(
                            "`{{{p}}}` reads the environment variable {var}, which `allow_env` does not list"
                        ),
                        Some(format!(
                            "name it in the launch block: allow_env = [\"{var}\"] (and run with --allow-launch)"
                        )),
                    ),
                    Some(_) => {}
                }
            }
        }
    }
}

fn is_env_name(s: &str) -> bool {
    !s.is_empty()
        && !s.starts_with(|c: char| c.is_ascii_digit())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Why a URL is not one the HTTP client accepts.
#[derive(Debug, thiserror::Error)]
enum UrlProblem {
    #[error("the scheme must be http or https")]
    Scheme,
    #[error("{0}")]
    Invalid(#[from] url::ParseError),
    #[error("it names no host")]
    NoHost,
    /// The URL parser would drop a tab or a line break and encode an ESC
    /// without a word; a URL never holds one.
    #[error("it holds a control character (ESC, CR, LF...)")]
    Control,
}

/// Whether `url` is one the HTTP client accepts: http(s), a host, a port
/// that fits (a `{port}` placeholder stands for one); why not otherwise.
fn check_url(url: &str) -> Result<(), UrlProblem> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(UrlProblem::Scheme);
    }
    if url.chars().any(char::is_control) {
        return Err(UrlProblem::Control);
    }
    let filled = url.replace("{port}", "8000");
    if filled.contains('{') {
        // Other placeholders ({env.NAME}) are filled at run time.
        return Ok(());
    }
    let parsed = url::Url::parse(&filled)?;
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(UrlProblem::NoHost);
    }
    Ok(())
}

/// An HTTP header name: a token of RFC 9110.
fn is_header_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

impl Cx<'_> {
    /// A CA certificate file: readable, small, PEM with a certificate.
    fn check_ca_cert(&mut self, key: &str, ca: &str) {
        let path = self.base_dir.join(ca);
        let problem = match crate::files::read_regular_in(
            &path,
            crate::files::MAX_CA_CERT_BYTES,
            self.repo,
        ) {
            Err(e) => Some(format!(
                "cannot read CA certificate {}: {e}",
                path.display()
            )),
            Ok(bytes) if !contains(&bytes, b"-----BEGIN CERTIFICATE-----") => Some(format!(
                "{} is not a PEM certificate file (no -----BEGIN CERTIFICATE----- block)",
                path.display()
            )),
            Ok(_) => None,
        };
        if let Some(p) = problem {
            self.err(key, p, Some("paths are relative to the spec file".into()));
        }
    }

    /// A launch `cwd` (placeholders other than `{spec.dir}` are checked
    /// per point, at plan time): an existing directory.
    fn check_cwd(&mut self, key: &str, cwd: &str) {
        if cwd.contains('\0') {
            self.err(key, "a path cannot hold a NUL character", None);
            return;
        }
        let dir = cwd.replace(
            "{spec.dir}",
            &crate::placeholder_dir(self.base_dir).display().to_string(),
        );
        if dir.contains('{') {
            return;
        }
        let path = self.base_dir.join(&dir);
        if !path.is_dir() {
            self.err(
                key,
                format!(
                    "the server's working directory {} is not a directory",
                    path.display()
                ),
                Some("paths are relative to the spec file".into()),
            );
        }
    }
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

impl Cx<'_> {
    /// A field a target's declared dialect cannot carry is an error at the
    /// workload that asks for it (every workload is checked against every
    /// target, the matrix aside: a spec that names a strict server says so
    /// for all of its workloads).
    pub(super) fn dialects(
        &mut self,
        targets: &BTreeMap<String, Target>,
        workloads: &BTreeMap<String, Workload>,
    ) {
        for (tname, t) in targets {
            let Some(dialect) = t.dialect else { continue };
            // Triton's generate takes every field (those that are not
            // model inputs as request parameters), whatever the dialect.
            let checked = workloads
                .iter()
                .filter(|(_, w)| w.mix.is_empty() && w.api != Api::Generate);
            for (wname, w) in checked {
                if w.structured.response_format.is_some()
                    && !crate::structured::carries_response_format(w.api, Some(dialect))
                {
                    self.key_err(
                        &format!("workloads.{wname}.response_format"),
                        format!(
                            "targets.{tname} declares dialect = \"{dialect}\", whose completions API has no field for a JSON schema"
                        ),
                        Some("use api = \"chat\", or a dialect that carries it: vllm, sglang, llama.cpp".into()),
                    );
                }
                for (field, key) in crate::dialect::extra_fields_asked(w) {
                    if dialect.wire_name(field).is_some() {
                        continue;
                    }
                    let carriers: Vec<&str> = Dialect::ALL
                        .iter()
                        .filter(|d| d.wire_name(field).is_some())
                        .map(|d| d.name())
                        .collect();
                    self.key_err(
                        &format!("workloads.{wname}.{key}"),
                        format!(
                            "targets.{tname} declares dialect = \"{dialect}\", which cannot carry `{field}`: it is not an OpenAI API field, and a strict server rejects the request"
                        ),
                        Some(format!(
                            "remove it, or set dialect to one that carries it: {}",
                            carriers.join(", ")
                        )),
                    );
                }
            }
        }
    }
}
