//! A grouped bar chart, as SVG and PNG: one group of bars per category
//! (the change benchmark's phases), one bar per target in each, on a log
//! axis (a local directory and a FUSE mount differ by 100×; on a linear axis
//! the slow bars would vanish). The line charts of B1–B5 are [`crate::figure`];
//! the font is found the same way.

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

pub struct Bars {
    pub title: String,
    pub y_label: String,
    /// the groups along the x axis, left to right
    pub categories: Vec<String>,
    /// one bar per category for each (legend name, values); None: no bar
    pub series: Vec<(String, Vec<Option<f64>>)>,
}

impl Bars {
    /// The axis's range: from the power of ten below every positive value to
    /// three times the highest (room above the bars for the legend).
    fn y_range(&self) -> Option<(f64, f64)> {
        let all = || self.series.iter().flat_map(|(_, v)| v.iter().flatten().copied());
        let vals = || all().filter(|v| v.is_finite() && *v > 0.0);
        let lo = vals().fold(f64::MAX, f64::min);
        let hi = vals().fold(0.0, f64::max);
        if hi <= 0.0 {
            return None;
        }
        let lo = 10f64.powf(lo.log10().floor());
        let hi = (hi * 3.0).max(lo * 10.0);
        Some((lo, hi))
    }
}

/// Draw `bars` as `<dir>/<stem>.svg` and `.png`; returns the paths.
pub fn draw(bars: &Bars, dir: &Path, stem: &str) -> anyhow::Result<Vec<PathBuf>> {
    crate::figure::font().as_ref().map_err(|e| anyhow!("{e}"))?;
    let (lo, hi) = bars.y_range().ok_or_else(|| anyhow!("nothing to draw"))?;
    std::fs::create_dir_all(dir)?;
    let svg = dir.join(format!("{stem}.svg"));
    let png = dir.join(format!("{stem}.png"));
    let size = (900, 560);
    {
        let root = SVGBackend::new(&svg, size).into_drawing_area();
        plot(&root, bars, lo, hi)?;
        root.present().map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    }
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        plot(&root, bars, lo, hi)?;
        root.present().map_err(|e| anyhow!("{}: {e}", png.display()))?;
    }
    Ok(vec![svg, png])
}

fn plot<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, bars: &Bars, lo: f64, hi: f64) -> anyhow::Result<()> {
    let e = |e: &dyn std::fmt::Display| anyhow!("drawing {}: {e}", bars.title);
    root.fill(&WHITE).map_err(|x| e(&x))?;
    let n = bars.categories.len().max(1) as f64;
    let mut chart = ChartBuilder::on(root)
        .caption(&bars.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(30)
        .y_label_area_size(70)
        .build_cartesian_2d(0.0..n, (lo..hi).log_scale())
        .map_err(|x| e(&x))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc(bars.y_label.as_str())
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(|x| e(&x))?;
    // the categories' names, under the middle of each group
    for (i, name) in bars.categories.iter().enumerate() {
        let (x, y) = chart.backend_coord(&(i as f64 + 0.5, lo));
        let style = ("sans-serif", 15).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Top));
        root.draw(&Text::new(name.clone(), (x, y + 8), style)).map_err(|x| e(&x))?;
    }
    let width = 0.8 / bars.series.len().max(1) as f64;
    for (t, (name, values)) in bars.series.iter().enumerate() {
        let color = Palette99::pick(t).to_rgba();
        let rects = values.iter().enumerate().filter_map(|(i, v)| {
            let v = v.filter(|v| v.is_finite() && *v > 0.0)?;
            let x0 = i as f64 + 0.1 + t as f64 * width;
            Some(Rectangle::new([(x0, lo), (x0 + width, v)], color.filled()))
        });
        chart
            .draw_series(rects)
            .map_err(|x| e(&x))?
            .label(name.as_str())
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(|x| e(&x))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Bars {
        Bars {
            title: "changes".into(),
            y_label: "ops/s".into(),
            categories: vec!["create+write".into(), "rm -rf".into()],
            series: vec![("local".into(), vec![Some(7265.0), Some(30699.0)]), ("imca".into(), vec![Some(497.0), None])],
        }
    }

    #[test]
    fn the_axis_starts_at_a_decade_and_leaves_room_above() {
        assert_eq!(sample().y_range(), Some((100.0, 3.0 * 30699.0)));
        let one = Bars { series: vec![("x".into(), vec![Some(1000.0)])], ..sample() };
        assert_eq!(one.y_range(), Some((1000.0, 10_000.0)), "at least a decade");
        let none = Bars { series: vec![("x".into(), vec![None, Some(0.0)])], ..sample() };
        assert_eq!(none.y_range(), None);
    }

    #[test]
    fn draws_svg_and_png_when_a_font_is_there() {
        if crate::figure::font().is_err() {
            eprintln!("skipped: no font on this machine");
            return;
        }
        let d = tempfile::tempdir().unwrap();
        let files = draw(&sample(), d.path(), "changes").unwrap();
        let svg = std::fs::read_to_string(&files[0]).unwrap();
        for text in ["create+write", "rm -rf", "local", "imca"] {
            assert!(svg.contains(text), "{text} missing from the SVG");
        }
        assert_eq!(&std::fs::read(&files[1]).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
    }
}
