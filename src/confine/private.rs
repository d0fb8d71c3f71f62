//! Files that hold what a person typed or what agents saw (transcripts,
//! logs, history, model picks): readable by their owner alone.

use std::fs::{DirBuilder, OpenOptions};
use std::path::Path;

/// Options that create a file with mode 0600; the caller adds how it opens.
pub fn file_options() -> OpenOptions {
    let mut options = OpenOptions::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    options
}

/// Creates `dir` and its parents, mode 0700.
pub fn dir(dir: &Path) -> std::io::Result<()> {
    let mut builder = DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(dir)
}
