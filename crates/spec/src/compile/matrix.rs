//! The `[matrix]` section: its axes in the file's order, and the
//! `include`/`exclude` entries, each value checked against the spec.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::Cx;
use crate::diag::{Seg, suggestion};
use crate::model::*;
use crate::raw::*;

impl Cx<'_> {
    /// Checks `[matrix]` and builds its axes, `include` and `exclude`
    /// against the declared targets, models and workloads. One function for
    /// the reason [`Cx::target`] is: the table's keys in the file's order,
    /// each adding to one error list.
    pub(super) fn matrix(
        &mut self,
        m: RawMatrix,
        targets: &BTreeMap<String, Target>,
        models: &BTreeMap<String, (Model, BTreeMap<String, Precision>)>,
        workloads: &BTreeMap<String, Workload>,
    ) -> Matrix {
        let names = |m: &dyn Fn() -> Vec<String>| m();
        let known: BTreeMap<Axis, Vec<String>> = [
            (Axis::Target, names(&|| targets.keys().cloned().collect())),
            (Axis::Model, names(&|| models.keys().cloned().collect())),
            (
                Axis::Workload,
                names(&|| workloads.keys().cloned().collect()),
            ),
        ]
        .into_iter()
        .collect();
        let declared_precisions: Vec<String> = models
            .values()
            .flat_map(|(_, p)| p.keys().cloned())
            .collect();
        let server_args = m.server_args.map(|list| {
            list.into_iter()
                .enumerate()
                .map(|(i, t)| AxisValue::ServerArgs(Arc::new(self.server_args_entry(i, t))))
                .collect::<Vec<_>>()
        });
        if server_args.is_some() {
            self.server_args_targets(m.target.as_deref(), targets);
        }
        let mut axes_raw: Vec<(Axis, Vec<AxisValue>)> = Vec::new();
        let to_vals = |v: Option<Vec<String>>| {
            v.map(|v| v.into_iter().map(AxisValue::Name).collect::<Vec<_>>())
        };
        let given: Vec<(Axis, Option<Vec<AxisValue>>)> = vec![
            (Axis::Target, to_vals(m.target)),
            (Axis::Model, to_vals(m.model)),
            (Axis::Precision, to_vals(m.precision)),
            (Axis::Workload, to_vals(m.workload)),
            (
                Axis::Concurrency,
                m.concurrency
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
            (
                Axis::Rate,
                m.rate.map(|v| v.into_iter().map(AxisValue::Rate).collect()),
            ),
            (
                Axis::MaxConcurrency,
                m.max_concurrency
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
            (
                Axis::Batch,
                m.batch
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
            (
                Axis::Documents,
                m.documents
                    .map(|v| v.into_iter().map(AxisValue::Count).collect()),
            ),
            (Axis::ServerArgs, server_args),
        ];
        // The file's order of axes decides the order of points, as in GitHub Actions.
        let order = self.loc.keys(&[Seg::Key("matrix".into())]);
        let mut given: BTreeMap<Axis, Vec<AxisValue>> = given
            .into_iter()
            .filter_map(|(a, v)| v.map(|v| (a, v)))
            .collect();
        for key in order.iter().filter_map(|k| Axis::from_name(k)) {
            if let Some(v) = given.remove(&key) {
                axes_raw.push((key, v));
            }
        }
        axes_raw.extend(given);
        // How many points, without making them: the product of the axes'
        // lengths (before exclude) plus the includes.
        let product = axes_raw
            .iter()
            .try_fold(1u64, |acc, (_, v)| acc.checked_mul(v.len() as u64));
        let points = product.and_then(|p| p.checked_add(m.include.len() as u64));
        if points.is_none_or(|p| p > crate::limits::MAX_POINTS) {
            self.err(
                "matrix",
                format!(
                    "the matrix has {} points (the product of its axes, plus includes); expected at most {}",
                    points.map_or("more than 18446744073709551615".to_string(), |p| p.to_string()),
                    crate::limits::MAX_POINTS
                ),
                Some("split the spec, or use fewer values per axis".into()),
            );
            return Matrix::default();
        }
        for (what, n) in [("include", m.include.len()), ("exclude", m.exclude.len())] {
            if n > crate::limits::MAX_MATRIX_ENTRIES {
                self.err(
                    &format!("matrix.{what}"),
                    format!(
                        "expected at most {} {what} entries, found {n}",
                        crate::limits::MAX_MATRIX_ENTRIES
                    ),
                    None,
                );
                return Matrix::default();
            }
        }
        // Entities defined with errors of their own (already reported).
        let broken: std::collections::HashSet<String> = self
            .errors
            .iter()
            .filter_map(|e| {
                let mut parts = e.key.splitn(3, '.');
                Some(format!("{}.{}", parts.next()?, parts.next()?))
            })
            .collect();
        for (axis, values) in &axes_raw {
            let key = format!("matrix.{}", axis.name());
            if values.is_empty() {
                self.err(
                    &key,
                    format!(
                        "the axis `{}` is empty; a matrix axis needs at least one value",
                        axis.name()
                    ),
                    Some("remove the axis to use the spec's single value".into()),
                );
            }
            let mut seen = std::collections::HashSet::with_capacity(values.len());
            for (i, v) in values.iter().enumerate() {
                if !seen.insert(v.to_string()) {
                    self.err(
                        &format!("{key}[{i}]"),
                        format!("`{v}` appears twice on the axis `{}`", axis.name()),
                        None,
                    );
                }
                self.check_axis_value(
                    &format!("{key}[{i}]"),
                    *axis,
                    v,
                    &known,
                    &declared_precisions,
                    &broken,
                );
            }
        }
        let axis_names: Vec<Axis> = axes_raw.iter().map(|a| a.0).collect();
        let entries = |list: Vec<RawMatrixEntry>, what: &str, cx: &mut Self| -> Vec<Combo> {
            let mut out = Vec::new();
            for (i, e) in list.into_iter().enumerate() {
                let key = format!("matrix.{what}[{i}]");
                let combo: Combo = [
                    (Axis::Target, e.target.map(AxisValue::Name)),
                    (Axis::Model, e.model.map(AxisValue::Name)),
                    (Axis::Precision, e.precision.map(AxisValue::Name)),
                    (Axis::Workload, e.workload.map(AxisValue::Name)),
                    (Axis::Concurrency, e.concurrency.map(AxisValue::Count)),
                    (Axis::Rate, e.rate.map(AxisValue::Rate)),
                    (
                        Axis::MaxConcurrency,
                        e.max_concurrency.map(AxisValue::Count),
                    ),
                    (Axis::Batch, e.batch.map(AxisValue::Count)),
                    (Axis::Documents, e.documents.map(AxisValue::Count)),
                ]
                .into_iter()
                .filter_map(|(a, v)| v.map(|v| (a, v)))
                .collect();
                if combo.is_empty() {
                    cx.err(
                        &key,
                        format!("an {what} entry needs at least one key"),
                        None,
                    );
                }
                for (axis, v) in &combo {
                    cx.check_axis_value(
                        &format!("{key}.{}", axis.name()),
                        *axis,
                        v,
                        &known,
                        &declared_precisions,
                        &broken,
                    );
                    if what == "exclude" && !axis_names.contains(axis) {
                        cx.key_err(
                            &format!("{key}.{}", axis.name()),
                            format!(
                                "exclude names `{}`, which is not an axis of this matrix",
                                axis.name()
                            ),
                            Some(format!(
                                "axes: {}",
                                axis_names
                                    .iter()
                                    .map(|a| a.name())
                                    .collect::<Vec<_>>()
                                    .join(", ")
                            )),
                        );
                    }
                }
                out.push(combo);
            }
            out
        };
        let exclude = entries(m.exclude, "exclude", self);
        let include = entries(m.include, "include", self);
        Matrix {
            axes: axes_raw,
            exclude,
            include,
        }
    }

    /// One table of `server_args`: its flags checked (identifier keys,
    /// scalar values) and its name.
    fn server_args_entry(
        &mut self,
        i: usize,
        table: BTreeMap<String, toml::Value>,
    ) -> crate::server_args::ServerArgs {
        use crate::server_args::{MAX_ARGS, NAME_KEY, ServerArgs, check_value, is_flag_key};
        let base = format!("matrix.server_args[{i}]");
        let mut name = None;
        let mut args = BTreeMap::new();
        let errors_before = self.errors.len();
        if table.len() > MAX_ARGS + 1 {
            self.err(
                &base,
                format!(
                    "expected at most {MAX_ARGS} settings, found {}",
                    table.len()
                ),
                None,
            );
        }
        for (k, v) in table {
            let key = format!("{base}.{k}");
            if k == NAME_KEY {
                match v.as_str() {
                    Some(n) if super::is_slug(n) => name = Some(n.to_string()),
                    _ => self.err(
                        &key,
                        format!(
                            "expected a name of letters, digits, `-`, `_` and `.` for this entry, found {}",
                            match &v {
                                toml::Value::String(s) => format!("\"{}\"", super::shown(s)),
                                other => other.type_str().to_string(),
                            }
                        ),
                        Some("e.g. name = \"seqs256\"; `name` names the entry in point slugs and is not passed to the server".into()),
                    ),
                }
                continue;
            }
            if !is_flag_key(&k) {
                self.key_err(
                    &key,
                    format!(
                        "expected a flag name of lowercase letters, digits, `_` and `-` (not starting with `-` or `_`), found \"{}\"",
                        super::shown(&k)
                    ),
                    Some("write the flag without its dashes: max_num_seqs = 256 becomes --max-num-seqs 256".into()),
                );
                continue;
            }
            match check_value(&v) {
                Ok(a) => {
                    args.insert(k, a);
                }
                Err(why) => self.err(&key, why.to_string(), None),
            }
        }
        // An entry with errors is named by its place, so that it is not
        // also reported as a duplicate of another.
        let name = match name {
            Some(n) => n,
            None if self.errors.len() > errors_before => base.clone(),
            None => ServerArgs::default_name(&args),
        };
        ServerArgs { name, args }
    }

    /// `server_args` are flags of a server infer-bench starts: every
    /// target the matrix runs needs a launch block.
    fn server_args_targets(&mut self, axis: Option<&[String]>, targets: &BTreeMap<String, Target>) {
        let names: Vec<&String> = match axis {
            Some(names) => names.iter().collect(),
            None => targets.keys().collect(),
        };
        for t in names {
            if targets.get(t).is_some_and(|t| t.launch.is_none()) {
                self.err(
                    "matrix.server_args",
                    format!(
                        "target `{t}` has no launch block, so there is no server command to give server_args to"
                    ),
                    Some(format!(
                        "add [targets.{t}.launch] with the command that starts the server, or remove the server_args axis"
                    )),
                );
            }
        }
    }

    fn check_axis_value(
        &mut self,
        key: &str,
        axis: Axis,
        v: &AxisValue,
        known: &BTreeMap<Axis, Vec<String>>,
        precisions: &[String],
        broken: &std::collections::HashSet<String>,
    ) {
        match (axis, v) {
            (Axis::Target | Axis::Model | Axis::Workload, AxisValue::Name(n)) => {
                let names = &known[&axis];
                let what = axis.name();
                let section = format!("{what}s");
                // Defined, but with errors of its own (already reported).
                let broken = broken.contains(&format!("{section}.{n}"));
                if !names.contains(n) && !broken {
                    self.err(
                        key,
                        format!(
                            "unknown {what} \"{n}\"; the spec defines: {}",
                            if names.is_empty() {
                                "none".to_string()
                            } else {
                                names.join(", ")
                            }
                        ),
                        suggestion(n, names.iter().map(String::as_str))
                            .or(Some(format!("define it as [{section}.{n}]"))),
                    );
                }
            }
            (Axis::Precision, AxisValue::Name(n))
                if DType::parse(n).is_none() && !precisions.contains(n) =>
            {
                self.err(
                    key,
                    format!("unknown precision \"{n}\": it is neither a number format ({}) nor declared under any [models.*.precisions]", DType::NAMES),
                    suggestion(n, precisions.iter().map(String::as_str).chain(DType::NAMES.split(", "))),
                );
            }
            (Axis::Concurrency | Axis::MaxConcurrency, AxisValue::Count(0)) => {
                self.err(key, "expected a concurrency of at least 1, found 0", None);
            }
            (Axis::Batch, AxisValue::Count(c))
                if !(1..=super::retrieval::MAX_BATCH).contains(c) =>
            {
                self.err(
                    key,
                    format!(
                        "expected a number of inputs per request between 1 and {}, found {c}",
                        super::retrieval::MAX_BATCH
                    ),
                    None,
                );
            }
            (Axis::Documents, AxisValue::Count(c))
                if !(1..=super::retrieval::MAX_DOCUMENTS).contains(c) =>
            {
                self.err(
                    key,
                    format!(
                        "expected a number of documents per request between 1 and {}, found {c}",
                        super::retrieval::MAX_DOCUMENTS
                    ),
                    None,
                );
            }
            (Axis::Concurrency | Axis::MaxConcurrency, AxisValue::Count(c))
                if *c > crate::limits::MAX_CONCURRENCY =>
            {
                self.err(
                    key,
                    format!(
                        "expected a concurrency of at most {}, found {c}",
                        crate::limits::MAX_CONCURRENCY
                    ),
                    None,
                );
            }
            _ => {}
        }
    }
}
