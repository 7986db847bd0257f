//! Change points: placeholder until the detector lands (branch changepoint).

/// Detection settings.
#[derive(Debug, Clone)]
pub struct Settings {
    pub max_pvalue: f64,
    pub min_segment: usize,
    pub min_relative: f64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            max_pvalue: 0.001,
            min_segment: 5,
            min_relative: 0.0,
        }
    }
}

/// A shift in level.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    pub index: usize,
    pub before: f64,
    pub after: f64,
    pub relative: f64,
    pub pvalue: f64,
}

/// The change points of `series`.
pub fn detect(_series: &[f64], _settings: &Settings) -> Vec<ChangePoint> {
    Vec::new()
}
