//! SVG plot of a report: one column per contender, a bar at the median, a point per repetition.

use crate::report::Report;
use plotters::prelude::*;
use std::path::Path;

/// Writes the plot of `report` to `path` (SVG).
pub fn write_svg(report: &Report, path: &Path) -> anyhow::Result<()> {
    let n = report.summary.len();
    let top = report
        .runs
        .iter()
        .filter_map(|r| r.value)
        .fold(0.0f64, f64::max)
        .max(f64::MIN_POSITIVE)
        * 1.15;
    let root = SVGBackend::new(path, (160 * n as u32 + 240, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let names: Vec<String> = report.summary.iter().map(|s| s.contender.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{} ({})", report.scenario, report.topology),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0f64..top)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n.max(1))
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                names.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc(if report.unit.is_empty() {
            "value".to_owned()
        } else {
            report.unit.clone()
        })
        .draw()?;
    let bars = report.summary.iter().enumerate().filter_map(|(i, s)| {
        s.value.map(|v| {
            let x = i as f64;
            Rectangle::new(
                [(x - 0.3, 0.0), (x + 0.3, v.median)],
                BLUE.mix(0.25).filled(),
            )
        })
    });
    chart.draw_series(bars)?;
    let reps = f64::from(report.repetitions.max(1));
    let points = report.runs.iter().filter_map(|r| {
        let i = report
            .summary
            .iter()
            .position(|s| s.contender == r.contender)?;
        let x = i as f64 - 0.2 + 0.4 * (f64::from(r.rep) + 0.5) / reps;
        r.value.map(|v| Circle::new((x, v), 4, RED.filled()))
    });
    chart.draw_series(points)?;
    root.present()?;
    Ok(())
}
