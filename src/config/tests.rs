use super::*;

#[test]
fn the_checkpoint_signal_is_a_signal_name() {
    assert_eq!(checkpoint_signal(None), Ok("SIGUSR1".into()));
    assert_eq!(checkpoint_signal(Some("usr2")), Ok("SIGUSR2".into()));
    assert_eq!(checkpoint_signal(Some("SIGTERM")), Ok("SIGTERM".into()));
    assert!(checkpoint_signal(Some("SIG USR1")).is_err());
    assert!(
        checkpoint_signal(Some("USR1&x=1")).is_err(),
        "never into a URL"
    );
    assert!(checkpoint_signal(Some("")).is_err());
}

#[test]
fn flags_override_the_file_and_the_file_overrides_defaults() {
    let file: FileConfig =
        toml::from_str("read_only = true\n[sim]\nseed = 5\nnodes = 32\n").expect("toml");
    let args = GlobalArgs {
        seed: Some(9),
        ..GlobalArgs::default()
    };
    let s = Settings::resolve(&args, file).expect("settings");
    assert!(s.read_only);
    match s.source {
        SourceConfig::Sim { sim, speed } => {
            assert_eq!((sim.seed, sim.nodes, speed), (9, 32, 1.0));
        }
        other => panic!("expected the sim, got {other:?}"),
    }
}

#[test]
fn bad_config_is_a_clear_error() {
    let err = toml::from_str::<FileConfig>("colour = 1").expect_err("unknown key");
    assert!(err.to_string().contains("colour"), "{err}");
    let file: FileConfig = toml::from_str("source = \"slurm\"").expect("toml");
    let err = Settings::resolve(&GlobalArgs::default(), file).expect_err("slurm without a url");
    assert!(err.to_string().contains("--slurm-url"), "{err}");
    let file: FileConfig = toml::from_str("source = \"pbs\"").expect("toml");
    let err = Settings::resolve(&GlobalArgs::default(), file).expect_err("unknown source");
    assert!(err.to_string().contains("pbs"));
}

#[test]
fn engine_parameters_take_human_units() {
    let file: FileConfig = toml::from_str(
        "[engine]\nstorage_read_bw = \"20GB/s\"\nnode_read_bw = \"100Gbit/s\"\nstartup = \"5m\"\ngpu_hour_price = 2.5\n",
    )
    .expect("toml");
    let s = Settings::resolve(&GlobalArgs::default(), file).expect("settings");
    assert_eq!(s.site.storage_read_bw, 20e9);
    assert_eq!(s.site.node_read_bw, 12.5e9);
    assert_eq!(s.site.startup_s, 300);
    assert_eq!(s.site.gpu_hour_price, Some(2.5));
    let file: FileConfig = toml::from_str("[engine]\nstorage_read_bw = \"fast\"\n").expect("toml");
    let err = Settings::resolve(&GlobalArgs::default(), file).expect_err("bad bandwidth");
    assert!(err.to_string().contains("engine.storage_read_bw"), "{err}");
    // The repeat-offender rule, and a bad one named.
    let file: FileConfig =
        toml::from_str("[engine]\nrepeat_offender = \"2 in 7d\"\n").expect("toml");
    let s = Settings::resolve(&GlobalArgs::default(), file).expect("settings");
    assert_eq!(
        (
            s.site.repeat_offender.count,
            s.site.repeat_offender.window_s
        ),
        (2, 7 * 86_400)
    );
    assert_eq!(s.endpoints.fault_window_s, 7 * 86_400);
    let file: FileConfig = toml::from_str("[engine]\nrepeat_offender = \"often\"\n").expect("toml");
    let err = Settings::resolve(&GlobalArgs::default(), file).expect_err("bad rule");
    assert!(err.to_string().contains("engine.repeat_offender"), "{err}");
}

#[test]
fn the_example_config_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/nightshift.example.toml");
    let file = FileConfig::load(&path).expect("example config");
    Settings::resolve(&GlobalArgs::default(), file).expect("example settings");
}

mod fuzz {
    use super::*;
    use proptest::prelude::*;

    /// Keys of every table, with values of every shape (and hostile
    /// numbers): the loader answers Ok or a one-line error naming the
    /// key, and never panics.
    fn arb_config() -> impl Strategy<Value = String> {
        let key = prop_oneof![
            Just("[ui]\nstale_after_s"),
            Just("[actions]\nmax_data_age_s"),
            Just("[actions]\nwindow_s"),
            Just("[actions]\ntimeout_s"),
            Just("[actions]\nmax_partition_share_out"),
            Just("[engine]\nstartup"),
            Just("[engine]\ndefault_time_limit"),
            Just("[engine]\nlimit_overrun"),
            Just("[engine]\nstorage_read_bw"),
            Just("[engine]\nstall_window"),
            Just("[engine]\nstall_util_min"),
            Just("[engine]\ngpu_hour_price"),
            Just("[slurm]\ninterval_s"),
            Just("[slurm]\ntimeout_s"),
            Just("[endpoints]\ninterval_s"),
            Just("[limits]\nmax_body_bytes"),
            Just("[limits]\ndiscovery_timeout_s"),
            Just("[sim]\nnodes"),
            Just("[sim]\nspeed"),
            Just("source"),
        ];
        let value = prop_oneof![
            any::<f64>().prop_map(|f| format!("{f:e}")),
            any::<i64>().prop_map(|i| i.to_string()),
            Just("1e308".to_string()),
            Just("-1".to_string()),
            Just("nan".to_string()),
            Just("inf".to_string()),
            "[0-9.e]{1,8}[a-zA-Z/]{0,6}".prop_map(|s| format!("\"{s}\"")),
            "\\PC{0,12}".prop_map(|s| format!("{s:?}")),
            Just("\"none\"".to_string()),
            Just("[1, 2]".to_string()),
        ];
        (key, value).prop_map(|(k, v)| format!("{k} = {v}\n"))
    }

    proptest! {
        #[test]
        fn fuzz_config_loader_structured(text in arb_config()) {
            if let Ok(file) = toml::from_str::<FileConfig>(&text)
                && let Err(e) = Settings::resolve(&GlobalArgs::default(), file)
            {
                prop_assert_eq!(e.to_string().lines().count(), 1, "{}", e);
            }
        }

        #[test]
        fn fuzz_config_loader_arbitrary(text in "\\PC{0,200}") {
            if let Ok(file) = toml::from_str::<FileConfig>(&text) {
                let _ = Settings::resolve(&GlobalArgs::default(), file);
            }
        }
    }
}

const CLUSTERS: &str = r#"
[engine]
gpu_hour_price = 3.0

[[clusters]]
name = "east"
source = "sim"
[clusters.sim]
seed = 3

[[clusters]]
name = "lab-slurm"
source = "slurm"
read_only = true
[clusters.slurm]
url = "http://127.0.0.1:6820"
user = "ops"
[clusters.endpoints]
prometheus = "http://prom:9090"

[[clusters]]
name = "gpu-kube"
source = "kube"
[clusters.kube]
context = "prod-gpu"
"#;

/// `[[clusters]]`: `--all` takes each with its own sections (and the top
/// level's engine), `--context NAME` one of them, a name that is none of
/// them is a kubeconfig context on a Kubernetes top level and an error
/// otherwise; source flags never reach a cluster.
#[test]
fn clusters_are_chosen_by_all_and_context() {
    let file = || toml::from_str::<FileConfig>(CLUSTERS).expect("toml");
    let all = GlobalArgs {
        all: true,
        slurm_url: Some("http://elsewhere:6820".into()),
        ..GlobalArgs::default()
    };
    let Selection::All(s) = Settings::select(&all, file()).expect("select") else {
        panic!("--all is every cluster");
    };
    let names: Vec<_> = s
        .iter()
        .map(|s| s.cluster.clone().unwrap_or_default())
        .collect();
    assert_eq!(names, ["east", "lab-slurm", "gpu-kube"]);
    assert!(matches!(&s[0].source, SourceConfig::Sim { sim, .. } if sim.seed == 3));
    match &s[1].source {
        SourceConfig::Slurm(c) => {
            assert_eq!(c.url, "http://127.0.0.1:6820", "the flag is no cluster's")
        }
        other => panic!("{other:?}"),
    }
    assert!(s[1].read_only && !s[0].read_only);
    assert_eq!(
        s[1].endpoints.prometheus.as_deref(),
        Some("http://prom:9090")
    );
    assert_eq!(
        s[0].site.gpu_hour_price,
        Some(3.0),
        "the top level's engine"
    );
    match &s[2].source {
        SourceConfig::Kube(k) => assert_eq!(k.context.as_deref(), Some("prod-gpu")),
        other => panic!("{other:?}"),
    }
    let ctx = |c: &str| GlobalArgs {
        context: Some(c.into()),
        ..GlobalArgs::default()
    };
    let Selection::One(s) = Settings::select(&ctx("lab-slurm"), file()).expect("select") else {
        panic!("one");
    };
    assert_eq!(s.cluster.as_deref(), Some("lab-slurm"));
    assert!(matches!(s.source, SourceConfig::Slurm(_)));
    // Not a cluster's name, and the top level (the sim) has no contexts: a
    // typo is an error naming the clusters, never the top level acted on
    // (issue 43).
    let e = Settings::select(&ctx("typo"), file())
        .expect_err("refused")
        .to_string();
    assert!(
        e.contains("\"typo\"") && e.contains("east, lab-slurm, gpu-kube"),
        "{e}"
    );
    // On Kubernetes at the top level, it is a kubeconfig context.
    let kube_top = format!("source = \"kube\"\n{CLUSTERS}");
    let f: FileConfig = toml::from_str(&kube_top).expect("toml");
    let Selection::One(s) = Settings::select(&ctx("other"), f).expect("select") else {
        panic!("one");
    };
    assert_eq!(s.cluster, None);
    match &s.source {
        SourceConfig::Kube(k) => assert_eq!(k.context.as_deref(), Some("other")),
        other => panic!("{other:?}"),
    }
    // Errors name what is wrong.
    let bad = |text: &str, args: &GlobalArgs| {
        let f: FileConfig = toml::from_str(text).expect("toml");
        Settings::select(args, f).expect_err("refused").to_string()
    };
    let twice = "[[clusters]]\nname = \"a\"\n[[clusters]]\nname = \"a\"\n";
    assert!(bad(twice, &all).contains("used twice"));
    assert!(bad("[[clusters]]\nname = \"a/b\"\n", &all).contains("without '/'"));
    assert!(bad("", &all).contains("has none"));
    let broken = "[[clusters]]\nname = \"s\"\nsource = \"slurm\"\n";
    let e = bad(broken, &all);
    assert!(e.contains("\"s\"") && e.contains("--slurm-url"), "{e}");
    assert!(toml::from_str::<FileConfig>("[[clusters]]\nname = \"a\"\ncolour = 1\n").is_err());
}
