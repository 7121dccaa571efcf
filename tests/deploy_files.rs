//! Issue 14 item 4: the files that deploy several mirrorgate instances behind a load balancer,
//! checked without a container engine or a cluster (neither is available where this runs).
//!
//! - `docker/compose.yaml` with `docker/haproxy.cfg` and the instances' configuration: images
//!   pinned or built here; three instances alike but for their instance name; HAProxy binds
//!   exactly the ports of every mirrorgate listener and forwards each to the same port of every
//!   instance, checked with GET `/ready` on the metrics port; every listener advertises the
//!   load balancer; every `MIRRORGATE__` variable names a real key; the configuration with each
//!   instance's environment passes `mirrorgate run --check`; Prometheus scrapes every instance's
//!   metrics port with the rules of `docker/prometheus/`, Grafana gets the dashboard and a
//!   datasource on that Prometheus (issue 15; promtool itself runs in `tests/prometheus.rs`).
//! - `docs/kubernetes/`: `tests/k8s-check` (Go, Kubernetes' own API types) decodes every
//!   manifest strictly and checks them against each other; the ConfigMap's proxy.yaml passes
//!   `mirrorgate run --check`.
//!
//! Each check collects problems instead of stopping at the first, and a second test per file
//! set breaks copies of the files one way at a time and expects the check to say so: a check
//! that cannot fail fails here.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mirrorgate::config::ProxyConfig;
use support::{repo, run};
use yaml_rust2::{Yaml, YamlLoader};

/// Keys the deploy files may give before mirrorgate knows them (reported, not failed; any
/// other refusal fails). Empty: every key they set exists.
const PENDING_KEYS: &[&str] = &[];

/// Where the image reads its configuration (`CMD` of docker/Dockerfile).
const IMAGE_CONFIG: &str = "/etc/mirrorgate/proxy.yaml";

fn scratch(name: &str) -> PathBuf {
    let dir = repo().join("target/deploy-files").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

// ---- YAML ------------------------------------------------------------------------------------

/// One YAML document, with merge keys (`<<: *anchor`, which compose files use) applied:
/// explicit keys win over merged ones.
fn load_yaml(text: &str) -> Result<Yaml, String> {
    let mut docs = YamlLoader::load_from_str(text).map_err(|e| e.to_string())?;
    if docs.len() != 1 {
        return Err(format!("{} YAML documents, expected 1", docs.len()));
    }
    Ok(merge_keys(docs.remove(0)))
}

fn merge_keys(y: Yaml) -> Yaml {
    match y {
        Yaml::Hash(h) => {
            let merge = Yaml::String("<<".into());
            let mut out = yaml_rust2::yaml::Hash::new();
            let mut merged = Vec::new();
            for (k, v) in h {
                if k == merge {
                    match v {
                        Yaml::Array(a) => merged.extend(a),
                        other => merged.push(other),
                    }
                } else {
                    out.insert(k, merge_keys(v));
                }
            }
            for m in merged {
                if let Yaml::Hash(mh) = merge_keys(m) {
                    for (k, v) in mh {
                        out.entry(k).or_insert(v);
                    }
                }
            }
            Yaml::Hash(out)
        }
        Yaml::Array(a) => Yaml::Array(a.into_iter().map(merge_keys).collect()),
        other => other,
    }
}

fn hash(y: &Yaml) -> Vec<(String, &Yaml)> {
    match y {
        Yaml::Hash(h) => h.iter().filter_map(|(k, v)| k.as_str().map(|k| (k.to_string(), v))).collect(),
        _ => Vec::new(),
    }
}

/// A scalar as compose reads it (numbers and booleans as text).
fn scalar(y: &Yaml) -> Option<String> {
    match y {
        Yaml::String(s) | Yaml::Real(s) => Some(s.clone()),
        Yaml::Integer(i) => Some(i.to_string()),
        Yaml::Boolean(b) => Some(b.to_string()),
        _ => None,
    }
}

fn strings(y: &Yaml) -> Vec<String> {
    match y {
        Yaml::Array(a) => a.iter().filter_map(scalar).collect(),
        other => scalar(other).into_iter().collect(),
    }
}

/// A service's `environment`, as a map or as a `KEY=VALUE` list.
fn environment(service: &Yaml) -> BTreeMap<String, String> {
    match &service["environment"] {
        Yaml::Array(a) => a
            .iter()
            .filter_map(scalar)
            .map(|kv| {
                let (k, v) = kv.split_once('=').unwrap_or((&kv, ""));
                (k.to_string(), v.to_string())
            })
            .collect(),
        env => hash(env).into_iter().map(|(k, v)| (k, scalar(v).unwrap_or_default())).collect(),
    }
}

// ---- mirrorgate's configuration ------------------------------------------------------------

/// The configuration key a `MIRRORGATE__A__B` variable sets (`a.b`), if it is one.
fn override_key(var: &str) -> Option<String> {
    var.strip_prefix("MIRRORGATE__").map(|k| k.split("__").map(str::to_lowercase).collect::<Vec<_>>().join("."))
}

/// `mirrorgate run --config FILE --check` with exactly `env` (nothing inherited) set.
fn mirrorgate_check(file: &Path, env: &BTreeMap<String, String>) -> Result<(), String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_mirrorgate"));
    cmd.args(["run", "--config"]).arg(file).arg("--check").env_clear().envs(env);
    let out = run(cmd, None, Duration::from_secs(30));
    if out.status.success() {
        Ok(())
    } else {
        Err(format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr)).trim().into())
    }
}

/// Every `MIRRORGATE__` variable of `env` must name a key mirrorgate accepts (tried one at a
/// time, for a message naming it), and the file with all of them must pass `--check`. A
/// pending key (above) that mirrorgate refuses as unknown is left out and reported.
fn check_config_with_env(
    what: &str,
    file: &Path,
    env: &BTreeMap<String, String>,
    problems: &mut Vec<String>,
    pending: &mut Vec<String>,
) {
    let mut usable = BTreeMap::new();
    for (var, value) in env {
        let Some(key) = override_key(var) else {
            continue;
        };
        let one = BTreeMap::from([(var.clone(), value.clone())]);
        match mirrorgate_check(file, &one) {
            Ok(()) => {
                usable.insert(var.clone(), value.clone());
            }
            Err(e) => {
                let top = key.split('.').next().unwrap();
                if PENDING_KEYS.contains(&key.as_str()) && e.contains(&format!("unknown field `{top}`")) {
                    pending.push(format!("{what}: {var} sets `{key}`, which this mirrorgate does not know yet: {e}"));
                } else {
                    problems.push(format!("{what}: {var}={value:?} (key `{key}`) is refused: {e}"));
                }
            }
        }
    }
    if let Err(e) = mirrorgate_check(file, &usable) {
        problems.push(format!("{what}: `mirrorgate run --config {} --check` fails: {e}", file.display()));
    }
}

/// The listeners and metrics address of a configuration file, as mirrorgate validates them
/// (environment overrides aside: listeners cannot be overridden, metrics.listen is taken from
/// the environment when set there).
fn settings(text: &str, env: &BTreeMap<String, String>) -> Result<mirrorgate::config::Settings, String> {
    let mut s = ProxyConfig::from_yaml(text).and_then(ProxyConfig::validate).map_err(|e| e.to_string())?;
    if let Some(listen) = env.get("MIRRORGATE__METRICS__LISTEN") {
        s.metrics_listen = Some(listen.parse().map_err(|_| format!("MIRRORGATE__METRICS__LISTEN={listen}"))?);
    }
    Ok(s)
}

/// Paths the metrics listener answers (`"/path" =>` arms of src/telemetry/http.rs's router).
fn served_paths() -> BTreeSet<String> {
    let src = std::fs::read_to_string(repo().join("src/telemetry/http.rs")).unwrap();
    let paths: BTreeSet<String> = src
        .lines()
        .filter_map(|l| l.trim().strip_prefix('"')?.split_once("\" =>").map(|(p, _)| p.to_string()))
        .collect();
    assert!(paths.contains("/metrics"), "routes of src/telemetry/http.rs not found: {paths:?}");
    paths
}

// ---- haproxy.cfg ---------------------------------------------------------------------------

#[derive(Debug, Default)]
struct Section {
    kind: String,
    name: String,
    lines: Vec<Vec<String>>,
}

impl Section {
    fn directives<'a>(&'a self, keyword: &'a str) -> impl Iterator<Item = &'a [String]> + 'a {
        self.lines.iter().filter(move |l| l[0] == keyword).map(|l| &l[1..])
    }
}

/// Sections (`frontend NAME`, `backend NAME`, ...) with their lines split into words, comments
/// removed.
fn parse_haproxy(text: &str) -> Vec<Section> {
    let mut sections: Vec<Section> = Vec::new();
    for raw in text.lines() {
        let line = raw.split('#').next().unwrap();
        let words: Vec<String> = line.split_whitespace().map(String::from).collect();
        if words.is_empty() {
            continue;
        }
        if !raw.starts_with(char::is_whitespace) {
            sections.push(Section {
                kind: words[0].clone(),
                name: words.get(1).cloned().unwrap_or_default(),
                lines: Vec::new(),
            });
        } else if let Some(s) = sections.last_mut() {
            s.lines.push(words);
        }
    }
    sections
}

/// The ports of a `bind` address: `[addr]:PORT` or `[addr]:FIRST-LAST`.
fn bind_ports(addr: &str) -> Result<(u16, u16), String> {
    let (_, ports) = addr.rsplit_once(':').ok_or_else(|| format!("bind {addr}: no port"))?;
    let (a, b) = ports.split_once('-').unwrap_or((ports, ports));
    match (a.parse::<u16>(), b.parse::<u16>()) {
        (Ok(a), Ok(b)) if a <= b => Ok((a, b)),
        _ => Err(format!("bind {addr}: ports {ports:?}")),
    }
}

/// `A[-B]:C[-D]` (optionally `IP:` first) of a compose `ports` entry: (host port, container
/// port) pairs.
fn published(spec: &str) -> Result<Vec<(u16, u16)>, String> {
    let spec = spec.split('/').next().unwrap();
    let parts: Vec<&str> = spec.rsplitn(3, ':').collect();
    let (host, container) = match parts.as_slice() {
        [c, h] | [c, h, _] => (*h, *c),
        _ => return Err(format!("ports entry {spec:?} publishes no host port")),
    };
    let range = |r: &str| -> Result<(u16, u16), String> {
        let (a, b) = r.split_once('-').unwrap_or((r, r));
        match (a.parse::<u16>(), b.parse::<u16>()) {
            (Ok(a), Ok(b)) if a <= b => Ok((a, b)),
            _ => Err(format!("ports entry {spec:?}")),
        }
    };
    let (h, c) = (range(host)?, range(container)?);
    if h.1 - h.0 != c.1 - c.0 {
        return Err(format!("ports entry {spec:?}: ranges of different sizes"));
    }
    Ok((h.0..=h.1).zip(c.0..=c.1).collect())
}

// ---- docker/compose.yaml -------------------------------------------------------------------

/// Checks the compose deployment in `dir` (a copy of docker/, or docker/ itself) and returns
/// every problem found; variables that set a pending key go to `pending`.
fn check_compose(dir: &Path, pending: &mut Vec<String>) -> Vec<String> {
    let mut problems = Vec::new();
    let p = &mut problems;
    let text = std::fs::read_to_string(dir.join("compose.yaml")).unwrap();
    let compose = match load_yaml(&text) {
        Ok(c) => c,
        Err(e) => return vec![format!("compose.yaml does not parse: {e}")],
    };
    let services = hash(&compose["services"]);
    if services.is_empty() {
        return vec!["compose.yaml has no services".into()];
    }
    let names: BTreeSet<String> = services.iter().map(|(n, _)| n.clone()).collect();

    // Images: built here from docker/Dockerfile, or a pinned release of a known image.
    let mut instances: Vec<(String, &Yaml)> = Vec::new();
    let mut haproxy: Vec<(String, &Yaml)> = Vec::new();
    for (name, svc) in &services {
        let image = scalar(&svc["image"]).unwrap_or_default();
        if !matches!(svc["build"], Yaml::BadValue) {
            let context = scalar(&svc["build"]["context"]).unwrap_or_default();
            let dockerfile = scalar(&svc["build"]["dockerfile"]).unwrap_or_default();
            if context != ".." || dockerfile != "docker/Dockerfile" {
                p.push(format!(
                    "{name}: builds {context:?} / {dockerfile:?}, not the repository with docker/Dockerfile"
                ));
            }
            if !image.starts_with("mirrorgate:") {
                p.push(format!("{name}: the locally built image is named {image:?}, not mirrorgate:TAG"));
            }
            instances.push((name.clone(), svc));
            continue;
        }
        let Some((repo_name, tag)) = image.rsplit_once(':') else {
            p.push(format!("{name}: image {image:?} has no tag"));
            continue;
        };
        let known = repo_name == "apache/kafka"
            || repo_name == "haproxy"
            || repo_name.starts_with("jaegertracing/")
            || repo_name == "prom/prometheus"
            || repo_name == "grafana/grafana";
        if !known {
            p.push(format!(
                "{name}: image {image:?} is neither built here nor apache/kafka, haproxy, jaegertracing, prom/prometheus or grafana/grafana"
            ));
        }
        if !tag.trim_start_matches('v').starts_with(|c: char| c.is_ascii_digit()) || !tag.contains('.') {
            p.push(format!("{name}: image {image:?} is not pinned to a release tag"));
        }
        if repo_name == "haproxy" {
            haproxy.push((name.clone(), svc));
        }
    }
    for needed in ["destination", "source"] {
        if !names.contains(needed) {
            p.push(format!("no `{needed}` service"));
        }
    }
    if !services.iter().any(|(_, s)| scalar(&s["image"]).is_some_and(|i| i.starts_with("jaegertracing/"))) {
        p.push("the Jaeger service is gone".into());
    }

    // Three instances, alike but for MIRRORGATE__INSTANCES__NAME.
    if instances.len() != 3 {
        p.push(format!("{} mirrorgate instances, expected 3", instances.len()));
    }
    let instance_names: BTreeSet<String> = instances.iter().map(|(n, _)| n.clone()).collect();
    let mut given_names = BTreeSet::new();
    let strip = |svc: &Yaml| {
        let mut env = environment(svc);
        env.remove("MIRRORGATE__INSTANCES__NAME");
        let mut y = svc.clone();
        if let Yaml::Hash(h) = &mut y {
            h.remove(&Yaml::String("environment".into()));
            h.remove(&Yaml::String("hostname".into()));
            h.remove(&Yaml::String("container_name".into()));
        }
        (env, y)
    };
    let mut config: Option<(PathBuf, mirrorgate::config::Settings)> = None;
    for (name, svc) in &instances {
        match environment(svc).get("MIRRORGATE__INSTANCES__NAME") {
            Some(n) if !n.is_empty() => {
                if !given_names.insert(n.clone()) {
                    p.push(format!("{name}: instance name {n:?} is not distinct"));
                }
            }
            _ => p.push(format!("{name}: no MIRRORGATE__INSTANCES__NAME")),
        }
        if strip(svc) != strip(instances[0].1) {
            p.push(format!("{name}: differs from {} in more than its instance name", instances[0].0));
        }
        if !matches!(svc["command"], Yaml::BadValue) || !matches!(svc["entrypoint"], Yaml::BadValue) {
            p.push(format!("{name}: overrides the image's command line"));
        }
        if !matches!(svc["ports"], Yaml::BadValue) {
            p.push(format!("{name}: publishes ports; clients must go through the load balancer"));
        }
        // The configuration it reads: a file mounted at the image's path, else the image's own.
        let mut file = dir.join("proxy.yaml");
        for v in strings(&svc["volumes"]) {
            let parts: Vec<&str> = v.split(':').collect();
            if parts.len() >= 2 && parts[1] == IMAGE_CONFIG {
                file = dir.join(parts[0].trim_start_matches("./"));
            }
        }
        let env = environment(svc);
        check_config_with_env(name, &file, &env, p, pending);
        let text = std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        match settings(&text, &env) {
            Ok(s) => {
                for host in env
                    .get("MIRRORGATE__DESTINATION__BOOTSTRAP_SERVERS")
                    .cloned()
                    .unwrap_or_else(|| s.destination_bootstrap.join(","))
                    .split(',')
                {
                    let h = host.trim().rsplit_once(':').map_or(host, |(h, _)| h);
                    if !names.contains(h) {
                        p.push(format!("{name}: destination bootstrap host {h:?} is no compose service"));
                    }
                }
                if config.is_none() {
                    config = Some((file.clone(), s));
                }
            }
            Err(e) => p.push(format!("{name}: {}: {e}", file.display())),
        }
    }
    let Some((config_file, settings)) = config else {
        p.push("no instance configuration to check the load balancer against".into());
        return problems;
    };
    let Some(metrics) = settings.metrics_listen else {
        p.push(format!("{}: no metrics.listen: nothing for the health checks", config_file.display()));
        return problems;
    };
    if !metrics.ip().is_unspecified() {
        p.push(format!("metrics.listen {metrics} is not reachable from HAProxy's container (bind 0.0.0.0)"));
    }
    let served = served_paths();

    // Each instance's own health check: GET /ready on the metrics port.
    for (name, svc) in &instances {
        let test = strings(&svc["healthcheck"]["test"]).join(" ");
        if !test.contains(&format!("/dev/tcp/127.0.0.1/{}", metrics.port())) || !test.contains("GET /ready ") {
            p.push(format!("{name}: healthcheck {test:?} is not GET /ready on port {}", metrics.port()));
        }
    }
    if !served.contains("/ready") {
        p.push(format!("the metrics listener serves no /ready: {served:?}"));
    }
    check_monitoring(dir, &services, &instance_names, metrics.port(), p);

    // HAProxy: mounted configuration, published ports.
    let [(hname, hsvc)] = haproxy.as_slice() else {
        p.push(format!("{} haproxy services, expected 1", haproxy.len()));
        return problems;
    };
    let mut cfg_file = None;
    for v in strings(&hsvc["volumes"]) {
        let parts: Vec<&str> = v.split(':').collect();
        if parts.len() >= 2 && parts[1] == "/usr/local/etc/haproxy/haproxy.cfg" {
            cfg_file = Some(dir.join(parts[0].trim_start_matches("./")));
        }
    }
    let Some(cfg_file) = cfg_file else {
        p.push(format!("{hname}: no configuration mounted at /usr/local/etc/haproxy/haproxy.cfg"));
        return problems;
    };
    let mut host_ports = BTreeMap::new();
    for spec in strings(&hsvc["ports"]) {
        match published(&spec) {
            Ok(pairs) => host_ports.extend(pairs),
            Err(e) => p.push(format!("{hname}: {e}")),
        }
    }
    let hostname = scalar(&hsvc["hostname"]).unwrap_or_else(|| hname.clone());
    let sections = parse_haproxy(&std::fs::read_to_string(&cfg_file).unwrap());
    let defaults_tcp = sections.iter().any(|s| s.kind == "defaults" && s.lines.iter().any(|l| l == &["mode", "tcp"]));
    let backend = |n: &str| sections.iter().find(|s| s.kind == "backend" && s.name == n);

    // Every listener: advertised as the load balancer, all its ports forwarded.
    let mut forwarded = BTreeSet::new();
    for l in &settings.listeners {
        let range = (l.bootstrap_port, l.last_port);
        let frontends: Vec<&Section> = sections
            .iter()
            .filter(|s| s.kind == "frontend")
            .filter(|s| s.directives("bind").any(|b| bind_ports(&b[0]).is_ok_and(|r| r == range)))
            .collect();
        let [fe] = frontends.as_slice() else {
            p.push(format!(
                "listener {}: {} HAProxy frontends bind exactly its ports {}-{}, expected 1",
                l.name,
                frontends.len(),
                range.0,
                range.1
            ));
            continue;
        };
        forwarded.extend(range.0..=range.1);
        if l.advertised_host == "localhost" {
            for port in range.0..=range.1 {
                if host_ports.get(&port) != Some(&port) {
                    p.push(format!(
                        "listener {} advertises localhost:{port}, but {hname} does not publish host port {port} as {port}",
                        l.name
                    ));
                }
            }
        } else if l.advertised_host != hostname && l.advertised_host != *hname {
            p.push(format!(
                "listener {} advertises {:?}: neither the load balancer ({hname}) nor, through its published ports, localhost",
                l.name, l.advertised_host
            ));
        }
        let mode_tcp = defaults_tcp || fe.lines.iter().any(|l| l == &["mode", "tcp"]);
        if !mode_tcp {
            p.push(format!("frontend {}: not mode tcp", fe.name));
        }
        let Some(be_name) = fe.directives("default_backend").next().map(|w| w[0].clone()) else {
            p.push(format!("frontend {}: no default_backend", fe.name));
            continue;
        };
        let Some(be) = backend(&be_name) else {
            p.push(format!("frontend {}: backend {be_name} does not exist", fe.name));
            continue;
        };
        // The health check: GET /ready on the metrics port of each server.
        let httpchk: Vec<&[String]> = be.directives("option").filter(|w| w[0] == "httpchk").collect();
        let mut check = httpchk.first().map(|w| (w.get(1).cloned(), w.get(2).cloned()));
        for send in be.directives("http-check").filter(|w| w[0] == "send") {
            let at = |k: &str| send.iter().position(|w| w == k).and_then(|i| send.get(i + 1)).cloned();
            check = check.map(|_| (at("meth"), at("uri")));
        }
        match check {
            Some((Some(m), Some(uri))) if m == "GET" && uri == "/ready" && served.contains(&uri) => {}
            other => p.push(format!("backend {be_name}: health check {other:?} is not GET /ready (option httpchk)")),
        }
        let mut servers = BTreeSet::new();
        for s in be.directives("server") {
            let (sname, addr) = (&s[0], &s[1]);
            if addr.contains(':') {
                p.push(format!(
                    "backend {be_name}: server {sname} {addr} names a port; without one, each port goes to the same port"
                ));
            }
            servers.insert(addr.clone());
            let port = s.iter().position(|w| w == "port").and_then(|i| s.get(i + 1));
            if !s.iter().any(|w| w == "check") || port.map(String::as_str) != Some(&metrics.port().to_string()) {
                p.push(format!(
                    "backend {be_name}: server {sname} is not checked on the metrics port {} (`check port {}`)",
                    metrics.port(),
                    metrics.port()
                ));
            }
        }
        if servers != instance_names {
            p.push(format!("backend {be_name}: servers {servers:?}, expected the instances {instance_names:?}"));
        }
    }
    // Nothing forwarded that no listener serves.
    for fe in sections.iter().filter(|s| s.kind == "frontend" || s.kind == "listen") {
        for b in fe.directives("bind") {
            match bind_ports(&b[0]) {
                Ok((a, z)) => {
                    for port in a..=z {
                        if !forwarded.contains(&port) {
                            p.push(format!(
                                "{} {}: port {port} is no port of an instance's listener",
                                fe.kind, fe.name
                            ));
                        }
                    }
                }
                Err(e) => p.push(format!("{} {}: {e}", fe.kind, fe.name)),
            }
        }
    }
    for port in host_ports.values() {
        if !forwarded.contains(port) {
            p.push(format!("{hname} publishes port {port}, which it does not forward"));
        }
    }
    problems
}

/// The Prometheus and Grafana services (issue 15 item 3): Prometheus reads the scrape config
/// and alert rules of `docker/prometheus/` and scrapes every mirrorgate instance on its metrics
/// port; Grafana gets the provisioning files and the dashboard, with a datasource on that
/// Prometheus. (`tests/prometheus.rs` runs promtool over the same files.)
fn check_monitoring(
    dir: &Path,
    services: &[(String, &Yaml)],
    instances: &BTreeSet<String>,
    metrics_port: u16,
    p: &mut Vec<String>,
) {
    let image_of =
        |prefix: &str| services.iter().find(|(_, s)| scalar(&s["image"]).is_some_and(|i| i.starts_with(prefix)));
    let mount = |svc: &Yaml, target: &str| {
        strings(&svc["volumes"]).into_iter().find_map(|v| {
            let parts: Vec<&str> = v.split(':').collect();
            (parts.len() >= 2 && parts[1] == target).then(|| dir.join(parts[0].trim_start_matches("./")))
        })
    };
    let Some((prom_name, prom)) = image_of("prom/prometheus:") else {
        p.push("no Prometheus service (prom/prometheus)".into());
        return;
    };
    match mount(prom, "/etc/prometheus") {
        None => p.push(format!("{prom_name}: no configuration directory mounted at /etc/prometheus")),
        Some(conf) => {
            match std::fs::read_to_string(conf.join("prometheus.yml"))
                .map_err(|e| e.to_string())
                .and_then(|t| load_yaml(&t))
            {
                Err(e) => p.push(format!("{prom_name}: {}/prometheus.yml: {e}", conf.display())),
                Ok(cfg) => {
                    let mut targets = BTreeSet::new();
                    if let Yaml::Array(jobs) = &cfg["scrape_configs"] {
                        for job in jobs {
                            if let Yaml::Array(statics) = &job["static_configs"] {
                                for st in statics {
                                    targets.extend(strings(&st["targets"]));
                                }
                            }
                        }
                    }
                    let wanted: BTreeSet<String> = instances.iter().map(|i| format!("{i}:{metrics_port}")).collect();
                    if targets != wanted {
                        p.push(format!("{prom_name}: scrape targets {targets:?}, expected every instance's metrics port {wanted:?}"));
                    }
                    for rules in strings(&cfg["rule_files"]) {
                        if !conf.join(&rules).is_file() {
                            p.push(format!("{prom_name}: rule file {rules} is not in {}", conf.display()));
                        }
                    }
                }
            }
        }
    }
    let Some((graf_name, graf)) = image_of("grafana/grafana:") else {
        p.push("no Grafana service (grafana/grafana)".into());
        return;
    };
    match mount(graf, "/var/lib/grafana/dashboards/mirrorgate.json") {
        Some(f) if f.is_file() => {}
        other => p.push(format!("{graf_name}: the dashboard is not mounted from a file: {other:?}")),
    }
    match mount(graf, "/etc/grafana/provisioning") {
        None => p.push(format!("{graf_name}: no provisioning directory mounted at /etc/grafana/provisioning")),
        Some(prov) => {
            let ds = std::fs::read_to_string(prov.join("datasources/prometheus.yml")).unwrap_or_default();
            if !ds.contains(&format!("url: http://{prom_name}:9090")) {
                p.push(format!("{graf_name}: the datasource does not point at http://{prom_name}:9090"));
            }
            let dash = std::fs::read_to_string(prov.join("dashboards/mirrorgate.yml")).unwrap_or_default();
            if !dash.contains("path: /var/lib/grafana/dashboards") {
                p.push(format!("{graf_name}: no dashboard provider on /var/lib/grafana/dashboards"));
            }
        }
    }
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        } else if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &to.join(e.file_name()));
        }
    }
}

/// A copy of `from` in `to` with `old` replaced by `new` once in `file` (which must hold it).
fn mutated(from: &Path, to: &Path, file: &str, old: &str, new: &str) {
    copy_dir(from, to);
    let path = to.join(file);
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains(old), "{file} no longer holds {old:?}: update this mutation");
    std::fs::write(&path, text.replacen(old, new, 1)).unwrap();
}

#[test]
fn compose_runs_three_instances_behind_haproxy_that_forwards_every_listener_port() {
    let mut pending = Vec::new();
    let problems = check_compose(&repo().join("docker"), &mut pending);
    for note in &pending {
        eprintln!("pending key (PENDING_KEYS): {note}");
    }
    assert!(problems.is_empty(), "docker/compose.yaml:\n{}", problems.join("\n"));
}

#[test]
fn compose_check_finds_each_kind_of_breakage() {
    let docker = repo().join("docker");
    let cases: &[(&str, &str, &str, &str)] = &[
        ("compose.yaml", "image: haproxy:3.2.4", "image: haproxy:latest", "not pinned"),
        (
            "compose.yaml",
            "image: jaegertracing/all-in-one:1.62.0",
            "image: bitnami/jaeger:1.62.0",
            "neither built here",
        ),
        (
            "compose.yaml",
            "MIRRORGATE__INSTANCES__NAME: mirrorgate-3",
            "MIRRORGATE__INSTANCES__NAME: mirrorgate-2",
            "not distinct",
        ),
        ("compose.yaml", "MIRRORGATE__LOG__LEVEL: info", "MIRRORGATE__LOG__LEVLE: info", "key `log.levle`"),
        (
            "compose.yaml",
            "MIRRORGATE__LOG__FORMAT: text",
            "MIRRORGATE__LOG__FORMAT: xml",
            "MIRRORGATE__LOG__FORMAT=\"xml\"",
        ),
        ("compose.yaml", "\"19092-19100:19092-19100\"", "\"29092-29100:19092-19100\"", "does not publish host port"),
        (
            "compose.yaml",
            "      MIRRORGATE__INSTANCES__NAME: mirrorgate-3\n",
            "      MIRRORGATE__INSTANCES__NAME: mirrorgate-3\n    command: [\"run\"]\n",
            "overrides the image's command line",
        ),
        (
            "compose.yaml",
            "      MIRRORGATE__INSTANCES__NAME: mirrorgate-2\n",
            "      MIRRORGATE__INSTANCES__NAME: mirrorgate-2\n    ports: [\"19092:19092\"]\n",
            "publishes ports",
        ),
        ("haproxy.cfg", "bind :19192-19200", "bind :19192-19199", "frontends bind exactly its ports"),
        ("haproxy.cfg", "uri /ready", "uri /health", "not GET /ready"),
        (
            "haproxy.cfg",
            "server mirrorgate-3 mirrorgate-3 check port 9464",
            "server mirrorgate-3 mirrorgate-3:19092 check port 9464",
            "names a port",
        ),
        (
            "haproxy.cfg",
            "server mirrorgate-2 mirrorgate-2 check port 9464",
            "server mirrorgate-2 mirrorgate-2 check",
            "not checked on the metrics port",
        ),
        ("haproxy.cfg", "    server mirrorgate-1 mirrorgate-1 check port 9464\n", "", "expected the instances"),
        (
            "compose.yaml",
            "BOOTSTRAP_SERVERS: destination:9092",
            "BOOTSTRAP_SERVERS: kafka:9092",
            "\"kafka\" is no compose service",
        ),
        ("compose.yaml", "GET /ready HTTP", "GET /health HTTP", "is not GET /ready on port 9464"),
        (
            "compose.yaml",
            "dockerfile: docker/Dockerfile",
            "dockerfile: Dockerfile",
            "not the repository with docker/Dockerfile",
        ),
        (
            "compose.yaml",
            "\"19092-19100:19092-19100\"",
            "\"19092-19100:19092-19100\"\n      - \"8404:8404\"",
            "publishes port 8404",
        ),
        ("haproxy.cfg", "    mode tcp\n", "    mode http\n", "not mode tcp"),
        ("haproxy.cfg", "bind :19092-19100", "bind :19092-19100\n    bind :19300", "port 19300 is no port"),
        ("haproxy.cfg", "default_backend mirrorgate_compose", "default_backend mirrorgate_other", "does not exist"),
        ("proxy-ha.yaml", "listen: 0.0.0.0:9464", "listen: 127.0.0.1:9464", "not reachable from HAProxy"),
        ("proxy-ha.yaml", "advertised_host: haproxy", "advertised_host: mirrorgate-1", "neither the load balancer"),
        ("proxy-ha.yaml", "listen: 0.0.0.0:9464", "listen: 0.0.0.0:9465", "not checked on the metrics port 9465"),
        ("proxy-ha.yaml", "port_range: 19092-19100", "port_range: 19092-19101", "frontends bind exactly its ports"),
        ("compose.yaml", "image: prom/prometheus:v2.53.2", "image: prom/prometheus:latest", "not pinned"),
        (
            "prometheus/prometheus.yml",
            "mirrorgate-3:9464",
            "mirrorgate-3:9465",
            "expected every instance's metrics port",
        ),
        ("prometheus/prometheus.yml", "  - alerts.yml", "  - alert.yml", "rule file alert.yml"),
        (
            "grafana/provisioning/datasources/prometheus.yml",
            "http://prometheus:9090",
            "http://localhost:9090",
            "datasource",
        ),
        ("compose.yaml", "./grafana/mirrorgate.json:", "./grafana/missing.json:", "dashboard is not mounted"),
    ];
    let mut missed = Vec::new();
    for (i, (file, old, new, expect)) in cases.iter().enumerate() {
        let dir = scratch(&format!("compose-mutation-{i}"));
        mutated(&docker, &dir, file, old, new);
        let problems = check_compose(&dir, &mut Vec::new());
        if !problems.iter().any(|p| p.contains(expect)) {
            missed.push(format!("{file}: {old:?} -> {new:?}: expected a problem with {expect:?}, got {problems:#?}"));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}

// ---- docs/kubernetes/ ----------------------------------------------------------------------

#[derive(Debug, serde::Deserialize)]
struct K8sResult {
    dir: String,
    errors: Vec<String>,
    objects: Vec<String>,
    config_path: String,
    proxy_yaml: String,
    env: BTreeMap<String, String>,
}

/// `go run` of tests/k8s-check over `dirs` (modules pinned by its go.sum, fetched by the Go
/// toolchain when missing); panics when Go or the modules are not available.
fn k8s_check(dirs: &[PathBuf]) -> Vec<K8sResult> {
    let mut cmd = Command::new("go");
    cmd.current_dir(repo().join("tests/k8s-check")).args(["run", "-mod=readonly", "."]).args(dirs);
    if let Err(e) = Command::new("go").arg("version").output() {
        panic!("cannot run `go` for tests/k8s-check ({e}): the Go toolchain (>= 1.26) is needed");
    }
    let out = run(cmd, None, Duration::from_secs(600));
    assert!(
        out.status.success(),
        "tests/k8s-check failed to run (Go toolchain and module proxy needed):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let results: Vec<K8sResult> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("k8s-check output {l:?}: {e}")))
        .collect();
    assert_eq!(results.len(), dirs.len(), "one result per directory: {results:?}");
    results
}

#[test]
fn kubernetes_manifests_decode_strictly_agree_with_each_other_and_configure_a_valid_mirrorgate() {
    let dir = repo().join("docs/kubernetes");
    let docs = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap());
    let docs: BTreeSet<String> = docs.collect();
    assert!(docs.contains("README.md"), "docs/kubernetes/README.md");
    let [r] = <[K8sResult; 1]>::try_from(k8s_check(std::slice::from_ref(&dir))).unwrap();
    assert!(r.errors.is_empty(), "{}:\n{}", r.dir, r.errors.join("\n"));
    let kinds: BTreeSet<&str> = r.objects.iter().map(|o| o.split('/').next().unwrap()).collect();
    assert_eq!(
        kinds,
        BTreeSet::from(["ConfigMap", "Deployment", "Namespace", "PodDisruptionBudget", "Service"]),
        "{:?}",
        r.objects
    );
    // The image's command line reads the file the ConfigMap provides.
    assert_eq!(r.config_path, IMAGE_CONFIG);
    let file = scratch("k8s").join("proxy.yaml");
    std::fs::write(&file, &r.proxy_yaml).unwrap();
    let (mut problems, mut pending) = (Vec::new(), Vec::new());
    check_config_with_env(
        "docs/kubernetes (ConfigMap proxy.yaml, Deployment env)",
        &file,
        &r.env,
        &mut problems,
        &mut pending,
    );
    for note in &pending {
        eprintln!("pending key (PENDING_KEYS): {note}");
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(r.env.contains_key("MIRRORGATE__INSTANCES__NAME"), "each replica gets an instance name: {:?}", r.env);
}

#[test]
fn kubernetes_check_finds_each_kind_of_breakage() {
    let k8s = repo().join("docs/kubernetes");
    let cases: &[(&str, &str, &str, &str)] = &[
        ("deployment.yaml", "  replicas: 3\n", "  replicas: 3\n  replicaCount: 3\n", "unknown field \"replicaCount\""),
        ("deployment.yaml", "  replicas: 3\n", "  replicas: 2\n", "replicas must be 3"),
        ("deployment.yaml", "path: /ready", "path: /readyz", "readinessProbe GETs \"/readyz\""),
        ("deployment.yaml", "path: /health", "path: /ready", "livenessProbe GETs \"/ready\""),
        (
            "deployment.yaml",
            "{ name: metrics, containerPort: 9464",
            "{ name: metrics, containerPort: 9465",
            "not the metrics.listen port",
        ),
        (
            "deployment.yaml",
            "terminationGracePeriodSeconds: 60",
            "terminationGracePeriodSeconds: 40",
            "terminationGracePeriodSeconds 40",
        ),
        ("deployment.yaml", "name: mirrorgate-config", "name: mirrorgate-conf", "no key of ConfigMap"),
        (
            "deployment.yaml",
            "readOnlyRootFilesystem: true",
            "readOnlyRootFilesystem: \"yes\"",
            "readOnlyRootFilesystem",
        ),
        ("service.yaml", "component: proxy", "component: proxi", "does not select the Deployment's pods"),
        (
            "service.yaml",
            "    - { name: node-7, port: 19100, targetPort: 19100, protocol: TCP }\n",
            "",
            "no port 19100",
        ),
        (
            "service.yaml",
            "port: 19095, targetPort: 19095",
            "port: 19095, targetPort: 19096",
            "port 19095 goes to 19096",
        ),
        ("pdb.yaml", "maxUnavailable: 1", "maxUnavailable: 2", "maxUnavailable must be 1"),
        (
            "pdb.yaml",
            "app.kubernetes.io/part-of: mirrorgate",
            "app.kubernetes.io/part-of: mirror gate",
            "metadata.labels",
        ),
        (
            "configmap.yaml",
            "advertised_host: mirrorgate.mirrorgate.svc.cluster.local",
            "advertised_host: mirrorgate-0",
            "advertises \"mirrorgate-0\"",
        ),
        ("configmap.yaml", "port_range: 19092-19100", "port_range: 19092-19101", "no port 19101"),
        ("namespace.yaml", "kind: Namespace", "kind: Namespaces", "not one this example uses"),
    ];
    let dirs: Vec<PathBuf> = cases
        .iter()
        .enumerate()
        .map(|(i, (file, old, new, _))| {
            let dir = scratch(&format!("k8s-mutation-{i}"));
            mutated(&k8s, &dir, file, old, new);
            dir
        })
        .collect();
    let results = k8s_check(&dirs);
    let mut missed = Vec::new();
    for ((file, old, new, expect), r) in cases.iter().zip(&results) {
        if !r.errors.iter().any(|e| e.contains(expect)) {
            missed.push(format!("{file}: {old:?} -> {new:?}: expected an error with {expect:?}, got {:#?}", r.errors));
        }
    }
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
