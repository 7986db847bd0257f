//! The simulator's checks of a plan before it runs: every point served by
//! the built-in simulator must have its model's weights and one KV block fit
//! the GPUs the target gives it. The check is [`crate::request::serving`],
//! the one `run` makes when it starts the simulator, so `validate` and `run`
//! agree; its error is placed on the target's `gpus` key (what the hint
//! asks to change), in the simulator's words.

use infer_bench_spec::Spec;
use infer_bench_spec::diag::{SpecError, SpecErrors};
use infer_bench_spec::plan::Plan;
use infer_bench_spec::raw::TargetKind;

use crate::error::Error;

/// Every simulated point whose model does not fit its GPUs (or whose
/// simulator settings the formulas cannot use), one error per target,
/// model and precision.
pub fn check(spec: &Spec, plan: &Plan) -> Result<(), SpecErrors> {
    let mut errors: Vec<SpecError> = Vec::new();
    // What is served depends on the target, model and precision only
    // (shared by the points that have them): each is resolved once, not
    // once per point of a large matrix.
    let mut seen = std::collections::HashSet::new();
    for p in &plan.points {
        let cfg = &p.config;
        let served = (
            std::sync::Arc::as_ptr(&cfg.target),
            std::sync::Arc::as_ptr(&cfg.model),
            cfg.precision.as_ref().map(|p| p.name.as_str()),
        );
        if !seen.insert(served) {
            continue;
        }
        // A network (vision, encoder) model has no architecture: the
        // simulator serves it otherwise, and `run` says what it cannot.
        if cfg.target.kind != TargetKind::Sim
            || cfg.target.sim.is_none()
            || cfg.model.architecture.is_none()
        {
            continue;
        }
        let Err(e) = crate::request::serving(cfg) else {
            continue;
        };
        if !matches!(
            e,
            Error::WeightsDoNotFit { .. }
                | Error::NoKvRoom { .. }
                | Error::KvCacheTooSmall { .. }
                | Error::Setting { .. }
                | Error::UnknownGpu { .. }
        ) {
            continue;
        }
        let key = format!("targets.{}.gpus", cfg.target.name);
        let message = format!(
            "model `{}`{} on the simulator: {e}",
            cfg.model.name,
            cfg.precision
                .as_ref()
                .map(|p| format!(" at precision `{}`", p.name))
                .unwrap_or_default()
        );
        if !errors.iter().any(|x| x.key == key && x.message == message) {
            errors.push(spec.error(&key, message, None));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(SpecErrors(errors))
    }
}
