//! Hand-drawn SVG line charts: panels side by side, each with named series as polylines,
//! axes scaled to the data. Shared by `kcm bench`'s scale curves and `kcm lab`'s
//! per-scenario charts. Pure; no dependencies.

use std::fmt::Write as _;

/// One named series: (x, y) points in drawing order.
#[derive(Clone, Debug, PartialEq)]
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

/// One panel: a title, the x ticks' unit and decimals, the y ticks' decimals, its series.
#[derive(Clone, Debug, PartialEq)]
pub struct Panel {
    pub title: String,
    /// Said under the x axis (none when empty).
    pub x_label: String,
    /// Appended to each x tick label (`"s"`, or `""`).
    pub x_unit: &'static str,
    pub x_decimals: usize,
    pub y_decimals: usize,
    pub series: Vec<Series>,
}

/// The series' colours, in order (the first is the baseline's grey, the second kcm's red).
const COLORS: [&str; 4] = ["#888888", "#d62728", "#1f77b4", "#2ca02c"];
const PANEL_W: f64 = 520.0;
const PANEL_H: f64 = 300.0;
const MARGIN: f64 = 50.0;

/// The SVG document of `panels`, side by side (an empty one is one panel wide).
pub fn svg(panels: &[Panel]) -> String {
    let width = PANEL_W * panels.len().max(1) as f64;
    let mut out = format!(
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{PANEL_H}" font-family="sans-serif" font-size="12">
<rect width="100%" height="100%" fill="white"/>
"#
    );
    for (i, panel) in panels.iter().enumerate() {
        draw(&mut out, i as f64 * PANEL_W + MARGIN, panel);
    }
    out.push_str("</svg>\n");
    out
}

/// Draws `panel` with its plot's left edge at `x0`: axes from 0 to the largest x and y
/// of any series (1 when none is positive; a count axis up to a multiple of 4), five
/// ticks each, a legend after the title.
fn draw(out: &mut String, x0: f64, panel: &Panel) {
    let (plot_w, plot_h) = (PANEL_W - 1.5 * MARGIN, PANEL_H - 2.0 * MARGIN);
    let y0 = MARGIN + plot_h;
    // An axis without decimals (counts) ends at a multiple of 4, so its ticks are whole.
    let largest = |axis: fn(&(f64, f64)) -> f64, floor: f64, decimals: usize| {
        let max = panel
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(axis))
            .fold(0.0f64, f64::max);
        let max = if max > 0.0 { max.max(floor) } else { 1.0 };
        if decimals == 0 {
            (max / 4.0).ceil() * 4.0
        } else {
            max
        }
    };
    let max_x = largest(|p| p.0, 0.001, panel.x_decimals);
    let max_y = largest(|p| p.1, 0.0, panel.y_decimals);
    let _ = writeln!(
        out,
        r#"<text x="{x0}" y="{}" font-weight="bold">{}</text>"#,
        MARGIN - 20.0,
        escape(&panel.title)
    );
    let _ = writeln!(
        out,
        r#"<line x1="{x0}" y1="{y0}" x2="{}" y2="{y0}" stroke="black"/><line x1="{x0}" y1="{MARGIN}" x2="{x0}" y2="{y0}" stroke="black"/>"#,
        x0 + plot_w
    );
    for tick in 0..=4 {
        let f = tick as f64 / 4.0;
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{:.xd$}{}</text><text x="{:.1}" y="{:.1}" text-anchor="end">{:.yd$}</text>"#,
            x0 + f * plot_w,
            y0 + 16.0,
            f * max_x,
            panel.x_unit,
            x0 - 4.0,
            y0 - f * plot_h + 4.0,
            f * max_y,
            xd = panel.x_decimals,
            yd = panel.y_decimals,
        );
    }
    if !panel.x_label.is_empty() {
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" text-anchor="middle">{}</text>"#,
            x0 + plot_w / 2.0,
            y0 + 34.0,
            escape(&panel.x_label)
        );
    }
    for (j, series) in panel.series.iter().enumerate() {
        let color = COLORS[j % COLORS.len()];
        let points: Vec<String> = series
            .points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    x0 + x / max_x * plot_w,
                    y0 - y / max_y * plot_h
                )
            })
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{color}" stroke-width="2" points="{}"/>"#,
            points.join(" ")
        );
        let _ = writeln!(
            out,
            r#"<text x="{:.1}" y="{:.1}" fill="{color}">{}</text>"#,
            x0 + plot_w - 120.0 + 70.0 * j as f64,
            MARGIN - 20.0 + 16.0 * (j / 2) as f64,
            escape(&series.name)
        );
    }
}

/// `text` with XML's special characters escaped.
fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('\'', "&apos;")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(name: &str, points: &[(f64, f64)]) -> Series {
        Series {
            name: name.into(),
            points: points.to_vec(),
        }
    }

    #[test]
    fn a_panel_draws_each_series_as_a_polyline_with_a_legend_and_axes_scaled_to_the_data() {
        let drawn = svg(&[Panel {
            title: "burst: creates in flight over time".into(),
            x_label: "seconds since the controller's create".into(),
            x_unit: "s",
            x_decimals: 1,
            y_decimals: 0,
            series: vec![
                series("2014", &[(0.0, 0.0), (0.5, 200.0), (1.0, 0.0)]),
                series("kcm", &[(0.0, 0.0), (2.0, 100.0)]),
            ],
        }]);
        assert!(drawn.starts_with(r#"<svg xmlns="http://www.w3.org/2000/svg" width="520""#));
        assert!(drawn.ends_with("</svg>\n"));
        assert_eq!(drawn.matches("<polyline").count(), 2, "{drawn}");
        // x spans 0 to 2 s (50 to 495), y 0 to 200 (250 to 50).
        assert!(drawn.contains(
            r##"<polyline fill="none" stroke="#888888" stroke-width="2" points="50.0,250.0 161.2,50.0 272.5,250.0"/>"##
        ), "{drawn}");
        assert!(drawn.contains(
            r##"<polyline fill="none" stroke="#d62728" stroke-width="2" points="50.0,250.0 495.0,150.0"/>"##
        ), "{drawn}");
        assert!(drawn.contains(r##"fill="#888888">2014</text>"##), "{drawn}");
        assert!(drawn.contains(r##"fill="#d62728">kcm</text>"##), "{drawn}");
        // The last ticks name the largest x and y.
        assert!(drawn.contains(">2.0s</text>"), "{drawn}");
        assert!(drawn.contains(r#"text-anchor="end">200</text>"#), "{drawn}");
        assert!(drawn.contains(">burst: creates in flight over time</text>"));
        assert!(
            drawn.contains(">seconds since the controller&apos;s create</text>"),
            "{drawn}"
        );
    }

    #[test]
    fn an_all_zero_series_is_drawn_along_the_x_axis() {
        let drawn = svg(&[Panel {
            title: "orphans".into(),
            x_label: String::new(),
            x_unit: "",
            x_decimals: 0,
            y_decimals: 0,
            series: vec![series("kcm", &[(0.0, 0.0), (4.0, 0.0)])],
        }]);
        assert!(
            drawn.contains(r#"points="50.0,250.0 495.0,250.0""#),
            "{drawn}"
        );
        // Counts' ticks are whole: x every revision, y (nothing above 0) 0 to 4.
        assert!(
            drawn.contains(r#"text-anchor="middle">3</text>"#),
            "{drawn}"
        );
        assert!(drawn.contains(r#"text-anchor="end">4</text>"#), "{drawn}");
        assert!(drawn.contains(r#"text-anchor="end">1</text>"#), "{drawn}");
    }
}
