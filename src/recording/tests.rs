use super::*;
use crate::sources::sim::{Sim, SimConfig};

fn night(seconds: u64, path: &std::path::Path) -> Vec<Arc<Cluster>> {
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let mut r = Recorder::create(path, "sim").expect("create");
    let mut seen = Vec::new();
    for _ in 0..seconds {
        let c = Arc::new(s.snapshot());
        r.snapshot(&c).expect("record");
        seen.push(c);
        s.advance(1);
    }
    r.finish().expect("finish");
    seen
}

#[test]
fn a_recorded_night_replays_snapshot_for_snapshot() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("night.nsrec");
    let live = night(610, &path);
    let rec = Recording::open(&path).expect("open");
    assert_eq!(rec.truncated, None);
    assert_eq!(rec.header.source, "sim");
    assert_eq!(rec.span(), (live[0].time, live[live.len() - 1].time));
    let keys = rec.marks.iter().filter(|m| m.key).count();
    assert_eq!(keys, 3, "a keyframe every {KEY_EVERY_S} s of 610");
    let replayed: Vec<Arc<Cluster>> = rec.states().collect::<Result<_, _>>().expect("states");
    assert_eq!(replayed.len(), live.len());
    for (a, b) in live.iter().zip(&replayed) {
        assert_eq!(**a, **b, "at {}", a.time);
    }
    // Seeking: any time, between snapshots too, is the last one before it.
    for i in [0usize, 1, 299, 300, 301, 450, 609] {
        assert_eq!(rec.state_at(live[i].time).expect("at"), *live[i]);
    }
    assert!(rec.state_at(live[0].time - 1).is_err());
    // Deltas are small: the file is far smaller than the snapshots.
    let raw: usize = live
        .iter()
        .step_by(10)
        .map(|c| serde_json::to_vec(&**c).map_or(0, |v| v.len()) * 10)
        .sum();
    let size = std::fs::metadata(&path).expect("size").len() as usize;
    assert!(size * 30 < raw, "{size} bytes for {raw} of snapshots");
}

#[test]
fn a_recording_cut_mid_write_reads_up_to_its_last_flush() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cut.nsrec");
    let mut s = Sim::new(SimConfig::default()).expect("sim");
    let mut r = Recorder::create(&path, "sim").expect("create");
    for _ in 0..20 {
        r.snapshot(&Arc::new(s.snapshot())).expect("record");
        s.advance(1);
    }
    r.flush().expect("flush");
    let flushed = std::fs::metadata(&path).expect("size").len();
    for _ in 0..20 {
        r.snapshot(&Arc::new(s.snapshot())).expect("record");
        s.advance(1);
    }
    // The process dies here: no finish, and the tail never reached the file
    // whole. Cut it inside the next block.
    r.flush().expect("flush");
    drop(r);
    let bytes = std::fs::read(&path).expect("read");
    assert!(bytes.len() as u64 > flushed);
    std::fs::write(&path, &bytes[..flushed as usize + 7]).expect("cut");
    let rec = Recording::open(&path).expect("still opens");
    assert!(rec.truncated.is_some(), "says it was cut");
    assert_eq!(
        rec.states().count(),
        20,
        "every snapshot of the flushed part"
    );
}

#[test]
fn an_existing_file_is_never_overwritten_and_garbage_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("x");
    std::fs::write(&path, b"precious").expect("write");
    assert!(Recorder::create(&path, "sim").is_err());
    assert_eq!(std::fs::read(&path).expect("read"), b"precious");
    let err = Recording::open(&path).expect_err("not zstd");
    assert!(err.contains("not a"), "{err}");
}

#[test]
fn times_on_the_command_line() {
    let start = 1_796_006_850; // 2026-11-30 02:47:30
    assert_eq!(parse_at("+10m", start), Ok(start + 600));
    assert_eq!(parse_at("03:00", start), Ok(start + 750));
    assert_eq!(parse_at("02:47:31", start), Ok(start + 1));
    assert_eq!(parse_at("1796006900", start), Ok(1_796_006_900));
    assert!(parse_at("25:00", start).is_err());
    assert!(parse_at("soon", start).is_err());
}
