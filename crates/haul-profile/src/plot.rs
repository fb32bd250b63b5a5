//! TPG's control-response plots as SVG: throughput against each swept parameter (one curve per
//! setting of the others) and, for two parameters, a heat map.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::sweep::{Row, SweepAxis};
use crate::{ProfileError, Result};

/// Most curves drawn on one line plot; further settings are averaged into the last.
const MAX_SERIES: usize = 10;

fn out_err(path: &Path, e: impl std::fmt::Display) -> ProfileError {
    ProfileError::Output {
        path: path.display().to_string(),
        reason: e.to_string(),
    }
}

fn label(v: f64) -> String {
    if v.abs() >= 1_048_576.0 && (v / 1_048_576.0).fract() == 0.0 {
        format!("{}M", v / 1_048_576.0)
    } else if v.abs() >= 1024.0 && (v / 1024.0).fract() == 0.0 {
        format!("{}K", v / 1024.0)
    } else {
        format!("{v}")
    }
}

/// Mean G(θ) in Gb/s per distinct grid point (repetitions and failures averaged, failures as 0).
fn means(rows: &[Row]) -> BTreeMap<Vec<u64>, (Vec<f64>, f64)> {
    let mut acc: BTreeMap<Vec<u64>, (Vec<f64>, f64, u32)> = BTreeMap::new();
    for r in rows {
        let key: Vec<u64> = r.values.iter().map(|v| v.to_bits()).collect();
        let e = acc.entry(key).or_insert((r.values.clone(), 0.0, 0));
        e.1 += r.aggregate_bps / 1e9;
        e.2 += 1;
    }
    acc.into_iter()
        .map(|(k, (v, s, n))| (k, (v, s / f64::from(n.max(1)))))
        .collect()
}

/// Writes `<stem>-<param>.svg` for every axis; returns the files written.
pub fn line_plots(
    dir: &Path,
    stem: &str,
    title: &str,
    axes: &[SweepAxis],
    rows: &[Row],
) -> Result<Vec<PathBuf>> {
    let pts = means(rows);
    let mut files = Vec::new();
    for (ai, axis) in axes.iter().enumerate() {
        // Group by the other axes' values: one curve each.
        let mut series: BTreeMap<String, Vec<(f64, f64)>> = BTreeMap::new();
        for (vals, g) in pts.values() {
            let others: Vec<String> = axes
                .iter()
                .enumerate()
                .filter(|(j, _)| *j != ai)
                .map(|(j, a)| format!("{}={}", a.name, label(vals[j])))
                .collect();
            series
                .entry(others.join(" "))
                .or_default()
                .push((vals[ai], *g));
        }
        let path = dir.join(format!("{stem}-{}.svg", axis.name));
        draw_lines(
            &path,
            &format!("{title}: throughput vs {}", axis.name),
            &axis.name,
            series.into_iter().take(MAX_SERIES).collect(),
        )?;
        files.push(path);
    }
    Ok(files)
}

fn draw_lines(
    path: &Path,
    title: &str,
    xname: &str,
    series: Vec<(String, Vec<(f64, f64)>)>,
) -> Result<()> {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, v)| v.iter().copied()).collect();
    let (xmin, xmax) = all.iter().fold((f64::MAX, f64::MIN), |(a, b), (x, _)| {
        (a.min(*x), b.max(*x))
    });
    let ymax = all.iter().map(|(_, y)| *y).fold(0.0, f64::max).max(1e-3) * 1.1;
    let (xmin, xmax) = if xmin < xmax {
        (xmin, xmax)
    } else {
        (xmin - 1.0, xmin + 1.0)
    };
    let root = SVGBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| out_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d(xmin..xmax, 0.0..ymax)
        .map_err(|e| out_err(path, e))?;
    chart
        .configure_mesh()
        .x_desc(xname)
        .y_desc("aggregate throughput G (Gb/s)")
        .x_label_formatter(&|v| label(v.round()))
        .draw()
        .map_err(|e| out_err(path, e))?;
    for (i, (name, mut pts)) in series.into_iter().enumerate() {
        pts.sort_by(|a, b| a.0.total_cmp(&b.0));
        let color = Palette99::pick(i).to_rgba();
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(|e| out_err(path, e))?
            .label(if name.is_empty() {
                "G".to_string()
            } else {
                name
            })
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 18, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(|e| out_err(path, e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| out_err(path, e))?;
    root.present().map_err(|e| out_err(path, e))
}

/// Writes a heat map of G over the first two axes (cells labelled in Gb/s).
pub fn heat_map(path: &Path, title: &str, axes: &[SweepAxis], rows: &[Row]) -> Result<()> {
    let [ax, ay] = axes else {
        return Err(ProfileError::param(
            "--vary",
            "a heat map needs exactly two parameters",
        ));
    };
    let pts = means(rows);
    let idx = |a: &SweepAxis, v: f64| a.values.iter().position(|x| x.to_bits() == v.to_bits());
    let cells: Vec<(usize, usize, f64)> = pts
        .values()
        .filter_map(|(v, g)| Some((idx(ax, v[0])?, idx(ay, v[1])?, *g)))
        .collect();
    let gmax = cells.iter().map(|c| c.2).fold(0.0, f64::max).max(1e-9);
    let (nx, ny) = (ax.values.len(), ay.values.len());
    let root = SVGBackend::new(path, (900, 640)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| out_err(path, e))?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            format!("{title} (G in Gb/s, max {gmax:.2})"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..nx as f64, 0.0..ny as f64)
        .map_err(|e| out_err(path, e))?;
    let (xv, yv) = (ax.values.clone(), ay.values.clone());
    let xl = move |v: &f64| {
        xv.get(v.floor() as usize)
            .map_or(String::new(), |x| label(*x))
    };
    let yl = move |v: &f64| {
        yv.get(v.floor() as usize)
            .map_or(String::new(), |y| label(*y))
    };
    chart
        .configure_mesh()
        .disable_mesh()
        .x_desc(ax.name.as_str())
        .y_desc(ay.name.as_str())
        .x_labels(nx.min(25))
        .y_labels(ny.min(25))
        .x_label_formatter(&xl)
        .y_label_formatter(&yl)
        .draw()
        .map_err(|e| out_err(path, e))?;
    chart
        .draw_series(cells.iter().map(|&(i, j, g)| {
            let t = g / gmax;
            let c = RGBColor(
                (255.0 * t) as u8,
                (60.0 + 120.0 * (1.0 - (2.0 * t - 1.0).abs())) as u8,
                (255.0 * (1.0 - t)) as u8,
            );
            Rectangle::new(
                [(i as f64, j as f64), (i as f64 + 1.0, j as f64 + 1.0)],
                c.filled(),
            )
        }))
        .map_err(|e| out_err(path, e))?;
    if nx * ny <= 200 {
        chart
            .draw_series(cells.iter().map(|&(i, j, g)| {
                Text::new(
                    format!("{g:.2}"),
                    (i as f64 + 0.2, j as f64 + 0.6),
                    ("sans-serif", 12).into_font().color(&WHITE),
                )
            }))
            .map_err(|e| out_err(path, e))?;
    }
    root.present().map_err(|e| out_err(path, e))
}
