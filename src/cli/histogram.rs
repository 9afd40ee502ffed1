//! `--histogram`: the latency distribution in log-scaled buckets, as an SVG file or as text
//! bars on a terminal.
//!
//! Bucket edges run 1, 2, 5, 10, 20, 50... nanoseconds, so every bucket spans a readable range
//! and the buckets cover the recorded span from its lowest to its highest latency.

use std::fmt::Write as _;
use std::io::{self, Write as _};
use std::path::Path;

use hdrhistogram::Histogram;

/// Width of the longest text bar, in characters.
const TEXT_WIDTH: u64 = 40;

/// The SVG's size and the plot area's margins, in pixels.
const SVG_WIDTH: u64 = 760;
const SVG_HEIGHT: u64 = 380;
const LEFT: u64 = 80;
const RIGHT: u64 = 20;
const TOP: u64 = 40;
const BOTTOM: u64 = 80;

/// Latencies in `[low_ns, high_ns)`, and how many dispatches took one of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Bucket {
    low_ns: u64,
    high_ns: u64,
    count: u64,
}

/// Writes `latencies` (in nanoseconds) to `target`: text bars for `-`, on stderr when
/// `text_to_stderr`, else on stdout; an SVG file for any other path.
///
/// # Errors
/// When the file or the stream cannot be written.
pub(super) fn write(
    target: &Path,
    latencies: &Histogram<u64>,
    text_to_stderr: bool,
) -> io::Result<()> {
    let buckets = buckets(latencies);
    if target == Path::new("-") {
        let text = text(&buckets);
        if text_to_stderr {
            io::stderr().lock().write_all(text.as_bytes())
        } else {
            io::stdout().lock().write_all(text.as_bytes())
        }
    } else {
        std::fs::write(target, svg(&buckets, latencies))
    }
}

/// The 1-2-5 edge at or below `value`, and every edge after it up to the first above `top`.
fn edges(value: u64, top: u64) -> Vec<u64> {
    let mut all = Vec::new();
    let mut decade = 1u64;
    'decades: loop {
        for step in [1, 2, 5] {
            let Some(edge) = decade.checked_mul(step) else {
                break 'decades;
            };
            all.push(edge);
            if edge > top {
                break 'decades;
            }
        }
        match decade.checked_mul(10) {
            Some(next) => decade = next,
            None => break,
        }
    }
    let first = all.partition_point(|edge| *edge <= value).saturating_sub(1);
    all.split_off(first)
}

/// The recorded latencies counted into 1-2-5 buckets; empty when nothing was recorded.
fn buckets(latencies: &Histogram<u64>) -> Vec<Bucket> {
    let recorded: Vec<(u64, u64)> = latencies
        .iter_recorded()
        .map(|step| (step.value_iterated_to(), step.count_since_last_iteration()))
        .collect();
    let (Some(low), Some(high)) = (recorded.first(), recorded.last()) else {
        return Vec::new();
    };
    let edges = edges(low.0, high.0);
    let mut buckets: Vec<Bucket> = edges
        .windows(2)
        .map(|pair| Bucket {
            low_ns: pair[0],
            high_ns: pair[1],
            count: 0,
        })
        .collect();
    let last = buckets.len().saturating_sub(1);
    for (value, count) in recorded {
        let index = buckets.partition_point(|bucket| bucket.high_ns <= value);
        if let Some(bucket) = buckets.get_mut(index.min(last)) {
            bucket.count += count;
        }
    }
    buckets
}

/// A 1-2-5 edge in nanoseconds as a short label: `500 ns`, `20 us`, `5 ms`, `2 s`.
fn label(ns: u64) -> String {
    match ns {
        0..1_000 => format!("{ns} ns"),
        1_000..1_000_000 => format!("{} us", ns / 1_000),
        1_000_000..1_000_000_000 => format!("{} ms", ns / 1_000_000),
        _ => format!("{} s", ns / 1_000_000_000),
    }
}

/// One line per bucket: its range, a bar scaled to the fullest bucket, its count and share.
fn text(buckets: &[Bucket]) -> String {
    let mut out = String::from("latency (log-scaled buckets)\n");
    let total: u64 = buckets.iter().map(|bucket| bucket.count).sum();
    let fullest = buckets.iter().map(|bucket| bucket.count).max().unwrap_or(0);
    if total == 0 {
        out.push_str("  no dispatches recorded\n");
        return out;
    }
    for bucket in buckets {
        let width = bucket.count.saturating_mul(TEXT_WIDTH).div_ceil(fullest);
        let _ = writeln!(
            out,
            "  {:>6} - {:<6} |{:<bar$}| {:>9} {:>5.1}%",
            label(bucket.low_ns),
            label(bucket.high_ns),
            "#".repeat(usize::try_from(width).unwrap_or(0)),
            bucket.count,
            bucket.count as f64 * 100.0 / total as f64,
            bar = usize::try_from(TEXT_WIDTH).unwrap_or(0),
        );
    }
    out
}

/// An SVG bar chart of `buckets`: one `<rect>` per bucket, edge labels under the x axis,
/// counts up the y axis, percentiles of `latencies` in the title.
fn svg(buckets: &[Bucket], latencies: &Histogram<u64>) -> String {
    let plot_width = SVG_WIDTH - LEFT - RIGHT;
    let plot_height = SVG_HEIGHT - TOP - BOTTOM;
    let bottom = SVG_HEIGHT - BOTTOM;
    let fullest = buckets.iter().map(|bucket| bucket.count).max().unwrap_or(0);
    let us = |q: f64| latencies.value_at_quantile(q) as f64 / 1_000.0;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{SVG_WIDTH}" height="{SVG_HEIGHT}" viewBox="0 0 {SVG_WIDTH} {SVG_HEIGHT}" font-family="sans-serif" font-size="12">"#
    );
    let _ = writeln!(
        out,
        r#"<rect x="0" y="0" width="{SVG_WIDTH}" height="{SVG_HEIGHT}" fill="white"/>"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="24" text-anchor="middle" font-size="14">{} dispatches: p50 {:.1} us, p99 {:.1} us, p99.9 {:.1} us</text>"#,
        SVG_WIDTH / 2,
        latencies.len(),
        us(0.50),
        us(0.99),
        us(0.999)
    );
    let _ = writeln!(
        out,
        r#"<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{bottom}" stroke="black"/><line x1="{LEFT}" y1="{bottom}" x2="{}" y2="{bottom}" stroke="black"/>"#,
        SVG_WIDTH - RIGHT
    );
    for tick in [0, fullest / 2, fullest] {
        let y = bottom - scale(tick, fullest, plot_height);
        let _ = writeln!(
            out,
            r#"<text x="{}" y="{}" text-anchor="end">{tick}</text>"#,
            LEFT - 6,
            y + 4
        );
    }
    let _ = writeln!(
        out,
        r#"<text transform="translate(18 {}) rotate(-90)" text-anchor="middle">dispatches</text>"#,
        TOP + plot_height / 2
    );
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">latency (log-scaled buckets)</text>"#,
        LEFT + plot_width / 2,
        SVG_HEIGHT - 8
    );
    let slot = plot_width / u64::try_from(buckets.len()).unwrap_or(1).max(1);
    for (index, bucket) in buckets.iter().enumerate() {
        let x = LEFT + slot * u64::try_from(index).unwrap_or(0);
        let height = scale(bucket.count, fullest, plot_height);
        let _ = writeln!(
            out,
            r#"<rect x="{}" y="{}" width="{}" height="{height}" fill="steelblue"><title>{} - {}: {}</title></rect>"#,
            x + 1,
            bottom - height,
            slot.saturating_sub(2).max(1),
            label(bucket.low_ns),
            label(bucket.high_ns),
            bucket.count
        );
        let _ = writeln!(
            out,
            r#"<text transform="translate({x} {}) rotate(-45)" text-anchor="end" font-size="11">{}</text>"#,
            bottom + 14,
            label(bucket.low_ns)
        );
    }
    if let Some(last) = buckets.last() {
        let _ = writeln!(
            out,
            r#"<text transform="translate({} {}) rotate(-45)" text-anchor="end" font-size="11">{}</text>"#,
            LEFT + slot * u64::try_from(buckets.len()).unwrap_or(0),
            bottom + 14,
            label(last.high_ns)
        );
    }
    out.push_str("</svg>\n");
    out
}

/// `count` of `fullest` as pixels of `height`, rounded to the nearest.
fn scale(count: u64, fullest: u64, height: u64) -> u64 {
    count
        .saturating_mul(height)
        .saturating_add(fullest / 2)
        .checked_div(fullest)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recorded(values: &[u64]) -> Histogram<u64> {
        let mut histogram =
            Histogram::<u64>::new_with_bounds(1, 3_600_000_000_000, 3).expect("valid bounds");
        for value in values {
            histogram.record(*value).expect("in bounds");
        }
        histogram
    }

    #[test]
    fn buckets_cover_the_span_on_1_2_5_edges() {
        let found = buckets(&recorded(&[1_500, 1_700, 30_000, 30_000, 4_000_000]));
        assert_eq!(found.first().map(|b| b.low_ns), Some(1_000));
        assert_eq!(found.last().map(|b| b.high_ns), Some(5_000_000));
        assert_eq!(found.iter().map(|b| b.count).sum::<u64>(), 5);
        let at = |low| found.iter().find(|b| b.low_ns == low).map(|b| b.count);
        assert_eq!(at(1_000), Some(2));
        assert_eq!(at(20_000), Some(2));
        assert_eq!(at(2_000_000), Some(1));
        for pair in found.windows(2) {
            assert_eq!(pair[0].high_ns, pair[1].low_ns);
        }
    }

    #[test]
    fn nothing_recorded_draws_no_buckets() {
        assert!(buckets(&recorded(&[])).is_empty());
        assert!(text(&[]).contains("no dispatches"));
    }

    #[test]
    fn text_bars_scale_to_the_fullest_bucket() {
        let drawn = text(&buckets(&recorded(&[1_000, 1_000, 1_000, 1_000, 50_000])));
        let bars: Vec<usize> = drawn
            .lines()
            .skip(1)
            .map(|line| line.matches('#').count())
            .collect();
        assert_eq!(bars.iter().max(), Some(&40));
        assert_eq!(bars.last(), Some(&10));
        assert!(drawn.contains("1 us - 2 us"), "{drawn}");
    }

    #[test]
    fn svg_has_a_rect_per_bucket() {
        let latencies = recorded(&[900, 12_000, 12_000, 700_000]);
        let drawn = svg(&buckets(&latencies), &latencies);
        assert!(drawn.starts_with("<svg"));
        assert!(drawn.trim_end().ends_with("</svg>"));
        // The background plus one bar per bucket.
        assert_eq!(
            drawn.matches("<rect").count(),
            1 + buckets(&latencies).len()
        );
    }

    #[test]
    fn labels_name_the_unit() {
        assert_eq!(label(500), "500 ns");
        assert_eq!(label(20_000), "20 us");
        assert_eq!(label(5_000_000), "5 ms");
        assert_eq!(label(2_000_000_000), "2 s");
    }
}
