//! Parse throughput on a 1,000-node dcgm-exporter scrape (8 GPUs a node, the
//! families nightshift reads, labels as dcgm-exporter writes them): our
//! parser against `prometheus-parse`, the well-known crate. Prints MB/s for
//! both. Run: cargo bench --bench scrape

use nightshift::sources::dcgm::{readings, textformat};
use std::hint::black_box;
use std::time::{Duration, Instant};

const FAMILIES: [&str; 16] = [
    "DCGM_FI_DEV_GPU_TEMP",
    "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",
    "DCGM_FI_DEV_FB_USED",
    "DCGM_FI_DEV_FB_FREE",
    "DCGM_FI_PROF_SM_OCCUPANCY",
    "DCGM_FI_PROF_SM_ACTIVE",
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
    "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
    "DCGM_FI_DEV_ROW_REMAP_PENDING",
    "DCGM_FI_DEV_ROW_REMAP_FAILURE",
    "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
];

fn scrape(nodes: usize) -> String {
    let mut s = String::new();
    for f in FAMILIES {
        s.push_str(&format!("# HELP {f} {f} help text.\n# TYPE {f} gauge\n"));
        for n in 0..nodes {
            for g in 0..8 {
                s.push_str(&format!(
                    "{f}{{gpu=\"{g}\",UUID=\"GPU-{n:08x}-{g:04x}-4d2e-9c1a-5f0e8d3b7a61\",pci_bus_id=\"00000000:{:02X}:00.0\",device=\"nvidia{g}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"gpu{n:05}\",DCGM_FI_DRIVER_VERSION=\"550.54.15\"}} {}\n",
                    0x18 + g * 0x10,
                    (n * 8 + g) % 97
                ));
            }
        }
    }
    s
}

fn measure(name: &str, bytes: usize, runs: usize, mut f: impl FnMut() -> usize) {
    let mut times: Vec<Duration> = (0..runs)
        .map(|_| {
            let t = Instant::now();
            black_box(f());
            t.elapsed()
        })
        .collect();
    times.sort();
    let med = times[times.len() / 2];
    println!(
        "{name:<48} median {:>8.1} ms   {:>7.1} MB/s",
        med.as_secs_f64() * 1e3,
        bytes as f64 / 1e6 / med.as_secs_f64()
    );
}

fn main() {
    let text = scrape(1000);
    println!(
        "scrape: 1,000 nodes × 8 GPUs × {} families = {:.1} MB",
        FAMILIES.len(),
        text.len() as f64 / 1e6
    );
    measure("nightshift textformat::parse", text.len(), 9, || {
        textformat::parse(&text).0.len()
    });
    measure(
        "nightshift parse + readings (GPU model)",
        text.len(),
        9,
        || {
            let (s, _) = textformat::parse(&text);
            readings(&s, "x", 0).len()
        },
    );
    let lines: Vec<String> = text.lines().map(str::to_string).collect();
    measure(
        "prometheus-parse 0.2.5 Scrape::parse",
        text.len(),
        9,
        || {
            prometheus_parse::Scrape::parse(lines.iter().cloned().map(Ok))
                .map_or(0, |s| s.samples.len())
        },
    );
    // Node-exporter InfiniBand ports merged onto a snapshot (issue 43: a
    // search of the node's ports per reading made 100k ports of one host
    // take minutes; by (device, port) it is linear).
    for n in [20_000usize, 100_000] {
        let mut text = String::new();
        for f in [
            "node_infiniband_state_id",
            "node_infiniband_link_downed_total",
        ] {
            for p in 0..n {
                text.push_str(&format!(
                    "{f}{{device=\"mlx5_{}\",port=\"{}\"}} 1\n",
                    p / 16,
                    p % 16 + 1
                ));
            }
        }
        let (samples, _) = textformat::parse(&text);
        let ports = nightshift::sources::dcgm::ports::ports_from(&samples, "gpu00001:9100", 0);
        let hosts = nightshift::sources::dcgm::merge::HostMap::default();
        measure(
            &format!("merge {n} IB ports of one host"),
            text.len(),
            3,
            || {
                let mut c = nightshift::model::Cluster::default();
                nightshift::sources::dcgm::ports::merge_ports(&mut c, &ports, &hosts);
                c.nodes.len()
            },
        );
    }
    // Correctness, not only speed: the crate truncates label values with ',' or '='.
    let tricky = "m{err_msg=\"Preemptive cleanup, due to previous errors -- a=b\"} 1\n";
    let ours = textformat::parse(tricky).0[0]
        .label("err_msg")
        .map(str::to_string);
    let theirs = prometheus_parse::Scrape::parse(tricky.lines().map(|l| Ok(l.to_string())))
        .ok()
        .and_then(|s| {
            s.samples
                .first()
                .and_then(|x| x.labels.get("err_msg").map(str::to_string))
        });
    println!("label with ',' and '=': nightshift {ours:?}, prometheus-parse {theirs:?}");
}
