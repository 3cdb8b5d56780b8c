//! Why a recording could not be read, written or played: one line for the
//! user, naming the file.

use std::path::PathBuf;
use std::sync::Arc;

#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordingError {
    #[error(
        "{}: a recording must be a regular file (it is read more than once; not a pipe, FIFO or terminal)",
        .0.display()
    )]
    NotAFile(PathBuf),
    #[error("cannot open the recording {}: {source}", path.display())]
    Open {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("{}: not a recording: {source}", path.display())]
    NotZstd {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("zstd: {0}")]
    Zstd(Arc<std::io::Error>),
    #[error("{}: not a nightshift recording: {why}", path.display())]
    NotOurs { path: PathBuf, why: String },
    #[error("{}: no recording header", .0.display())]
    NoHeader(PathBuf),
    #[error("{}: empty recording", .0.display())]
    Empty(PathBuf),
    #[error(
        "{}: {format} version {version}, this nightshift reads {} up to version {}",
        path.display(),
        super::FORMAT,
        super::VERSION
    )]
    Version {
        path: PathBuf,
        format: String,
        version: u32,
    },
    #[error("{}: the recording holds no snapshot{}", path.display(), first_skipped.as_ref().map_or(String::new(), |w| format!(" that can be read ({w})")))]
    NoSnapshot {
        path: PathBuf,
        first_skipped: Option<String>,
    },
    #[error(
        "{} is before the recording starts ({})",
        crate::text::datetime(*at),
        crate::text::datetime(*start)
    )]
    BeforeStart { at: i64, start: i64 },
    /// The file ended early or changed since it was indexed.
    #[error("{0}")]
    Cut(String),
    #[error("the index and the file disagree")]
    IndexDisagrees,
    #[error("no keyframe before that time")]
    NoKeyframe,
    #[error("line {line}: {error}")]
    Line {
        line: u64,
        error: Box<RecordingError>,
    },
    #[error("an unreadable snapshot line: {0}")]
    BadLine(Arc<serde_json::Error>),
    #[error("a delta names node #{index} of {count}")]
    DeltaNode { index: usize, count: usize },
    #[error("a delta brings readings of {readings} GPUs to node #{index}, which has {gpus}")]
    DeltaReadings {
        index: usize,
        gpus: usize,
        readings: usize,
    },
    #[error("a delta orders job {0}, never recorded")]
    DeltaOrder(String),
    #[error("--at {0:?}: give HH:MM[:SS] (UTC), +DURATION from the start, or Unix seconds")]
    At(String),
    #[error(transparent)]
    Duration(#[from] crate::engine::units::UnitError),
    #[error("cannot create the recording {}: {source}", path.display())]
    Create {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("cannot write the recording {}: {source}", path.display())]
    WriteTo {
        path: PathBuf,
        source: Arc<std::io::Error>,
    },
    #[error("recording: {0}")]
    Encode(Arc<serde_json::Error>),
    #[error("cannot write the recording: {0}")]
    Write(Arc<std::io::Error>),
    #[error("cannot finish the recording: {0}")]
    Finish(Arc<std::io::Error>),
    #[error("cannot start the recording's writer: {0}")]
    Thread(Arc<std::io::Error>),
    #[error("the recording holds no snapshot")]
    Nothing,
}

/// Two errors are the same when they say the same.
impl PartialEq for RecordingError {
    fn eq(&self, other: &RecordingError) -> bool {
        self.to_string() == other.to_string()
    }
}

impl From<RecordingError> for String {
    fn from(e: RecordingError) -> String {
        e.to_string()
    }
}
