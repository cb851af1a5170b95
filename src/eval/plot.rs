//! Draws evaluation results as SVG: recall@k against k for every retrieval mode, one panel per
//! question group. Owns only drawing; it computes no metric and writes no file.

use std::fmt::Display;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// One mode's recall curve: (k, recall in [0, 1]) points in increasing k.
pub struct Curve {
    /// The retrieval mode's name, shown in the legend.
    pub mode: String,
    /// (k, recall@k) points, k strictly increasing, recall in [0, 1].
    pub points: Vec<(usize, f64)>,
}

/// One panel: a question group (e.g. "multi-hop (n=282)") and a curve per mode.
pub struct Panel {
    /// The panel's caption.
    pub title: String,
    /// One curve per retrieval mode.
    pub curves: Vec<Curve>,
}

/// Panels per grid row at most.
const MAX_COLS: usize = 3;
/// Size of one panel's cell in pixels.
const CELL_W: u32 = 440;
const CELL_H: u32 = 330;
/// Height of the strip holding the overall title.
const TITLE_H: u32 = 44;
/// Height of one row of legend entries.
const LEGEND_ROW_H: u32 = 26;
/// Font sizes (plotters units; the SVG font-size is this / 1.24).
const TITLE_FONT: f64 = 26.0;
const CAPTION_FONT: f64 = 20.0;
const LEGEND_FONT: f64 = 17.0;
const AXIS_DESC_FONT: f64 = 16.0;
const TICK_FONT: f64 = 14.0;
/// Legend swatch: a short thick bar with the marker on it, then a gap, then the name.
const SWATCH_W: i32 = 28;
const SWATCH_GAP: i32 = 6;
const ENTRY_GAP: i32 = 26;
const MARKER_RADIUS: u32 = 3;
const LINE_WIDTH: u32 = 2;

/// d3's category10: ten colours that stay apart from each other on white; modes past ten reuse them.
const PALETTE: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The colour of the `index`-th mode (in order of first appearance).
fn colour(index: usize) -> RGBColor {
    PALETTE[index % PALETTE.len()]
}

fn fail<E: Display>(e: E) -> String {
    e.to_string()
}

/// Renders `panels` in a grid (at most 3 per row), each with x = k, y = recall (0..1 fixed), a line
/// with point markers per mode (the same mode has the same colour in every panel; distinct colours for
/// up to 10 modes), one shared legend, and `title` on top. Returns the SVG document.
pub fn recall_svg(title: &str, panels: &[Panel]) -> std::result::Result<String, String> {
    let modes = validate(panels)?;
    let cols = panels.len().min(MAX_COLS);
    let rows = panels.len().div_ceil(MAX_COLS);
    let width = CELL_W * cols as u32;

    let legend_font = FontDesc::new(FontFamily::SansSerif, LEGEND_FONT, FontStyle::Normal);
    let legend_rows = legend_layout(&modes, &legend_font, width as i32)?;
    let legend_h = LEGEND_ROW_H * legend_rows.len() as u32 + 8;
    let height = TITLE_H + legend_h + CELL_H * rows as u32;

    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let (title_area, rest) = root.split_vertically(TITLE_H);
        let (legend_area, grid) = rest.split_vertically(legend_h);

        let title_style = TextStyle::from(("sans-serif", TITLE_FONT).into_font().style(FontStyle::Bold))
            .color(&BLACK)
            .pos(Pos::new(HPos::Center, VPos::Center));
        title_area.draw(&Text::new(title, (width as i32 / 2, TITLE_H as i32 / 2), title_style)).map_err(fail)?;

        draw_legend(&legend_area, &legend_rows, &legend_font)?;

        for (panel, cell) in panels.iter().zip(grid.split_evenly((rows, cols))) {
            draw_panel(&cell, panel, &modes)?;
        }
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

/// Checks the input and returns the mode names in order of first appearance.
fn validate(panels: &[Panel]) -> Result<Vec<&str>, String> {
    if panels.is_empty() {
        return Err("nothing to plot: no panels".to_string());
    }
    let mut modes: Vec<&str> = Vec::new();
    for panel in panels {
        if panel.curves.is_empty() {
            return Err(format!("panel {:?} has no curves", panel.title));
        }
        for curve in &panel.curves {
            if curve.points.is_empty() {
                return Err(format!("panel {:?}: curve {:?} has no points", panel.title, curve.mode));
            }
            for &(k, recall) in &curve.points {
                if !(0.0..=1.0).contains(&recall) {
                    return Err(format!(
                        "panel {:?}: curve {:?} has recall {recall} at k={k}, outside [0, 1]",
                        panel.title, curve.mode
                    ));
                }
            }
            if curve.points.windows(2).any(|w| w[0].0 >= w[1].0) {
                return Err(format!("panel {:?}: curve {:?} has k not strictly increasing", panel.title, curve.mode));
            }
            if !modes.contains(&curve.mode.as_str()) {
                modes.push(&curve.mode);
            }
        }
    }
    Ok(modes)
}

/// One legend entry placed on a row: mode index, name, x of its left edge.
struct LegendEntry<'a> {
    index: usize,
    name: &'a str,
    x: i32,
}

/// Packs legend entries into centred rows no wider than `width`.
fn legend_layout<'a>(modes: &[&'a str], font: &FontDesc, width: i32) -> Result<Vec<Vec<LegendEntry<'a>>>, String> {
    let usable = width - 2 * ENTRY_GAP;
    let mut rows: Vec<Vec<(usize, &str, i32)>> = vec![Vec::new()];
    let mut row_w = 0;
    for (index, name) in modes.iter().enumerate() {
        let (text_w, _) = font.box_size(name).map_err(fail)?;
        let entry_w = SWATCH_W + SWATCH_GAP + text_w as i32;
        let needed = if row_w == 0 { entry_w } else { row_w + ENTRY_GAP + entry_w };
        if row_w > 0 && needed > usable {
            rows.push(Vec::new());
            row_w = entry_w;
        } else {
            row_w = needed;
        }
        if let Some(row) = rows.last_mut() {
            row.push((index, *name, entry_w));
        }
    }
    Ok(rows
        .into_iter()
        .map(|row| {
            let total: i32 = row.iter().map(|e| e.2).sum::<i32>() + ENTRY_GAP * (row.len() as i32 - 1);
            let mut x = (width - total) / 2;
            row.into_iter()
                .map(|(index, name, w)| {
                    let entry = LegendEntry { index, name, x };
                    x += w + ENTRY_GAP;
                    entry
                })
                .collect()
        })
        .collect())
}

fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    rows: &[Vec<LegendEntry>],
    font: &FontDesc,
) -> Result<(), String> {
    let text_style = TextStyle::from(font.clone()).color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    for (r, row) in rows.iter().enumerate() {
        let y = LEGEND_ROW_H as i32 * r as i32 + LEGEND_ROW_H as i32 / 2 + 4;
        for entry in row {
            let c = colour(entry.index);
            let half = LINE_WIDTH as i32 / 2;
            // A filled bar rather than a path, so the only polylines in the document are the curves.
            area.draw(&Rectangle::new([(entry.x, y - half), (entry.x + SWATCH_W, y + half)], c.filled()))
                .map_err(fail)?;
            area.draw(&Circle::new((entry.x + SWATCH_W / 2, y), MARKER_RADIUS + 1, c.filled())).map_err(fail)?;
            area.draw(&Text::new(entry.name, (entry.x + SWATCH_W + SWATCH_GAP, y), text_style.clone()))
                .map_err(fail)?;
        }
    }
    Ok(())
}

fn draw_panel<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, panel: &Panel, modes: &[&str]) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let ks = panel.curves.iter().flat_map(|c| c.points.iter().map(|p| p.0 as i64));
    let (lo, hi) = ks.fold((i64::MAX, i64::MIN), |(lo, hi), k| (lo.min(k), hi.max(k)));
    // Pad so markers at the ends are not cut by the axes.
    let pad = ((hi - lo) / 25).max(1);
    let mut chart = ChartBuilder::on(area)
        .caption(&panel.title, ("sans-serif", CAPTION_FONT))
        .margin(12)
        .x_label_area_size(42)
        .y_label_area_size(52)
        .build_cartesian_2d((lo - pad)..(hi + pad), -0.02f64..1.02f64)
        .map_err(fail)?;
    chart
        .configure_mesh()
        .x_desc("k")
        .y_desc("recall@k")
        .axis_desc_style(("sans-serif", AXIS_DESC_FONT))
        .label_style(("sans-serif", TICK_FONT))
        .x_labels(8)
        .y_labels(6)
        .y_label_formatter(&|y| format!("{y:.1}"))
        .light_line_style(WHITE.mix(0.0))
        .bold_line_style(BLACK.mix(0.12))
        .draw()
        .map_err(fail)?;
    for curve in &panel.curves {
        let index =
            modes.iter().position(|m| *m == curve.mode).ok_or_else(|| format!("unknown mode {}", curve.mode))?;
        let c = colour(index);
        let points: Vec<(i64, f64)> = curve.points.iter().map(|&(k, r)| (k as i64, r)).collect();
        chart.draw_series(LineSeries::new(points.iter().copied(), c.stroke_width(LINE_WIDTH))).map_err(fail)?;
        chart.draw_series(points.iter().map(|&p| Circle::new(p, MARKER_RADIUS, c.filled()))).map_err(fail)?;
    }
    Ok(())
}

/// One line of a timing plot ((graph nodes, ms per query) points) or of a gate plot ((τ,
/// share) points).
pub struct Series {
    /// Legend name ("cpu, batch 1").
    pub name: String,
    /// (x, y) points, x increasing.
    pub points: Vec<(f64, f64)>,
}

/// Time per query against graph size, both axes logarithmic, one line per series.
pub fn timing_svg(title: &str, series: &[Series]) -> std::result::Result<String, String> {
    let all: Vec<(f64, f64)> =
        series.iter().flat_map(|s| s.points.iter().copied()).filter(|p| p.0 > 0.0 && p.1 > 0.0).collect();
    if all.is_empty() {
        return Err("nothing to plot: no positive points".to_string());
    }
    let (x0, x1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.0), b.max(p.0)));
    let (y0, y1) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), p| (a.min(p.1), b.max(p.1)));
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", TITLE_FONT))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((x0 / 1.5..x1 * 1.5).log_scale(), (y0 / 2.0..y1 * 2.0).log_scale())
            .map_err(fail)?;
        chart
            .configure_mesh()
            .x_desc("graph nodes")
            .y_desc("ms per query")
            .x_labels(6)
            .y_labels(6)
            .max_light_lines(1)
            .x_label_formatter(&|x| format!("{x:.0}"))
            .y_label_formatter(&|y| format!("{y}"))
            .axis_desc_style(("sans-serif", AXIS_DESC_FONT))
            .label_style(("sans-serif", TICK_FONT))
            .draw()
            .map_err(fail)?;
        // Log axes: only positive points can be drawn.
        let positive = |p: &(f64, f64)| p.0 > 0.0 && p.1 > 0.0;
        draw_lines(&mut chart, series, &positive, true)?;
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

/// Draws each series' `keep` points as a line in its palette colour (with a marker at every
/// point when `markers`) and the legend, top left: what the timing and gate plots share.
fn draw_lines<'a, DB, X, Y>(
    chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>,
    series: &[Series],
    keep: &dyn Fn(&(f64, f64)) -> bool,
    markers: bool,
) -> std::result::Result<(), String>
where
    DB: DrawingBackend + 'a,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    for (i, s) in series.iter().enumerate() {
        let c = colour(i);
        let points: Vec<(f64, f64)> = s.points.iter().copied().filter(|p| keep(p)).collect();
        chart
            .draw_series(LineSeries::new(points.clone(), c.stroke_width(LINE_WIDTH)))
            .map_err(fail)?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + SWATCH_W, y)], c.stroke_width(LINE_WIDTH + 2)));
        if markers {
            chart.draw_series(points.iter().map(|&p| Circle::new(p, MARKER_RADIUS, c.filled()))).map_err(fail)?;
        }
    }
    chart
        .configure_series_labels()
        .label_font(("sans-serif", LEGEND_FONT))
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(fail)
}

/// The gate's two rates against its threshold τ (both axes linear, in [0, 1]): one line per
/// series, e.g. "LoCoMo: adversarial rejected" and "LoCoMo: answerable refused".
pub fn gate_svg(title: &str, series: &[Series]) -> std::result::Result<String, String> {
    unit_svg(title, "threshold τ (rejected when the confidence is under it)", "share of questions", series)
}

/// A reliability diagram: the share of answerable questions against the gate's confidence, one
/// line per series (a line from (0, 0) to (1, 1) is a calibrated gate).
pub fn reliability_svg(title: &str, series: &[Series]) -> std::result::Result<String, String> {
    unit_svg(title, "confidence (held out)", "share answerable", series)
}

/// Lines in the unit square, both axes linear in [0, 1].
fn unit_svg(title: &str, x_desc: &str, y_desc: &str, series: &[Series]) -> std::result::Result<String, String> {
    if series.iter().all(|s| s.points.is_empty()) {
        return Err("nothing to plot: no points".to_string());
    }
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (900, 600)).into_drawing_area();
        root.fill(&WHITE).map_err(fail)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(title, ("sans-serif", TITLE_FONT))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..1.0f64, 0.0..1.0f64)
            .map_err(fail)?;
        chart
            .configure_mesh()
            .x_desc(x_desc)
            .y_desc(y_desc)
            .x_labels(11)
            .y_labels(11)
            .max_light_lines(1)
            .axis_desc_style(("sans-serif", AXIS_DESC_FONT))
            .label_style(("sans-serif", TICK_FONT))
            .draw()
            .map_err(fail)?;
        draw_lines(&mut chart, series, &|_| true, false)?;
        root.present().map_err(fail)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gate_plot_names_every_series() {
        let rising = |k: f64| (0..=10).map(|i| (i as f64 / 10.0, (i as f64 / 10.0).powf(k))).collect();
        let series = [
            Series { name: "locomo: adversarial rejected".into(), points: rising(0.5) },
            Series { name: "locomo: answerable refused".into(), points: rising(3.0) },
        ];
        let svg = gate_svg("gate", &series).unwrap();
        assert!(
            svg.contains("adversarial rejected") && svg.contains("answerable refused") && svg.contains("threshold")
        );
        assert!(gate_svg("gate", &[]).is_err());
    }

    const KS: [usize; 6] = [1, 3, 5, 10, 20, 50];
    const MODES: [&str; 4] = ["bm25", "dense", "hybrid", "spreading-activation"];

    fn curve(mode: &str, base: f64) -> Curve {
        // Saturating curve: rises with k, stays in [0, 1].
        let points =
            KS.iter().map(|&k| (k, (base + (1.0 - base) * (1.0 - 1.0 / (k as f64).sqrt())).min(1.0))).collect();
        Curve { mode: mode.to_string(), points }
    }

    fn panels() -> Vec<Panel> {
        let groups = [("single-hop (n=841)", 0.42), ("multi-hop (n=282)", 0.21), ("temporal (n=321)", 0.30)];
        groups
            .iter()
            .map(|&(title, base)| Panel {
                title: title.to_string(),
                curves: MODES.iter().enumerate().map(|(i, m)| curve(m, base + 0.08 * i as f64)).collect(),
            })
            .collect()
    }

    /// The trimmed contents of every <text> element.
    fn texts(svg: &str) -> Vec<String> {
        svg.split("<text")
            .skip(1)
            .filter_map(|s| {
                let start = s.find('>')? + 1;
                let end = s.find("</text>")?;
                Some(s[start..end].trim().to_string())
            })
            .collect()
    }

    fn attr<'a>(tag: &'a str, name: &str) -> Option<&'a str> {
        let key = format!(" {name}=\"");
        let start = tag.find(&key)? + key.len();
        let len = tag[start..].find('"')?;
        Some(&tag[start..start + len])
    }

    /// (stroke, points) of every <polyline>.
    fn polylines(svg: &str) -> Vec<(String, Vec<(i32, i32)>)> {
        svg.split("<polyline")
            .skip(1)
            .filter_map(|s| {
                let tag = &s[..s.find("/>")?];
                let points = attr(tag, "points")?
                    .split_whitespace()
                    .filter_map(|p| {
                        let (x, y) = p.split_once(',')?;
                        Some((x.parse().ok()?, y.parse().ok()?))
                    })
                    .collect();
                Some((attr(tag, "stroke")?.to_string(), points))
            })
            .collect()
    }

    fn hex(c: RGBColor) -> String {
        format!("#{:02X}{:02X}{:02X}", c.0, c.1, c.2)
    }

    #[test]
    fn renders_all_panels_modes_and_labels() {
        let panels = panels();
        let svg = recall_svg("LoCoMo recall@k", &panels).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        assert!(svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<svg").count(), 1);

        let texts = texts(&svg);
        let count = |s: &str| texts.iter().filter(|t| *t == s).count();
        assert_eq!(count("LoCoMo recall@k"), 1);
        for p in &panels {
            assert_eq!(count(&p.title), 1, "panel title {:?} in {texts:?}", p.title);
        }
        for m in MODES {
            assert_eq!(count(m), 1, "legend entry {m:?} in {texts:?}");
        }
        assert_eq!(count("k"), 3);
        assert_eq!(count("recall@k"), 3);
        assert!(count("0.0") == 3 && count("1.0") == 3, "y ticks in {texts:?}");

        let lines = polylines(&svg);
        let data: Vec<_> = lines.iter().filter(|(s, _)| PALETTE.iter().any(|c| hex(*c) == *s)).collect();
        assert_eq!(data.len(), panels.len() * MODES.len());
        for (i, m) in MODES.iter().enumerate() {
            let mine: Vec<_> = data.iter().filter(|(s, _)| *s == hex(colour(i))).collect();
            assert_eq!(mine.len(), panels.len(), "mode {m}");
            // In panel order, each inside its own grid column, one vertex per point.
            for (p, (_, pts)) in mine.iter().enumerate() {
                assert_eq!(pts.len(), KS.len());
                let col = (p % MAX_COLS) as i32;
                let cell = (col * CELL_W as i32)..((col + 1) * CELL_W as i32);
                assert!(pts.iter().all(|(x, _)| cell.contains(x)), "panel {p} mode {m}: {pts:?}");
                assert!(pts.windows(2).all(|w| w[0].0 < w[1].0), "x grows with k");
                // Recall rises with k, so y (downwards) falls.
                assert!(pts.windows(2).all(|w| w[0].1 >= w[1].1), "y falls as recall rises: {pts:?}");
            }
        }
        assert_eq!(svg.matches("<circle").count(), panels.len() * MODES.len() * KS.len() + MODES.len());
    }

    #[test]
    fn same_mode_keeps_its_colour_whatever_the_curve_order() {
        let a = panels();
        let mut b = panels();
        for p in b.iter_mut().skip(1) {
            p.curves.reverse();
        }
        let sa = recall_svg("t", &a).unwrap();
        let sb = recall_svg("t", &b).unwrap();
        let mut la = polylines(&sa);
        let mut lb = polylines(&sb);
        la.sort();
        lb.sort();
        assert_eq!(la, lb);
        // Sanity: the modes really got different colours.
        let strokes: std::collections::BTreeSet<_> =
            la.iter().map(|l| l.0.clone()).filter(|s| s != "#000000").collect();
        assert_eq!(strokes.len(), MODES.len(), "{strokes:?}");
    }

    #[test]
    fn many_panels_wrap_and_many_modes_wrap_the_legend() {
        let many: Vec<Panel> = (0..5)
            .map(|i| Panel {
                title: format!("group {i}"),
                curves: (0..10).map(|m| curve(&format!("mode-with-a-long-name-{m}"), 0.05 * m as f64)).collect(),
            })
            .collect();
        let svg = recall_svg("five panels", &many).unwrap();
        let width: u32 = attr(&svg, "width").unwrap().parse().unwrap();
        let height: u32 = attr(&svg, "height").unwrap().parse().unwrap();
        assert_eq!(width, 3 * CELL_W);
        assert!(height > TITLE_H + 2 * CELL_H + 2 * LEGEND_ROW_H, "two grid rows and a wrapped legend: {height}");
        let strokes: std::collections::BTreeSet<_> =
            polylines(&svg).into_iter().map(|l| l.0).filter(|s| s != "#000000").collect();
        assert_eq!(strokes.len(), 10);
        assert_eq!(texts(&svg).iter().filter(|t| t.starts_with("mode-with-a-long-name-")).count(), 10);
    }

    #[test]
    fn escapes_markup_in_labels() {
        let mut p = panels();
        p[0].title = "a<b & c".to_string();
        let svg = recall_svg("x", &p).unwrap();
        assert!(svg.contains("a&lt;b &amp; c"));
        assert!(!svg.contains("a<b"));
    }

    #[test]
    fn rejects_bad_input() {
        assert!(recall_svg("t", &[]).unwrap_err().contains("no panels"));

        let mut p = panels();
        p[1].curves.clear();
        assert!(recall_svg("t", &p).unwrap_err().contains("no curves"));

        let mut p = panels();
        p[2].curves[3].points.clear();
        assert!(recall_svg("t", &p).unwrap_err().contains("no points"));

        for bad in [f64::NAN, -0.01, 1.01, f64::INFINITY] {
            let mut p = panels();
            p[0].curves[1].points[2].1 = bad;
            let err = recall_svg("t", &p).unwrap_err();
            assert!(err.contains("outside [0, 1]") && err.contains("k=5"), "{bad}: {err}");
        }

        let mut p = panels();
        p[0].curves[0].points.swap(1, 2);
        assert!(recall_svg("t", &p).unwrap_err().contains("strictly increasing"));

        // Boundary values are fine.
        let mut p = panels();
        p[0].curves[0].points[0].1 = 0.0;
        p[0].curves[0].points[5].1 = 1.0;
        assert!(recall_svg("t", &p).is_ok());
    }
}
