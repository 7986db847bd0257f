//! The `[cost]` section: prices and GPU counts for cost figures.

use super::Cx;
use crate::model::*;
use crate::raw::*;

impl Cx<'_> {
    pub(super) fn cost(&mut self, c: RawCost) -> Cost {
        for (key, v) in [("gpu_hour_usd", c.gpu_hour_usd), ("kwh_usd", c.kwh_usd)] {
            if let Some(x) = v {
                if !(x >= 0.0 && x.is_finite()) {
                    self.err(
                        &format!("cost.{key}"),
                        format!("expected a price >= 0, found {x}"),
                        None,
                    );
                }
            }
        }
        if c.gpus == Some(0) {
            self.err("cost.gpus", "expected at least 1 GPU, found 0", None);
        }
        Cost {
            gpu_hour_usd: c.gpu_hour_usd,
            gpus: c.gpus,
            kwh_usd: c.kwh_usd,
        }
    }
}
