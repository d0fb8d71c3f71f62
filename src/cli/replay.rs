//! `quorum replay`: a recorded transcript played in the TUI, or rendered to
//! a screenshot with no terminal (`tui::modes`).

use std::path::PathBuf;

use anyhow::Result;

use super::{PanelArg, max_line, with_runtime};
use crate::engine::config;
use crate::tui::modes::{self, ReplayOptions, ScreenshotOptions};

#[derive(clap::Args)]
pub struct ReplayArgs {
    /// The transcript to play.
    pub file: PathBuf,
    /// Playback speed: 2 plays twice as fast as recorded.
    #[arg(long, default_value_t = 1.0, value_parser = parse_speed)]
    pub speed: f64,
    /// Show the end state at once.
    #[arg(long)]
    pub instant: bool,
    /// Start paused (space plays, n steps).
    #[arg(long)]
    pub paused: bool,
    /// Side panel of background tasks.
    #[arg(long, value_enum, default_value_t)]
    pub panel: PanelArg,
    /// Render with no terminal and write OUT: .txt (plain text), .ans
    /// (ANSI colours) or .svg (image).
    #[arg(long, value_name = "OUT")]
    pub screenshot: Option<PathBuf>,
    /// Screenshot size, COLSxROWS.
    #[arg(long, default_value = "120x40", value_parser = parse_size, requires = "screenshot")]
    pub size: (u16, u16),
    /// Screenshot after event N (1 is the first event; default: the end).
    #[arg(long, value_name = "N", requires = "screenshot")]
    pub at: Option<usize>,
}

impl ReplayArgs {
    /// What to render, when a screenshot is asked for.
    /// `max_line`: the longest transcript line read
    /// (`max_transcript_line_bytes`).
    pub fn screenshot_options(&self, max_line: u64) -> Option<ScreenshotOptions> {
        Some(ScreenshotOptions {
            out: self.screenshot.clone()?,
            size: self.size,
            at: self.at,
            panel: self.panel.open(),
            max_line,
        })
    }

    pub fn replay_options(&self, max_line: u64) -> ReplayOptions {
        ReplayOptions {
            speed: self.speed,
            instant: self.instant,
            paused: self.paused,
            panel: self.panel.open(),
            max_line,
        }
    }
}

/// `quorum replay`: played in real time, or one screenshot.
pub fn command(args: ReplayArgs, config: Option<PathBuf>) -> Result<i32> {
    let max_line = max_line(&config)?;
    match args.screenshot_options(max_line) {
        Some(shot) => modes::screenshot(&args.file, shot)?,
        None => with_runtime(async {
            config::init_logging();
            let options = args.replay_options(max_line);
            Ok(modes::replay(&args.file, options).await?)
        })?,
    }
    Ok(0)
}

/// `--speed`: above 0.
pub fn parse_speed(s: &str) -> Result<f64, String> {
    let speed: f64 = s.parse().map_err(|_| format!("{s:?} is not a number"))?;
    if speed.is_finite() && speed > 0.0 {
        Ok(speed)
    } else {
        Err(format!("speed must be above 0, got {s}"))
    }
}

/// `--size COLSxROWS`.
pub fn parse_size(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("{s:?} is not a size like 120x40");
    let (c, r) = s.split_once(['x', 'X']).ok_or_else(bad)?;
    let (cols, rows): (u16, u16) = (
        c.trim().parse().map_err(|_| bad())?,
        r.trim().parse().map_err(|_| bad())?,
    );
    if !(20..=1000).contains(&cols) || !(5..=1000).contains(&rows) {
        return Err(format!(
            "{s}: size must be 20..1000 columns by 5..1000 rows"
        ));
    }
    Ok((cols, rows))
}
