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

/// Colour of INVALID points' markers.
pub const INVALID_COLOR: &str = "#8c959f";

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
    /// Log when the positive values span at least `ratio`, else linear:
    /// a latency that climbs from 300 ms to 80 s would squash everything
    /// below a second into the bottom pixels of a linear axis.
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
    /// Why the point is INVALID: drawn as a grey, dashed, open marker with
    /// the reason in its hover title, and named in the legend.
    pub invalid: Option<String>,
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
    /// Opacity of the line and markers: below 1 for a lighter shade of the
    /// colour (a p99 beside its p50).
    pub shade: f64,
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
            shade: 1.0,
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

/// A shaded horizontal band (a noise band around a level), drawn under
/// the reference lines and the data, its label as its hover title.
#[derive(Debug, Clone)]
pub struct Band {
    pub low: f64,
    pub high: f64,
    /// The stretch of the x axis it covers; the whole plot when absent.
    pub x: Option<(f64, f64)>,
    pub label: String,
    /// A palette index (see [`color`]).
    pub color: usize,
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
    pub bands: Vec<Band>,
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
            bands: Vec::new(),
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

/// A percentile tick label with every digit it needs: 99.999 is "99.999%",
/// never a rounded "100%".
pub fn pct_label(p: f64) -> String {
    let t = format!("{:.6}", clean(p));
    format!("{}%", t.trim_end_matches('0').trim_end_matches('.'))
}

/// A box a label or marker takes on the chart: x, y of the top left
/// corner, width, height.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Rect {
    pub x: f64,
    pub y: f64,
    pub w: f64,
    pub h: f64,
}

impl Rect {
    /// The area two boxes share.
    pub fn overlap(&self, o: &Rect) -> f64 {
        let w = (self.x + self.w).min(o.x + o.w) - self.x.max(o.x);
        let h = (self.y + self.h).min(o.y + o.h) - self.y.max(o.y);
        if w > 0.0 && h > 0.0 { w * h } else { 0.0 }
    }
}

/// Greedy label placement: each label takes the first of its candidate
/// boxes that overlaps nothing placed before it (labels and obstacles
/// such as markers and lines) and stays inside the bounds, else the
/// candidate that overlaps least. Labels placed earlier win.
#[derive(Debug, Clone)]
pub struct Placer {
    bounds: Rect,
    taken: Vec<Rect>,
}

impl Placer {
    pub fn new(bounds: Rect) -> Placer {
        Placer {
            bounds,
            taken: Vec::new(),
        }
    }

    /// Something labels must keep off (a marker, a line).
    pub fn obstacle(&mut self, r: Rect) {
        self.taken.push(r);
    }

    /// The chosen candidate's index, now taken; `None` without candidates.
    pub fn place(&mut self, candidates: &[Rect]) -> Option<usize> {
        let b = self.bounds;
        let cost = |r: &Rect| {
            let inside =
                r.x >= b.x && r.y >= b.y && r.x + r.w <= b.x + b.w && r.y + r.h <= b.y + b.h;
            let outside = if inside {
                0.0
            } else {
                r.w * r.h - r.overlap(&b) + 1.0
            };
            self.taken.iter().map(|t| t.overlap(r)).sum::<f64>() + outside * 4.0
        };
        let mut best: Option<(usize, f64)> = None;
        for (i, r) in candidates.iter().enumerate() {
            let c = cost(r);
            if c == 0.0 {
                best = Some((i, 0.0));
                break;
            }
            if best.is_none_or(|(_, bc)| c < bc) {
                best = Some((i, c));
            }
        }
        let (i, _) = best?;
        self.taken.push(candidates[i]);
        Some(i)
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
                    ticks.push((p, pct_label(p)));
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

/// Renders the chart as one `<svg>` element: the legend's layout first (it
/// decides the height), then the frame, title, axes and grid, the
/// reference lines, the data, the labels placed clear of both, and the
/// legend.
pub fn render(c: &Chart) -> String {
    const LEFT: f64 = 70.0;
    const RIGHT: f64 = 20.0;
    const TOP: f64 = 40.0;
    const AXIS_SPACE: f64 = 46.0;
    const LEGEND_ROW: f64 = 18.0;

    let rows = legend_rows(c, c.width - LEFT - RIGHT);
    let legend_h = rows.len() as f64 * LEGEND_ROW;
    let height = c.height + legend_h + if rows.is_empty() { 0.0 } else { 6.0 };
    let f = Frame::new(
        c,
        LEFT,
        TOP,
        c.width - LEFT - RIGHT,
        c.height - TOP - AXIS_SPACE,
    );
    let (x0, y0, plot_w, plot_h) = (f.x0, f.y0, f.w, f.h);
    let (mx, my) = (&f.mx, &f.my);

    let mut s = String::with_capacity(8192);
    let _ = write!(
        s,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"chart\" viewBox=\"0 0 {w} {h}\" width=\"{w}\" height=\"{h}\" role=\"img\" data-yscale=\"{ys}\" data-xscale=\"{xs}\" font-family=\"system-ui, -apple-system, 'Segoe UI', Roboto, 'Helvetica Neue', Arial, sans-serif\" font-size=\"12\">",
        w = n(c.width),
        h = n(height),
        ys = scale_word(my.scale),
        xs = scale_word(mx.scale)
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

    axes(&mut s, c, &f);

    let clip = format!("{}-plot", escape(&c.id));
    let _ = write!(
        s,
        "<defs><clipPath id=\"{clip}\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\"/></clipPath></defs>",
        n(x0 - 5.0),
        n(y0 - 5.0),
        n(plot_w + 10.0),
        n(plot_h + 10.0)
    );

    bands(&mut s, c, &f, &clip);
    let mut placer = placer(c, &f);
    let mut labels = String::new();
    reference_lines(&mut s, &mut labels, c, &f, &mut placer);
    for series in &c.series {
        draw_series(&mut s, &mut labels, series, &f, &mut placer, &clip);
    }
    // Labels above the data, unclipped.
    s.push_str(&labels);
    legend(&mut s, &rows, x0, c.height + 10.0, LEGEND_ROW);
    s.push_str("</g></svg>");
    s
}

/// Where the plot area lies in the SVG, and how values map into it.
struct Frame {
    x0: f64,
    y0: f64,
    w: f64,
    h: f64,
    mx: Mapping,
    my: Mapping,
}

impl Frame {
    /// The plot area at (`x0`, `y0`), `w` by `h`, its axes scaled to every
    /// series' points and every reference line.
    fn new(c: &Chart, x0: f64, y0: f64, w: f64, h: f64) -> Frame {
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
        for b in &c.bands {
            ys.extend([b.low, b.high]);
        }
        Frame {
            x0,
            y0,
            w,
            h,
            mx: Mapping::new(&c.x, &xs),
            my: Mapping::new(&c.y, &ys),
        }
    }

    fn px(&self, v: f64) -> Option<f64> {
        self.mx.frac(v).map(|f| self.x0 + f * self.w)
    }

    fn py(&self, v: f64) -> Option<f64> {
        self.my.frac(v).map(|f| self.y0 + self.h - f * self.h)
    }

    fn inside(&self, x: f64, y: f64) -> bool {
        (self.x0..=self.x0 + self.w).contains(&x) && (self.y0..=self.y0 + self.h).contains(&y)
    }
}

/// The legend's keys in rows that fit `avail`, each with its offset from
/// the left. After the series, a key to the marker styles that appear:
/// open (fails an SLO) and INVALID.
fn legend_rows(c: &Chart, avail: f64) -> Vec<Vec<(Key<'_>, f64)>> {
    let any = |f: &dyn Fn(&Point) -> bool| {
        c.series.iter().filter(|s| s.markers).any(|s| {
            s.points
                .iter()
                .any(|p| p.x.is_finite() && p.y.is_finite() && f(p))
        })
    };
    let mut legend: Vec<Key<'_>> = c
        .series
        .iter()
        .filter(|s| s.in_legend)
        .map(Key::Series)
        .collect();
    if any(&|p| p.hollow && p.invalid.is_none()) {
        legend.push(Key::Hollow);
    }
    if any(&|p| p.invalid.is_some()) {
        legend.push(Key::Invalid);
    }
    if legend.is_empty() {
        return Vec::new();
    }
    let mut rows: Vec<Vec<(Key<'_>, f64)>> = vec![Vec::new()];
    let mut used = 0.0;
    for k in legend {
        let w = 34.0 + text_width(k.name(), 12.0) + 14.0;
        if used + w > avail && !rows.last().expect("non-empty").is_empty() {
            rows.push(Vec::new());
            used = 0.0;
        }
        rows.last_mut().expect("non-empty").push((k, used));
        used += w;
    }
    rows
}

/// The grid, the tick labels that fit, the axis lines and their labels.
fn axes(s: &mut String, c: &Chart, f: &Frame) {
    let (x0, y0, plot_w, plot_h) = (f.x0, f.y0, f.w, f.h);
    let px = |v: f64| f.px(v);
    let py = |v: f64| f.py(v);
    let (mx, my) = (&f.mx, &f.my);
    // Ticks that fit: a label too close to the one before it is left out
    // (the grid line stays).
    let mut yticks: Vec<(f64, &str)> = Vec::new();
    for (v, label) in &my.ticks {
        if let Some(y) = py(*v) {
            if yticks.last().is_none_or(|(ly, _)| (ly - y).abs() >= 14.0) {
                yticks.push((y, label));
            }
        }
    }
    let mut xticks: Vec<(f64, &str)> = Vec::new();
    for (v, label) in &mx.ticks {
        if let Some(x) = px(*v) {
            let half = text_width(label, 12.0) / 2.0;
            let clear = xticks.last().is_none_or(|(lx, last)| {
                x - half >= lx + text_width(last, 12.0) / 2.0 + 6.0 && *last != label.as_str()
            });
            if clear {
                xticks.push((x, label));
            }
        }
    }
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
    for (y, label) in &yticks {
        let _ = write!(
            s,
            "<text class=\"ytick\" x=\"{}\" y=\"{}\" text-anchor=\"end\" dominant-baseline=\"middle\">{}</text>",
            n(x0 - 6.0),
            n(*y),
            escape(label)
        );
    }
    for (x, label) in &xticks {
        let _ = write!(
            s,
            "<text class=\"xtick\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            n(*x),
            n(y0 + plot_h + 16.0),
            escape(label)
        );
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
        "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" fill=\"#1b1f24\">{}{}</text>",
        n(x0 + plot_w / 2.0),
        n(y0 + plot_h + 36.0),
        escape(&c.x.label),
        if mx.scale == Scale::Log {
            ", log scale"
        } else {
            ""
        }
    );
    let _ = write!(
        s,
        "<text transform=\"translate({} {}) rotate(-90)\" text-anchor=\"middle\" fill=\"#1b1f24\">{}{}</text>",
        n(16.0),
        n(y0 + plot_h / 2.0),
        escape(&c.y.label),
        if my.scale == Scale::Log {
            ", log scale"
        } else {
            ""
        }
    );
}

/// A placer for labels, with every marker and reference line as an
/// obstacle.
fn placer(c: &Chart, f: &Frame) -> Placer {
    let (x0, y0, plot_w, plot_h) = (f.x0, f.y0, f.w, f.h);
    let px = |v: f64| f.px(v);
    let py = |v: f64| f.py(v);
    // Labels are placed greedily, away from markers, lines and each other:
    // reference lines' first, then the points'.
    let mut placer = Placer::new(Rect {
        x: x0,
        y: y0,
        w: plot_w,
        h: plot_h,
    });
    for series in c.series.iter().filter(|s| s.markers) {
        for p in &series.points {
            if let (Some(x), Some(y)) = (px(p.x), py(p.y)) {
                placer.obstacle(Rect {
                    x: x - 5.0,
                    y: y - 5.0,
                    w: 10.0,
                    h: 10.0,
                });
            }
        }
    }
    for l in &c.lines {
        let r = if l.vertical {
            px(l.value).map(|x| Rect {
                x: x - 1.0,
                y: y0,
                w: 2.0,
                h: plot_h,
            })
        } else {
            py(l.value).map(|y| Rect {
                x: x0,
                y: y - 1.0,
                w: plot_w,
                h: 2.0,
            })
        };
        if let Some(r) = r {
            placer.obstacle(r);
        }
    }
    placer
}

/// The bands, under the reference lines and the data, clipped to the plot.
fn bands(s: &mut String, c: &Chart, f: &Frame, clip: &str) {
    for b in &c.bands {
        let (x_lo, x_hi) = match b.x {
            Some((lo, hi)) => (f.px(lo), f.px(hi)),
            None => (Some(f.x0), Some(f.x0 + f.w)),
        };
        let (Some(x_lo), Some(x_hi), Some(y_lo), Some(y_hi)) =
            (x_lo, x_hi, f.py(b.low), f.py(b.high))
        else {
            continue;
        };
        let (left, top) = (x_lo.min(x_hi), y_lo.min(y_hi));
        let _ = write!(
            s,
            "<g class=\"band\" clip-path=\"url(#{clip})\"><rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" fill-opacity=\"0.14\"/><title>{}</title></g>",
            n(left),
            n(top),
            n((x_hi - x_lo).abs()),
            n((y_hi - y_lo).abs()),
            color(b.color),
            escape(&b.label)
        );
    }
}

/// The reference lines, under the data; their labels go to `labels`.
fn reference_lines(s: &mut String, labels: &mut String, c: &Chart, f: &Frame, placer: &mut Placer) {
    let (x0, y0, plot_w, plot_h) = (f.x0, f.y0, f.w, f.h);
    let px = |v: f64| f.px(v);
    let py = |v: f64| f.py(v);
    for l in &c.lines {
        let col = l.color.map(color).unwrap_or(SLO_COLOR);
        let tip = escape(l.tip.as_deref().unwrap_or(&l.label));
        let w = text_width(&l.label, 11.0);
        if l.vertical {
            let Some(x) = px(l.value) else { continue };
            if !(x0..=x0 + plot_w).contains(&x) {
                continue;
            }
            let _ = write!(
                s,
                "<g class=\"ref\"><path d=\"M{} {}V{}\" stroke=\"{col}\" stroke-width=\"1.5\" stroke-dasharray=\"3 3\"/><title>{tip}</title></g>",
                n(x),
                n(y0),
                n(y0 + plot_h)
            );
            // Rotated text reading upwards from (ax, ay), left or right
            // of the line, at the top, middle or bottom.
            let mut cands = Vec::new();
            for frac in [0.0, 0.35, 0.7] {
                let ay = y0 + 4.0 + w + frac * (plot_h - w - 8.0).max(0.0);
                for ax in [x - 4.0, x + 13.0] {
                    cands.push(Rect {
                        x: ax - 9.0,
                        y: ay - w,
                        w: 11.0,
                        h: w,
                    });
                }
            }
            if let Some(i) = placer.place(&cands) {
                let r = cands[i];
                let (ax, ay) = (r.x + 9.0, r.y + r.h);
                let _ = write!(
                    labels,
                    "<text class=\"lbl\" x=\"{}\" y=\"{}\" fill=\"{col}\" font-size=\"11\" transform=\"rotate(-90 {} {})\">{}<title>{tip}</title></text>",
                    n(ax),
                    n(ay),
                    n(ax),
                    n(ay),
                    escape(&l.label)
                );
            }
        } else {
            let Some(y) = py(l.value) else { continue };
            if !(y0 - 0.5..=y0 + plot_h + 0.5).contains(&y) {
                continue;
            }
            let _ = write!(
                s,
                "<g class=\"ref\"><path d=\"M{} {}H{}\" stroke=\"{col}\" stroke-width=\"1.5\" stroke-dasharray=\"8 3 2 3\"/><title>{tip}</title></g>",
                n(x0),
                n(y),
                n(x0 + plot_w)
            );
            // Above or below the line, from the right end leftwards.
            let mut cands = Vec::new();
            for k in 0..6 {
                let start = x0 + plot_w - 4.0 - w - k as f64 * (plot_w - w - 8.0).max(0.0) / 5.0;
                for top in [y - 14.0, y + 3.0] {
                    cands.push(Rect {
                        x: start,
                        y: top,
                        w,
                        h: 11.0,
                    });
                }
            }
            if let Some(i) = placer.place(&cands) {
                let r = cands[i];
                let _ = write!(
                    labels,
                    "<text class=\"lbl\" x=\"{}\" y=\"{}\" fill=\"{col}\" font-size=\"11\">{}<title>{tip}</title></text>",
                    n(r.x),
                    n(r.y + 9.0),
                    escape(&l.label)
                );
            }
        }
    }
}

/// One series: its line (one polyline per run of drawable points) and its
/// markers; their labels go to `labels`.
fn draw_series(
    s: &mut String,
    labels: &mut String,
    series: &Series,
    f: &Frame,
    placer: &mut Placer,
    clip: &str,
) {
    let px = |v: f64| f.px(v);
    let py = |v: f64| f.py(v);
    let col = color(series.color);
    let shade = if series.shade < 1.0 {
        format!(" opacity=\"{:.2}\"", series.shade)
    } else {
        String::new()
    };
    let _ = write!(
        s,
        "<g class=\"series\" clip-path=\"url(#{clip})\"{shade}><title>{}</title>",
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
                _ => flush(&mut seg, &mut *s),
            }
        }
        flush(&mut seg, &mut *s);
    }
    if series.markers {
        for p in &series.points {
            let (Some(x), Some(y)) = (px(p.x), py(p.y)) else {
                continue;
            };
            let mut tip = p.tip.clone().unwrap_or_default();
            if let Some(why) = &p.invalid {
                let _ = write!(
                    s,
                    "<circle class=\"invalid\" cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"#ffffff\" stroke=\"{INVALID_COLOR}\" stroke-width=\"2\" stroke-dasharray=\"2 1.5\">",
                    n(x),
                    n(y)
                );
                if !tip.is_empty() {
                    tip.push('\n');
                }
                tip.push_str("INVALID: ");
                tip.push_str(why);
            } else {
                let fill = if p.hollow { "#ffffff" } else { col };
                let _ = write!(
                    s,
                    "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"{fill}\" stroke=\"{col}\" stroke-width=\"2\">",
                    n(x),
                    n(y)
                );
            }
            if !tip.is_empty() {
                let _ = write!(s, "<title>{}</title>", escape(&tip));
            }
            s.push_str("</circle>");
            let (Some(label), true) = (&p.label, f.inside(x, y)) else {
                continue;
            };
            let w = text_width(label, 11.0);
            let cands = [
                (x + 7.0, y - 18.0),
                (x - 7.0 - w, y - 18.0),
                (x + 7.0, y + 6.0),
                (x - 7.0 - w, y + 6.0),
                (x + 8.0, y - 6.0),
                (x - 8.0 - w, y - 6.0),
                (x - w / 2.0, y - 22.0),
                (x - w / 2.0, y + 10.0),
                (x + 7.0, y - 32.0),
                (x - 7.0 - w, y - 32.0),
                (x + 7.0, y + 20.0),
                (x - 7.0 - w, y + 20.0),
            ]
            .map(|(lx, ty)| Rect {
                x: lx,
                y: ty,
                w,
                h: 12.0,
            });
            if let Some(i) = placer.place(&cands) {
                let r = cands[i];
                let _ = write!(
                    labels,
                    "<text class=\"lbl\" x=\"{}\" y=\"{}\" font-size=\"11\" fill=\"#1b1f24\">{}</text>",
                    n(r.x),
                    n(r.y + 10.0),
                    escape(label)
                );
            }
        }
    }
    s.push_str("</g>");
}

/// The legend's rows, from (`x0`, `ly0`), `row_h` apart.
fn legend(s: &mut String, rows: &[Vec<(Key<'_>, f64)>], x0: f64, ly0: f64, row_h: f64) {
    s.push_str("<g class=\"legend\">");
    for (r, row) in rows.iter().enumerate() {
        let y = ly0 + r as f64 * row_h;
        for (key, off) in row {
            let x = x0 + off;
            match key {
                Key::Series(series) => {
                    let col = color(series.color);
                    let shade = if series.shade < 1.0 {
                        format!(" opacity=\"{:.2}\"", series.shade)
                    } else {
                        String::new()
                    };
                    let _ = write!(s, "<g{shade}>");
                    if series.stroke != Stroke::None {
                        let _ = write!(
                            s,
                            "<path d=\"M{} {}H{}\" stroke=\"{col}\" stroke-width=\"2\"{}/>",
                            n(x),
                            n(y),
                            n(x + 28.0),
                            dash(series.stroke)
                        );
                    }
                    if series.markers {
                        let _ = write!(
                            s,
                            "<circle cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"{col}\"/>",
                            n(x + 14.0),
                            n(y)
                        );
                    }
                    s.push_str("</g>");
                }
                Key::Hollow => {
                    let _ = write!(
                        s,
                        "<circle cx=\"{}\" cy=\"{}\" r=\"4\" fill=\"#ffffff\" stroke=\"#3d444d\" stroke-width=\"2\"/>",
                        n(x + 14.0),
                        n(y)
                    );
                }
                Key::Invalid => {
                    let _ = write!(
                        s,
                        "<circle class=\"invalid-key\" cx=\"{}\" cy=\"{}\" r=\"4.5\" fill=\"#ffffff\" stroke=\"{INVALID_COLOR}\" stroke-width=\"2\" stroke-dasharray=\"2 1.5\"><title>INVALID points: measured, but their numbers are not to be trusted; hover a marker for why</title></circle>",
                        n(x + 14.0),
                        n(y)
                    );
                }
            }
            let _ = write!(
                s,
                "<text x=\"{}\" y=\"{}\" dominant-baseline=\"middle\" fill=\"#1b1f24\">{}</text>",
                n(x + 34.0),
                n(y),
                escape(key.name())
            );
        }
    }
}

/// One entry of a chart's legend.
enum Key<'a> {
    Series(&'a Series),
    /// Open markers: points that fail an SLO.
    Hollow,
    /// Grey dashed open markers: INVALID points.
    Invalid,
}

impl Key<'_> {
    fn name(&self) -> &str {
        match self {
            Key::Series(s) => &s.name,
            Key::Hollow => "open: fails an SLO",
            Key::Invalid => "INVALID (hover for why)",
        }
    }
}

fn scale_word(s: Scale) -> &'static str {
    match s {
        Scale::Linear => "linear",
        Scale::Log => "log",
        Scale::Nines => "nines",
    }
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
    fn scale_is_log_where_the_data_spans_decades() {
        // A rate sweep's TTFT: 300 ms and 2 s thresholds, data to 80 s.
        let ttft = [120.0, 180.0, 900.0, 14_000.0, 80_000.0, 300.0, 2000.0];
        assert_eq!(Axis::auto("TTFT", ttft, 30.0).scale, Scale::Log);
        // Within a factor of 30: linear.
        let tpot = [8.0, 9.5, 12.0, 21.0, 60.0];
        assert_eq!(Axis::auto("TPOT", tpot, 30.0).scale, Scale::Linear);
        // Zeros and NaNs do not count.
        assert_eq!(
            Axis::auto("x", [0.0, f64::NAN, 5.0, 7.0], 30.0).scale,
            Scale::Linear
        );
    }

    #[test]
    fn percent_ticks_keep_their_digits() {
        assert_eq!(pct_label(99.0), "99%");
        assert_eq!(pct_label(99.9), "99.9%");
        assert_eq!(pct_label(99.999), "99.999%");
        assert_eq!(pct_label(50.0), "50%");
    }

    #[test]
    fn placer_takes_the_first_free_candidate_else_the_least_overlap() {
        let mut p = Placer::new(Rect {
            x: 0.0,
            y: 0.0,
            w: 100.0,
            h: 100.0,
        });
        let at = |x: f64, y: f64| Rect {
            x,
            y,
            w: 30.0,
            h: 10.0,
        };
        // Four "knee" labels wanting the same spot spread out.
        let cands = [
            at(10.0, 10.0),
            at(10.0, 25.0),
            at(50.0, 10.0),
            at(50.0, 25.0),
        ];
        let picks: Vec<usize> = (0..4).map(|_| p.place(&cands).unwrap()).collect();
        assert_eq!(picks, [0, 1, 2, 3]);
        // A fifth overlaps something: the candidate that overlaps least,
        // and never one outside the bounds when one inside is as good.
        let fifth = p.place(&[at(10.0, 10.0), at(80.0, 95.0), at(10.0, 60.0)]);
        assert_eq!(fifth, Some(2));
        p.obstacle(at(10.0, 80.0));
        assert_eq!(p.place(&[at(15.0, 82.0), at(60.0, 80.0)]), Some(1));
        assert_eq!(p.place(&[]), None);
    }

    /// The boxes of the `class="lbl"` labels of an SVG, as placed.
    fn label_boxes(svg: &str) -> Vec<(f64, f64, String)> {
        svg.split("<text class=\"lbl\" ")
            .skip(1)
            .map(|t| {
                let num = |k: &str| -> f64 {
                    let i = t.find(&format!("{k}=\"")).unwrap() + k.len() + 2;
                    t[i..i + t[i..].find('"').unwrap()].parse().unwrap()
                };
                let text = t[t.find('>').unwrap() + 1..].split('<').next().unwrap();
                (num("x"), num("y"), text.to_string())
            })
            .collect()
    }

    #[test]
    fn point_and_threshold_labels_do_not_collide() {
        let mut c = Chart::new("knees", Axis::linear("load"), Axis::log("ms"));
        for k in 0..4 {
            let mut pts: Vec<Point> = (1..=5)
                .map(|i| Point::new(f64::from(i) * 10.0, 100.0 + f64::from(k)))
                .collect();
            pts[2].label = Some("knee".into());
            c.series
                .push(Series::line(format!("run {k}"), k as usize, pts));
        }
        for (v, label) in [
            (300.0, "SLO ttft p50 < 300ms"),
            (2000.0, "SLO ttft p99 < 2s"),
        ] {
            c.lines.push(RefLine {
                value: v,
                label: label.into(),
                tip: None,
                vertical: false,
                color: None,
            });
        }
        let svg = render(&c);
        let boxes = label_boxes(&svg);
        assert_eq!(boxes.len(), 6, "{boxes:?}");
        assert_eq!(boxes.iter().filter(|b| b.2 == "knee").count(), 4);
        let rect = |b: &(f64, f64, String)| Rect {
            x: b.0,
            y: b.1 - 10.0,
            w: text_width(&b.2, 11.0),
            h: 11.0,
        };
        for (i, a) in boxes.iter().enumerate() {
            for b in &boxes[i + 1..] {
                assert_eq!(rect(a).overlap(&rect(b)), 0.0, "{a:?} and {b:?}");
            }
        }
        assert!(svg.contains("data-yscale=\"log\""));
        assert!(svg.contains("ms, log scale"));
    }

    #[test]
    fn invalid_points_are_grey_with_their_reason_and_a_legend_key() {
        let mut c = Chart::new("t", Axis::linear("x"), Axis::linear("y"));
        let mut bad = Point::new(2.0, 2.0).tip("r=8");
        bad.invalid = Some("the client itself was late".into());
        let mut open = Point::new(3.0, 3.0);
        open.hollow = true;
        c.series
            .push(Series::line("s", 0, vec![Point::new(1.0, 1.0), bad, open]));
        let svg = render(&c);
        assert_eq!(svg.matches("<circle class=\"invalid\"").count(), 1);
        assert!(svg.contains("<title>r=8\nINVALID: the client itself was late</title>"));
        assert!(svg.contains("INVALID (hover for why)"));
        assert!(svg.contains("open: fails an SLO"));
        // Without such points, no such keys.
        let mut c = Chart::new("t", Axis::linear("x"), Axis::linear("y"));
        c.series
            .push(Series::line("s", 0, vec![Point::new(1.0, 1.0)]));
        let svg = render(&c);
        assert!(!svg.contains("INVALID") && !svg.contains("open: fails"));
    }

    #[test]
    fn nines_axis_labels_are_distinct_and_apart() {
        let mut c = Chart::new("ITL", Axis::nines("percentile"), Axis::linear("ms"));
        c.series.push(Series::line(
            "itl",
            0,
            vec![Point::new(0.0, 1.0), Point::new(99.999, 30.0)],
        ));
        let svg = render(&c);
        let ticks: Vec<(f64, &str)> = svg
            .split("<text class=\"xtick\" x=\"")
            .skip(1)
            .map(|t| {
                let x: f64 = t[..t.find('"').unwrap()].parse().unwrap();
                let label = t[t.find('>').unwrap() + 1..].split('<').next().unwrap();
                (x, label)
            })
            .collect();
        let labels: Vec<&str> = ticks.iter().map(|t| t.1).collect();
        let mut uniq = labels.clone();
        uniq.dedup();
        assert_eq!(labels, uniq, "duplicate tick labels");
        assert!(labels.contains(&"99.999%"), "{labels:?}");
        for w in ticks.windows(2) {
            let gap = w[1].0 - w[0].0;
            let need = (text_width(w[0].1, 12.0) + text_width(w[1].1, 12.0)) / 2.0;
            assert!(gap >= need, "{:?} crowd {:?}", w[0], w[1]);
        }
    }

    #[test]
    fn a_band_is_shaded_under_the_data_with_its_label() {
        let mut c = Chart::new("t", Axis::linear("x"), Axis::linear("y"));
        c.series.push(Series::line(
            "s",
            0,
            vec![Point::new(0.0, 10.0), Point::new(4.0, 10.0)],
        ));
        c.bands.push(Band {
            low: 9.5,
            high: 10.5,
            x: Some((2.0, 4.0)),
            label: "noise <band>".into(),
            color: 0,
        });
        let svg = render(&c);
        let band = svg.find("<g class=\"band\"").expect("a band");
        assert!(
            band < svg.find("<g class=\"series\"").unwrap(),
            "under the data"
        );
        assert!(svg.contains("<title>noise &lt;band&gt;</title>"));
        assert!(svg.contains("fill-opacity=\"0.14\""));
    }

    #[test]
    fn an_empty_chart_still_renders_axes() {
        let c = Chart::new("empty", Axis::linear("x"), Axis::nines("percentile"));
        let svg = render(&c);
        assert!(svg.contains("class=\"axis\""));
        assert!(!c.has_data());
    }
}
