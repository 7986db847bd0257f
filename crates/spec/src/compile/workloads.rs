//! The `[workloads.*]` section: plain workloads, mixes of them, and the
//! length files empirical distributions read.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::{Cx, hex, is_slug};
use crate::Dist;
use crate::diag::suggestion;
use crate::dist::Empirical;
use crate::model::*;
use crate::raw::*;

impl Cx<'_> {
    pub(super) fn workload(&mut self, name: &str, w: RawWorkload) -> Option<Workload> {
        let before = self.errors.len();
        let k = |f: &str| format!("workloads.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("workloads.{name}"),
                format!(
                    "expected a workload name of letters, digits, `-`, `_` or `.`, found \"{name}\""
                ),
                None,
            );
        }
        let api = w.api.unwrap_or_default();
        if w.dataset.is_none() {
            for (key, v) in [
                ("input_tokens", &w.input_tokens),
                ("output_tokens", &w.output_tokens),
            ] {
                if v.is_none() {
                    self.key_err(
                        &format!("workloads.{name}"),
                        format!("missing key `{key}`"),
                        Some(format!("add e.g. {key} = 256, or a `dataset`")),
                    );
                }
            }
        }
        let input_tokens = w
            .input_tokens
            .map(|d| self.load_dist(&k("input_tokens"), d));
        let output_tokens = w
            .output_tokens
            .map(|d| self.load_dist(&k("output_tokens"), d));
        if let Some(Dist::Fixed(0)) = output_tokens {
            self.err(
                &k("output_tokens"),
                "expected at least 1 output token, found 0",
                None,
            );
        }
        let max_tokens_field = w.max_tokens_field.unwrap_or_else(|| "max_tokens".into());
        if !matches!(
            max_tokens_field.as_str(),
            "max_tokens" | "max_completion_tokens"
        ) {
            self.err(&k("max_tokens_field"), format!("expected \"max_tokens\" or \"max_completion_tokens\", found \"{max_tokens_field}\""), None);
        }
        let shared_prefix = w.shared_prefix.map(|p| {
            if p.tokens == 0 {
                self.err(
                    &k("shared_prefix.tokens"),
                    "expected a prefix of at least 1 token, found 0",
                    None,
                );
            }
            SharedPrefix {
                tokens: p.tokens,
                count: p.count.unwrap_or(1).max(1),
            }
        });
        let dataset = w.dataset.and_then(|d| {
            let path = self.base_dir.join(&d.path);
            match std::fs::read(&path) {
                Ok(bytes) => Some(Dataset {
                    sha256: hex(&Sha256::digest(&bytes)),
                    path: d.path,
                    format: d.format,
                    min_input_tokens: d.min_input_tokens,
                    max_input_tokens: d.max_input_tokens,
                }),
                Err(e) => {
                    self.err(
                        &k("dataset.path"),
                        format!("cannot read dataset {}: {e}", path.display()),
                        Some("paths are relative to the spec file".into()),
                    );
                    None
                }
            }
        });
        let conversation = w.conversation.map(|c| {
            if api != Api::Chat {
                self.key_err(
                    &k("conversation"),
                    "multi-turn conversations need api = \"chat\"",
                    None,
                );
            }
            if c.turns == 0 {
                self.err(
                    &k("conversation.turns"),
                    "expected at least 1 turn, found 0",
                    None,
                );
            }
            Conversation {
                turns: c.turns,
                think_time: c.think_time.unwrap_or_default(),
            }
        });
        let mut extra_body = serde_json::Map::new();
        for (key, v) in w.extra_body.unwrap_or_default() {
            if matches!(
                key.as_str(),
                "model"
                    | "prompt"
                    | "messages"
                    | "stream"
                    | "stream_options"
                    | "max_tokens"
                    | "max_completion_tokens"
                    | "ignore_eos"
            ) {
                self.key_err(&format!("workloads.{name}.extra_body.{key}"), format!("`{key}` is set by infer-bench itself and cannot be overridden in extra_body"), None);
                continue;
            }
            match serde_json::to_value(&v) {
                Ok(j) => {
                    extra_body.insert(key, j);
                }
                Err(e) => self.err(
                    &format!("workloads.{name}.extra_body.{key}"),
                    format!("cannot be sent as JSON: {e}"),
                    None,
                ),
            }
        }
        (self.errors.len() == before).then(|| Workload {
            name: name.to_string(),
            api,
            input_tokens,
            output_tokens,
            shared_prefix,
            dataset,
            conversation,
            ignore_eos: w.ignore_eos.unwrap_or(false),
            stream: w.stream.unwrap_or(true),
            max_tokens_field,
            sampling: w.sampling.unwrap_or_default(),
            extra_body,
            mix: Vec::new(),
        })
    }

    /// A mixed workload from its parts, which are workloads of the spec.
    pub(super) fn mix(
        &mut self,
        name: &str,
        w: RawWorkload,
        workloads: &BTreeMap<String, Workload>,
        mix_names: &[String],
    ) -> Option<Workload> {
        let before = self.errors.len();
        let key = format!("workloads.{name}.mix");
        let parts = w.mix.clone().unwrap_or_default();
        let others = RawWorkload { mix: None, ..w };
        let set = serde_json::to_value(&others).ok();
        if let Some(obj) = set.as_ref().and_then(|v| v.as_object()) {
            if let Some((k, _)) = obj.iter().find(|(_, v)| !v.is_null()) {
                self.key_err(
                    &format!("workloads.{name}.{k}"),
                    format!(
                        "a mix takes every request setting from its parts, so it cannot set `{k}`"
                    ),
                    Some("set it on the workloads the mix names".into()),
                );
            }
        }
        if parts.len() < 2 {
            self.err(
                &key,
                format!(
                    "expected at least two workloads to mix, found {}",
                    parts.len()
                ),
                Some("e.g. mix = { chat = 0.7, rag = 0.3 }".into()),
            );
        }
        let total: f64 = parts.values().filter(|v| v.is_finite() && **v > 0.0).sum();
        let mut out = Vec::new();
        for (part, weight) in &parts {
            let pk = format!("{key}.{part}");
            if !(weight.is_finite() && *weight > 0.0) {
                self.err(&pk, format!("expected a weight > 0, found {weight}"), None);
                continue;
            }
            if mix_names.contains(part) {
                self.err(
                    &pk,
                    format!("workload \"{part}\" is itself a mix; name its parts here instead"),
                    None,
                );
                continue;
            }
            let Some(found) = workloads.get(part) else {
                self.err(
                    &pk,
                    format!("unknown workload \"{part}\""),
                    suggestion(part, workloads.keys().map(String::as_str)),
                );
                continue;
            };
            if found.conversation.is_some() {
                self.err(
                    &pk,
                    format!("workload \"{part}\" is a conversation; a mix sends single requests"),
                    None,
                );
                continue;
            }
            out.push(MixPart {
                weight: weight / total,
                workload: found.clone(),
            });
        }
        if let Some(first) = out.first() {
            let f = &first.workload;
            for p in &out[1..] {
                let o = &p.workload;
                let differs = [
                    ("api", f.api != o.api),
                    ("stream", f.stream != o.stream),
                    ("max_tokens_field", f.max_tokens_field != o.max_tokens_field),
                    ("sampling", f.sampling != o.sampling),
                    ("extra_body", f.extra_body != o.extra_body),
                    ("ignore_eos", f.ignore_eos != o.ignore_eos),
                ];
                if let Some((what, _)) = differs.iter().find(|(_, d)| *d) {
                    self.err(
                        &key,
                        format!("the mixed workloads \"{}\" and \"{}\" send requests differently (`{what}` differs)", f.name, o.name),
                        Some("a mix varies what is sent (lengths, prefixes, datasets), not how: give its parts the same api, stream, max_tokens_field, sampling, extra_body and ignore_eos".into()),
                    );
                    break;
                }
            }
        }
        if self.errors.len() != before {
            return None;
        }
        let f = &out[0].workload;
        Some(Workload {
            name: name.to_string(),
            api: f.api,
            input_tokens: None,
            output_tokens: None,
            shared_prefix: None,
            dataset: None,
            conversation: None,
            ignore_eos: f.ignore_eos,
            stream: f.stream,
            max_tokens_field: f.max_tokens_field.clone(),
            sampling: f.sampling.clone(),
            extra_body: f.extra_body.clone(),
            mix: out,
        })
    }

    /// Loads an empirical distribution's file: one length per line, or
    /// `length,weight` (a histogram); `#` starts a comment.
    fn load_dist(&mut self, key: &str, d: Dist) -> Dist {
        let Dist::Empirical(Empirical::File(file)) = &d else {
            return d;
        };
        let path = self.base_dir.join(file);
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                self.err(
                    key,
                    format!("cannot read length file {}: {e}", path.display()),
                    Some("paths are relative to the spec file".into()),
                );
                return d;
            }
        };
        let mut counts: BTreeMap<u32, f64> = BTreeMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let mut parts = line.split([',', ' ', '\t']).filter(|p| !p.is_empty());
            let value = parts.next().and_then(|v| v.parse::<u32>().ok());
            let weight = match parts.next() {
                None => Some(1.0),
                Some(w) => w.parse::<f64>().ok().filter(|w| *w > 0.0 && w.is_finite()),
            };
            match (value, weight, parts.next()) {
                (Some(v), Some(w), None) => *counts.entry(v).or_default() += w,
                _ => {
                    self.err(key, format!("{}:{}: expected a token length, or `length,weight` with weight > 0; found \"{line}\"", path.display(), i + 1), None);
                    return d;
                }
            }
        }
        if counts.is_empty() {
            self.err(key, format!("{} holds no lengths", path.display()), None);
            return d;
        }
        Dist::Empirical(Empirical::Values(counts.into_iter().collect()))
    }
}
