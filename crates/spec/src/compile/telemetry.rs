//! The `[telemetry]` section: GPU and server-metrics sampling intervals.

use super::Cx;
use crate::Duration;
use crate::model::*;
use crate::raw::*;

impl Cx<'_> {
    pub(super) fn telemetry(&mut self, t: RawTelemetry) -> Telemetry {
        let interval = t.interval.unwrap_or(Duration::from_millis(100));
        if interval < Duration::from_millis(10) {
            self.err(
                "telemetry.interval",
                format!("expected an interval of at least 10ms, found {interval}"),
                None,
            );
        }
        let scrape_interval = t.scrape_interval.unwrap_or(Duration::from_millis(500));
        if scrape_interval < Duration::from_millis(10) {
            self.err(
                "telemetry.scrape_interval",
                format!("expected an interval of at least 10ms, found {scrape_interval}"),
                None,
            );
        }
        Telemetry {
            gpu: t.gpu.unwrap_or_default(),
            interval,
            server_metrics: t.server_metrics.unwrap_or(true),
            scrape_interval,
        }
    }
}
