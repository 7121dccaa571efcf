//! docs/configuration.md against the code: the key tables there are the reference for
//! `proxy.yaml`, so they must list exactly the keys `ProxyConfig` accepts, with the code's
//! defaults, and cover every key the example `proxy.yaml` uses.
//!
//! No Kafka needed. The set of keys the code accepts is discovered from the code itself: every
//! config struct denies unknown fields, and serde's "unknown field `x`, expected one of ..."
//! message lists the real ones. Defaults are compared through the validated `Settings`: a
//! minimal config with a key set to its documented default must validate to exactly the same
//! settings as the minimal config without it.

use std::collections::{BTreeMap, BTreeSet};

use mirrorgate::config::ProxyConfig;
use serde_json::{json, Map, Value};

const DOC: &str = include_str!("../docs/configuration.md");
const EXAMPLE: &str = include_str!("../proxy.yaml");
const DOCKER_EXAMPLE: &str = include_str!("../docker/proxy.yaml");
const PROBE: &str = "zz_not_a_key";

/// One row of a key table: `| `key` | default | unit | meaning |`.
#[derive(Debug)]
struct Row {
    key: String,
    default: Default,
}

#[derive(Debug, PartialEq)]
enum Default {
    /// "required": no default, startup fails without the key.
    Required,
    /// A literal in code font: the value the key takes when absent.
    Literal(String),
    /// Plain words: derived from other keys, not checked here.
    Derived,
}

fn doc_rows(doc: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    let mut in_key_table = false;
    for line in doc.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_key_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"Key") {
            assert_eq!(cells, ["Key", "Default", "Unit", "Meaning"], "key table header in docs/configuration.md");
            in_key_table = true;
            continue;
        }
        if !in_key_table || cells[0].starts_with("---") {
            continue;
        }
        let key = code(cells[0]).unwrap_or_else(|| panic!("key cell is not in code font: {line}"));
        let default = match cells[1] {
            "required" => Default::Required,
            d => match code(d) {
                Some(lit) => Default::Literal(lit),
                None => Default::Derived,
            },
        };
        rows.push(Row { key, default });
    }
    rows
}

/// The text of a cell that is exactly one code span.
fn code(cell: &str) -> Option<String> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    (!inner.contains('`')).then(|| inner.to_string())
}

fn minimal() -> Value {
    json!({
        "destination": { "bootstrap_servers": "127.0.0.1:9092" },
        "listeners": [ { "bind_host": "127.0.0.1", "port_range": "19092-19191" } ],
    })
}

/// JSON is YAML, so a `Value` can be fed to the real YAML loader.
fn parse(v: &Value) -> Result<ProxyConfig, String> {
    ProxyConfig::from_yaml(&v.to_string()).map_err(|e| e.to_string())
}

fn settings_debug(v: &Value) -> Result<String, String> {
    let settings = parse(v)?.validate().map_err(|e| e.to_string())?;
    Ok(format!("{settings:?}"))
}

/// The object a documented key lives in: `a.b` → `root["a"]`, `listeners[].x` →
/// `root["listeners"][0]`, `x` → `root`. Creates objects on the way.
fn parent_mut<'a>(root: &'a mut Value, key: &str) -> (&'a mut Map<String, Value>, String) {
    let mut parts: Vec<&str> = key.split('.').collect();
    let leaf = parts.pop().expect("non-empty key").to_string();
    let mut cur = root;
    for p in parts {
        cur = match p.strip_suffix("[]") {
            Some(list) => &mut cur[list][0],
            None => {
                let obj = cur.as_object_mut().expect("object");
                obj.entry(p).or_insert_with(|| json!({}))
            }
        };
    }
    (cur.as_object_mut().unwrap_or_else(|| panic!("`{key}`: parent is not an object")), leaf)
}

fn with_key(key: &str, value: Value) -> Value {
    let mut root = minimal();
    let (parent, leaf) = parent_mut(&mut root, key);
    parent.insert(leaf, value);
    root
}

/// A documented literal as the YAML scalar it stands for.
fn literal(s: &str) -> Value {
    if let Ok(n) = s.parse::<i64>() {
        json!(n)
    } else if let Ok(b) = s.parse::<bool>() {
        json!(b)
    } else {
        json!(s)
    }
}

/// Field names serde lists in "unknown field `zz_not_a_key`, expected one of `a`, `b`", or
/// `None` when the error is not an unknown-field error (the probed path is not a struct).
fn expected_fields(err: &str) -> Option<Vec<String>> {
    let rest = &err[err.find(&format!("unknown field `{PROBE}`"))?..];
    let list = rest.split_once("expected").map_or("", |(_, l)| l);
    // The config crate appends where it happened: "... for key `destination`".
    let list = list.split(" for key ").next().unwrap_or(list);
    Some(list.split('`').skip(1).step_by(2).map(String::from).collect())
}

/// Every leaf key `ProxyConfig` accepts, found by probing each struct with an unknown field.
fn accepted_keys() -> BTreeSet<String> {
    fn walk(prefix: &str, node: &Value, out: &mut BTreeSet<String>) {
        // Probe this struct with an unknown field; the error lists its real fields.
        let probe_key = if prefix.is_empty() { PROBE.to_string() } else { format!("{prefix}.{PROBE}") };
        let err = match parse(&with_key(&probe_key, json!(1))) {
            Ok(_) => panic!("`{probe_key}` was accepted: the config struct does not deny unknown fields"),
            Err(e) => e,
        };
        let fields = expected_fields(&err).unwrap_or_else(|| panic!("probing `{probe_key}`: {err}"));
        assert!(!fields.is_empty(), "probing `{probe_key}` listed no fields: {err}");
        for f in fields {
            let path = if prefix.is_empty() { f.clone() } else { format!("{prefix}.{f}") };
            match node.get(&f) {
                // A list of structs (listeners): probe its first element.
                Some(Value::Array(items)) => walk(&format!("{path}[]"), &items[0], out),
                _ => {
                    let sub = with_key(&path, json!({ PROBE: 1 }));
                    let is_struct = parse(&sub).err().is_some_and(|e| expected_fields(&e).is_some());
                    if is_struct {
                        walk(&path, &json!({}), out);
                    } else {
                        out.insert(path);
                    }
                }
            }
        }
    }
    let mut out = BTreeSet::new();
    walk("", &minimal(), &mut out);
    out
}

/// Leaf keys of `proxy.yaml` with their values, as the config loader reads them.
fn example_keys() -> BTreeMap<String, Value> {
    fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
        match v {
            Value::Object(m) => {
                for (k, v) in m {
                    flatten(&if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") }, v, out);
                }
            }
            Value::Array(items) => items.iter().for_each(|i| flatten(&format!("{prefix}[]"), i, out)),
            leaf => {
                out.insert(prefix.to_string(), leaf.clone());
            }
        }
    }
    let mut out = BTreeMap::new();
    flatten("", &example_tree(), &mut out);
    out
}

fn scalar_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[test]
fn documented_keys_are_exactly_the_accepted_keys() {
    let rows = doc_rows(DOC);
    assert!(rows.len() >= 10, "found only {} key rows in docs/configuration.md", rows.len());
    let mut documented = BTreeSet::new();
    for r in &rows {
        assert!(documented.insert(r.key.clone()), "`{}` is documented twice", r.key);
    }
    let accepted = accepted_keys();
    let undocumented: Vec<_> = accepted.difference(&documented).collect();
    let unknown: Vec<_> = documented.difference(&accepted).collect();
    assert!(
        undocumented.is_empty() && unknown.is_empty(),
        "docs/configuration.md is out of step with src/config.rs\n  accepted by the code but not documented: \
         {undocumented:?}\n  documented but refused by the code: {unknown:?}"
    );
}

#[test]
fn every_key_in_proxy_yaml_is_documented_with_the_same_default() {
    let rows: BTreeMap<String, Default> = doc_rows(DOC).into_iter().map(|r| (r.key, r.default)).collect();
    let example = example_keys();
    assert!(example.len() >= 5, "proxy.yaml parsed to only {example:?}");
    for (key, value) in &example {
        let default = rows.get(key).unwrap_or_else(|| panic!("proxy.yaml key `{key}` is not in docs/configuration.md"));
        // proxy.yaml spells out the defaults; listener entries are examples, not defaults.
        if let (Default::Literal(d), false) = (default, key.starts_with("listeners[]")) {
            assert_eq!(&scalar_text(value), d, "proxy.yaml `{key}` differs from its documented default");
        }
    }
    parse(&example_tree()).expect("proxy.yaml parses as a ProxyConfig");
}

/// `proxy.yaml` as the config loader reads it.
fn example_tree() -> Value {
    let cfg = config::Config::builder()
        .add_source(config::File::from_str(EXAMPLE, config::FileFormat::Yaml))
        .build()
        .expect("proxy.yaml loads");
    cfg.try_deserialize().expect("proxy.yaml as a tree")
}

#[test]
fn docker_image_config_is_valid() {
    let cfg = ProxyConfig::from_yaml(DOCKER_EXAMPLE).expect("docker/proxy.yaml loads");
    let settings = cfg.validate().expect("docker/proxy.yaml validates");
    let l = &settings.listeners[0];
    assert_eq!((l.bootstrap_port, l.advertised_host.as_str()), (19092, "localhost"), "compose.yaml publishes 19092");
}

#[test]
fn documented_defaults_are_the_code_defaults() {
    let base = settings_debug(&minimal()).expect("the minimal config validates");
    let mut checked = 0;
    for row in doc_rows(DOC) {
        match &row.default {
            Default::Literal(d) => {
                let got = settings_debug(&with_key(&row.key, literal(d)))
                    .unwrap_or_else(|e| panic!("`{}: {d}` (its documented default) is refused: {e}", row.key));
                assert_eq!(got, base, "`{}`: the documented default `{d}` is not the code's default", row.key);
                checked += 1;
            }
            Default::Required => {
                let mut root = minimal();
                let (parent, leaf) = parent_mut(&mut root, &row.key);
                assert!(
                    parent.remove(&leaf).is_some(),
                    "required `{}` missing from the test's minimal config",
                    row.key
                );
                assert!(parse(&root).is_err(), "`{}` is documented as required but a config without it loads", row.key);
            }
            Default::Derived => {}
        }
    }
    assert!(checked >= 8, "only {checked} literal defaults checked");
}

#[test]
fn a_changed_default_is_noticed() {
    // The comparison above can fail: a non-default value changes the settings.
    let base = settings_debug(&minimal()).unwrap();
    let changed = settings_debug(&with_key("max_in_flight_requests", json!(7))).unwrap();
    assert_ne!(base, changed);
    // And the table parser sees the rows this test file relies on.
    let rows = doc_rows(DOC);
    assert!(rows.iter().any(|r| r.key == "destination.bootstrap_servers" && r.default == Default::Required));
    assert!(rows.iter().any(|r| r.key == "listeners[].admin" && r.default == Default::Literal("false".into())));
}

/// One row of the mirror config table: `| `name` | default | unit | meaning |`, with the default
/// as `KEYS` spells it (`required` / `none` → `None`, `empty` → `Some("")`, a code span → its
/// text).
#[derive(Debug)]
struct MirrorRow {
    name: String,
    default: Option<String>,
    required: bool,
    unit: String,
}

fn mirror_rows(doc: &str) -> Vec<MirrorRow> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for line in doc.lines() {
        let line = line.trim();
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"Mirror config") {
            assert_eq!(
                cells,
                ["Mirror config", "Default", "Unit", "Meaning"],
                "mirror config table header in docs/configuration.md"
            );
            in_table = true;
            continue;
        }
        if !in_table || cells[0].starts_with("---") {
            continue;
        }
        assert_eq!(cells.len(), 4, "mirror config row has {} cells: {line}", cells.len());
        let name = code(cells[0]).unwrap_or_else(|| panic!("mirror config name is not in code font: {line}"));
        let default =
            match cells[1] {
                "required" | "none" => None,
                "empty" => Some(String::new()),
                d => Some(code(d).unwrap_or_else(|| {
                    panic!("`{name}`: default must be `literal`, required, none or empty, not {d:?}")
                })),
            };
        assert!(!cells[3].is_empty(), "`{name}` has no meaning");
        rows.push(MirrorRow { name, default, required: cells[1] == "required", unit: cells[2].to_string() });
    }
    rows
}

#[test]
fn mirror_config_table_is_exactly_the_code_keys_with_their_defaults() {
    use mirrorgate::mirror::configs::KEYS;
    let rows = mirror_rows(DOC);
    assert!(!rows.is_empty(), "no mirror config table (header `| Mirror config | Default | Unit | Meaning |`)");
    let mut documented = BTreeMap::new();
    for r in &rows {
        assert!(documented.insert(r.name.as_str(), r).is_none(), "mirror config `{}` is documented twice", r.name);
    }
    let code_keys: BTreeMap<&str, _> = KEYS.iter().map(|k| (k.name, k)).collect();
    let missing: Vec<_> = code_keys.keys().filter(|k| !documented.contains_key(*k)).collect();
    let extra: Vec<_> = documented.keys().filter(|k| !code_keys.contains_key(*k)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "docs/configuration.md mirror configs are out of step with src/mirror/configs.rs KEYS\n  in KEYS but not \
         documented: {missing:?}\n  documented but not in KEYS: {extra:?}"
    );
    for (name, k) in &code_keys {
        let row = documented[name];
        assert_eq!(
            row.default.as_deref(),
            k.default,
            "mirror config `{name}`: documented default differs from src/mirror/configs.rs"
        );
        if let Some(d) = k.default {
            assert_eq!(mirrorgate::mirror::configs::validate(name, d), Ok(()), "`{name}`: default is invalid");
        }
        // Units that can be told from the name.
        if name.ends_with(".ms") {
            assert_eq!(row.unit, "ms", "mirror config `{name}` unit");
        }
        if name.ends_with(".bytes") {
            assert_eq!(row.unit, "bytes", "mirror config `{name}` unit");
        }
    }
    // `required` is exactly what validate_all requires: a config with every other key set (to its
    // default, or an address) is refused as missing that key.
    let full: BTreeMap<String, String> = KEYS
        .iter()
        .filter_map(|k| {
            let v = k.default.or((k.name == "bootstrap.servers").then_some("127.0.0.1:9092"))?;
            Some((k.name.to_string(), v.to_string()))
        })
        .collect();
    assert_eq!(mirrorgate::mirror::configs::validate_all(&full), Ok(()));
    for r in &rows {
        let mut without = full.clone();
        without.remove(&r.name);
        let refused = matches!(
            mirrorgate::mirror::configs::validate_all(&without),
            Err(mirrorgate::mirror::configs::ConfigValueError::Missing(ref k)) if k == &r.name
        );
        assert_eq!(r.required, refused, "mirror config `{}`: documented as required = {}", r.name, r.required);
    }
}

#[test]
fn kip_alias_table_is_exactly_the_code_aliases() {
    use mirrorgate::mirror::configs::{key, ALIASES};
    let mut in_table = false;
    let mut documented = Vec::new();
    for line in DOC.lines().map(str::trim) {
        if !line.starts_with('|') {
            in_table = false;
            continue;
        }
        let cells: Vec<&str> = line.trim_matches('|').split('|').map(str::trim).collect();
        if cells.first() == Some(&"KIP-1279 name") {
            assert_eq!(cells, ["KIP-1279 name", "Same as"], "alias table header in docs/configuration.md");
            in_table = true;
            continue;
        }
        if in_table && !cells[0].starts_with("---") {
            let alias = code(cells[0]).unwrap_or_else(|| panic!("alias not in code font: {line}"));
            let target = code(cells[1]).unwrap_or_else(|| panic!("key not in code font: {line}"));
            documented.push((alias, target));
        }
    }
    let code_aliases: Vec<(String, String)> = ALIASES.iter().map(|(a, k)| (a.to_string(), k.to_string())).collect();
    assert_eq!(documented, code_aliases, "docs/configuration.md KIP-1279 names vs src/mirror/configs.rs ALIASES");
    for (a, k) in ALIASES {
        assert_eq!(key(a).map(|d| d.name), Some(*k), "alias `{a}`");
    }
}

#[test]
fn a_wrong_mirror_config_row_is_noticed() {
    // The parser reads the rows this test relies on, so a changed default or a missing row
    // would be seen by the comparison above.
    let rows = mirror_rows(DOC);
    let get = |n: &str| rows.iter().find(|r| r.name == n).unwrap_or_else(|| panic!("no row for `{n}`"));
    assert_eq!(get("bootstrap.servers").default, None);
    assert_eq!(get("topics.include").default, Some(String::new()));
    assert_eq!(get("topics.exclude").default, Some("__.*".to_string()));
    let changed = DOC.replace("| `fetch.max.bytes` | `1048576` |", "| `fetch.max.bytes` | `1048577` |");
    let r = mirror_rows(&changed).into_iter().find(|r| r.name == "fetch.max.bytes").unwrap();
    assert_ne!(r.default.as_deref(), mirrorgate::mirror::configs::key("fetch.max.bytes").unwrap().default);
}
