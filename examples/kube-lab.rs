//! The test Kubernetes API server, on its own:
//! `cargo run --release --example kube-lab -- --objects DIR --listen 127.0.0.1:PORT --write-kubeconfig FILE`
//! serves the manifests in DIR until killed (see `kubelab`).

use clap::Parser;
use std::path::PathBuf;

#[derive(Parser)]
#[command(about = "A Kubernetes API server for tests, serving a directory of manifests")]
struct Args {
    /// Directory of manifests (YAML or JSON; one object, documents or a List per file).
    #[arg(long)]
    objects: PathBuf,
    /// Address to listen on (port 0: any free port).
    #[arg(long, default_value = "127.0.0.1:0")]
    listen: String,
    /// Write a kubeconfig pointing at this server here.
    #[arg(long)]
    write_kubeconfig: Option<PathBuf>,
    /// The cluster's (and the kubeconfig context's) name.
    #[arg(long, default_value = "kube-lab")]
    cluster: String,
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    let (url, _lab) = match kubelab::start(&args.objects, &args.listen).await {
        Ok(x) => x,
        Err(e) => {
            eprintln!("kube-lab: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    if let Some(path) = &args.write_kubeconfig
        && let Err(e) = std::fs::write(path, kubelab::kubeconfig(&url, &args.cluster))
    {
        eprintln!("kube-lab: {}: {e}", path.display());
        return std::process::ExitCode::FAILURE;
    }
    println!("kube-lab serving {} at {url}", args.objects.display());
    let _ = tokio::signal::ctrl_c().await;
    std::process::ExitCode::SUCCESS
}
