//! Hand-made SVG line and scatter charts for the HTML report: axes with
//! nice ticks (linear, log, or the "nines" scale of percentile plots),
//! labels with units, a legend, lines and markers, reference lines (SLO
//! thresholds, capacities) and hover titles. Output is one self-contained
//! `<svg>` element: fonts come from the system, nothing is fetched, and
//! every piece of text is escaped.

use std::fmt::Write as _;

use crate::xml::escape;

/// Colours that stay apart for most colour-blind readers and in greyscale
/// print (Okabe-Ito, then Tol's muted set).
pub const PALETTE: &[&str] = &[
    "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#332288", "#882255",
    "#44aa99", "#999933",
];

/// A series colour outside the palette: dark grey, for frontiers and
/// other guides.
pub const NEUTRAL: usize = usize::MAX;

/// The colour of series `i` (`NEUTRAL` is dark grey).
pub fn color(i: usize) -> &'static str {
    if i == NEUTRAL {
        "#3d444d"
    } else {
        PALETTE[i % PALETTE.len()]
    }
}

/// Colour of SLO threshold lines.
pub const SLO_COLOR: &str = "#b3261e";

/// How values map to positions along an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Linear,
    /// Base 10; values must be positive (others are skipped).
    Log,
    /// Percentiles (0-100) on -log10(1 - p/100), so 90, 99 and 99.9 are
    /// evenly spaced: the HDR histogram percentile plot.
    Nines,
}

/// One axis.
#[derive(Debug, Clone)]
pub struct Axis {
    /// The label, with its unit: "TTFT (ms)".
    pub label: String,
    pub scale: Scale,
    /// Include zero in a linear range (rates and counts start at zero).
    pub zero: bool,
    /// A fixed range instead of the data's; what falls outside is clipped.
    pub range: Option<(f64, f64)>,
}

impl Axis {
    pub fn linear(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Linear,
            zero: true,
            range: None,
        }
    }
    pub fn log(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Log,
            zero: false,
            range: None,
        }
    }
    pub fn nines(label: impl Into<String>) -> Axis {
        Axis {
            label: label.into(),
            scale: Scale::Nines,
            zero: false,
            range: None,
        }
    }
    /// Log when the positive values span at least `ratio`, else linear.
    pub fn auto(
        label: impl Into<String>,
        values: impl IntoIterator<Item = f64>,
        ratio: f64,
    ) -> Axis {
        let (mut lo, mut hi) = (f64::INFINITY, 0.0f64);
        for v in values.into_iter().filter(|v| v.is_finite() && *v > 0.0) {
            lo = lo.min(v);
            hi = hi.max(v);
        }
        if hi > 0.0 && hi / lo >= ratio {
            Axis::log(label)
        } else {
            Axis::linear(label)
        }
    }
}

/// How a series' line is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stroke {
    Solid,
    Dashed,
    Dotted,
    /// Markers only (a scatter).
    None,
}

/// One data point.
#[derive(Debug, Clone, Default)]
pub struct Point {
    pub x: f64,
    pub y: f64,
    /// Hover text.
    pub tip: Option<String>,
    /// Drawn as an open marker (e.g. a point that fails its SLOs).
    pub hollow: bool,
    /// A label written beside the marker.
    pub label: Option<String>,
}

impl Point {
    pub fn new(x: f64, y: f64) -> Point {
        Point {
            x,
            y,
            ..Point::default()
        }
    }
    pub fn tip(mut self, tip: impl Into<String>) -> Point {
        self.tip = Some(tip.into());
        self
    }
}

/// A named line or set of markers.
#[derive(Debug, Clone)]
pub struct Series {
    pub name: String,
    pub color: usize,
    pub stroke: Stroke,
    pub markers: bool,
    pub points: Vec<Point>,
    /// Leave the series out of the legend (e.g. the p99 twin of a p50 line
    /// when the legend explains the dash once).
    pub in_legend: bool,
}

impl Series {
    pub fn line(name: impl Into<String>, color: usize, points: Vec<Point>) -> Series {
        Series {
            name: name.into(),
            color,
            stroke: Stroke::Solid,
            markers: true,
            points,
            in_legend: true,
        }
    }
}

/// A horizontal (threshold) or vertical (load) reference line.
#[derive(Debug, Clone)]
pub struct RefLine {
    pub value: f64,
    pub label: String,
    /// Hover text; the label when absent.
    pub tip: Option<String>,
    pub vertical: bool,
    /// A palette index, or `None` for the SLO colour.
    pub color: Option<usize>,
}

/// A chart: title, axes, series, reference lines.
#[derive(Debug, Clone)]
pub struct Chart {
    /// Unique within a page: names the chart's clip path.
    pub id: String,
    pub title: String,
    pub x: Axis,
    pub y: Axis,
    pub series: Vec<Series>,
    pub lines: Vec<RefLine>,
    pub width: f64,
    pub height: f64,
}

impl Chart {
    pub fn new(title: impl Into<String>, x: Axis, y: Axis) -> Chart {
        Chart {
            id: "chart".into(),
            title: title.into(),
            x,
            y,
            series: Vec::new(),
            lines: Vec::new(),
            width: 640.0,
            height: 360.0,
        }
    }

    /// Whether any series has a point to draw.
    pub fn has_data(&self) -> bool {
        self.series
            .iter()
            .any(|s| s.points.iter().any(|p| p.x.is_finite() && p.y.is_finite()))
    }
}

/// Numbers of a "nice" step (1, 2, 2.5, 5 × 10^k) covering [lo, hi] with
/// about `target` ticks (Heckbert's labelling).
pub fn nice_ticks(lo: f64, hi: f64, target: usize) -> Vec<f64> {
    if !(lo.is_finite() && hi.is_finite()) {
        return Vec::new();
    }
    if hi <= lo {
        return vec![lo];
    }
    let raw = (hi - lo) / target.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let start = (lo / step).floor() as i64;
    let end = (hi / step).ceil() as i64;
    (start..=end).map(|i| clean(i as f64 * step)).collect()
}

/// Rounds away float noise (0.30000000000000004 -> 0.3).
fn clean(x: f64) -> f64 {
    if x == 0.0 {
        return 0.0;
    }
    let m = 10f64.powi(12 - x.abs().log10().ceil() as i32);
    (x * m).round() / m
}

/// Ticks of a log axis: 1-2-5 steps, thinned to powers of ten on wide
/// ranges.
pub fn log_ticks(lo: f64, hi: f64) -> Vec<f64> {
    if !(lo > 0.0 && hi >= lo && hi.is_finite()) {
        return Vec::new();
    }
    let (a, b) = (lo.log10().floor() as i32, hi.log10().ceil() as i32);
    let pick = |mults: &[f64]| -> Vec<f64> {
        (a..=b)
            .flat_map(|e| mults.iter().map(move |m| clean(m * 10f64.powi(e))))
            .filter(|v| *v >= lo * (1.0 - 1e-9) && *v <= hi * (1.0 + 1e-9))
            .collect()
    };
    for mults in [&[1.0, 2.0, 5.0][..], &[1.0][..]] {
        let t = pick(mults);
        if t.len() <= 10 {
            if t.len() >= 2 {
                return t;
            }
            // A narrow range: finer steps, else plain linear ones.
            let fine = pick(&[1.0, 1.5, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
            if fine.len() >= 2 {
                return fine;
            }
            return nice_ticks(lo, hi, 4)
                .into_iter()
                .filter(|v| *v >= lo && *v <= hi)
                .collect();
        }
    }
    pick(&[1.0])
        .into_iter()
        .enumerate()
        .filter(|(i, _)| i % 2 == 0)
        .map(|(_, v)| v)
        .collect()
}

/// A tick label: short, without float noise, with k/M for large values.
pub fn fmt_tick(v: f64) -> String {
    let a = v.abs();
    let trim = |s: String| -> String {
        if s.contains('.') {
            s.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            s
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.2}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 100.0 || a == 0.0 {
        format!("{v:.0}")
    } else if a >= 1.0 {
        trim(format!("{v:.2}"))
    } else {
        trim(format!("{:.4}", clean(v)))
    }
}

/// The nines transform of a percentile (0-100).
pub fn nines(p: f64) -> f64 {
    -(1.0 - (p / 100.0).min(0.999_999)).log10()
}

/// Where an axis puts values: the transform, the domain and the ticks.
struct Mapping {
    scale: Scale,
    lo: f64,
    hi: f64,
    ticks: Vec<(f64, String)>,
}

impl Mapping {
    fn t(&self, v: f64) -> Option<f64> {
        let t = match self.scale {
            Scale::Linear => v,
            Scale::Log if v > 0.0 => v.log10(),
            Scale::Log => return None,
            Scale::Nines if (0.0..100.0).contains(&v) => nines(v),
            Scale::Nines => return None,
        };
        t.is_finite().then_some(t)
    }

    /// Position in [0, 1] along the axis.
    fn frac(&self, v: f64) -> Option<f64> {
        let t = self.t(v)?;
        Some(if self.hi > self.lo {
            (t - self.lo) / (self.hi - self.lo)
        } else {
            0.5
        })
    }

    fn new(axis: &Axis, values: &[f64]) -> Mapping {
        let usable: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| match axis.scale {
                Scale::Linear => v.is_finite(),
                Scale::Log => v.is_finite() && *v > 0.0,
                Scale::Nines => (0.0..100.0).contains(v),
            })
            .collect();
        let (mut lo, mut hi) = match axis.range {
            Some(r) => r,
            None => usable
                .iter()
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), &v| {
                    (a.min(v), b.max(v))
                }),
        };
        if usable.is_empty() && axis.range.is_none() {
            (lo, hi) = match axis.scale {
                Scale::Nines => (0.0, 99.0),
                _ => (1.0, 10.0),
            };
        }
        match axis.scale {
            Scale::Linear => {
                if axis.zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                if hi == lo {
                    let pad = if lo == 0.0 { 1.0 } else { lo.abs() * 0.1 };
                    lo -= pad;
                    hi += pad;
                }
                let ticks = nice_ticks(lo, hi, 5);
                let (tl, th) = (ticks[0], *ticks.last().expect("non-empty"));
                Mapping {
                    scale: Scale::Linear,
                    lo: tl,
                    hi: th,
                    ticks: ticks.into_iter().map(|v| (v, fmt_tick(v))).collect(),
                }
            }
            Scale::Log => {
                if hi / lo < 1.5 {
                    lo /= 1.25;
                    hi *= 1.25;
                } else {
                    lo /= 1.08;
                    hi *= 1.08;
                }
                let ticks = log_ticks(lo, hi);
                Mapping {
                    scale: Scale::Log,
                    lo: lo.log10(),
                    hi: hi.log10(),
                    ticks: ticks.into_iter().map(|v| (v, fmt_tick(v))).collect(),
                }
            }
            Scale::Nines => {
                let top = nines(hi).ceil().max(2.0);
                let mut ticks = vec![(0.0, "0%".to_string()), (50.0, "50%".to_string())];
                let mut p = 90.0;
                let mut k = 1.0;
                while k <= top + 1e-9 {
                    ticks.push((p, format!("{}%", fmt_tick(p))));
                    p = 100.0 - (100.0 - p) / 10.0;
                    k += 1.0;
                }
                Mapping {
                    scale: Scale::Nines,
                    lo: 0.0,
                    hi: top,
                    ticks,
                }
            }
        }
    }
}

/// A number for SVG coordinates.
fn n(x: f64) -> String {
    format!("{:.1}", x)
}

/// Rough width of text at 12px in a sans-serif font.
fn text_width(s: &str, size: f64) -> f64 {
    s.chars().count() as f64 * size * 0.56
}

fn dash(stroke: Stroke) -> &'static str {
    match stroke {
        Stroke::Dashed => " stroke-dasharray=\"7 4\"",
        Stroke::Dotted => " stroke-dasharray=\"2 3\"",
        _ => "",
    }
}

/// Renders the chart as one `<svg>` element.
pub fn render(c: &Chart) -> String {
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 40.0;
    const AXIS_SPACE: f64 = 46.0;
    const LEGEND_ROW: f64 = 18.0;

    // Legend layout first: it decides the height.
    let legend: Vec<&Series> = c.series.iter().filter(|s| s.in_legend).collect();
    let mut rows: Vec<Vec<(&Series, f64)>> = vec![Vec::new()];
    let mut used = 0.0;
    let avail = c.width - LEFT - RIGHT;
    for s in &legend {
        let w = 26.0 + text_width(&s.name, 12.0) + 14.0;
        if used + w > avail && !rows.last().expect("non-empty").is_empty() {
            rows.push(Vec::new());
            used = 0.0;
        }
        rows.last_mut().expect("non-empty").push((s, used));
        used += w;
    }
    if legend.is_empty() {
        rows.clear();
    }
    let legend_h = rows.len() as f64 * LEGEND_ROW;
    let height = c.height + legend_h + if rows.is_empty() { 0.0 } else { 6.0 };
    let plot_w = c.width - LEFT - RIGHT;
    let plot_h = c.height - TOP - AXIS_SPACE;
    let (x0, y0) = (LEFT, TOP);

    let mut xs: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .collect();
    let mut ys: Vec<f64> = c
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.y))
        .collect();
    for l in &c.lines {
        if l.vertical {
            xs.push(l.value);
        } else {
            ys.push(l.value);
        }
    }
    let mx = Mapping::new(&c.x, &xs);
    let my = Mapping::new(&c.y, &ys);
    let px = |v: f64| mx.frac(v).map(|f| x0 + f * plot_w);
    let py = |v: f64| my.frac(v).map(|f| y0 + plot_h - f * plot_h);

    let mut s = String::with_capacity(8192);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif\" font-size=\"12\">",
        w = n(c.width),
        h = n(height)
    );
    let _ = write!(s, "<title>{}</title>", escape(&c.title));
    let _ = write!(
        s,
        "<rect x=\"0\" y=\"0\" width=\"{}\" height=\"{}\" fill=\"#ffffff\"/>",
        n(c.width),
        n(height)
    );
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"22\" font-size=\"15\" font-weight=\"600\" fill=\"#1b1f24\">{}</text>",
        n(x0),
        escape(&c.title)
    );

    // Grid and ticks.
    s.push_str("<g class=\"grid\" stroke=\"#e3e6ea\" stroke-width=\"1\">");
    for (v, _) in &my.ticks {
        if let Some(y) = py(*v) {
            let _ = write!(s, "<path d=\"M{} {}H{}\"/>", n(x0), n(y), n(x0 + plot_w));
        }
    }
    for (v, _) in &mx.ticks {
        if let Some(x) = px(*v) {
            let _ = write!(s, "<path d=\"M{} {}V{}\"/>", n(x), n(y0), n(y0 + plot_h));
        }
    }
    s.push_str("</g>");
    s.push_str("<g class=\"ticks\" fill=\"#57606a\">");
    for (v, label) in &my.ticks {
        if let Some(y) = py(*v) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
                n(x0 - 6.0),
                n(y),
                escape(label)
            );
        }
    }
    for (v, label) in &mx.ticks {
        if let Some(x) = px(*v) {
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
                n(x),
                n(y0 + plot_h + 16.0),
                escape(label)
            );
        }
    }
    s.push_str("</g>");
    let _ = write!(
        s,
        "<path class=\"axis\" d=\"M{} {}V{}H{}\" fill=\"none\" stroke=\"#57606a\" stroke-width=\"1\"/>",
        n(x0),
        n(y0),
        n(y0 + plot_h),
        n(x0 + plot_w)
    );
    let _ = write!(
        s,
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1b1f24\">{}</text>",
        n(x0 + plot_w / 2.0),
        n(y0 + plot_h + 36.0),
        escape(&c.x.label)
    );
    let _ = write!(
        s,
        "<text transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#1b1f24\">{}</text>",
        n(16.0),
        n(y0 + plot_h / 2.0),
        escape(&c.y.label)
    );

    let clip = format!("{}-plot", escape(&c.id));
    let _ = write!(
        s,
        "<defs><clipPath id=\"{clip}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        n(x0 - 5.0),
        n(y0 - 5.0),
        n(plot_w + 10.0),
        n(plot_h + 10.0)
    );

    // Reference lines under the data; labels of vertical ones staggered so
    // that close lines stay readable.
    let mut verticals = 0usize;
    let mut placed: Vec<(f64, f64, f64)> = Vec::new();
    for l in &c.lines {
        let col = l.color.map(color).unwrap_or(SLO_COLOR);
        if l.vertical {
            if let Some(x) = px(l.value) {
                let ly = y0 + 4.0 + (verticals % 3) as f64 * plot_h / 3.0;
                verticals += 1;
                let _ = write!(
                    s,
                    "<g class=\"ref\"><path d=\"M{} {}V{}\" stroke=\"{col}\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/><text x=\"{}\" y=\"{}\" fill=\"{col}\" font-size=\"11\" text-anchor=\"end\" transform=\"rotate(-90 {} {})\">{}</text><title>{}</title></g>",
                    n(x),
                    n(y0),
                    n(y0 + plot_h),
                    n(x - 4.0),
                    n(ly),
                    n(x - 4.0),
                    n(ly),
                    escape(&l.label),
                    escape(l.tip.as_deref().unwrap_or(&l.label))
                );
            }
        } else if let Some(y) = py(l.value) {
            // Right-aligned above the line, moved left of any label it
            // would overlap.
            let w = text_width(&l.label, 11.0);
            let mut end = x0 + plot_w - 4.0;
            while let Some(&(_, start, _)) = placed
                .iter()
                .find(|(py, start, stop)| (py - y).abs() < 14.0 && end > *start && end - w < *stop)
            {
                end = start - 10.0;
            }
            placed.push((y, end - w, end));
            let _ = write!(
                s,
                "<g class=\"ref\"><path d=\"M{} {}H{}\" stroke=\"{col}\" stroke-width=\"1.5\" stroke-dasharray=\"8 3 2 3\"/><text x=\"{}\" y=\"{}\" fill=\"{col}\" font-size=\"11\" text-anchor=\"end\">{}</text><title>{}</title></g>",
                n(x0),
                n(y),
                n(x0 + plot_w),
                n(end),
                n(y - 4.0),
                escape(&l.label),
                escape(l.tip.as_deref().unwrap_or(&l.label))
            );
        }
    }

    // Data.
    let mut labels = String::new();
    for series in &c.series {
        let col = color(series.color);
        let _ = write!(
            s,
            "<g class=\"series\" clip-path=\"url(#{clip})\"><title>{}</title>",
            escape(&series.name)
        );
        if series.stroke != Stroke::None {
            // One polyline per run of drawable points.
            let mut seg: Vec<String> = Vec::new();
            let flush = |seg: &mut Vec<String>, s: &mut String| {
                if seg.len() >= 2 {
                    let _ = write!(
                        s,
                        "<polyline points=\"{}\" fill=\"none\" stroke=\"{col}\" stroke-width=\"2\" stroke-linejoin=\"round\" stroke-linecap=\"round\"{}/>",
                        seg.join(" "),
                        dash(series.stroke)
                    );
                }
                seg.clear();
            };
            for p in &series.points {
                match (px(p.x), py(p.y)) {
                    (Some(x), Some(y)) => seg.push(format!("{},{}", n(x), n(y))),
                    _ => flush(&mut seg, &mut s),
                }
            }
            flush(&mut seg, &mut s);
        }
        if series.markers {
            for p in &series.points {
                let (Some(x), Some(y)) = (px(p.x), py(p.y)) else {
                    continue;
                };
                let fill = if p.hollow { "#ffffff" } else { col };
                let _ = write!(
                    s,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{fill}\" stroke=\"{col}\" stroke-width=\"2\">",
                    n(x),
                    n(y)
                );
                if let Some(tip) = &p.tip {
                    let _ = write!(s, "<title>{}</title>", escape(tip));
                }
                s.push_str("</circle>");
                let inside = (x0..=x0 + plot_w).contains(&x) && (y0..=y0 + plot_h).contains(&y);
                if let (Some(label), true) = (&p.label, inside) {
                    let anchor_right = x > x0 + plot_w * 0.75;
                    let _ = write!(
                        labels,
                        "<text x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1b1f24\" text-anchor=\"{}\">{}</text>",
                        n(if anchor_right { x - 7.0 } else { x + 7.0 }),
                        n(y - 7.0),
                        if anchor_right { "end" } else { "start" },
                        escape(label)
                    );
                }
            }
        }
        s.push_str("</g>");
    }
    // Point labels above the data, unclipped.
    s.push_str(&labels);

    // Legend.
    let ly0 = c.height + 10.0;
    s.push_str("<g class=\"legend\">");
    for (r, row) in rows.iter().enumerate() {
        let y = ly0 + r as f64 * LEGEND_ROW;
        for (series, off) in row {
            let x = x0 + off;
            let col = color(series.color);
            if series.stroke != Stroke::None {
                let _ = write!(
                    s,
                    "<path d=\"M{} {}H{}\" stroke=\"{col}\" stroke-width=\"2\"{}/>",
                    n(x),
                    n(y),
                    n(x + 20.0),
                    dash(series.stroke)
                );
            }
            if series.markers {
                let _ = write!(
                    s,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{col}\"/>",
                    n(x + 10.0),
                    n(y)
                );
            }
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\" fill=\"#1b1f24\">{}</text>",
                n(x + 26.0),
                n(y),
                escape(&series.name)
            );
        }
    }
    s.push_str("</g></svg>");
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_ticks_are_round_and_cover() {
        assert_eq!(nice_ticks(0.0, 9.3, 5), vec![0.0, 2.0, 4.0, 6.0, 8.0, 10.0]);
        assert_eq!(
            nice_ticks(0.0, 4714.0, 5),
            vec![0.0, 1000.0, 2000.0, 3000.0, 4000.0, 5000.0]
        );
        assert_eq!(
            nice_ticks(0.1, 0.34, 5),
            vec![0.1, 0.15, 0.2, 0.25, 0.3, 0.35]
        );
        let t = nice_ticks(0.0, 23.0, 5);
        assert_eq!(t, vec![0.0, 5.0, 10.0, 15.0, 20.0, 25.0]);
    }

    #[test]
    fn log_ticks_pick_1_2_5() {
        assert_eq!(log_ticks(7.0, 140.0), vec![10.0, 20.0, 50.0, 100.0]);
        assert_eq!(
            log_ticks(1.0, 1e6),
            vec![1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]
        );
        // Narrow ranges get finer steps.
        assert_eq!(log_ticks(11.0, 19.0), vec![12.0, 14.0, 16.0, 18.0]);
        assert_eq!(log_ticks(3.5, 9.0), vec![4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }

    #[test]
    fn tick_labels_are_short() {
        assert_eq!(fmt_tick(0.0), "0");
        assert_eq!(fmt_tick(2.5), "2.5");
        assert_eq!(fmt_tick(12000.0), "12k");
        assert_eq!(fmt_tick(2_500_000.0), "2.5M");
        assert_eq!(fmt_tick(0.05), "0.05");
        assert_eq!(fmt_tick(250.0), "250");
    }

    #[test]
    fn nines_spread_the_tail() {
        assert!((nines(90.0) - 1.0).abs() < 1e-9);
        assert!((nines(99.9) - 3.0).abs() < 1e-9);
        assert_eq!(nines(0.0), 0.0);
    }

    #[test]
    fn renders_lines_markers_legend_and_refs() {
        let mut c = Chart::new("TPOT <p50>", Axis::log("load"), Axis::linear("ms"));
        c.series.push(Series::line(
            "a & b",
            0,
            vec![
                Point::new(8.0, 7.0).tip("c=8"),
                Point::new(32.0, 9.0),
                Point::new(f64::NAN, 1.0),
                Point::new(128.0, 21.0),
            ],
        ));
        c.lines.push(RefLine {
            value: 10.0,
            label: "SLO p50 < 10ms".into(),
            tip: None,
            vertical: false,
            color: None,
        });
        let svg = render(&c);
        assert!(svg.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\""));
        assert!(svg.ends_with("</svg>"));
        assert!(svg.contains("TPOT &lt;p50&gt;"));
        assert!(svg.contains("a &amp; b"));
        assert!(svg.contains("SLO p50 &lt; 10ms"));
        // The NaN splits the line: one segment of two points, one lone point.
        assert_eq!(svg.matches("<polyline").count(), 1);
        assert_eq!(
            svg.matches("<circle").count(),
            3 + 1,
            "3 markers and a legend swatch"
        );
        assert!(svg.contains("<title>c=8</title>"));
        assert!(c.has_data());
    }

    #[test]
    fn an_empty_chart_still_renders_axes() {
        let c = Chart::new("empty", Axis::linear("x"), Axis::nines("percentile"));
        let svg = render(&c);
        assert!(svg.contains("class=\"axis\""));
        assert!(!c.has_data());
    }
}
