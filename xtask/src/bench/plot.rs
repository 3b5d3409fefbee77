//! The plot of the node bursts over time, as SVG: one column per CCM QPS
//! setting, one line per burst; nodes initialized above, the CCM's
//! resident memory below.

use anyhow::anyhow;
use plotters::prelude::*;

use super::scenarios::Series;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 800;
const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// The SVG, or `None` without series.
pub(crate) fn svg(series: &[&Series]) -> anyhow::Result<Option<String>> {
    let mut panels: Vec<&str> = Vec::new();
    for s in series {
        if !panels.contains(&s.panel.as_str()) {
            panels.push(&s.panel);
        }
    }
    if panels.is_empty() {
        return Ok(None);
    }
    let mut out = String::new();
    {
        let root = SVGBackend::with_string(&mut out, (WIDTH, HEIGHT)).into_drawing_area();
        root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
        let areas = root.split_evenly((2, panels.len()));
        let (nodes, memory) = areas.split_at(panels.len());
        for ((nodes, memory), panel) in nodes.iter().zip(memory).zip(&panels) {
            let lines: Vec<&&Series> = series.iter().filter(|s| s.panel == *panel).collect();
            draw(nodes, panel, &lines, Quantity::Nodes)?;
            draw(memory, panel, &lines, Quantity::Rss)?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(Some(out))
}

/// What a panel plots over time.
#[derive(Debug, Clone, Copy)]
enum Quantity {
    Nodes,
    Rss,
}

impl Quantity {
    fn points(self, series: &Series) -> Vec<(f64, f64)> {
        match self {
            Self::Nodes => series.points.iter().map(|(t, n)| (*t, *n as f64)).collect(),
            Self::Rss => series.rss.clone(),
        }
    }

    fn label(self) -> &'static str {
        match self {
            Self::Nodes => "nodes initialized",
            Self::Rss => "CCM resident memory (MiB)",
        }
    }
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &str,
    lines: &[&&Series],
    quantity: Quantity,
) -> anyhow::Result<()> {
    let points: Vec<Vec<(f64, f64)>> = lines.iter().map(|s| quantity.points(s)).collect();
    let x_max = points
        .iter()
        .flat_map(|p| p.last().map(|p| p.0))
        .fold(1.0_f64, f64::max)
        * 1.05;
    let y_max = match quantity {
        Quantity::Nodes => lines.iter().map(|s| s.total).max().unwrap_or(1) as f64,
        Quantity::Rss => points.iter().flatten().map(|p| p.1).fold(1.0_f64, f64::max),
    } * 1.05;
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("{e:?}");
    let mut chart = ChartBuilder::on(area)
        .caption(format!("CCM with {panel}"), ("sans-serif", 16))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("seconds since the first node registered")
        .y_desc(quantity.label())
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, (s, points)) in lines.iter().zip(points).enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(points, color.stroke_width(2)))
            .map_err(err)?
            .label(s.label.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(panel: &str, label: &str) -> Series {
        Series {
            label: label.into(),
            panel: panel.into(),
            total: 100,
            points: vec![(0.0, 0), (1.0, 40), (2.5, 100)],
            rss: vec![(0.0, 20.0), (1.0, 48.5), (2.5, 31.0)],
        }
    }

    #[test]
    fn one_panel_per_qps_setting_and_a_legend_entry_per_burst() {
        let (a, b, c) = (
            series("--kube-api-qps=20", "100 nodes, qps 20"),
            series("--kube-api-qps=1000", "100 nodes, qps 1000"),
            series("--kube-api-qps=1000", "500 nodes, qps 1000"),
        );
        let svg = svg(&[&a, &b, &c]).unwrap().unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80]);
        // Two QPS settings, each with a nodes panel and a memory panel.
        assert_eq!(svg.matches("CCM with").count(), 4);
        assert_eq!(svg.matches("CCM resident memory (MiB)").count(), 2);
        for label in [
            "100 nodes, qps 20",
            "100 nodes, qps 1000",
            "500 nodes, qps 1000",
        ] {
            assert!(svg.contains(label), "{label} missing");
        }
    }

    #[test]
    fn no_series_no_plot() {
        assert!(svg(&[]).unwrap().is_none());
    }
}
