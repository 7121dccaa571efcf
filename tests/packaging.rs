//! Issue 14 item 4: the container image must build, and no container engine (nor base image)
//! is reachable where this runs. So the builder stage of `docker/Dockerfile` is replayed in a
//! scratch directory: every `COPY` brings exactly the files it names from the build context
//! (the repository, minus what `docker/Dockerfile.dockerignore` excludes), every `RUN` runs
//! there with `sh -c`, in order. What cannot be replayed outside a container is changed, and
//! said here:
//!
//! - `WORKDIR /build` is the scratch directory; an absolute destination of a `RUN` (`cp …
//!   /mirrorgate`) lands under the scratch root;
//! - `cargo build` runs as `cargo check` (same manifest, lock file, patch and targets — the
//!   step that failed before, "can't find `batch` bench" — and every crate type-checked, but no
//!   code generated), unless `MIRRORGATE_DOCKER_REPLAY=full`, which builds for real (several
//!   minutes of release build on 2 cores) and then runs the binary the runtime stage copies;
//! - the runtime stage's `COPY --from=builder` sources must be what the builder produced (or,
//!   in check mode, what its `cp` names), its context files must exist and not be ignored,
//!   and its `CMD` must be a command line the binary accepts with the image's config file.

mod support;

use std::path::{Path, PathBuf};
use std::process::Command;

use support::repo;

/// One instruction of a stage: keyword (upper case) and its argument text, continuation
/// lines joined.
#[derive(Debug, Clone)]
struct Instruction {
    keyword: String,
    args: String,
}

#[derive(Debug)]
struct Stage {
    name: Option<String>,
    instructions: Vec<Instruction>,
}

fn parse(dockerfile: &str) -> Vec<Stage> {
    let mut stages: Vec<Stage> = Vec::new();
    let mut logical = String::new();
    let mut lines: Vec<String> = Vec::new();
    for line in dockerfile.lines() {
        let trimmed = line.trim();
        if logical.is_empty() && (trimmed.is_empty() || trimmed.starts_with('#')) {
            continue;
        }
        if let Some(head) = trimmed.strip_suffix('\\') {
            logical.push_str(head);
            logical.push(' ');
        } else {
            logical.push_str(trimmed);
            lines.push(std::mem::take(&mut logical));
        }
    }
    assert!(logical.is_empty(), "the Dockerfile ends inside a continued line");
    for line in lines {
        let (keyword, args) = line.split_once(char::is_whitespace).unwrap_or((&line, ""));
        let keyword = keyword.to_uppercase();
        let args = args.trim().to_string();
        if keyword == "FROM" {
            let words: Vec<&str> = args.split_whitespace().collect();
            let name = match words.as_slice() {
                [_, as_, name] if as_.eq_ignore_ascii_case("as") => Some(name.to_string()),
                [_] => None,
                other => panic!("FROM {other:?}"),
            };
            stages.push(Stage { name, instructions: vec![] });
        } else {
            stages.last_mut().expect("an instruction before FROM").instructions.push(Instruction { keyword, args });
        }
    }
    stages
}

/// Top-level names `docker/Dockerfile.dockerignore` excludes from the build context (it holds
/// only plain names; anything else fails here so that this replay stays exact).
fn ignored() -> Vec<String> {
    let text = std::fs::read_to_string(repo().join("docker/Dockerfile.dockerignore")).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            assert!(
                l.chars().all(|c| c.is_ascii_alphanumeric() || "._-".contains(c)),
                "pattern {l:?}: only plain top-level names are replayed"
            );
            l.to_string()
        })
        .collect()
}

fn copy_tree(from: &Path, to: &Path) {
    let meta = std::fs::metadata(from).unwrap_or_else(|e| panic!("COPY source {}: {e}", from.display()));
    if meta.is_dir() {
        std::fs::create_dir_all(to).unwrap();
        for entry in std::fs::read_dir(from).unwrap() {
            let entry = entry.unwrap();
            copy_tree(&entry.path(), &to.join(entry.file_name()));
        }
    } else {
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::copy(from, to).unwrap();
    }
}

/// `COPY src… dest` from the build context into `workdir` (a destination ending in `/`, or
/// several sources, name a directory).
fn copy_from_context(args: &str, workdir: &Path, ignore: &[String]) -> Vec<String> {
    let words: Vec<&str> = args.split_whitespace().collect();
    let (dest, sources) = words.split_last().expect("COPY needs a destination");
    assert!(!sources.is_empty(), "COPY {args}");
    let into_dir = dest.ends_with('/') || sources.len() > 1;
    for src in sources {
        let top = src.trim_start_matches("./").split('/').next().unwrap();
        assert!(!ignore.iter().any(|i| i == top), "COPY {src}: excluded by the .dockerignore");
        let from = repo().join(src);
        let name = Path::new(src).file_name().unwrap();
        let to = if into_dir { workdir.join(dest).join(name) } else { workdir.join(dest) };
        copy_tree(&from, &to);
    }
    sources.iter().map(|s| s.to_string()).collect()
}

fn full_build() -> bool {
    std::env::var("MIRRORGATE_DOCKER_REPLAY").is_ok_and(|v| v == "full")
}

#[test]
fn the_container_images_builder_stage_replays_with_exactly_the_files_it_copies() {
    let dockerfile = std::fs::read_to_string(repo().join("docker/Dockerfile")).unwrap();
    let stages = parse(&dockerfile);
    assert_eq!(stages.len(), 2, "a builder and a runtime stage: {stages:?}");
    let builder = &stages[0];
    assert_eq!(builder.name.as_deref(), Some("builder"));
    let ignore = ignored();

    let root = repo().join("target/docker-replay/root");
    // Cargo's `target/` of the replayed /build is kept between runs of this test (as the
    // image's layer cache would keep it): a re-run only re-checks what changed.
    let kept = repo().join("target/docker-replay/kept-target");
    let build_target = root.join("build/target");
    if build_target.exists() {
        let _ = std::fs::remove_dir_all(&kept);
        std::fs::rename(&build_target, &kept).unwrap();
    }
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(&root).unwrap();
    let mut workdir: Option<PathBuf> = None;
    let mut copied = Vec::new();
    let mut runs = 0;
    for ins in &builder.instructions {
        match ins.keyword.as_str() {
            "WORKDIR" => {
                let dir = root.join(ins.args.trim_start_matches('/'));
                std::fs::create_dir_all(&dir).unwrap();
                if kept.exists() && !dir.join("target").exists() {
                    std::fs::rename(&kept, dir.join("target")).unwrap();
                }
                workdir = Some(dir);
            }
            "COPY" => {
                assert!(!ins.args.starts_with("--"), "builder COPY with flags: {}", ins.args);
                let dir = workdir.as_ref().expect("WORKDIR before COPY");
                copied.extend(copy_from_context(&ins.args, dir, &ignore));
            }
            "RUN" => {
                let dir = workdir.as_ref().expect("WORKDIR before RUN");
                let mut cmd = ins.args.replace(" /mirrorgate", &format!(" {}/mirrorgate", root.display()));
                if !full_build() {
                    cmd = cmd.replace("cargo build", "cargo check");
                    // (No binary without code generation: the copy is checked below.)
                    cmd = cmd.replace(&format!("&& cp target/release/mirrorgate {}/mirrorgate", root.display()), "");
                }
                let out = Command::new("sh")
                    .arg("-c")
                    .arg(&cmd)
                    .current_dir(dir)
                    .env_remove("CARGO_TARGET_DIR")
                    .env("CARGO_TERM_COLOR", "never")
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "RUN {cmd}\nfailed with {}:\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                );
                runs += 1;
                // The manifest step leaves only what the image's next layer starts from.
                if ins.args.contains("rm -rf src benches") {
                    assert!(!dir.join("src").exists() && !dir.join("benches").exists());
                }
            }
            other => panic!("builder instruction {other} is not replayed: {}", ins.args),
        }
    }
    assert_eq!(runs, 2, "the dependency step and the crate step");
    for needed in ["Cargo.toml", "Cargo.lock", "vendor", "src", "benches"] {
        assert!(copied.iter().any(|c| c == needed), "{needed} is copied into the builder: {copied:?}");
    }

    // The runtime stage: what it copies exists, and its command line starts mirrorgate.
    let runtime = &stages[1];
    let mut binary_copied = false;
    let mut cmd: Option<Vec<String>> = None;
    let mut entrypoint: Option<Vec<String>> = None;
    for ins in &runtime.instructions {
        match ins.keyword.as_str() {
            "COPY" if ins.args.starts_with("--from=builder") => {
                let words: Vec<&str> = ins.args.split_whitespace().collect();
                assert_eq!(words[1..], ["/mirrorgate", "/usr/local/bin/mirrorgate"], "{}", ins.args);
                binary_copied = true;
                if full_build() {
                    assert!(root.join("mirrorgate").is_file(), "the builder left /mirrorgate");
                } else {
                    let builder_runs: Vec<&Instruction> =
                        builder.instructions.iter().filter(|i| i.keyword == "RUN").collect();
                    assert!(
                        builder_runs.last().unwrap().args.contains("cp target/release/mirrorgate /mirrorgate"),
                        "the builder's last step copies the release binary to /mirrorgate"
                    );
                }
            }
            "COPY" => {
                let (src, dest) = ins.args.split_once(' ').unwrap();
                assert!(!ignore.iter().any(|i| src.starts_with(i.as_str())), "{src} is ignored");
                assert!(repo().join(src).is_file(), "COPY {src}: not in the build context");
                assert_eq!(dest.trim(), "/etc/mirrorgate/proxy.yaml");
            }
            "CMD" => cmd = Some(serde_json::from_str(&ins.args).expect("CMD in exec form")),
            "ENTRYPOINT" => entrypoint = Some(serde_json::from_str(&ins.args).expect("ENTRYPOINT in exec form")),
            "RUN" | "USER" | "EXPOSE" | "STOPSIGNAL" => {}
            other => panic!("runtime instruction {other}: {}", ins.args),
        }
    }
    assert!(binary_copied);
    assert_eq!(entrypoint.as_deref(), Some(&["/usr/local/bin/mirrorgate".to_string()][..]));
    let cmd = cmd.expect("CMD");
    assert_eq!(cmd, ["run", "--config", "/etc/mirrorgate/proxy.yaml"]);
    // The same command line, with the file the image holds at that path, is one the binary
    // accepts and whose configuration validates (`--check`: validate and exit).
    let bin = if full_build() { root.join("mirrorgate") } else { PathBuf::from(env!("CARGO_BIN_EXE_mirrorgate")) };
    let args: Vec<String> = cmd
        .iter()
        .map(|a| {
            if a == "/etc/mirrorgate/proxy.yaml" {
                repo().join("docker/proxy.yaml").display().to_string()
            } else {
                a.clone()
            }
        })
        .chain(["--check".to_string()])
        .collect();
    let out = Command::new(&bin).args(&args).output().unwrap();
    assert!(out.status.success(), "{} {args:?}: {out:?}", bin.display());
}
