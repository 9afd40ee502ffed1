//! The plot: p50 latency and throughput against concurrency for the three systems, in one
//! scenario family (one payload, one worker count), drawn as SVG with plotters.

use std::path::Path;

use plotters::prelude::*;

use crate::compare::{payload_label, Outcome};
use crate::kind::Kind;
use crate::mode::Mode;

/// `(concurrency, p50 us, rps)`.
type Point = (f64, f64, f64);

fn colour(kind: Kind) -> RGBColor {
    match kind {
        Kind::Lintel => RGBColor(0xd6, 0x27, 0x28),
        Kind::Nats => RGBColor(0x1f, 0x77, 0xb4),
        Kind::Floor => RGBColor(0x55, 0x55, 0x55),
        Kind::LintelTls => RGBColor(0xff, 0x7f, 0x0e),
    }
}

/// One system's points `(concurrency, p50 us, rps)` in the family, by concurrency.
fn series(outcomes: &[Outcome], kind: Kind, workers: usize, payload: usize) -> Vec<Point> {
    let mut points: Vec<Point> = outcomes
        .iter()
        .filter(|o| o.scenario.workers == workers && o.scenario.payload_bytes == payload)
        .filter_map(|o| {
            let sample = o.sample(kind)?;
            Some((o.scenario.concurrency as f64, sample.p50_us, sample.rps))
        })
        .collect();
    points.sort_by(|a, b| a.0.total_cmp(&b.0));
    points
}

/// Draws the family `workers` × `payload` from `outcomes`, measured in `mode`, into an SVG at
/// `path`; `subtitle` names the machine and the run.
///
/// # Errors
/// Why drawing failed, as text: also when `outcomes` has no scenario of the family.
pub fn draw(
    path: &Path,
    outcomes: &[Outcome],
    workers: usize,
    payload: usize,
    mode: Mode,
    subtitle: &str,
) -> Result<(), String> {
    let all: Vec<(Kind, Vec<Point>)> = Kind::EVERY
        .iter()
        .map(|&kind| (kind, series(outcomes, kind, workers, payload)))
        .filter(|(_, points)| !points.is_empty())
        .collect();
    if all.is_empty() {
        return Err(format!(
            "no scenario with {workers} workers and {payload} B to plot"
        ));
    }
    let max_c = all
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.0))
        .fold(1.0, f64::max);
    let (min_lat, max_lat) = all
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.1))
        .fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let max_rps = all
        .iter()
        .flat_map(|(_, p)| p.iter().map(|p| p.2))
        .fold(1.0, f64::max);

    let root = SVGBackend::new(path, (1200, 580)).into_drawing_area();
    let fail = |err: &dyn std::fmt::Display| format!("plot {}: {err}", path.display());
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let title = format!(
        "lintel vs NATS vs TCP relay floor: {workers} workers, {} payload, mode {}{}",
        payload_label(payload),
        mode.key(),
        if mode.publishable() {
            ""
        } else {
            " (DIAGNOSTIC, NOT FOR PUBLICATION)"
        }
    );
    let root = root
        .titled(&title, ("sans-serif", 24))
        .map_err(|e| fail(&e))?;
    let (body, foot) = root.split_vertically(480);
    foot.draw(&Text::new(
        subtitle.to_owned(),
        (10, 10),
        ("sans-serif", 14).into_font().color(&BLACK.mix(0.7)),
    ))
    .map_err(|e| fail(&e))?;
    let (left, right) = body.split_horizontally(600);
    let x_range = (0.8f64..max_c * 1.25).log_scale();

    let mut latency = ChartBuilder::on(&left)
        .caption("p50 latency (us, log scale)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(x_range.clone(), (min_lat * 0.7..max_lat * 1.5).log_scale())
        .map_err(|e| fail(&e))?;
    latency
        .configure_mesh()
        .x_desc("requests in flight")
        .y_desc("us")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{y:.0}"))
        .draw()
        .map_err(|e| fail(&e))?;

    let mut throughput = ChartBuilder::on(&right)
        .caption("throughput (requests/s)", ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range, 0.0..max_rps * 1.15)
        .map_err(|e| fail(&e))?;
    throughput
        .configure_mesh()
        .x_desc("requests in flight")
        .y_desc("req/s")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .y_label_formatter(&|y| format!("{:.0}k", y / 1000.0))
        .draw()
        .map_err(|e| fail(&e))?;

    for (kind, points) in &all {
        let style = colour(*kind).stroke_width(2);
        latency
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.1)), style))
            .map_err(|e| fail(&e))?
            .label(kind.key())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        latency
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.1), 4, colour(*kind).filled())),
            )
            .map_err(|e| fail(&e))?;
        throughput
            .draw_series(LineSeries::new(points.iter().map(|p| (p.0, p.2)), style))
            .map_err(|e| fail(&e))?
            .label(kind.key())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style));
        throughput
            .draw_series(
                points
                    .iter()
                    .map(|p| Circle::new((p.0, p.2), 4, colour(*kind).filled())),
            )
            .map_err(|e| fail(&e))?;
    }
    latency
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    throughput
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| fail(&e))?;
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}
