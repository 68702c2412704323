//! Progress bars (indicatif). They draw on stderr only when it is a terminal.

use std::fmt::Write;

use indicatif::{ProgressBar, ProgressState, ProgressStyle};

use crate::report::fmt_num;

/// The bar for one scenario run (hidden when `quiet`).
pub fn run_bar(quiet: bool) -> ProgressBar {
    if quiet {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(1);
    if let Ok(style) = ProgressStyle::with_template(
        "  {spinner} {prefix} {msg:>10} [{bar:30}] {human_pos}/{human_len} ({rate}, {elapsed})",
    ) {
        let style = style.with_key("rate", |s: &ProgressState, w: &mut dyn Write| {
            let _ = write!(w, "{}/s", fmt_num(s.per_sec()));
        });
        bar.set_style(style.progress_chars("=> "));
    }
    bar
}

/// The bar counting the runs of a comparison.
pub fn overall(runs: u64) -> ProgressBar {
    let bar = ProgressBar::new(runs);
    if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} runs, {elapsed} elapsed, ~{eta} left: {msg}")
    {
        bar.set_style(style.progress_chars("#- "));
    }
    bar
}
