//! The `[models.*]` section: its kind (a language model, or a vision or
//! encoder network), presets, architectures, tokenizers and each model's
//! `[models.*.precisions]`.

use std::collections::BTreeMap;

use super::Cx;
use super::{is_slug, num, shown};
use crate::catalog;
use crate::diag::suggestion;
use crate::model::*;
use crate::raw::*;

impl Cx<'_> {
    /// Checks `[models.NAME]` and its precisions. One function for the
    /// reason [`Cx::target`] is: the table's keys in order, each adding to
    /// one error list.
    pub(super) fn model(
        &mut self,
        name: &str,
        m: RawModel,
    ) -> Option<(Model, BTreeMap<String, Precision>)> {
        let before = self.errors.len();
        let k = |f: &str| format!("models.{name}.{f}");
        if !is_slug(name) {
            self.key_err(
                &format!("models.{name}"),
                format!(
                    "expected a model name of at most 64 letters, digits, `-`, `_` or `.` (not starting with `.`), found \"{}\"",
                    shown(name)
                ),
                None,
            );
        }
        if let Some(t) = &m.tokenizer {
            // Read again at run time, once per point; checked here with the
            // same parser, so that a file `run` refuses fails `validate`.
            let path = self.base_dir.join(t);
            let problem = match crate::files::read_regular_in(
                &path,
                crate::files::MAX_TOKENIZER_BYTES,
                self.repo,
            ) {
                Err(e) => Some(format!("cannot read tokenizer {}: {e}", path.display())),
                Ok(bytes) => {
                    self.sizes
                        .tokenizers
                        .insert(name.to_string(), (k("tokenizer"), bytes.len() as u64));
                    crate::tokenizer::parse(&bytes).err().map(|e| {
                        format!(
                            "{} is not a tokenizer.json: {}",
                            path.display(),
                            crate::files::sanitize_message(&e.to_string())
                        )
                    })
                }
            };
            if let Some(p) = problem {
                self.err(
                    &k("tokenizer"),
                    p,
                    Some(
                        "give the path of a Hugging Face tokenizer.json, relative to the spec file"
                            .into(),
                    ),
                );
            }
        }
        let network_preset = m.preset.as_deref().and_then(catalog::network);
        let kind = m
            .kind
            .or(network_preset.map(|n| n.kind))
            .unwrap_or_default();
        let networks = || {
            catalog::NETWORKS
                .iter()
                .filter(|n| n.kind == kind)
                .map(|n| n.id)
                .collect::<Vec<_>>()
                .join(", ")
        };
        let preset = m.preset.as_deref().and_then(|p| {
            let found = catalog::model(p);
            if found.is_none() && network_preset.is_none() {
                let ids: Vec<&str> = catalog::MODELS
                    .iter()
                    .map(|m| m.id)
                    .chain(catalog::NETWORKS.iter().map(|n| n.id))
                    .collect();
                self.err(
                    &k("preset"),
                    format!(
                        "unknown model preset \"{p}\"; known presets: {}",
                        ids.join(", ")
                    ),
                    suggestion(p, ids.iter().copied()),
                );
            }
            found
        });
        let network = if kind.takes_tensors() {
            if let Some(p) = preset {
                self.err(
                    &k("preset"),
                    format!(
                        "preset \"{}\" is a language model, and this model's kind is \"{}\"",
                        p.id,
                        kind.name()
                    ),
                    Some(format!(
                        "a {} model takes one of: {}; or leave `kind` out for a language model",
                        kind.name(),
                        networks()
                    )),
                );
            }
            if m.architecture.is_some() {
                self.key_err(
                    &k("architecture"),
                    format!(
                        "{} has no transformer architecture for the simulator: its figures come from its preset",
                        kind.noun()
                    ),
                    Some(format!("remove the table and give preset = one of: {}", networks())),
                );
            }
            if let Some(n) = network_preset.filter(|n| n.kind != kind) {
                self.err(
                    &k("kind"),
                    format!(
                        "preset \"{}\" is {}, and `kind` says \"{}\"",
                        n.id,
                        n.kind.noun(),
                        kind.name()
                    ),
                    Some(format!(
                        "write kind = \"{}\", or leave `kind` out",
                        n.kind.name()
                    )),
                );
            }
            Some(Network {
                kind,
                preset: network_preset.map(|n| n.id.to_string()),
            })
        } else {
            if let Some(n) = network_preset {
                self.err(
                    &k("kind"),
                    format!(
                        "preset \"{}\" is {}, served over KServe v2, and `kind` says \"llm\"",
                        n.id,
                        n.kind.noun()
                    ),
                    Some(format!(
                        "write kind = \"{}\", or leave `kind` out",
                        n.kind.name()
                    )),
                );
            }
            None
        };
        if let (Some(p), Some(n)) = (m.params_b, network_preset) {
            let want = n.params_m / 1000.0;
            if (p - want).abs() > 1e-9 * want {
                self.err(
                    &k("params_b"),
                    format!(
                        "params_b = {} disagrees with the preset \"{}\", which has {} billion parameters",
                        num(p),
                        n.id,
                        crate::fmt_number(want)
                    ),
                    Some("remove params_b (the preset sets it)".into()),
                );
            }
        }
        if preset.is_some() && m.architecture.is_some() {
            self.key_err(
                &k("architecture"),
                "give either `preset` or `architecture`, not both",
                None,
            );
        }
        let params_b = m
            .params_b
            .or(preset.map(|p| p.params_b))
            .or(network_preset.map(|n| n.params_m / 1000.0));
        if let Some(p) = m.params_b {
            if !(p > 0.0 && p.is_finite() && p <= crate::limits::MAX_PARAMS_B) {
                self.err(
                    &k("params_b"),
                    format!(
                        "expected a parameter count in billions in (0, 100000], found {}",
                        num(p)
                    ),
                    None,
                );
            } else if let Some(pre) =
                preset.filter(|pre| (p - pre.params_b).abs() > 1e-9 * pre.params_b.max(1.0))
            {
                self.err(
                    &k("params_b"),
                    format!(
                        "params_b = {} disagrees with the preset \"{}\", which has {} billion parameters",
                        num(p),
                        pre.id,
                        crate::fmt_number(pre.params_b)
                    ),
                    Some("remove params_b (the preset sets it), or describe the model with an [architecture] table".into()),
                );
            }
        }
        let architecture = match (preset, m.architecture) {
            (Some(p), _) => Some(Architecture {
                preset: Some(p.id.to_string()),
                params_b: params_b.unwrap_or(p.params_b),
                active_params_b: p.active_params_b,
                layers: p.layers,
                hidden: p.hidden,
                heads: p.heads,
                kv_heads: p.kv_heads,
                head_dim: p.head_dim,
                context_tokens: None,
                kv_latent_dim: p.kv_latent_dim,
                vision: p.vision,
            }),
            (None, Some(a)) => {
                let ak = |f: &str| format!("models.{name}.architecture.{f}");
                for (f, v) in [
                    ("layers", Some(a.layers)),
                    ("hidden", Some(a.hidden)),
                    ("heads", Some(a.heads)),
                    ("kv_heads", Some(a.kv_heads)),
                    ("head_dim", a.head_dim),
                    ("context_tokens", a.context_tokens),
                    ("kv_latent_dim", a.kv_latent_dim),
                ] {
                    self.count_in(
                        &ak(f),
                        v.map(u64::from),
                        1,
                        crate::limits::MAX_ARCH_DIM.into(),
                        "a size",
                    );
                }
                if let Some(x) = a.active_params_b {
                    let max = params_b
                        .filter(|p| p.is_finite())
                        .unwrap_or(crate::limits::MAX_PARAMS_B);
                    if !(x > 0.0 && x <= max) {
                        self.err(
                            &ak("active_params_b"),
                            format!(
                                "expected active parameters in billions in (0, params_b = {}], found {}",
                                num(max),
                                num(x)
                            ),
                            None,
                        );
                    }
                }
                if a.kv_heads == 0 || a.heads == 0 {
                    // Reported above; no division by zero below.
                } else if a.heads % a.kv_heads != 0 {
                    self.err(
                        &k("architecture.kv_heads"),
                        format!("kv_heads ({}) must divide heads ({})", a.kv_heads, a.heads),
                        None,
                    );
                }
                match params_b {
                    None => {
                        self.key_err(
                            &k("architecture"),
                            "an architecture needs the model's `params_b`",
                            Some(format!("add params_b = ... to [models.{name}]")),
                        );
                        None
                    }
                    Some(pb) => Some(Architecture {
                        preset: None,
                        params_b: pb,
                        active_params_b: a.active_params_b.unwrap_or(pb),
                        layers: a.layers,
                        hidden: a.hidden,
                        heads: a.heads,
                        kv_heads: a.kv_heads,
                        head_dim: a.head_dim.unwrap_or(a.hidden / a.heads.max(1)),
                        context_tokens: a.context_tokens,
                        kv_latent_dim: a.kv_latent_dim,
                        vision: None,
                    }),
                }
            }
            (None, None) => None,
        };
        let mut precisions = BTreeMap::new();
        for (pname, p) in m.precisions {
            let pk = |f: &str| format!("models.{name}.precisions.{pname}.{f}");
            if !is_slug(&pname) {
                self.key_err(
                    &format!("models.{name}.precisions.{pname}"),
                    format!(
                        "expected a precision name of at most 64 letters, digits, `-`, `_` or `.` (not starting with `.`), found \"{}\"",
                        shown(&pname)
                    ),
                    Some("the name becomes part of file names (a launched server's log)".into()),
                );
            }
            let dtype = match &p.dtype {
                Some(d) => {
                    let parsed = DType::parse(d);
                    if parsed.is_none() {
                        self.err(
                            &pk("dtype"),
                            format!(
                                "unknown number format \"{d}\"; expected one of: {}",
                                DType::NAMES
                            ),
                            suggestion(d, DType::NAMES.split(", ")),
                        );
                    }
                    parsed
                }
                None => DType::parse(&pname),
            };
            let kv_dtype = p.kv_dtype.as_deref().and_then(|d| {
                let parsed = DType::parse(d);
                if parsed.is_none() {
                    self.err(
                        &pk("kv_dtype"),
                        format!(
                            "unknown number format \"{d}\"; expected one of: {}",
                            DType::NAMES
                        ),
                        suggestion(d, DType::NAMES.split(", ")),
                    );
                }
                parsed
            });
            precisions.insert(
                pname.clone(),
                Precision {
                    name: pname.clone(),
                    served_name: p.served_name,
                    dtype,
                    kv_dtype,
                    arg: p.arg,
                    weights: p.weights,
                },
            );
        }
        (self.errors.len() == before).then(|| {
            (
                Model {
                    name: name.to_string(),
                    served_name: m.served_name.unwrap_or_else(|| name.to_string()),
                    tokenizer: m.tokenizer,
                    weights: m.weights,
                    params_b,
                    architecture,
                    network,
                },
                precisions,
            )
        })
    }
}
