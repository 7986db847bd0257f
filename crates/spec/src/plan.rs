//! The plan: a compiled spec expanded into points. Matrix expansion follows
//! GitHub Actions' documented `strategy.matrix` rules; each point is
//! resolved into a complete, serializable configuration and given a stable
//! ID (a readable slug plus a hash of what the point measures); points can
//! be partitioned across machines with `slice:K/N` or `hash:K/N`.

// Spec errors carry their position and snippet; they are cold, and boxing
// them would only make every call site noisier.
#![allow(clippy::result_large_err)]

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::raw::{Arrival, TargetKind};
use crate::{
    Axis, AxisValue, Combo, Goodput, Level, Load, Model, Precision, Spec, SpecError, SpecErrors,
    Target, Workload, hex, ramp_levels,
};

/// Everything one point needs to run, fully resolved. Written into results
/// and baselines; its measured part is hashed into the point's ID.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct PointConfig {
    pub target: Arc<Target>,
    pub model: Arc<Model>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<Precision>,
    pub workload: Arc<Workload>,
    pub load: Load,
    #[serde(default, skip_serializing_if = "Goodput::is_empty")]
    pub goodput: Goodput,
    pub seed: u64,
    /// The launched server's flags from the `server_args` axis: part of
    /// what is measured (the hash), not of what is sent (`request_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_args: Option<Arc<crate::server_args::ServerArgs>>,
}

/// What is left out of a point's hash: how to reach and start the system
/// under test, not what is sent to it. A changed server flag, launch
/// command, simulator speed or API endpoint is exactly what the regression
/// judge should compare; hardware identity is checked by the environment
/// fingerprint instead. `runs` is left out because more runs measure the
/// same thing with more evidence.
const UNHASHED: &[&[&str]] = &[
    &["target", "base_url"],
    &["target", "api_key_env"],
    &["target", "headers"],
    &["target", "metrics_url"],
    &["target", "tls_insecure"],
    &["target", "ca_cert"],
    &["target", "launch"],
    &["target", "gpu_ids"],
    &["target", "gpu_metrics_url"],
    &["target", "gpu_metrics_match"],
    &["target", "sim"],
    &["target", "gpu_hour_usd"],
    &["model", "weights"],
    &["precision", "weights"],
    &["precision", "arg"],
    &["load", "runs"],
];

impl PointConfig {
    /// One measured part as JSON (unhashed fields removed), `None` when
    /// the point has no such part (no precision, no goodput bounds).
    fn part_json(&self, key: &str) -> Option<serde_json::Value> {
        let v = match key {
            "goodput" if self.goodput.is_empty() => return None,
            "goodput" => serde_json::to_value(&self.goodput),
            "load" => serde_json::to_value(&self.load),
            "model" => serde_json::to_value(&self.model),
            "precision" => serde_json::to_value(self.precision.as_ref()?),
            "seed" => Ok(serde_json::Value::from(self.seed)),
            "server_args" => serde_json::to_value(self.server_args.as_ref()?),
            "target" => serde_json::to_value(&self.target),
            "workload" => serde_json::to_value(&self.workload),
            _ => return None,
        };
        let mut v = v.expect("configs serialize");
        if let Some(obj) = v.as_object_mut() {
            for path in UNHASHED.iter().filter(|p| p[0] == key) {
                obj.remove(path[1]);
            }
        }
        Some(v)
    }

    /// The part of the configuration that defines what is measured, as
    /// canonical JSON (sorted keys): the baseline's drift diff shows it.
    pub fn measured_json(&self) -> serde_json::Value {
        let parts = [
            "goodput",
            "load",
            "model",
            "precision",
            "seed",
            "server_args",
            "target",
            "workload",
        ];
        serde_json::Value::Object(
            parts
                .iter()
                .filter_map(|k| self.part_json(k).map(|v| (k.to_string(), v)))
                .collect(),
        )
    }

    /// The point's hash: the first 8 hex digits of SHA-256 over the
    /// SHA-256 digests of its measured parts (goodput, load without `runs`,
    /// model, precision, seed, target identity, workload, then the
    /// launched server's `server_args` where the matrix gives them; each
    /// part's canonical JSON as in `measured_json`), in that order. Hashing the
    /// parts first lets a plan of many points digest each shared part once.
    pub fn hash(&self) -> String {
        self.hash_cached(&mut HashParts::default())
    }

    fn hash_cached(&self, cache: &mut HashParts) -> String {
        let digest_of = |key: &str| -> [u8; 32] {
            match self.part_json(key) {
                Some(v) => {
                    Sha256::digest(serde_json::to_string(&v).expect("serializes").as_bytes()).into()
                }
                None => [0; 32],
            }
        };
        let mut part = |kind: &'static str, name: String| -> [u8; 32] {
            *cache
                .0
                .entry((kind, name))
                .or_insert_with(|| digest_of(kind))
        };
        let mut h = Sha256::new();
        h.update(digest_of("goodput"));
        h.update(digest_of("load"));
        h.update(part(
            "model",
            format!("{}\0{}", self.model.name, self.model.served_name),
        ));
        h.update(match &self.precision {
            Some(p) => part("precision", format!("{}\0{}", self.model.name, p.name)),
            None => [0; 32],
        });
        h.update(self.seed.to_le_bytes());
        h.update(part("target", self.target.name.clone()));
        h.update(part("workload", self.workload.name.clone()));
        // Only where the axis is given, so points without one keep the
        // hashes they had before it existed.
        if self.server_args.is_some() {
            h.update(digest_of("server_args"));
        }
        hex(&h.finalize()[..4])
    }

    /// What the requests of this point are drawn from, and nothing else:
    /// the key every random stream of the point is derived from (with the
    /// spec's seed, the run and the purpose, `seed::derive`): prompt
    /// lengths and text, shared prefixes, media, a mix's choices, arrival
    /// times. Hex SHA-256 over the canonical JSON of
    ///
    /// - the workload, less its labels (its name, a mix part's name, a
    ///   dataset's or trace's path: the file's SHA-256 stays);
    /// - the model name as sent (`served_name`);
    /// - the load's shape: `arrival`, `burstiness`, `level`,
    ///   `max_concurrency`, `ramp`, `warmup`, `duration`, `requests`.
    ///
    /// Everything else is left out, because it changes how the client
    /// waits for, reads, reaches or judges a request, never which requests
    /// it draws: timeouts, `[load.limits]`, `cold_connections`,
    /// `reset_cache`, `window`,
    /// `runs` (each run has a stream of its own already), `search` (a
    /// search runs as probes, points at one level without one), goodput
    /// bounds, the target (URL, key, headers, launch, simulator), the rest
    /// of the model and precision (a tokenizer changes the text that fits
    /// a drawn length, not the draw), and every table outside the point
    /// (`[slo]`, `[telemetry]`, `[validity]`, `[cost]`, `[regression]`).
    /// The point's [`hash`](Self::hash) covers more, being what is
    /// measured: a changed timeout is another point to the judge, which
    /// sends the same requests.
    pub fn request_key(&self) -> String {
        // Exhaustive destructuring: a new field of the point or of its
        // load does not compile until it is sorted into one side or the
        // other.
        let PointConfig {
            target: _,
            model: _,
            precision: _,
            workload,
            load,
            goodput: _,
            seed: _,
            server_args: _,
        } = self;
        let Load {
            arrival,
            burstiness,
            level,
            max_concurrency,
            ramp,
            search: _,
            warmup,
            duration,
            requests,
            runs: _,
            window: _,
            timeouts: _,
            limits: _,
            cold_connections: _,
            reset_cache: _,
        } = load;
        let mut workload = serde_json::to_value(&**workload).expect("configs serialize");
        strip_labels(&mut workload);
        let key = serde_json::json!({
            "workload": workload,
            "served_name": self.served_name(),
            "load": {
                "arrival": arrival,
                "burstiness": burstiness,
                "level": level,
                "max_concurrency": max_concurrency,
                "ramp": ramp,
                "warmup": warmup,
                "duration": duration,
                "requests": requests,
            },
        });
        hex(&Sha256::digest(
            serde_json::to_string(&key).expect("serializes").as_bytes(),
        ))
    }

    /// The model name to send in requests.
    pub fn served_name(&self) -> &str {
        self.precision
            .as_ref()
            .and_then(|p| p.served_name.as_deref())
            .unwrap_or(&self.model.served_name)
    }
}

/// Removes from a workload's JSON what names it rather than defines its
/// requests: its name, a dataset's or trace's path (their SHA-256 stays),
/// and the same in every part of a mix.
fn strip_labels(workload: &mut serde_json::Value) {
    let Some(w) = workload.as_object_mut() else {
        return;
    };
    w.remove("name");
    if let Some(d) = w.get_mut("dataset").and_then(|d| d.as_object_mut()) {
        d.remove("path");
    }
    if let Some(t) = w.get_mut("trace").and_then(|t| t.as_object_mut()) {
        t.remove("file");
    }
    if let Some(parts) = w.get_mut("mix").and_then(|m| m.as_array_mut()) {
        for part in parts {
            if let Some(pw) = part.get_mut("workload") {
                strip_labels(pw);
            }
        }
    }
}

/// What the points of a plan share, built once: the digests of their
/// measured parts, and the parts themselves behind `Arc`s.
#[derive(Default)]
struct HashParts(
    std::collections::HashMap<(&'static str, String), [u8; 32]>,
    std::collections::HashMap<String, Arc<Target>>,
    std::collections::HashMap<(String, String), Arc<Model>>,
    std::collections::HashMap<String, Arc<Workload>>,
);

/// One point of the matrix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Point {
    /// `slug-hash`: stable across runs, new when the measured configuration changes.
    pub id: String,
    /// Readable name from the axis values; the same point keeps it when the spec changes.
    pub slug: String,
    pub hash: String,
    /// The axis values that made this point, in matrix order.
    pub axes: Vec<(String, String)>,
    pub config: PointConfig,
}

/// The expanded spec.
#[derive(Debug, Clone)]
pub struct Plan {
    pub points: Vec<Point>,
}

/// Expands axes with GitHub Actions' rules: the cartesian product (first
/// axis outermost), minus every combination an `exclude` entry matches on
/// all of its keys, then each `include` entry merged into every combination
/// where it overwrites none of the original axis values (values added by
/// earlier includes may be overwritten), or appended as a new combination
/// where it fits none. Generic so the documented examples can be tested
/// with their own keys.
pub fn expand<K: Clone + PartialEq, V: Clone + PartialEq>(
    axes: &[(K, Vec<V>)],
    exclude: &[Vec<(K, V)>],
    include: &[Vec<(K, V)>],
) -> Vec<Vec<(K, V)>> {
    let mut combos: Vec<Vec<(K, V)>> = if axes.is_empty() {
        Vec::new()
    } else {
        vec![Vec::new()]
    };
    for (key, values) in axes {
        combos = combos
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |v| {
                    let mut next = c.clone();
                    next.push((key.clone(), v.clone()));
                    next
                })
            })
            .collect();
    }
    let matches = |combo: &[(K, V)], entry: &[(K, V)]| {
        entry
            .iter()
            .all(|(k, v)| combo.iter().any(|(ck, cv)| ck == k && cv == v))
    };
    combos.retain(|c| !exclude.iter().any(|e| matches(c, e)));
    let originals = combos.len();
    let n_axes = axes.len();
    for entry in include {
        let mut merged = false;
        for combo in combos.iter_mut().take(originals) {
            let fits =
                entry.iter().all(
                    |(k, v)| match combo[..n_axes].iter().find(|(ck, _)| ck == k) {
                        Some((_, cv)) => cv == v,
                        None => true,
                    },
                );
            if fits {
                merged = true;
                for (k, v) in entry {
                    if combo[..n_axes].iter().any(|(ck, _)| ck == k) {
                        continue;
                    }
                    match combo[n_axes..].iter_mut().find(|(ck, _)| ck == k) {
                        Some(slot) => slot.1 = v.clone(),
                        None => combo.push((k.clone(), v.clone())),
                    }
                }
            }
        }
        if !merged {
            combos.push(entry.clone());
        }
    }
    combos
}

/// Which share of the points this machine runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Partition {
    /// Round robin by point order: the K-th of every N (1-based).
    Slice { k: u32, n: u32 },
    /// By a hash of the point's slug: stable when points are added or removed.
    Hash { k: u32, n: u32 },
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("expected a partition such as \"slice:1/4\" or \"hash:2/3\" (1 <= K <= N), found \"{0}\"")]
pub struct ParsePartitionError(String);

impl FromStr for Partition {
    type Err = ParsePartitionError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ParsePartitionError(s.to_string());
        let (kind, frac) = s.split_once(':').ok_or_else(err)?;
        let (k, n) = frac.split_once('/').ok_or_else(err)?;
        let k: u32 = k.trim().parse().map_err(|_| err())?;
        let n: u32 = n.trim().parse().map_err(|_| err())?;
        if k == 0 || n == 0 || k > n {
            return Err(err());
        }
        match kind.trim() {
            "slice" => Ok(Partition::Slice { k, n }),
            "hash" => Ok(Partition::Hash { k, n }),
            _ => Err(err()),
        }
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Partition::Slice { k, n } => write!(f, "slice:{k}/{n}"),
            Partition::Hash { k, n } => write!(f, "hash:{k}/{n}"),
        }
    }
}

impl Partition {
    /// The split's kind ("slice" or "hash"), this share's K and the N.
    pub fn parts(&self) -> (&'static str, u32, u32) {
        match *self {
            Partition::Slice { k, n } => ("slice", k, n),
            Partition::Hash { k, n } => ("hash", k, n),
        }
    }

    /// Share `k` of the same split.
    pub fn sibling(&self, k: u32) -> Partition {
        match *self {
            Partition::Slice { n, .. } => Partition::Slice { k, n },
            Partition::Hash { n, .. } => Partition::Hash { k, n },
        }
    }

    /// Whether the point at `index` (in plan order) belongs to this share.
    pub fn contains(&self, index: usize, point: &Point) -> bool {
        match *self {
            Partition::Slice { k, n } => index as u64 % n as u64 == (k - 1) as u64,
            Partition::Hash { k, n } => {
                let d = Sha256::digest(point.slug.as_bytes());
                let h = u64::from_be_bytes(d[..8].try_into().expect("8 bytes"));
                h % n as u64 == (k - 1) as u64
            }
        }
    }
}

impl Plan {
    /// Runs every simulator point on `clock` (`run --virtual`); returns how
    /// many points that is. The clock is not part of a point's hash (nor
    /// is anything else of `[targets.*.sim]`): the results say which ran.
    pub fn set_sim_clock(&mut self, clock: crate::raw::SimClock) -> usize {
        let mut n = 0;
        for p in &mut self.points {
            if let Some(sim) = Arc::make_mut(&mut p.config.target).sim.as_mut() {
                sim.clock = clock;
                n += 1;
            }
        }
        n
    }

    /// Expands and resolves every point of a spec.
    pub fn build(spec: &Spec) -> Result<Plan, SpecErrors> {
        let m = &spec.matrix;
        let combos: Vec<Combo> = if m.axes.is_empty() && m.include.is_empty() {
            vec![Vec::new()]
        } else {
            expand(&m.axes, &m.exclude, &m.include)
        };
        let mut points = Vec::with_capacity(combos.len());
        let mut errors = Vec::new();
        let mut reported = std::collections::HashSet::new();
        let mut cache = HashParts::default();
        for combo in &combos {
            match resolve(spec, combo, &mut cache).and_then(|p| launch_values(spec, &p).map(|_| p))
            {
                Ok(p) => points.push(p),
                Err(e) => {
                    if reported.insert((e.key.clone(), e.message.clone())) {
                        errors.push(e);
                    }
                }
            }
        }
        for p in &points {
            if let Some(e) = over_budget(spec, p) {
                if reported.insert((e.key.clone(), e.message.clone())) {
                    errors.push(e);
                }
            }
        }
        errors.extend(quality_over_budget(spec, &points));
        if !errors.is_empty() {
            return Err(SpecErrors(errors));
        }
        if points.is_empty() {
            return Err(spec
                .error(
                    "matrix",
                    "the matrix has no points: every combination is excluded",
                    None,
                )
                .into());
        }
        let mut seen = std::collections::BTreeMap::new();
        for p in &points {
            if let Some(prev) = seen.insert(p.slug.clone(), p.id.clone()) {
                return Err(spec
                    .error(
                        "matrix",
                        format!(
                            "two points resolve to the same configuration `{}` ({prev})",
                            p.slug
                        ),
                        Some("remove the duplicate include entry or axis value".into()),
                    )
                    .into());
            }
        }
        Ok(Plan { points })
    }

    /// Keeps the points of one partition and those matching `only` (point
    /// IDs, slugs or slug prefixes).
    pub fn select(self, partition: Option<Partition>, only: &[String]) -> Plan {
        let points = self
            .points
            .into_iter()
            .enumerate()
            .filter(|(i, p)| partition.is_none_or(|part| part.contains(*i, p)))
            .filter(|(_, p)| only.is_empty() || only.iter().any(|o| selects(o, &p.id, &p.slug)))
            .map(|(_, p)| p)
            .collect();
        Plan { points }
    }
}

/// Whether a selector (`--only`, `bless --points`) names a point: its ID,
/// its slug, or a slug prefix written with a final `*` (`sim.llama-8b.*`).
/// A bare name is exact: `...c1` does not select `...c16`.
pub fn selects(selector: &str, id: &str, slug: &str) -> bool {
    match selector.strip_suffix('*') {
        Some(prefix) => slug.starts_with(prefix) || id.starts_with(prefix),
        None => selector == id || selector == slug,
    }
}

/// A launched server's placeholders that read the point's model or
/// precision (`{precision.weights}`...) must have a value for every point
/// that starts one; `run` would stop at the first that has none.
fn launch_values(spec: &Spec, p: &Point) -> Result<(), SpecError> {
    let cfg = &p.config;
    let Some(launch) = &cfg.target.launch else {
        return Ok(());
    };
    let prec = cfg.precision.as_ref();
    let weights = prec
        .and_then(|p| p.weights.as_ref())
        .or(cfg.model.weights.as_ref());
    let has = |key: &str| match key {
        "model.weights" | "precision.weights" => weights.is_some(),
        "model.tokenizer" => cfg.model.tokenizer.is_some(),
        "precision" => prec.is_some(),
        "precision.arg" => prec.is_some_and(|p| p.arg.is_some()),
        "precision.dtype" => prec.is_some_and(|p| p.dtype.is_some()),
        _ => true,
    };
    let t = &cfg.target.name;
    let templates = launch
        .command
        .iter()
        .enumerate()
        .map(|(i, a)| (format!("targets.{t}.launch.command[{i}]"), a))
        .chain(
            launch
                .env
                .iter()
                .map(|(k, v)| (format!("targets.{t}.launch.env.{k}"), v)),
        )
        .chain(
            launch
                .cwd
                .iter()
                .map(|c| (format!("targets.{t}.launch.cwd"), c)),
        );
    for (key, template) in templates {
        if let Some(missing) = crate::placeholders(template).into_iter().find(|k| !has(k)) {
            let what = match missing {
                "model.weights" | "precision.weights" => format!(
                    "`weights` in [models.{m}] or [models.{m}.precisions.<name>]",
                    m = cfg.model.name
                ),
                "model.tokenizer" => format!("`tokenizer` in [models.{}]", cfg.model.name),
                "precision" => "a `precision` axis in [matrix]".to_string(),
                other => format!(
                    "`{}` in [models.{}.precisions.<name>]",
                    other.trim_start_matches("precision."),
                    cfg.model.name
                ),
            };
            return Err(spec.error(
                &key,
                format!(
                    "the launch command uses {{{missing}}}, which point `{}` has no value for",
                    p.slug
                ),
                Some(format!("set {what}")),
            ));
        }
    }
    Ok(())
}

fn value_of(combo: &Combo, axis: Axis) -> Option<&AxisValue> {
    combo.iter().find(|(a, _)| *a == axis).map(|(_, v)| v)
}

fn name_of(combo: &Combo, axis: Axis) -> Option<&str> {
    match value_of(combo, axis) {
        Some(AxisValue::Name(n)) => Some(n),
        _ => None,
    }
}

/// The single defined entity when no axis names one, or an error.
fn pick<'a, T>(
    spec: &Spec,
    combo: &Combo,
    axis: Axis,
    map: &'a std::collections::BTreeMap<String, T>,
) -> Result<(&'a String, &'a T), SpecError> {
    let what = axis.name();
    match name_of(combo, axis) {
        Some(n) => map.get_key_value(n).ok_or_else(|| spec.error("matrix", format!("unknown {what} \"{n}\""), None)),
        None if map.len() == 1 => Ok(map.iter().next().expect("one entry")),
        None => Err(spec.error(
            &if spec.matrix.axes.is_empty() && spec.matrix.include.is_empty() {
                format!("{what}s.{}", map.keys().nth(1).map(String::as_str).unwrap_or(""))
            } else {
                "matrix".to_string()
            },
            format!(
                "a point has no `{what}`: the spec defines {} {what}s ({}) and the matrix does not choose one",
                map.len(),
                map.keys().cloned().collect::<Vec<_>>().join(", ")
            ),
            Some(format!("add a `{what}` axis to [matrix], or a `{what}` key to each include entry")),
        )),
    }
}

fn level_slug(level: &Level) -> String {
    match level {
        Level::Concurrency(c) => format!("c{c}"),
        Level::Rate(r) => format!("r{}", crate::fmt_number(r.as_per_second())),
    }
}

fn resolve(spec: &Spec, combo: &Combo, cache: &mut HashParts) -> Result<Point, SpecError> {
    let (tname, target) = pick(spec, combo, Axis::Target, &spec.targets)?;
    let (mname, (model, precisions)) = pick(spec, combo, Axis::Model, &spec.models)?;
    let (wname, workload) = pick(spec, combo, Axis::Workload, &spec.workloads)?;
    let workload = &*crate::retrieval::with_axes(
        workload,
        count_of(combo, Axis::Batch),
        count_of(combo, Axis::Documents),
    )
    .map_err(|(axis, msg)| {
        spec.error(
            &format!("matrix.{axis}"),
            msg,
            Some(format!(
                "give `{axis}` only to the workloads it fits, in `include` entries such as {{ workload = \"...\", {axis} = 8 }}, or `exclude` workload \"{wname}\" from it"
            )),
        )
    })?;
    let precision = match name_of(combo, Axis::Precision) {
        Some(p) => match precisions.get(p) {
            Some(prec) => Some(prec.clone()),
            None => match crate::DType::parse(p) {
                Some(d) => Some(Precision {
                    name: p.to_string(),
                    served_name: None,
                    dtype: Some(d),
                    kv_dtype: None,
                    arg: None,
                    weights: None,
                }),
                None => {
                    return Err(spec.error(
                        &format!("models.{mname}"),
                        format!("model `{mname}` has no precision \"{p}\""),
                        Some(format!("declare it as [models.{mname}.precisions.{p}], or use a number format ({})", crate::DType::NAMES)),
                    ));
                }
            },
        },
        None if precisions.len() == 1 => precisions.values().next().cloned(),
        None => None,
    };
    if target.kind == TargetKind::Sim {
        // The simulator speaks the OpenAI and Anthropic APIs and KServe
        // tensors, not Triton's generate extension.
        let parts = std::iter::once(workload).chain(workload.mix.iter().map(|p| &p.workload));
        if let Some(w) = parts
            .into_iter()
            .find(|w| w.api == crate::raw::Api::Generate)
        {
            return Err(spec.error(
                &format!("workloads.{}.api", w.name),
                format!(
                    "target `{tname}` is the simulator, which does not serve api = \"generate\" (Triton's generate extension)"
                ),
                Some("point the workload at a Triton target (kind = \"openai\", base_url = \"http://HOST:8000\"), or use api = \"completions\" to send the same prompts to the simulator".into()),
            ));
        }
        sim_serves(spec, tname, mname, model, workload)?;
    }
    if target.kind == TargetKind::Sim {
        if let Some(p) = &precision {
            if p.dtype.is_none() {
                return Err(spec.error(
                    &format!("models.{mname}.precisions.{}", p.name),
                    format!(
                        "the simulator needs the number format of precision \"{}\"",
                        p.name
                    ),
                    Some(format!(
                        "add dtype = \"fp8\" (one of {})",
                        crate::DType::NAMES
                    )),
                ));
            }
        }
    }
    let load = resolve_load(spec, combo, workload)?;
    let served = precision
        .as_ref()
        .and_then(|p| p.served_name.clone())
        .unwrap_or_else(|| model.served_name.clone());
    let model = cache
        .2
        .entry((mname.clone(), served.clone()))
        .or_insert_with(|| {
            Arc::new(Model {
                served_name: served,
                ..model.clone()
            })
        })
        .clone();
    let target = cache
        .1
        .entry(tname.clone())
        .or_insert_with(|| Arc::new(target.clone()))
        .clone();
    let workload = cache
        .3
        .entry(workload.name.clone())
        .or_insert_with(|| Arc::new(workload.clone()))
        .clone();
    let config = PointConfig {
        target,
        model,
        precision,
        workload: workload.clone(),
        load,
        goodput: spec.goodput.clone(),
        seed: spec.seed,
        server_args: match value_of(combo, Axis::ServerArgs) {
            Some(AxisValue::ServerArgs(a)) => Some(a.clone()),
            _ => None,
        },
    };
    let slug = slug_of(&config);
    let hash = config.hash_cached(cache);
    Ok(Point {
        id: format!("{slug}-{hash}"),
        slug,
        hash,
        axes: combo
            .iter()
            .map(|(a, v)| (a.name().to_string(), v.to_string()))
            .collect(),
        config,
    })
}

/// A point's readable name: target, model, precision, workload, then its
/// load (level, ramp or search) and cap, joined by dots.
fn slug_of(config: &PointConfig) -> String {
    let mut parts = vec![config.target.name.clone(), config.model.name.clone()];
    if let Some(p) = &config.precision {
        parts.push(p.name.clone());
    }
    parts.push(config.workload.name.clone());
    parts.push(match (&config.load.ramp, &config.load.search) {
        (Some(r), _) => format!(
            "ramp-{}-{}",
            level_slug(r.levels.first().expect("non-empty")),
            level_slug(r.levels.last().expect("non-empty"))
        ),
        (None, Some(s)) => format!("search-{}-{}", level_slug(&s.from), level_slug(&s.to)),
        (None, None) => level_slug(&config.load.level),
    });
    if let Some(mc) = config.load.max_concurrency {
        parts.push(format!("mc{mc}"));
    }
    if let Some(a) = &config.server_args {
        parts.push(a.name.clone());
    }
    parts
        .join(".")
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The memory budget's error for a point whose estimate exceeds it
/// (`crate::budget`), at the key of its largest part: the load level
/// (as an axis of the matrix or in `[load]`), the dataset's path or the
/// tokenizer.
/// The quality phase keeps every server's answers until the run ends: an
/// error at `quality.prompts` when they could hold more than
/// [`crate::budget::QUALITY_BUDGET_BYTES`].
fn quality_over_budget(spec: &Spec, points: &[Point]) -> Option<SpecError> {
    use crate::budget;
    let q = spec.quality.as_ref()?;
    let servers: std::collections::BTreeSet<(&str, &str, Option<&str>)> = points
        .iter()
        .map(|p| {
            let c = &p.config;
            (
                c.target.name.as_str(),
                c.model.name.as_str(),
                c.precision.as_ref().map(|p| p.name.as_str()),
            )
        })
        .collect();
    let n = servers.len() as u64;
    let (prompts, tokens, top) = (
        u64::from(q.prompts),
        u64::from(q.max_tokens),
        u64::from(q.logprobs),
    );
    let bytes = budget::quality_bytes(n, prompts, tokens, top);
    if bytes <= budget::QUALITY_BUDGET_BYTES {
        return None;
    }
    Some(spec.error(
        "quality.prompts",
        format!(
            "the quality phase would keep up to {} of answers, over its budget of {}: {n} server(s) x {prompts} prompts x {tokens} tokens, each with {top} alternatives",
            budget::fmt_size(bytes),
            budget::fmt_size(budget::QUALITY_BUDGET_BYTES),
        ),
        Some("ask fewer prompts, or shorter answers (max_tokens), or fewer alternatives (logprobs)".into()),
    ))
}

fn over_budget(spec: &Spec, p: &Point) -> Option<SpecError> {
    use crate::budget::{self, Part};
    let w = &p.config.workload;
    // A mix loads every part's dataset; its largest entry is what a
    // request may carry.
    let mut dataset: Option<(&str, budget::DatasetSize)> = None;
    for d in std::iter::once(&**w)
        .chain(w.mix.iter().map(|m| &m.workload))
        .filter_map(|w| w.dataset.as_ref())
    {
        let Some((key, size)) = spec.sizes.datasets.get(&d.sha256) else {
            continue;
        };
        dataset = Some(match dataset {
            None => (key.as_str(), *size),
            Some((k, acc)) => {
                let bigger = size.largest_body_bytes > acc.largest_body_bytes;
                (
                    if bigger { key.as_str() } else { k },
                    budget::DatasetSize {
                        file_bytes: acc.file_bytes + size.file_bytes,
                        largest_body_bytes: acc.largest_body_bytes.max(size.largest_body_bytes),
                        most_messages: acc.most_messages.max(size.most_messages),
                        image_bytes: acc.image_bytes + size.image_bytes,
                    },
                )
            }
        });
    }
    let tokenizer = spec.sizes.tokenizers.get(&p.config.model.name);
    let inputs = budget::Inputs {
        dataset: dataset.map(|(_, d)| d),
        tokenizer_bytes: tokenizer.map_or(0, |(_, b)| *b),
        in_flight: budget::in_flight(&p.config.load),
    };
    let e = budget::estimate(&inputs);
    if !e.over_budget() {
        return None;
    }
    let axis = |name: &str| p.axes.iter().any(|(a, _)| a == name);
    let level_key = match p.config.load.level {
        Level::Concurrency(_) if axis("concurrency") => "matrix.concurrency",
        Level::Concurrency(_) if p.config.load.ramp.is_some() => "load.ramp",
        Level::Concurrency(_) => "load.concurrency",
        Level::Rate(_) if axis("max_concurrency") => "matrix.max_concurrency",
        Level::Rate(_) if p.config.load.max_concurrency.is_some() => "load.max_concurrency",
        Level::Rate(_) if axis("rate") => "matrix.rate",
        Level::Rate(_) => "load.rate",
    };
    let level_key = if p.config.load.search.is_some() {
        "load.search"
    } else {
        level_key
    };
    let size = budget::fmt_size;
    let parts = format!(
        "the dataset {} ({} of file{}), the tokenizer {}, requests {} ({} alive at once and {} built ahead, each up to {} of body{}, held {} times over)",
        size(e.dataset),
        size(inputs.dataset.map_or(0, |d| d.file_bytes)),
        match inputs.dataset.map_or(0, |d| d.image_bytes) {
            0 => String::new(),
            n => format!(" and {} of its images' base64", size(n)),
        },
        size(e.tokenizer),
        size(e.requests),
        inputs.in_flight,
        budget::built_ahead(
            inputs.in_flight,
            inputs.dataset.map_or(0, |d| d.largest_body_bytes)
        ),
        size(inputs.dataset.map_or(0, |d| d.largest_body_bytes)),
        match inputs.dataset.map_or(0, |d| d.most_messages) {
            n if n > 1 => format!(" and {n} messages"),
            _ => String::new(),
        },
        budget::REQUEST_FACTOR,
    );
    let (key, hint) = match e.largest() {
        Part::Requests => (
            level_key.to_string(),
            "lower the concurrency (or max_concurrency), or use shorter prompts",
        ),
        Part::Dataset => (
            dataset.map_or("workloads", |(k, _)| k).to_string(),
            "use a smaller dataset file",
        ),
        Part::Tokenizer => (
            tokenizer.map_or("models", |(k, _)| k.as_str()).to_string(),
            "use a smaller tokenizer.json, or none (lengths are then approximated)",
        ),
    };
    Some(spec.error(
        &key,
        format!(
            "point {} would need about {} of memory, over the limit of {}: {parts}",
            p.slug,
            size(e.total),
            size(budget::MEMORY_BUDGET_BYTES),
        ),
        Some(format!("{hint} (docs/spec.md, \"Memory budget\")")),
    ))
}

impl Point {
    /// One probe of this point's capacity search: the same point at
    /// `level`, without the search, so it has the ID a sweep's point at
    /// that level has (the same configuration measures the same thing).
    pub fn probe(&self, level: Level) -> Point {
        let mut config = self.config.clone();
        config.load.level = level;
        config.load.search = None;
        let slug = slug_of(&config);
        let hash = config.hash();
        let mut axes = self.axes.clone();
        let (axis, value) = match level {
            Level::Concurrency(c) => ("concurrency", c.to_string()),
            Level::Rate(r) => ("rate", r.to_string()),
        };
        axes.push((axis.to_string(), value));
        Point {
            id: format!("{slug}-{hash}"),
            slug,
            hash,
            axes,
            config,
        }
    }
}

fn resolve_load(spec: &Spec, combo: &Combo, workload: &Workload) -> Result<Load, SpecError> {
    let d = &spec.load;
    if let Some(t) = &workload.trace {
        return trace_load(spec, combo, workload, t);
    }
    if d.arrival == Some(Arrival::Trace) {
        return Err(spec.error(
            "load.arrival",
            format!(
                "arrival = \"trace\" needs a workload that replays a trace, and \"{}\" does not",
                workload.name
            ),
            Some("add trace = { file = \"...\", format = \"mooncake\" } to the workload, or pick another arrival".into()),
        ));
    }
    if d.duration.is_none() && d.requests.is_none() && d.ramp.is_none() {
        return Err(spec.error(
            "load",
            format!("workload \"{}\" needs an end: set `duration`, `requests` or both in [load] (whichever ends first)", workload.name),
            Some("e.g. duration = \"60s\"; only a trace ends by itself".into()),
        ));
    }
    let count = |axis| match value_of(combo, axis) {
        Some(AxisValue::Count(c)) => Some(*c),
        _ => None,
    };
    let rate_axis = match value_of(combo, Axis::Rate) {
        Some(AxisValue::Rate(r)) => Some(*r),
        _ => None,
    };
    let conc_axis = count(Axis::Concurrency);
    // An axis picks the kind of level; the [load] defaults fill in the rest.
    let (concurrency, rate) = match (conc_axis, rate_axis) {
        (Some(c), Some(r)) => {
            return Err(spec.error(
                "matrix",
                format!(
                    "a point has both concurrency = {c} (closed loop) and rate = {r} (open loop)"
                ),
                Some("for an open loop capped in flight, use `max_concurrency`".into()),
            ));
        }
        (Some(c), None) => (Some(c), None),
        (None, Some(r)) => (None, Some(r)),
        (None, None) => (d.concurrency, d.rate),
    };
    let ramp = match &d.ramp {
        Some(r) => {
            if conc_axis.is_some() || rate_axis.is_some() {
                return Err(spec.error(
                    "load.ramp",
                    "a ramp sets the load level itself; remove the matrix's concurrency/rate axis",
                    None,
                ));
            }
            let levels = ramp_levels(r)
                .map_err(|e| spec.error(&format!("load.ramp.{}", e.key()), e.to_string(), None))?;
            Some(crate::Ramp {
                levels,
                every: r.every,
            })
        }
        None => None,
    };
    if d.search.is_some() && (conc_axis.is_some() || rate_axis.is_some()) {
        return Err(spec.error(
            "load.search",
            "a search sets the level of each probe itself; remove the matrix's concurrency/rate axis",
            None,
        ));
    }
    let first = ramp
        .as_ref()
        .map(|r| r.levels[0])
        .or(d.search.as_ref().map(|s| s.from));
    let level = match (first, concurrency, rate) {
        (Some(l), _, _) => l,
        (None, Some(c), None) => Level::Concurrency(c),
        (None, None, Some(r)) => Level::Rate(r),
        (None, Some(c), Some(r)) => {
            return Err(spec.error(
                "load",
                format!(
                    "[load] sets both concurrency = {c} (closed loop) and rate = {r} (open loop)"
                ),
                Some("for an open loop capped in flight, use `max_concurrency`".into()),
            ));
        }
        (None, None, None) => {
            return Err(spec.error(
                "load",
                "a point has no load level: set `concurrency` (closed loop) or `rate` (open loop) in [load] or as a matrix axis",
                Some("e.g. concurrency = 8, or rate = \"10/s\"".into()),
            ));
        }
    };
    let closed = matches!(level, Level::Concurrency(_));
    let arrival = match (d.arrival, closed) {
        (None, true) => Arrival::Closed,
        (None, false) => Arrival::Poisson,
        (Some(Arrival::Closed), true) => Arrival::Closed,
        (Some(a), false) if a != Arrival::Closed => a,
        (Some(a), _) => {
            let want = if closed { "a concurrency" } else { "a rate" };
            let a_name = serde_json::to_value(a)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            return Err(spec.error(
                "load.arrival",
                format!("arrival = \"{a_name}\" does not fit a point whose load level is {level} (which needs {want})"),
                Some(if closed { "closed-loop points use arrival = \"closed\"".into() } else { "open-loop points use poisson, gamma or constant".into() }),
            ));
        }
    };
    let max_concurrency = count(Axis::MaxConcurrency).or(d.max_concurrency);
    if closed && max_concurrency.is_some() {
        return Err(spec.error("load.max_concurrency", "max_concurrency caps open-loop arrivals; a closed loop's concurrency is already its cap", None));
    }
    let duration = match &ramp {
        Some(r) => Some(crate::Duration::from_nanos(
            r.every.as_nanos() * r.levels.len() as u64,
        )),
        None => d.duration,
    };
    Ok(Load {
        arrival,
        burstiness: d.burstiness,
        level,
        max_concurrency,
        ramp,
        search: d.search.clone(),
        warmup: d.warmup,
        duration,
        requests: d.requests,
        runs: d.runs,
        window: d.window,
        timeouts: d.timeouts,
        limits: d.limits,
        cold_connections: d.cold_connections,
        reset_cache: d.reset_cache,
    })
}

/// The load of a point that replays a trace: open loop at the trace's
/// timestamps, its level the trace's mean rate (for reports and the
/// point's name); `[load]`'s rate and concurrency are for other workloads,
/// a matrix axis or a ramp that sets them does not fit.
fn trace_load(
    spec: &Spec,
    combo: &Combo,
    workload: &Workload,
    t: &crate::Trace,
) -> Result<Load, SpecError> {
    let d = &spec.load;
    for axis in [Axis::Rate, Axis::Concurrency] {
        if value_of(combo, axis).is_some() {
            return Err(spec.error(
                "matrix",
                format!(
                    "workload \"{}\" replays a trace, whose timestamps set the load; a `{}` axis does not fit it",
                    workload.name,
                    axis.name()
                ),
                Some("vary the trace's `speedup` with another workload, or exclude the combination".into()),
            ));
        }
    }
    if d.ramp.is_some() {
        return Err(spec.error(
            "load.ramp",
            format!(
                "workload \"{}\" replays a trace, whose timestamps set the load; a ramp does not fit it",
                workload.name
            ),
            None,
        ));
    }
    if d.search.is_some() {
        return Err(spec.error(
            "load.search",
            format!(
                "workload \"{}\" replays a trace, whose timestamps set the load; a capacity search does not fit it",
                workload.name
            ),
            Some("search with a synthetic workload, or vary the trace's `speedup`".into()),
        ));
    }
    if let Some(a) = d.arrival.filter(|a| *a != Arrival::Trace) {
        let a_name = serde_json::to_value(a)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        return Err(spec.error(
            "load.arrival",
            format!(
                "arrival = \"{a_name}\" does not fit workload \"{}\", which replays a trace at its own timestamps",
                workload.name
            ),
            Some("remove `arrival` (a trace workload implies arrival = \"trace\")".into()),
        ));
    }
    let rate = crate::Rate::per_second(
        t.mean_rate()
            .clamp(crate::limits::MIN_RATE_PER_S, crate::limits::MAX_RATE_PER_S),
    )
    .expect("clamped into the valid range");
    Ok(Load {
        arrival: Arrival::Trace,
        burstiness: d.burstiness,
        level: Level::Rate(rate),
        max_concurrency: count_of(combo, Axis::MaxConcurrency).or(d.max_concurrency),
        ramp: None,
        warmup: d.warmup,
        duration: d.duration,
        requests: d.requests,
        runs: d.runs,
        window: d.window,
        timeouts: d.timeouts,
        limits: d.limits,
        cold_connections: d.cold_connections,
        reset_cache: d.reset_cache,
        search: None,
    })
}

fn count_of(combo: &Combo, axis: Axis) -> Option<u32> {
    match value_of(combo, axis) {
        Some(AxisValue::Count(c)) => Some(*c),
        _ => None,
    }
}

/// A rough wall-time estimate of one point (all runs), in seconds; `None`
/// when it depends on the server's speed (a closed loop ended by count).
pub fn estimate_seconds(p: &PointConfig) -> Option<f64> {
    let l = &p.load;
    let warmup = match l.warmup {
        crate::Warmup::Time(d) => d.as_secs_f64(),
        _ => 0.0,
    };
    let trace = p.workload.trace.as_ref().map(|t| t.span.as_secs_f64());
    let measure = match (l.duration, l.requests, l.level) {
        (Some(d), _, _) => Some(trace.map_or(d.as_secs_f64(), |s| s.min(d.as_secs_f64()))),
        _ if trace.is_some() => trace,
        (None, Some(n), Level::Rate(r)) => Some(n as f64 / r.as_per_second()),
        _ => None,
    }?;
    // A search runs one such point per probe; its first probe, at `from`,
    // is the slowest of them when requests end it at a rate.
    let probes = l.search.as_ref().map_or(1, search_probes_max);
    Some((warmup + measure) * l.runs as f64 * probes as f64)
}

/// The most probes a capacity search can take: `from`, then doublings up
/// to `to` (each may pass), then geometric bisection of the last doubling
/// (a ratio of at most 2) until the failure is within `precision` of the
/// pass. An upper bound: a search that fails early probes fewer.
pub fn search_probes_max(s: &crate::Search) -> u32 {
    let value = |l: Level| match l {
        Level::Concurrency(c) => c as f64,
        Level::Rate(r) => r.as_per_second(),
    };
    let (from, to) = (value(s.from), value(s.to));
    let doublings = if to > from && from > 0.0 {
        (to / from).log2().ceil() as u32
    } else {
        0
    };
    let p = s.precision.fraction();
    let bisections = if p > 0.0 && doublings > 0 {
        (std::f64::consts::LN_2 / p.ln_1p()).log2().ceil().max(0.0) as u32
    } else {
        0
    };
    1 + doublings + bisections
}

/// Whether the simulator can serve `workload` from `model`: a language
/// model needs its shape and is sent text; a vision or encoder network
/// needs its preset's figures and is sent tensors (api = "kserve").
fn sim_serves(
    spec: &Spec,
    tname: &str,
    mname: &str,
    model: &Model,
    workload: &Workload,
) -> Result<(), SpecError> {
    let api_key = format!("workloads.{}.api", workload.name);
    match &model.network {
        Some(n) if n.preset.is_none() => Err(spec.error(
            &format!("models.{mname}"),
            format!(
                "target `{tname}` is the simulator, which needs the figures of model `{mname}`, {}",
                n.kind.noun()
            ),
            Some(format!(
                "add preset = one of: {} (see `infer-bench catalog`)",
                crate::catalog::NETWORKS
                    .iter()
                    .filter(|x| x.kind == n.kind)
                    .map(|x| x.id)
                    .collect::<Vec<_>>()
                    .join(", ")
            )),
        )),
        Some(n) if workload.api != crate::raw::Api::Kserve => Err(spec.error(
            &api_key,
            format!(
                "workload `{}` sends {} requests, and model `{mname}` is {}, which the simulator serves over KServe v2 only",
                workload.name,
                workload.api.name(),
                n.kind.noun()
            ),
            Some("set api = \"kserve\" (with the network's inputs, or none to take them from its metadata), or pair the workload with a language model".into()),
        )),
        Some(_) => Ok(()),
        None if workload.api == crate::raw::Api::Kserve => Err(spec.error(
            &api_key,
            format!(
                "workload `{}` sends KServe v2 tensors, and model `{mname}` is a language model, which the simulator serves over the OpenAI APIs only",
                workload.name
            ),
            Some("give the model kind = \"vision\" or \"encoder\" and a network preset such as \"resnet-50\" (see `infer-bench catalog`), or send it chat or completions".into()),
        )),
        None if model.architecture.is_none() => Err(spec.error(
            &format!("models.{mname}"),
            format!("target `{tname}` is the simulator, which needs the shape of model `{mname}`"),
            Some(format!("add preset = \"llama-3.1-8b\" (see `infer-bench catalog`) or an [models.{mname}.architecture] table")),
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod hash_tests {
    use super::*;

    /// The plan's cached hashes equal a point's hash computed alone.
    #[test]
    fn cached_hash_is_the_point_hash() {
        // The example specs live at the workspace root, two levels up.
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs");
        for f in [
            "quickstart.toml",
            "rate-sweep.toml",
            "precision-comparison.toml",
            "ramp.toml",
            "llama-cpp.toml",
        ] {
            let spec = crate::load(&path.join(f)).unwrap();
            let plan = Plan::build(&spec).unwrap();
            let mut hashes: Vec<&str> = plan.points.iter().map(|p| p.hash.as_str()).collect();
            for p in &plan.points {
                assert_eq!(p.hash, p.config.hash(), "{f}: {}", p.slug);
            }
            hashes.sort();
            hashes.dedup();
            assert_eq!(
                hashes.len(),
                plan.points.len(),
                "{f}: distinct points, distinct hashes"
            );
        }
    }

    /// Issue 40: a client setting changes what is measured (the hash) but
    /// not what is sent (the request key the seeds come from); what
    /// defines the requests changes both.
    #[test]
    fn only_what_defines_the_requests_moves_the_request_key() {
        use crate::Duration;
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../specs");
        let spec = crate::load(&path.join("quickstart.toml")).unwrap();
        let base = Plan::build(&spec).unwrap().points[0].config.clone();
        type Edit = fn(&mut PointConfig);
        let client_side: &[(&str, Edit)] = &[
            ("first-token timeout 1h -> 48h", |c| {
                c.load.timeouts.first_token = Duration::from_secs(48 * 3600)
            }),
            ("connect timeout", |c| {
                c.load.timeouts.connect = Duration::from_secs(1)
            }),
            ("idle timeout", |c| {
                c.load.timeouts.idle = Duration::from_secs(1)
            }),
            ("total timeout", |c| {
                c.load.timeouts.total = Duration::from_secs(1)
            }),
            ("limits", |c| c.load.limits.max_events = 7),
            ("cold connections", |c| c.load.cold_connections = true),
            ("reset cache", |c| {
                c.load.reset_cache = crate::ResetCache::Never
            }),
            ("window", |c| c.load.window = Duration::from_millis(250)),
            ("runs", |c| c.load.runs = 9),
            ("goodput", |c| c.goodput.ttft = Some(Duration::from_secs(9))),
            ("target name", |c| {
                Arc::make_mut(&mut c.target).name = "t2".into()
            }),
            ("target dialect", |c| {
                Arc::make_mut(&mut c.target).dialect = Some(crate::Dialect::Sglang)
            }),
            ("model name", |c| {
                Arc::make_mut(&mut c.model).name = "m2".into()
            }),
            ("model tokenizer", |c| {
                Arc::make_mut(&mut c.model).tokenizer = Some("other.json".into())
            }),
            ("precision dtype", |c| {
                c.precision.as_mut().unwrap().dtype = Some(crate::DType::Fp8)
            }),
            ("workload name", |c| {
                Arc::make_mut(&mut c.workload).name = "w2".into()
            }),
        ];
        for (what, edit) in client_side {
            let mut c = base.clone();
            edit(&mut c);
            assert_ne!(c, base, "{what}: the edit changes the point");
            assert_eq!(c.request_key(), base.request_key(), "{what}");
        }
        // Nor is the seed in the key: `seed::derive` takes it beside it.
        let mut c = base.clone();
        c.seed = 7;
        assert_eq!(c.request_key(), base.request_key());
        let defining: &[(&str, Edit)] = &[
            ("input lengths", |c| {
                Arc::make_mut(&mut c.workload).input_tokens = Some(crate::Dist::Fixed(100))
            }),
            ("stream", |c| {
                let w = Arc::make_mut(&mut c.workload);
                w.stream = !w.stream
            }),
            ("served name", |c| {
                Arc::make_mut(&mut c.model).served_name = "other".into();
                c.precision.as_mut().unwrap().served_name = None;
            }),
            ("level", |c| c.load.level = Level::Concurrency(3)),
            ("max concurrency", |c| c.load.max_concurrency = Some(3)),
            ("duration", |c| {
                c.load.duration = Some(Duration::from_secs(3))
            }),
            ("requests", |c| c.load.requests = Some(3)),
            ("warm-up", |c| c.load.warmup = crate::Warmup::Requests(3)),
        ];
        for (what, edit) in defining {
            let mut c = base.clone();
            edit(&mut c);
            assert_ne!(c.request_key(), base.request_key(), "{what}");
            assert_ne!(c.hash(), base.hash(), "{what}: a new point as well");
        }
        // Issue 42: a server's flags are another point to the judge, the
        // same requests to the server.
        let mut c = base.clone();
        let args: std::collections::BTreeMap<String, crate::server_args::ArgValue> = [(
            "max_num_seqs".to_string(),
            crate::server_args::ArgValue::Int(128),
        )]
        .into();
        c.server_args = Some(Arc::new(crate::server_args::ServerArgs {
            name: "s128".into(),
            args,
        }));
        assert_ne!(c.hash(), base.hash());
        assert_eq!(c.request_key(), base.request_key());
        let mut d = c.clone();
        Arc::make_mut(d.server_args.as_mut().unwrap()).args.insert(
            "max_num_seqs".into(),
            crate::server_args::ArgValue::Int(256),
        );
        assert_ne!(d.hash(), c.hash());
        assert_eq!(d.request_key(), base.request_key());
        // The case: the judge sees another point, the server the
        // same requests.
        let mut c = base.clone();
        c.load.timeouts.first_token = Duration::from_secs(48 * 3600);
        assert_ne!(c.hash(), base.hash());
        assert_eq!(c.request_key(), base.request_key());
    }
}

#[cfg(test)]
mod github_rules {
    //! The examples of GitHub Actions' documentation for `strategy.matrix`
    //! ("Expanding or adding matrix configurations", "Excluding matrix
    //! configurations", "Adding configurations only"), reproduced exactly.
    use super::expand;

    type Combo = Vec<(&'static str, &'static str)>;

    fn axes(a: &[(&'static str, &[&'static str])]) -> Vec<(&'static str, Vec<&'static str>)> {
        a.iter().map(|(k, v)| (*k, v.to_vec())).collect()
    }

    fn sorted(mut c: Combo) -> Combo {
        c.sort();
        c
    }

    fn run(
        a: &[(&'static str, &[&'static str])],
        exclude: &[Combo],
        include: &[Combo],
    ) -> Vec<Combo> {
        expand(&axes(a), exclude, include)
            .into_iter()
            .map(sorted)
            .collect()
    }

    #[test]
    fn expanding_or_adding_configurations() {
        let got = run(
            &[("fruit", &["apple", "pear"]), ("animal", &["cat", "dog"])],
            &[],
            &[
                vec![("color", "green")],
                vec![("color", "pink"), ("animal", "cat")],
                vec![("fruit", "apple"), ("shape", "circle")],
                vec![("fruit", "banana")],
                vec![("fruit", "banana"), ("animal", "cat")],
            ],
        );
        let want: Vec<Combo> = vec![
            vec![
                ("fruit", "apple"),
                ("animal", "cat"),
                ("color", "pink"),
                ("shape", "circle"),
            ],
            vec![
                ("fruit", "apple"),
                ("animal", "dog"),
                ("color", "green"),
                ("shape", "circle"),
            ],
            vec![("fruit", "pear"), ("animal", "cat"), ("color", "pink")],
            vec![("fruit", "pear"), ("animal", "dog"), ("color", "green")],
            vec![("fruit", "banana")],
            vec![("fruit", "banana"), ("animal", "cat")],
        ];
        assert_eq!(got, want.into_iter().map(sorted).collect::<Vec<_>>());
    }

    #[test]
    fn excluding_configurations() {
        let got = run(
            &[
                ("os", &["macos-latest", "windows-latest"]),
                ("version", &["12", "14", "16"]),
                ("environment", &["staging", "production"]),
            ],
            &[
                vec![
                    ("os", "macos-latest"),
                    ("version", "12"),
                    ("environment", "production"),
                ],
                vec![("os", "windows-latest"), ("version", "16")],
            ],
            &[],
        );
        assert_eq!(got.len(), 9, "12 combinations, one and two excluded");
        assert!(!got.contains(&sorted(vec![
            ("os", "macos-latest"),
            ("version", "12"),
            ("environment", "production")
        ])));
        assert!(
            !got.iter()
                .any(|c| c.contains(&("os", "windows-latest")) && c.contains(&("version", "16")))
        );
    }

    #[test]
    fn extending_one_combination() {
        let got = run(
            &[
                ("os", &["windows-latest", "ubuntu-latest"]),
                ("node", &["14", "16"]),
            ],
            &[],
            &[vec![("os", "windows-latest"), ("node", "16"), ("npm", "6")]],
        );
        assert_eq!(got.len(), 4);
        assert_eq!(got.iter().filter(|c| c.contains(&("npm", "6"))).count(), 1);
        assert!(got.contains(&sorted(vec![
            ("os", "windows-latest"),
            ("node", "16"),
            ("npm", "6")
        ])));
    }

    #[test]
    fn a_selector_is_exact_unless_it_ends_in_a_star() {
        use super::selects;
        assert!(selects("s.m.c1", "s.m.c1-abc", "s.m.c1"));
        assert!(!selects("s.m.c1", "s.m.c16-abc", "s.m.c16"));
        assert!(selects("s.m.c1*", "s.m.c16-abc", "s.m.c16"));
        assert!(selects("s.m.c16-abc", "s.m.c16-abc", "s.m.c16"));
        assert!(selects("*", "x-1", "x"));
    }

    #[test]
    fn only_includes() {
        let got = run(
            &[],
            &[],
            &[
                vec![("site", "production"), ("datacenter", "site-a")],
                vec![("site", "staging"), ("datacenter", "site-b")],
            ],
        );
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn order_follows_the_axes() {
        let got = expand(&axes(&[("a", &["1", "2"]), ("b", &["x", "y"])]), &[], &[]);
        let flat: Vec<String> = got
            .iter()
            .map(|c| format!("{}{}", c[0].1, c[1].1))
            .collect();
        assert_eq!(flat, vec!["1x", "1y", "2x", "2y"]);
    }
}
