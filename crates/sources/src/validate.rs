//! The site's check before a node goes back to service (issue 29,
//! `Action::Validate`): what runs (`[validate] command`, DCGM's
//! diagnostics by default), for how long at most, where its output goes,
//! and what its output says — DCGM's `dcgmi diag -j` JSON, whose failing
//! tests become the node's reason when it stays out.

use serde_json::Value;
use std::path::PathBuf;
use std::time::Duration;

pub use crate::model::VALIDATION_FAILED;

/// `[validate]`.
#[derive(Debug, Clone, PartialEq)]
pub struct ValidateSpec {
    /// The check, run on the node by a shell; `{level}` is the
    /// diagnostics level the action asks for.
    pub command: String,
    /// The longest the check may take, queueing included: past it the
    /// check is cancelled and the node stays out.
    pub timeout: Duration,
    /// Where the check's output is written (by the node) and read (by
    /// nightshift): a directory both see (Slurm).
    pub output_dir: PathBuf,
    /// Kubernetes: the image the check's Job runs (DCGM's), and its
    /// namespace.
    pub image: String,
    pub namespace: String,
}

impl Default for ValidateSpec {
    fn default() -> Self {
        ValidateSpec {
            command: "dcgmi diag -r {level} -j".into(),
            timeout: Duration::from_secs(15 * 60),
            output_dir: std::env::temp_dir(),
            image: "nvcr.io/nvidia/cloud-native/dcgm:3.3.5-1-ubuntu22.04".into(),
            namespace: "default".into(),
        }
    }
}

impl ValidateSpec {
    /// The command for `level`.
    pub fn command_for(&self, level: u8) -> String {
        self.command.replace("{level}", &level.to_string())
    }
}

/// What a finished check says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    /// The failing tests, a line each: `GPU Memory: GPU 3: …`.
    Fail(Vec<String>),
}

/// The check's verdict from its exit status and output: DCGM's JSON (its
/// `"DCGM GPU Diagnostic"` object, or `"DCGM Diagnostic"` from DCGM 4)
/// names the failing tests; other output is taken by its exit status,
/// with its last line as the reason.
pub fn verdict(succeeded: bool, output: &str) -> Verdict {
    let failing = dcgm_failures(output);
    match (succeeded, failing) {
        (true, Some(f)) if f.is_empty() => Verdict::Pass,
        (_, Some(f)) if !f.is_empty() => Verdict::Fail(f),
        (true, _) => Verdict::Pass,
        (false, _) => {
            let last = output
                .lines()
                .rev()
                .map(str::trim)
                .find(|l| !l.is_empty())
                .unwrap_or("no output");
            Verdict::Fail(vec![format!(
                "the check failed: {}",
                crate::text::one_line(last, 200)
            )])
        }
    }
}

/// The failing tests of DCGM's JSON, or `None` when the output is not it.
fn dcgm_failures(output: &str) -> Option<Vec<String>> {
    // dcgmi may print a line before its JSON.
    let start = output.find('{')?;
    let v: Value = serde_json::from_str(output[start..].trim_end()).ok()?;
    let diag = v
        .get("DCGM GPU Diagnostic")
        .or_else(|| v.get("DCGM Diagnostic"))?;
    let mut out = Vec::new();
    for cat in diag["test_categories"].as_array()? {
        for test in cat["tests"].as_array().into_iter().flatten() {
            let name = test["name"].as_str().unwrap_or("a test");
            for r in test["results"].as_array().into_iter().flatten() {
                if !r["status"]
                    .as_str()
                    .is_some_and(|s| s.eq_ignore_ascii_case("fail"))
                {
                    continue;
                }
                let gpu = r["gpu_id"]
                    .as_str()
                    .map(str::to_string)
                    .or_else(|| r["gpu_id"].as_u64().map(|g| g.to_string()))
                    .or_else(|| {
                        r["gpu_ids"].as_array().map(|a| {
                            a.iter()
                                .map(|g| g.as_str().map_or_else(|| g.to_string(), str::to_string))
                                .collect::<Vec<_>>()
                                .join(",")
                        })
                    });
                let said = match &r["warnings"] {
                    Value::Array(ws) => ws
                        .iter()
                        .filter_map(|w| w["warning"].as_str().or_else(|| w.as_str()))
                        .collect::<Vec<_>>()
                        .join("; "),
                    Value::String(w) => w.clone(),
                    _ => r["warning"]
                        .as_str()
                        .or_else(|| r["info"].as_str())
                        .unwrap_or_default()
                        .to_string(),
                };
                let gpu = gpu.map_or(String::new(), |g| format!("GPU {g}: "));
                out.push(crate::text::one_line(&format!("{name}: {gpu}{said}"), 300));
            }
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shape of `dcgmi diag -r 2 -j` as NVIDIA's DCGM documentation
    /// shows it: categories of tests, each test's per-GPU results with a
    /// status and, on a failure, warnings.
    const FAILED: &str = r#"Successfully ran diagnostic for group.
{"DCGM GPU Diagnostic": {"test_categories": [
  {"category": "Deployment", "tests": [{"name": "Denylist", "results": [{"status": "Pass"}]}]},
  {"category": "Hardware", "tests": [{"name": "GPU Memory", "results": [
     {"gpu_id": "0", "status": "Pass"},
     {"gpu_id": "3", "status": "Fail", "warnings": [{"warning": "Pending page retirements together with a DBE were detected on GPU 3.", "error_id": 42}]}]}]},
  {"category": "Integration", "tests": [{"name": "PCIe", "results": [{"gpu_id": 5, "status": "Fail", "warnings": "GPU 5 is not visible"}]}]}
], "version": "3.3.5"}}"#;

    #[test]
    fn dcgm_json_names_the_failing_tests() {
        assert_eq!(
            verdict(false, FAILED),
            Verdict::Fail(vec![
                "GPU Memory: GPU 3: Pending page retirements together with a DBE were detected on GPU 3.".into(),
                "PCIe: GPU 5: GPU 5 is not visible".into(),
            ])
        );
        let passed = FAILED.replace("\"Fail\"", "\"Pass\"");
        assert_eq!(verdict(true, &passed), Verdict::Pass);
        // DCGM 4's top-level name.
        let v4 = FAILED.replace("DCGM GPU Diagnostic", "DCGM Diagnostic");
        assert!(matches!(verdict(false, &v4), Verdict::Fail(f) if f.len() == 2));
        // A failing test outranks a zero exit status.
        assert!(matches!(verdict(true, FAILED), Verdict::Fail(_)));
    }

    #[test]
    fn other_output_is_taken_by_its_exit_status() {
        assert_eq!(verdict(true, "all good\n"), Verdict::Pass);
        assert_eq!(
            verdict(false, "checking\nnvidia-smi: GPU lost\n\n"),
            Verdict::Fail(vec!["the check failed: nvidia-smi: GPU lost".into()])
        );
        assert_eq!(
            verdict(false, ""),
            Verdict::Fail(vec!["the check failed: no output".into()])
        );
        assert_eq!(ValidateSpec::default().command_for(2), "dcgmi diag -r 2 -j");
    }
}
