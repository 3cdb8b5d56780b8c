//! A kube-lab API server for a test: in this process, on a free port,
//! serving tests/fixtures/kube/cluster, with a kubeconfig pointing at it.
//!
//! No real kube-apiserver can run here (see `kubelab`); the
//! tests check the lab with the real `kubectl` so that what nightshift is
//! tested against speaks the real protocol.

use std::path::PathBuf;
use std::process::{Command, Output};

pub struct KubeLab {
    pub rt: tokio::runtime::Runtime,
    pub url: String,
    pub dir: tempfile::TempDir,
    pub lab: std::sync::Arc<kubelab::Lab>,
}

pub fn fixture_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/kube/cluster")
}

impl KubeLab {
    pub fn start() -> KubeLab {
        KubeLab::start_in(&fixture_dir())
    }

    /// A lab serving the manifests in `objects`.
    pub fn start_in(objects: &std::path::Path) -> KubeLab {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let (url, lab) = rt
            .block_on(kubelab::start(objects, "127.0.0.1:0"))
            .expect("kube-lab");
        let dir = tempfile::tempdir().expect("tempdir");
        std::fs::write(
            dir.path().join("kubeconfig"),
            kubelab::kubeconfig(&url, "gpu-lab"),
        )
        .expect("kubeconfig");
        KubeLab { rt, url, dir, lab }
    }

    pub fn kubeconfig(&self) -> PathBuf {
        self.dir.path().join("kubeconfig")
    }

    /// The real kubectl against the lab.
    pub fn kubectl(&self, args: &[&str]) -> Output {
        Command::new("kubectl")
            .arg("--kubeconfig")
            .arg(self.kubeconfig())
            .arg("--cache-dir")
            .arg(self.dir.path().join("kube-cache"))
            .args(args)
            .output()
            .expect("run kubectl")
    }

    /// kubectl's JSON answer (the command must succeed).
    pub fn kubectl_json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.kubectl(args);
        assert!(
            out.status.success(),
            "kubectl {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).expect("kubectl json")
    }

    /// nightshift on the lab, with its log and audit log in the test's dir.
    pub fn nightshift(&self, args: &[&str]) -> Output {
        let mut all: Vec<&str> = vec!["--source", "kube", "--kubeconfig"];
        let cfg = self.kubeconfig();
        let cfg = cfg.to_str().expect("utf-8 path");
        all.push(cfg);
        let audit = self.dir.path().join("audit.jsonl");
        let audit = audit.to_str().expect("utf-8 path").to_string();
        all.extend(["--audit-log", &audit]);
        all.extend(args);
        super::nightshift(self.dir.path(), &all)
    }

    /// Sets the log kube-lab serves for pod `ns/name` (as the kubelet
    /// would): `log` is `{"lines", "times", "last"}` or `{"endless": true}`.
    pub fn set_log(&self, pod: &str, log: &serde_json::Value) {
        let url = format!("{}/lab/log?pod={pod}", self.url);
        let body = log.to_string();
        let status = self
            .rt
            .block_on(async {
                nightshift::sources::http::client_builder()
                    .build()
                    .expect("client")
                    .post(&url)
                    .body(body)
                    .send()
                    .await
                    .map(|r| r.status())
            })
            .expect("lab log");
        assert!(status.is_success(), "{pod}: {status}");
    }

    /// One of the lab's switches (`compact`, `cut-watches`, `down?seconds=N`).
    pub fn switch(&self, what: &str) {
        let url = format!("{}/lab/{what}", self.url);
        let status = self
            .rt
            .block_on(async {
                nightshift::sources::http::client_builder()
                    .build()
                    .expect("client")
                    .post(&url)
                    .send()
                    .await
                    .map(|r| r.status())
            })
            .expect("lab switch");
        assert!(status.is_success(), "{what}: {status}");
    }
}
