//! The `[workloads.*]` section: plain workloads, mixes of them, and the
//! length files empirical distributions read.

use std::collections::BTreeMap;

use sha2::{Digest, Sha256};

use super::{Cx, hex, is_slug, shown};
use crate::diag::suggestion;
use crate::dist::Empirical;
use crate::model::*;
use crate::raw::*;
use crate::{Dist, Duration};

impl Cx<'_> {
    /// Checks `[workloads.NAME]` and builds its [`Workload`]. One function
    /// for the reason [`Cx::target`] is: the table's keys in order, each
    /// adding to one error list.
    pub(super) fn workload(&mut self, name: &str, w: RawWorkload) -> Option<Workload> {
        let before = self.errors.len();
        let k = |f: &str| format!("workloads.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("workloads.{name}"),
                format!(
                    "expected a workload name of at most 64 letters, digits, `-`, `_` or `.` (not starting with `.`), found \"{}\"",
                    shown(name)
                ),
                None,
            );
        }
        let api = w.api.unwrap_or_default();
        let retrieval = self.retrieval(name, &w, api);
        let structured = self.structured(name, &w, api);
        if w.trace.is_some() {
            // A trace gives every request's lengths and arrival: what
            // would set them otherwise has no say.
            for (key, set) in [
                ("input_tokens", w.input_tokens.is_some()),
                ("output_tokens", w.output_tokens.is_some()),
                ("dataset", w.dataset.is_some()),
                ("shared_prefix", w.shared_prefix.is_some()),
                ("conversation", w.conversation.is_some()),
            ] {
                if set {
                    self.key_err(
                        &k(key),
                        format!("a trace gives each request's lengths and shared prefix, so a trace workload cannot set `{key}`"),
                        Some("remove it, or use a workload of its own".into()),
                    );
                }
            }
        } else if w.dataset.is_none() {
            for (key, v) in [
                ("input_tokens", &w.input_tokens),
                ("output_tokens", &w.output_tokens),
            ] {
                let needed = match key {
                    "output_tokens" => !super::retrieval::retrieves(api),
                    // A tensor request has no text.
                    _ => api != Api::Kserve,
                };
                if v.is_none() && needed {
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
        for (key, d) in [
            ("input_tokens", &input_tokens),
            ("output_tokens", &output_tokens),
        ] {
            if let Some(top) = d.as_ref().and_then(Dist::upper) {
                if top > crate::limits::MAX_TOKENS {
                    self.err(
                        &k(key),
                        format!(
                            "expected lengths of at most {} tokens, found up to {top}",
                            crate::limits::MAX_TOKENS
                        ),
                        Some("no model has a longer context; set a smaller `max`".into()),
                    );
                }
            }
        }
        if let Some(s) = &w.sampling {
            self.sampling(name, s);
        }
        let max_tokens_field = w
            .max_tokens_field
            .unwrap_or_else(|| api.default_max_tokens_field().into());
        let allowed = api.max_tokens_fields();
        if !allowed.contains(&max_tokens_field.as_str()) {
            let expected = allowed
                .iter()
                .map(|f| format!("\"{f}\""))
                .collect::<Vec<_>>()
                .join(" or ");
            self.err(
                &k("max_tokens_field"),
                format!(
                    "expected {expected} for api = \"{}\", found \"{}\"",
                    api.name(),
                    shown(&max_tokens_field)
                ),
                (allowed.len() == 1)
                    .then(|| "leave max_tokens_field out: the API has one output cap".to_string()),
            );
        }
        let shared_prefix = w.shared_prefix.map(|p| {
            use crate::limits::{MAX_PREFIX_TOKENS, MAX_TOKENS};
            self.count_in(
                &k("shared_prefix.tokens"),
                Some(p.tokens.into()),
                1,
                MAX_TOKENS.into(),
                "a prefix length in tokens",
            );
            self.count_in(
                &k("shared_prefix.count"),
                p.count.map(u64::from),
                1,
                MAX_PREFIX_TOKENS,
                "a number of prefixes",
            );
            let total = u64::from(p.tokens) * u64::from(p.count.unwrap_or(1));
            if p.tokens as u64 <= MAX_TOKENS as u64 && total > MAX_PREFIX_TOKENS {
                self.err(
                    &k("shared_prefix"),
                    format!(
                        "the prefixes hold {total} tokens together (tokens x count); expected at most {MAX_PREFIX_TOKENS}"
                    ),
                    Some("they are generated once and kept for the whole point: use fewer or shorter ones".into()),
                );
            }
            SharedPrefix {
                tokens: p.tokens,
                count: p.count.unwrap_or(1).max(1),
            }
        });
        let need_output = output_tokens.is_none() && !super::retrieval::retrieves(api);
        let dataset = w
            .dataset
            .and_then(|d| self.dataset(&k("dataset"), d, api, need_output, w.images.is_some()));
        let trace = w.trace.and_then(|t| self.trace(&k("trace"), t));
        let conversation = w.conversation.map(|c| {
            if !api.takes_messages() {
                self.key_err(
                    &k("conversation"),
                    "multi-turn conversations need api = \"chat\", \"responses\" or \"messages\"",
                    None,
                );
            }
            self.count_in(
                &k("conversation.turns"),
                Some(c.turns.into()),
                1,
                crate::limits::MAX_TURNS.into(),
                "a number of turns",
            );
            // Each turn sends the whole conversation so far.
            let mean = |d: &Option<Dist>| d.as_ref().map(Dist::approx_mean).unwrap_or(0.0);
            let context = shared_prefix.as_ref().map_or(0.0, |p| p.tokens as f64)
                + c.turns as f64 * (mean(&input_tokens) + mean(&output_tokens));
            if c.turns <= crate::limits::MAX_TURNS
                && context.is_finite()
                && context > crate::limits::MAX_TOKENS as f64
            {
                self.err(
                    &k("conversation.turns"),
                    format!(
                        "the last turn's context would hold about {} tokens (prefix + turns x (input + output)); expected at most {}",
                        context.round(),
                        crate::limits::MAX_TOKENS
                    ),
                    Some("use fewer turns or shorter turns".into()),
                );
            }
            Conversation {
                turns: c.turns,
                think_time: c.think_time.unwrap_or_default(),
            }
        });
        let images = w.images.and_then(|i| self.images(name, api, i));
        let audio = w.audio.and_then(|a| self.audio(name, api, a));
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
            if !all_finite(&v) {
                self.err(
                    &format!("workloads.{name}.extra_body.{key}"),
                    "cannot be sent as JSON: it holds nan or inf",
                    None,
                );
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
            trace,
            conversation,
            ignore_eos: w.ignore_eos.unwrap_or(false),
            stream: w.stream.unwrap_or(!super::retrieval::retrieves(api)),
            max_tokens_field,
            sampling: w.sampling.unwrap_or_default(),
            extra_body,
            mix: Vec::new(),
            images,
            audio,
            retrieval,
            structured,
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
            if found.trace.is_some() {
                self.err(
                    &pk,
                    format!("workload \"{part}\" replays a trace; a mix sends its requests on one arrival process of its own"),
                    None,
                );
                continue;
            }
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
                    (
                        "response_format, tools or tool_choice",
                        f.structured != o.structured,
                    ),
                    (
                        "batch, documents, encoding_format or dimensions",
                        match (&f.retrieval, &o.retrieval) {
                            (Some(a), Some(b)) => !a.sends_alike(b),
                            (a, b) => a.is_some() != b.is_some(),
                        },
                    ),
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
        let retrieval = f.retrieval.clone();
        let structured = f.structured.clone();
        Some(Workload {
            name: name.to_string(),
            api: f.api,
            input_tokens: None,
            output_tokens: None,
            shared_prefix: None,
            dataset: None,
            trace: None,
            conversation: None,
            ignore_eos: f.ignore_eos,
            stream: f.stream,
            max_tokens_field: f.max_tokens_field.clone(),
            sampling: f.sampling.clone(),
            extra_body: f.extra_body.clone(),
            mix: out,
            images: None,
            audio: None,
            retrieval,
            structured,
        })
    }

    /// Loads an empirical distribution's file: one length per line, or
    /// `length,weight` (a histogram); `#` starts a comment.
    pub(super) fn load_dist(&mut self, key: &str, d: Dist) -> Dist {
        let Dist::Empirical(Empirical::File(file)) = &d else {
            return d;
        };
        let path = self.base_dir.join(file);
        let text =
            match crate::files::read_text_in(&path, crate::files::MAX_LENGTHS_BYTES, self.repo) {
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
        for (i, raw_line) in text.lines().enumerate() {
            let line = raw_line.split('#').next().unwrap_or("");
            if line.trim().is_empty() {
                continue;
            }
            // Each field with its column, so an error points at the token.
            let mut fields = Vec::new();
            let mut start = None;
            for (b, c) in line.char_indices().chain([(line.len(), ',')]) {
                let sep = matches!(c, ',' | ' ' | '\t');
                match (start, sep) {
                    (None, false) => start = Some(b),
                    (Some(s0), true) => {
                        fields.push((s0, &line[s0..b]));
                        start = None;
                    }
                    _ => {}
                }
            }
            let col = |b: usize| line[..b].chars().count() + 1;
            let bad = |(b, tok): (usize, &str), what: &str| {
                format!(
                    "{}:{}:{}: expected {what}, found {}",
                    path.display(),
                    i + 1,
                    col(b),
                    crate::files::describe_token(tok)
                )
            };
            let problem = match fields.as_slice() {
                [v, rest @ ..] if v.1.parse::<u32>().is_err() => {
                    let _ = rest;
                    Some(bad(*v, "a token length (a whole number)"))
                }
                [v] if v
                    .1
                    .parse::<u32>()
                    .is_ok_and(|n| n > crate::limits::MAX_TOKENS) =>
                {
                    Some(bad(*v, "a token length of at most 1048576"))
                }
                [v, w] => match w.1.parse::<f64>() {
                    Ok(x) if x > 0.0 && x.is_finite() => {
                        let n: u32 = v.1.parse().unwrap_or(0);
                        if n > crate::limits::MAX_TOKENS {
                            Some(bad(*v, "a token length of at most 1048576"))
                        } else {
                            *counts.entry(n).or_default() += x;
                            None
                        }
                    }
                    _ => Some(bad(*w, "a weight > 0")),
                },
                [v] => {
                    *counts.entry(v.1.parse().unwrap_or(0)).or_default() += 1.0;
                    None
                }
                [_, _, extra, ..] => Some(bad(*extra, "at most two fields, `length,weight`")),
                [] => None,
            };
            if let Some(p) = problem {
                self.err(key, p, None);
                return d;
            }
        }
        if !counts.values().sum::<f64>().is_finite() {
            self.err(
                key,
                format!(
                    "{}: the weights add up to more than a number can hold",
                    path.display()
                ),
                None,
            );
            return d;
        }
        if counts.is_empty() {
            self.err(key, format!("{} holds no lengths", path.display()), None);
            return d;
        }
        Dist::Empirical(Empirical::Values(counts.into_iter().collect()))
    }
}

/// Whether every float in a TOML value is finite (JSON has no nan or inf).
fn all_finite(v: &toml::Value) -> bool {
    match v {
        toml::Value::Float(x) => x.is_finite(),
        toml::Value::Array(a) => a.iter().all(all_finite),
        toml::Value::Table(t) => t.values().all(all_finite),
        _ => true,
    }
}

impl Cx<'_> {
    /// A dataset: read (a regular file, bounded), hashed, and parsed by the
    /// same checker `run` uses; the image files its rows name are read
    /// and checked too (their sizes kept, not their bytes). A workload
    /// with an `images` table (`images_table`) cannot also send the rows'
    /// own images.
    fn dataset(
        &mut self,
        key: &str,
        d: RawDataset,
        api: Api,
        need_output: bool,
        images_table: bool,
    ) -> Option<Dataset> {
        let path = self.base_dir.join(&d.path);
        let pk = format!("{key}.path");
        if let (Some(lo), Some(hi)) = (d.min_input_tokens, d.max_input_tokens) {
            if lo > hi {
                self.err(
                    &format!("{key}.min_input_tokens"),
                    format!("min_input_tokens ({lo}) is greater than max_input_tokens ({hi})"),
                    None,
                );
            }
        }
        let (sha256, text) =
            self.read_text(&pk, &path, crate::files::MAX_DATASET_BYTES, "dataset")?;
        let text = text.as_str();
        let at = |e: crate::dataset::DatasetError| {
            let at = match (e.line, e.col) {
                (Some(l), Some(c)) => format!(":{l}:{c}"),
                (Some(l), None) => format!(":{l}"),
                _ => String::new(),
            };
            Some((format!("{}{at}: {}", path.display(), e.message), e.hint))
        };
        let dir = path.parent().unwrap_or(std::path::Path::new("."));
        let parsed = crate::dataset::parse(text, d.format, api, need_output).and_then(|mut p| {
            let files = crate::image::load(&mut p.records, dir, self.repo, false)?;
            Ok((p, files))
        });
        let problem = match parsed {
            Err(e) => at(e),
            Ok((p, _)) if images_table && !p.records.iter().all(|r| r.images.is_empty()) => {
                let line = p
                    .records
                    .iter()
                    .find(|r| !r.images.is_empty())
                    .map_or(0, |r| r.line);
                self.key_err(
                    &format!("{}.images", key.strip_suffix(".dataset").unwrap_or(key)),
                    format!(
                        "the dataset's rows name images of their own ({}:{line}), and a request sends either those or the `images` table's",
                        path.display()
                    ),
                    Some("remove `images` to send the dataset's images, or use a dataset whose rows name none".into()),
                );
                return None;
            }
            Ok((p, files)) if !p.records.is_empty() => {
                let size = crate::budget::dataset_size(text.len() as u64, &p.records, &files);
                self.sizes
                    .datasets
                    .insert(sha256.clone(), (pk.clone(), size));
                None
            }
            Ok((p, _)) => Some((
                format!(
                    "{}: no usable prompt ({} entries read)",
                    path.display(),
                    p.read
                ),
                Some("check the file's format (jsonl or sharegpt)"),
            )),
        };
        if let Some((message, hint)) = problem {
            self.err(&pk, message, hint.map(str::to_string));
            return None;
        }
        Some(Dataset {
            sha256,
            path: d.path,
            format: d.format,
            min_input_tokens: d.min_input_tokens,
            max_input_tokens: d.max_input_tokens,
        })
    }

    /// A trace: read (a regular file, bounded), hashed, and parsed by the
    /// same checker `run` uses, keeping the window's requests.
    /// Reads a file a spec names (a dataset, a trace) as UTF-8 text within
    /// `limit` bytes, with its SHA-256; an error at `pk` otherwise.
    pub(super) fn read_text(
        &mut self,
        pk: &str,
        path: &std::path::Path,
        limit: u64,
        what: &str,
    ) -> Option<(String, String)> {
        let bytes = match crate::files::read_regular_in(path, limit, self.repo) {
            Ok(b) => b,
            Err(e) => {
                self.err(
                    pk,
                    format!("cannot read {what} {}: {e}", path.display()),
                    Some("paths are relative to the spec file".into()),
                );
                return None;
            }
        };
        let sha256 = hex(&Sha256::digest(&bytes));
        match String::from_utf8(bytes) {
            Ok(text) => Some((sha256, text)),
            Err(e) => {
                let at = e.utf8_error().valid_up_to();
                let (line, col) = crate::files::line_col_of(e.as_bytes(), at);
                self.err(
                    pk,
                    format!("{}:{line}:{col}: not UTF-8 text", path.display()),
                    None,
                );
                None
            }
        }
    }

    fn trace(&mut self, key: &str, t: RawTrace) -> Option<Trace> {
        let before = self.errors.len();
        let speedup = self.positive(
            &format!("{key}.speedup"),
            t.speedup,
            1.0,
            Some(crate::limits::MAX_SPEEDUP),
        );
        if speedup < 1.0 / crate::limits::MAX_SPEEDUP {
            self.err(
                &format!("{key}.speedup"),
                format!(
                    "expected a speedup of at least {}, found {speedup}",
                    1.0 / crate::limits::MAX_SPEEDUP
                ),
                None,
            );
        }
        let block_tokens = t.block_tokens.unwrap_or(512);
        self.count_in(
            &format!("{key}.block_tokens"),
            t.block_tokens.map(u64::from),
            1,
            crate::limits::MAX_TOKENS.into(),
            "a block length in tokens",
        );
        if t.duration.is_some_and(|d| d.is_zero()) {
            self.err(
                &format!("{key}.duration"),
                "expected a duration > 0, found 0s",
                None,
            );
        }
        for (what, d) in [("start", t.start), ("duration", t.duration)] {
            if d.is_some_and(|d| d > crate::limits::MAX_DURATION) {
                self.err(
                    &format!("{key}.{what}"),
                    format!("expected at most {}", crate::limits::MAX_DURATION),
                    None,
                );
            }
        }
        if self.errors.len() != before {
            return None;
        }
        let path = self.base_dir.join(&t.file);
        let pk = format!("{key}.file");
        let (sha256, text) = self.read_text(&pk, &path, crate::files::MAX_TRACE_BYTES, "trace")?;
        let text = text.as_str();
        let mut out = Trace {
            file: t.file,
            sha256,
            format: t.format,
            speedup,
            start: t.start.unwrap_or_default(),
            duration: t.duration,
            block_tokens,
            requests: 0,
            span: Duration::default(),
        };
        let problem = match crate::trace::parse(text, t.format, out.window()) {
            Err(e) => {
                let at = match (e.line, e.col) {
                    (Some(l), Some(c)) => format!(":{l}:{c}"),
                    (Some(l), None) => format!(":{l}"),
                    _ => String::new(),
                };
                Some((format!("{}{at}: {}", path.display(), e.message), e.hint))
            }
            Ok(p) if p.records.is_empty() => Some((
                format!(
                    "{}: no request inside the window ({} requests read)",
                    path.display(),
                    p.read
                ),
                Some("check `start` and `duration` against the trace's length, and its format"),
            )),
            Ok(p) => {
                out.requests = p.records.len() as u64;
                out.span = Duration::from_nanos(p.records.last().map_or(0, |r| r.at_ns));
                None
            }
        };
        if let Some((message, hint)) = problem {
            self.err(&pk, message, hint.map(str::to_string));
            return None;
        }
        Some(out)
    }

    /// Sampling parameters: finite, and in the range servers accept.
    fn sampling(&mut self, name: &str, s: &RawSampling) {
        let k = |f: &str| format!("workloads.{name}.sampling.{f}");
        self.float_in(&k("temperature"), s.temperature, 0.0, 100.0);
        self.float_in(&k("top_p"), s.top_p, 0.0, 1.0);
        self.float_in(&k("min_p"), s.min_p, 0.0, 1.0);
        for (f, v) in [
            ("presence_penalty", s.presence_penalty),
            ("frequency_penalty", s.frequency_penalty),
            ("repetition_penalty", s.repetition_penalty),
        ] {
            self.float_in(&k(f), v, -100.0, 100.0);
        }
    }
}
