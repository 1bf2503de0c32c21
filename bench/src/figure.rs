//! The dissertation's figures, drawn from [`Outcome`]s with `plotters`:
//! one line per target (and per group, e.g. client count or record size),
//! as SVG and PNG.
//!
//! Text needs a TrueType font. `plotters` rasterises it in pure Rust
//! (`ab_glyph`, no fontconfig or freetype), but the font file itself is
//! found at run time: `$IMCA_BENCH_FONT`, else DejaVu Sans or Liberation
//! Sans where Debian puts them (`fonts-dejavu-core`). Without one no figure
//! is drawn and the caller says so; tables, JSON and CSV do not need it.

use crate::outcome::Outcome;
use anyhow::anyhow;
use plotters::coord::ranged1d::{AsRangedCoord, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// How one benchmark's figure is made from its table.
pub struct Spec {
    pub title: String,
    /// column on the x axis
    pub x: &'static str,
    pub x_label: &'static str,
    pub y_label: &'static str,
    /// x is a size swept by doubling: log₂ axis
    pub log_x: bool,
    /// y columns, each a line, with the name it gets in the legend
    pub ys: Vec<(&'static str, &'static str)>,
    /// one line per distinct value of this column (legend: prefix + value)
    pub group_by: Option<(&'static str, &'static str)>,
}

pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// At most this many groups in a figure (shared among the targets), spread
/// over the values, so a full sweep still gives a readable figure.
const MAX_GROUPS: usize = 6;

/// The lines of `spec` for every (target name, outcome).
pub fn series(spec: &Spec, outcomes: &[(&str, &Outcome)]) -> Vec<Series> {
    let mut out = Vec::new();
    for (target, o) in outcomes {
        let groups: Vec<Option<f64>> = match spec.group_by {
            None => vec![None],
            Some((col, _)) => {
                let mut vals: Vec<f64> = o.rows.iter().map(|r| o.get(r, col)).collect();
                vals.sort_by(f64::total_cmp);
                vals.dedup();
                let per_target = (MAX_GROUPS / outcomes.len().max(1)).max(1);
                spread(&vals, per_target).into_iter().map(Some).collect()
            }
        };
        for g in groups {
            for (ycol, yname) in &spec.ys {
                let mut name = Vec::new();
                if !target.is_empty() {
                    name.push(target.to_string());
                }
                if let (Some(v), Some((_, prefix))) = (g, spec.group_by) {
                    name.push(format!("{prefix}{}", human(v)));
                }
                if spec.ys.len() > 1 {
                    name.push(yname.to_string());
                }
                let points = o
                    .rows
                    .iter()
                    .filter(|r| g.is_none_or(|v| o.get(r, spec.group_by.map(|g| g.0).unwrap_or("")) == v))
                    .map(|r| (o.get(r, spec.x), o.get(r, ycol)))
                    .filter(|(x, y)| x.is_finite() && y.is_finite())
                    .collect();
                out.push(Series { name: name.join(", "), points });
            }
        }
    }
    out
}

/// Up to `n` of `vals`, first and last included, evenly spaced.
fn spread(vals: &[f64], n: usize) -> Vec<f64> {
    if vals.len() <= n {
        return vals.to_vec();
    }
    if n == 1 {
        return vec![vals[0]];
    }
    let mut idx: Vec<usize> = (0..n).map(|i| i * (vals.len() - 1) / (n - 1)).collect();
    idx.dedup();
    idx.into_iter().map(|i| vals[i]).collect()
}

/// 1, 512, 2K, 64K, 1M: sizes and counts as axis labels.
pub fn human(v: f64) -> String {
    let units = [(1u64 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (u, s) in units {
        let u = u as f64;
        if v >= u && (v / u).fract() == 0.0 {
            return format!("{}{s}", v / u);
        }
    }
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
    }
}

pub(crate) fn font() -> &'static Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| {
        let candidates: Vec<PathBuf> = std::env::var_os("IMCA_BENCH_FONT")
            .map(PathBuf::from)
            .into_iter()
            .chain(
                [
                    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/TTF/DejaVuSans.ttf",
                    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
                    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
                ]
                .map(PathBuf::from),
            )
            .collect();
        for p in &candidates {
            if let Ok(bytes) = std::fs::read(p) {
                // registered once for the process's life, as plotters wants
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
        }
        Err("no TrueType font found (apt-get install fonts-dejavu-core, or set IMCA_BENCH_FONT=/path/to/font.ttf)".into())
    })
}

/// Draw `series` as `<dir>/<stem>.svg` and `.png`; returns the paths.
pub fn draw(spec: &Spec, series: &[Series], dir: &Path, stem: &str) -> anyhow::Result<Vec<PathBuf>> {
    font().as_ref().map_err(|e| anyhow!("{e}"))?;
    let pts = || series.iter().flat_map(|s| s.points.iter());
    if pts().next().is_none() {
        anyhow::bail!("nothing to draw");
    }
    let (mut x0, mut x1, mut y1) = (f64::MAX, f64::MIN, 0.0f64);
    for &(x, y) in pts() {
        (x0, x1, y1) = (x0.min(x), x1.max(x), y1.max(y));
    }
    if x1 <= x0 {
        (x0, x1) = (x0 * 0.5, x1 * 2.0 + 1.0);
    }
    let y1 = if y1 > 0.0 { y1 * 1.1 } else { 1.0 };
    std::fs::create_dir_all(dir)?;
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let size = (900, 560);
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        on_area(&root, spec, series, x0, x1, y1)?;
        root.present().map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        on_area(&root, spec, series, x0, x1, y1)?;
        root.present().map_err(|e| anyhow!("{}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

fn on_area<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    spec: &Spec,
    series: &[Series],
    x0: f64,
    x1: f64,
    y1: f64,
) -> anyhow::Result<()> {
    if spec.log_x {
        plot(root, spec, series, (x0.max(f64::MIN_POSITIVE)..x1).log_scale().base(2.0), (x0, x1), y1)
    } else {
        plot(root, spec, series, x0..x1, (x0, x1), y1)
    }
}

fn plot<DB: DrawingBackend, X>(
    root: &DrawingArea<DB, Shift>,
    spec: &Spec,
    series: &[Series],
    x: X,
    (x_lo, x_hi): (f64, f64),
    y1: f64,
) -> anyhow::Result<()>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let e = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", spec.title);
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let mut chart = ChartBuilder::on(root)
        .caption(&spec.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(x, 0.0..y1)
        .map_err(|x| e(&x))?;
    // linear axes here count processes: one label per whole number
    let whole = (x_hi - x_lo).round() as usize + 1;
    chart
        .configure_mesh()
        .x_labels(whole.clamp(2, 12))
        .x_desc(spec.x_label)
        .y_desc(spec.y_label)
        .x_label_formatter(&|v| if spec.log_x || v.fract() == 0.0 { human(*v) } else { String::new() })
        .draw()
        .map_err(|x| e(&x))?;
    for (i, s) in series.iter().enumerate() {
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
            .map_err(|x| e(&x))?
            .label(&s.name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2)));
        chart
            .draw_series(s.points.iter().map(|&p| Circle::new(p, 3, color.filled())))
            .map_err(|x| e(&x))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::System;

    fn b3_like() -> Outcome {
        Outcome {
            bench: "B3".into(),
            name: "t".into(),
            label: String::new(),
            system: System::default(),
            run: serde_json::Value::Null,
            columns: vec!["clients".into(), "record".into(), "read_mean_us".into(), "write_mean_us".into()],
            rows: vec![vec![2.0, 1.0, 10.0, 20.0], vec![2.0, 4.0, 11.0, 21.0], vec![4.0, 1.0, 12.0, 22.0]],
            names: None,
        }
    }

    fn spec() -> Spec {
        Spec {
            title: "t".into(),
            x: "record",
            x_label: "record size (bytes)",
            y_label: "µs",
            log_x: true,
            ys: vec![("read_mean_us", "read"), ("write_mean_us", "write")],
            group_by: Some(("clients", "K=")),
        }
    }

    #[test]
    fn one_line_per_target_group_and_y() {
        let o = b3_like();
        let s = series(&spec(), &[("imca", &o)]);
        let names: Vec<&str> = s.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["imca, K=2, read", "imca, K=2, write", "imca, K=4, read", "imca, K=4, write"]);
        assert_eq!(s[0].points, [(1.0, 10.0), (4.0, 11.0)]);
        assert_eq!(s[3].points, [(1.0, 22.0)]);
    }

    #[test]
    fn many_groups_are_thinned_keeping_both_ends() {
        let v: Vec<f64> = (0..17).map(|i| (1u64 << i) as f64).collect();
        let s = spread(&v, 6);
        assert_eq!(s.len(), 6);
        assert_eq!((s[0], s[5]), (1.0, 65536.0));
        assert_eq!(spread(&[1.0, 2.0], 6), [1.0, 2.0]);
    }

    #[test]
    fn human_sizes() {
        assert_eq!(human(1.0), "1");
        assert_eq!(human(2048.0), "2K");
        assert_eq!(human(1536.0), "1536");
        assert_eq!(human(1048576.0), "1M");
    }

    #[test]
    fn draws_svg_and_png_when_a_font_is_there() {
        if font().is_err() {
            eprintln!("skipped: no font on this machine");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let o = b3_like();
        let files = draw(&spec(), &series(&spec(), &[("imca", &o)]), d.path(), "b3").unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        assert!(svg.starts_with("<svg") && svg.contains("imca, K=2, read"), "{}", &svg[..200.min(svg.len())]);
        assert_eq!(&std::fs::read(&files[1]).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
}
