//! The node's InfiniBand/RoCE ports from sysfs (`/sys/class/infiniband`),
//! served under the Prometheus node exporter's infiniband names (so the
//! console reads the agent and the exporter alike), with the agent's
//! `Hostname` label.

use nightshift_core::model::IbPort;
use std::fmt::Write;
use std::path::Path;

/// `4: ACTIVE` → 4.
fn leading_number(text: &str) -> Option<u32> {
    text.split(':').next()?.trim().parse().ok()
}

/// `400 Gb/sec (4X NDR)` → bytes per second.
fn rate(text: &str) -> Option<f64> {
    let gbit: f64 = text.split_whitespace().next()?.parse().ok()?;
    Some(gbit * 1e9 / 8.0)
}

/// The most of one sysfs attribute read: they are a line each.
const ATTR_MAX: u64 = 4096;

/// A sysfs attribute: a regular file only (opened without blocking, so a
/// FIFO planted under `--sysfs` is refused at once, not waited on), its
/// first `ATTR_MAX` bytes.
fn read(path: &Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let f = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    if !f.metadata().ok()?.is_file() {
        return None;
    }
    let mut buf = Vec::new();
    f.take(ATTR_MAX).read_to_end(&mut buf).ok()?;
    String::from_utf8(buf).ok()
}

/// Every port under `sysfs/class/infiniband`, by device then port. No
/// such directory (no HCA): none.
pub fn read_ports(sysfs: &Path) -> Vec<IbPort> {
    let root = sysfs.join("class/infiniband");
    let Ok(devices) = std::fs::read_dir(&root) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for dev in devices.flatten() {
        let name = dev.file_name().to_string_lossy().to_string();
        let Ok(ports) = std::fs::read_dir(dev.path().join("ports")) else {
            continue;
        };
        for p in ports.flatten() {
            let Ok(port) = p.file_name().to_string_lossy().parse::<u32>() else {
                continue;
            };
            let dir = p.path();
            let counter = |c: &str| {
                read(&dir.join("counters").join(c)).and_then(|t| t.trim().parse::<u64>().ok())
            };
            out.push(IbPort {
                device: name.clone(),
                port,
                state: read(&dir.join("state")).and_then(|t| leading_number(&t)),
                physical_state: read(&dir.join("phys_state")).and_then(|t| leading_number(&t)),
                rate_bytes_per_second: read(&dir.join("rate")).and_then(|t| rate(&t)),
                link_downed: counter("link_downed"),
                link_error_recovery: counter("link_error_recovery"),
                symbol_errors: counter("symbol_error"),
                receive_errors: counter("port_rcv_errors"),
            });
        }
    }
    out.sort_by(|a, b| a.device.cmp(&b.device).then(a.port.cmp(&b.port)));
    out
}

type Field = fn(&IbPort) -> Option<f64>;

/// The node exporter's families: name, type, value.
const FAMILIES: [(&str, &str, Field); 7] = [
    ("node_infiniband_state_id", "gauge", |p| {
        p.state.map(f64::from)
    }),
    ("node_infiniband_physical_state_id", "gauge", |p| {
        p.physical_state.map(f64::from)
    }),
    ("node_infiniband_rate_bytes_per_second", "gauge", |p| {
        p.rate_bytes_per_second
    }),
    ("node_infiniband_link_downed_total", "counter", |p| {
        p.link_downed.map(|v| v as f64)
    }),
    (
        "node_infiniband_link_error_recovery_total",
        "counter",
        |p| p.link_error_recovery.map(|v| v as f64),
    ),
    ("node_infiniband_symbol_error_total", "counter", |p| {
        p.symbol_errors.map(|v| v as f64)
    }),
    (
        "node_infiniband_port_errors_received_total",
        "counter",
        |p| p.receive_errors.map(|v| v as f64),
    ),
];

/// The ports as the node exporter writes them, labelled with `Hostname`.
pub fn to_metrics(host: &str, ports: &[IbPort]) -> String {
    let esc = |s: &str| {
        s.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    };
    let mut out = String::new();
    for (name, kind, get) in FAMILIES {
        let lines: Vec<String> = ports
            .iter()
            .filter_map(|p| {
                get(p).map(|v| {
                    format!(
                        "{name}{{device=\"{}\",port=\"{}\",Hostname=\"{}\"}} {v}",
                        esc(&p.device),
                        p.port,
                        esc(host)
                    )
                })
            })
            .collect();
        if lines.is_empty() {
            continue;
        }
        let _ = writeln!(out, "# TYPE {name} {kind}");
        for l in lines {
            let _ = writeln!(out, "{l}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    /// A FIFO planted under `--sysfs` is skipped at once (the agent's one
    /// thread never blocks on it), and a huge attribute is read only in
    /// part (issue 43).
    #[test]
    fn a_fifo_or_a_huge_file_in_sysfs_is_skipped_not_waited_on() {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = dir.path().join("class/infiniband/mlx5_0/ports/1");
        std::fs::create_dir_all(port.join("counters")).expect("dirs");
        let fifo = port.join("state");
        let c = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: a valid path; mkfifo has no other preconditions.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let big = std::fs::File::create(port.join("counters/link_downed")).expect("big");
        big.set_len(512 << 20).expect("sparse 512 MB");
        std::fs::write(port.join("phys_state"), "5: LinkUp\n").expect("phys");
        let start = std::time::Instant::now();
        let ports = super::read_ports(dir.path());
        assert!(start.elapsed() < std::time::Duration::from_secs(2));
        assert_eq!(ports.len(), 1);
        assert_eq!(
            (
                ports[0].state,
                ports[0].physical_state,
                ports[0].link_downed
            ),
            (None, Some(5), None)
        );
    }

    use super::*;

    /// A generated sysfs like the one the node exporter test reads: the
    /// agent says the same numbers under the same names.
    #[test]
    fn ports_read_from_sysfs_are_served_under_the_node_exporters_names() {
        let s = tempfile::tempdir().expect("tempdir");
        let p = s.path().join("class/infiniband/mlx5_3/ports/1");
        std::fs::create_dir_all(p.join("counters")).expect("mkdir");
        std::fs::write(p.join("state"), "1: DOWN\n").expect("w");
        std::fs::write(p.join("phys_state"), "3: Disabled\n").expect("w");
        std::fs::write(p.join("rate"), "400 Gb/sec (4X NDR)\n").expect("w");
        std::fs::write(p.join("counters/link_downed"), "7\n").expect("w");
        std::fs::write(p.join("counters/symbol_error"), "12\n").expect("w");
        let ports = read_ports(s.path());
        assert_eq!(ports.len(), 1);
        assert_eq!(
            (
                ports[0].state,
                ports[0].physical_state,
                ports[0].link_downed
            ),
            (Some(1), Some(3), Some(7))
        );
        assert_eq!(ports[0].link_error_recovery, None, "no file: unknown");
        let m = to_metrics("gpu07", &ports);
        assert!(
            m.contains(
                "node_infiniband_state_id{device=\"mlx5_3\",port=\"1\",Hostname=\"gpu07\"} 1\n"
            ),
            "{m}"
        );
        assert!(m.contains("node_infiniband_rate_bytes_per_second{device=\"mlx5_3\",port=\"1\",Hostname=\"gpu07\"} 50000000000\n"), "{m}");
        assert!(!m.contains("link_error_recovery"), "{m}");
        assert!(read_ports(&s.path().join("nothing")).is_empty());
    }
}
