//! The plot of node initialization over time: one panel per CCM QPS
//! setting, one line per burst, as SVG.

use anyhow::anyhow;
use plotters::prelude::*;

use super::scenarios::Series;

const WIDTH: u32 = 1100;
const HEIGHT: u32 = 440;
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
        let areas = root.split_evenly((1, panels.len()));
        for (area, panel) in areas.iter().zip(&panels) {
            let lines: Vec<&&Series> = series.iter().filter(|s| s.panel == *panel).collect();
            draw(area, panel, &lines)?;
        }
        root.present().map_err(|e| anyhow!("{e}"))?;
    }
    Ok(Some(out))
}

fn draw<DB: DrawingBackend>(
    area: &DrawingArea<DB, plotters::coord::Shift>,
    panel: &str,
    lines: &[&&Series],
) -> anyhow::Result<()> {
    let x_max = lines
        .iter()
        .flat_map(|s| s.points.last().map(|p| p.0))
        .fold(1.0_f64, f64::max)
        * 1.05;
    let y_max = lines.iter().map(|s| s.total).max().unwrap_or(1) as f64 * 1.05;
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
        .y_desc("nodes initialized")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .draw()
        .map_err(err)?;
    for (i, s) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                s.points.iter().map(|(t, n)| (*t, *n as f64)),
                color.stroke_width(2),
            ))
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
        assert_eq!(svg.matches("CCM with").count(), 2);
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
