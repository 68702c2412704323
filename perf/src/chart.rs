//! The comparison chart (SVG, drawn with plotters): per scenario, how many times better A is
//! than B on the headline metric (throughput, or p50 latency for `reqrep`, connection rate for
//! `conns`) and on server CPU per message. Bars above the 1.0 line mean A is better.

use std::path::Path;

use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;

use crate::compare::{CompareReport, ScenarioSummary};

const HEADLINE: RGBColor = RGBColor(0x35, 0x6a, 0xb3);
const CPU: RGBColor = RGBColor(0xe0, 0x8a, 0x2c);

/// Advantage factors for one scenario: (headline metric name, headline, CPU).
fn advantages(s: &ScenarioSummary) -> (String, Option<f64>, Option<f64>) {
    let head = s.metrics.first();
    let cpu = s.metrics.iter().find(|m| m.name == "CPU s/M msgs");
    (
        head.map(|m| m.name.clone()).unwrap_or_default(),
        head.and_then(|m| m.advantage()),
        cpu.and_then(|m| m.advantage()),
    )
}

/// Writes the chart to `path`.
pub fn draw(report: &CompareReport, path: &Path) -> Result<(), Box<dyn std::error::Error>> {
    let rows: Vec<(String, Option<f64>, Option<f64>)> = report
        .scenarios
        .iter()
        .map(|s| {
            let (metric, head, cpu) = advantages(s);
            (format!("{} ({metric})", s.display_name()), head, cpu)
        })
        .collect();
    let n = rows.len().max(1);
    let top = rows
        .iter()
        .flat_map(|(_, h, c)| [*h, *c])
        .flatten()
        .filter(|v| v.is_finite())
        .fold(2.0f64, f64::max)
        .min(20.0)
        * 1.3;
    let width = (220 + 150 * n as u32).max(800);
    let root = SVGBackend::new(path, (width, 520)).into_drawing_area();
    root.fill(&WHITE)?;
    let caption = format!(
        "{} vs {}: how many times better A is (median of {} rounds; >1 = {} better)",
        report.a.name, report.b.name, report.rounds, report.a.name
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 18))
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0..n - 1).into_segmented(), 0f64..top)?;
    let names: Vec<String> = rows.iter().map(|r| r.0.clone()).collect();
    let label = |v: &SegmentValue<usize>| match v {
        SegmentValue::CenterOf(i) | SegmentValue::Exact(i) => names.get(*i).cloned().unwrap_or_default(),
        SegmentValue::Last => String::new(),
    };
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n)
        .x_label_formatter(&label)
        .y_desc("A advantage (×)")
        .label_style(("sans-serif", 13))
        .draw()?;

    let seg = (chart.plotting_area().dim_in_pixel().0 / n as u32).max(4);
    let bar = |i: usize, v: f64, left: bool, color: RGBColor| {
        let mut r = Rectangle::new(
            [(SegmentValue::Exact(i), 0.0), (SegmentValue::Exact(i + 1), v.min(top))],
            color.filled(),
        );
        let (l, rt) = if left { (seg / 8, seg / 2) } else { (seg / 2, seg / 8) };
        r.set_margin(0, 0, l, rt);
        r
    };
    let head_bars: Vec<_> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, (_, h, _))| h.map(|v| bar(i, v, true, HEADLINE)))
        .collect();
    chart
        .draw_series(head_bars)?
        .label("headline metric")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], HEADLINE.filled()));
    let cpu_bars: Vec<_> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, (_, _, c))| c.map(|v| bar(i, v, false, CPU)))
        .collect();
    chart
        .draw_series(cpu_bars)?
        .label("server CPU per message")
        .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], CPU.filled()));

    // Value labels above the bars.
    let text = ("sans-serif", 12).into_font().color(&BLACK);
    let q = (seg / 4) as i32;
    for (i, (_, h, c)) in rows.iter().enumerate() {
        for (v, dx) in [(h, -q), (c, q)] {
            if let Some(v) = v {
                let at = (SegmentValue::CenterOf(i), v.min(top));
                chart.draw_series(std::iter::once(
                    EmptyElement::at(at) + Text::new(format!("{v:.2}"), (dx - 12, -16), text.clone()),
                ))?;
            }
        }
    }
    // Parity line.
    chart.draw_series(std::iter::once(PathElement::new(
        vec![(SegmentValue::Exact(0), 1.0), (SegmentValue::Last, 1.0)],
        BLACK.stroke_width(2),
    )))?;
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperMiddle)
        .background_style(WHITE.mix(0.9))
        .border_style(BLACK)
        .draw()?;
    root.present()?;
    Ok(())
}
