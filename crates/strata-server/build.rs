//! Turns the command table (`commands/*.json`, one file per command group)
//! into Rust statics, so that every fact about a command is stated once, in
//! data, and a misspelt flag, category or handler fails the build.
//!
//! The generated `commands.rs` holds one static `Spec` per command and
//! subcommand (`client|list`), a container listing its subcommands and a
//! subcommand naming its container, and `COMMANDS`, all of them by id (each
//! top-level command followed by its subcommands). Names of flags and ACL
//! categories become the constants of `cmd::table::{flag, acl, key_flag}`
//! (upper case, `-` as `_`); handlers are paths under `cmd::`.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{Map, Value};

fn main() {
    println!("cargo:rerun-if-changed=commands");
    let dir = Path::new("commands");
    let mut files: Vec<_> = match std::fs::read_dir(dir) {
        Ok(rd) => {
            rd.filter_map(|e| e.ok().map(|e| e.path())).filter(|p| p.extension().is_some_and(|x| x == "json")).collect()
        }
        Err(e) => fail(&format!("commands/: {e}")),
    };
    files.sort();
    let mut commands: Vec<(String, Map<String, Value>)> = Vec::new();
    for path in &files {
        println!("cargo:rerun-if-changed={}", path.display());
        let text = std::fs::read_to_string(path).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        let table: Map<String, Value> =
            serde_json::from_str(&text).unwrap_or_else(|e| fail(&format!("{}: {e}", path.display())));
        for (name, v) in table {
            let Value::Object(m) = v else { fail(&format!("{name}: not an object")) };
            commands.push((name, m));
        }
    }
    commands.sort_by(|a, b| a.0.cmp(&b.0));
    // Flatten: a container, then its subcommands.
    let mut flat: Vec<Flat> = Vec::new();
    for (name, m) in &commands {
        let at = flat.len();
        flat.push(Flat { name: name.clone(), spec: m.clone(), parent: None, subs: Vec::new() });
        if let Some(Value::Object(subs)) = m.get("subcommands") {
            for (sub, v) in subs {
                let Value::Object(sm) = v else { fail(&format!("{name}|{sub}: not an object")) };
                let i = flat.len();
                flat.push(Flat { name: format!("{name}|{sub}"), spec: sm.clone(), parent: Some(at), subs: Vec::new() });
                flat[at].subs.push(i);
            }
        }
    }
    let mut out = String::new();
    for (i, f) in flat.iter().enumerate() {
        out.push_str(&spec(i, f, &flat));
    }
    let _ = writeln!(out, "/// Every command and subcommand, by id; generated from `commands/*.json`.");
    let all: Vec<String> = (0..flat.len()).map(|i| format!("&CMD_{i}")).collect();
    let _ = writeln!(out, "pub(super) static COMMANDS: [&Spec; {}] = [{}];", flat.len(), all.join(", "));
    let out_dir = std::env::var("OUT_DIR").unwrap_or_else(|_| fail("OUT_DIR unset"));
    if let Err(e) = std::fs::write(Path::new(&out_dir).join("commands.rs"), out) {
        fail(&format!("writing commands.rs: {e}"));
    }
}

struct Flat {
    name: String,
    spec: Map<String, Value>,
    parent: Option<usize>,
    subs: Vec<usize>,
}

fn fail(msg: &str) -> ! {
    eprintln!("command table: {msg}");
    std::process::exit(1)
}

fn constant(name: &str) -> String {
    name.trim_start_matches('@').to_ascii_uppercase().replace('-', "_")
}

fn strs<'a>(m: &'a Map<String, Value>, key: &str, who: &str) -> Vec<&'a str> {
    match m.get(key) {
        None => Vec::new(),
        Some(Value::Array(a)) => {
            a.iter().map(|v| v.as_str().unwrap_or_else(|| fail(&format!("{who}.{key}: not a string")))).collect()
        }
        Some(_) => fail(&format!("{who}.{key}: not a list")),
    }
}

fn bits(module: &str, names: &[&str]) -> String {
    if names.is_empty() {
        return "0".into();
    }
    names.iter().map(|n| format!("{module}::{}", constant(n))).collect::<Vec<_>>().join(" | ")
}

fn int(v: &Value, who: &str) -> i64 {
    v.as_i64().unwrap_or_else(|| fail(&format!("{who}: not an integer")))
}

fn spec(i: usize, f: &Flat, flat: &[Flat]) -> String {
    let who = &f.name;
    let m = &f.spec;
    // A subcommand runs its container's handler.
    let holder = f.parent.map_or(m, |p| &flat[p].spec);
    let handler = holder.get("handler").and_then(Value::as_str).unwrap_or_else(|| fail(&format!("{who}: no handler")));
    let run = match holder.get("context").and_then(Value::as_str) {
        Some("connection") => format!("Run::Session(super::{handler})"),
        None => format!("Run::Data(super::{handler})"),
        Some(other) => fail(&format!("{who}: unknown context {other}")),
    };
    let arity = int(m.get("arity").unwrap_or(&Value::Null), &format!("{who}.arity"));
    let mut flags = strs(m, "flags", who);
    flags.extend(strs(m, "strata", who));
    let events = match m.get("events") {
        None => "Events::None".to_string(),
        Some(Value::String(custom)) => format!("Events::Custom(super::notify::{custom})"),
        Some(Value::Array(list)) => {
            let evs: Vec<String> = list
                .iter()
                .map(|e| match e.as_array().map(Vec::as_slice) {
                    Some([Value::String(class), Value::String(event), at, rest @ ..]) => {
                        let kept = match rest {
                            [] => false,
                            [Value::String(k)] if k == "kept" => true,
                            _ => fail(&format!("{who}.events: only \"kept\" may follow the argument")),
                        };
                        format!(
                            "Event {{ class: crate::pubsub::events::{}, event: {event:?}, arg: {}, kept: {kept} }}",
                            constant(class),
                            int(at, who)
                        )
                    }
                    _ => fail(&format!("{who}.events: [class, event, argument, \"kept\"?] expected")),
                })
                .collect();
            format!("Events::Fixed(&[{}])", evs.join(", "))
        }
        Some(_) => fail(&format!("{who}.events: a list or a function name expected")),
    };
    let key_specs: Vec<String> = match m.get("key_specs") {
        None => Vec::new(),
        Some(Value::Array(a)) => a.iter().map(|k| key_spec(k, who)).collect(),
        Some(_) => fail(&format!("{who}.key_specs: not a list")),
    };
    let tips: Vec<String> = strs(m, "tips", who).iter().map(|t| format!("{t:?}")).collect();
    let docs = match m.get("docs") {
        Some(d) => doc(d, "", who),
        None => fail(&format!("{who}: no docs")),
    };
    let propagate = match m.get("propagate").and_then(Value::as_str) {
        Some(f) => format!("Some(super::propagate::{f})"),
        None => "None".into(),
    };
    let getkeys = match m.get("getkeys").and_then(Value::as_str) {
        Some(path) => format!("Some(super::{path})"),
        None => "None".into(),
    };
    let subs: Vec<String> = f.subs.iter().map(|i| format!("&CMD_{i}")).collect();
    let parent = match f.parent {
        Some(p) => format!("Some({:?})", flat[p].name),
        None => "None".into(),
    };
    format!(
        "static CMD_{i}: Spec = Spec {{\n        id: {i},\n        name: {:?},\n        arity: {arity},\n        flags: {},\n        acl: {},\n        \
         key_specs: &[{}],\n        tips: &[{}],\n        run: {run},\n        getkeys: {getkeys},\n        propagate: {propagate},\n        events: {events},\n        docs: {docs},\n        \
         parent: {parent},\n        subcommands: &[{}],\n}};\n",
        f.name,
        bits("flag", &flags),
        bits("acl", &strs(m, "acl_categories", who)),
        key_specs.join(", "),
        tips.join(", "),
        subs.join(", ")
    )
}

fn key_spec(v: &Value, who: &str) -> String {
    let Value::Object(m) = v else { fail(&format!("{who}.key_specs: not an object")) };
    let notes = match m.get("notes").and_then(Value::as_str) {
        Some(n) => format!("Some({n:?})"),
        None => "None".into(),
    };
    let flags = bits("key_flag", &strs(m, "flags", who));
    let begin = match m.get("begin_search") {
        Some(Value::String(s)) if s == "unknown" => "Begin::Unknown".to_string(),
        Some(Value::Object(b)) if b.contains_key("index") => {
            format!("Begin::Index({})", int(&b["index"], who))
        }
        Some(Value::Object(b)) if b.contains_key("keyword") => format!(
            "Begin::Keyword {{ keyword: {:?}, startfrom: {} }}",
            b["keyword"].as_str().unwrap_or_else(|| fail(&format!("{who}: keyword"))),
            int(b.get("startfrom").unwrap_or(&Value::Null), who)
        ),
        _ => fail(&format!("{who}: begin_search is 'unknown', {{index}} or {{keyword, startfrom}}")),
    };
    let three = |v: &Value| -> [i64; 3] {
        match v.as_array().map(Vec::as_slice) {
            Some([a, b, c]) => [int(a, who), int(b, who), int(c, who)],
            _ => fail(&format!("{who}: find_keys takes three integers")),
        }
    };
    let find = match m.get("find_keys") {
        Some(Value::String(s)) if s == "unknown" => "Find::Unknown".to_string(),
        Some(Value::Object(f)) if f.contains_key("range") => {
            let [lastkey, keystep, limit] = three(&f["range"]);
            format!("Find::Range {{ lastkey: {lastkey}, keystep: {keystep}, limit: {limit} }}")
        }
        Some(Value::Object(f)) if f.contains_key("keynum") => {
            let [keynumidx, firstkey, keystep] = three(&f["keynum"]);
            format!("Find::Keynum {{ keynumidx: {keynumidx}, firstkey: {firstkey}, keystep: {keystep} }}")
        }
        _ => fail(&format!("{who}: find_keys is 'unknown', {{range}} or {{keynum}}")),
    };
    format!("KeySpec {{ notes: {notes}, flags: {flags}, begin: {begin}, find: {find} }}")
}

/// A documentation value as `Doc`: maps stay maps (their order kept), and
/// the fields Redis answers as sets (`flags`, `doc_flags`: status strings;
/// `history`: pairs) become sets.
fn doc(v: &Value, key: &str, who: &str) -> String {
    match (key, v) {
        ("flags" | "doc_flags", Value::Array(a)) => {
            let items: Vec<String> = a
                .iter()
                .map(|x| format!("Doc::Simple({:?})", x.as_str().unwrap_or_else(|| fail(&format!("{who}: {key}")))))
                .collect();
            format!("Doc::Set(&[{}])", items.join(", "))
        }
        ("history", Value::Array(a)) => {
            let items: Vec<String> = a.iter().map(|x| doc(x, "", who)).collect();
            format!("Doc::Set(&[{}])", items.join(", "))
        }
        (_, Value::Object(m)) => {
            let items: Vec<String> = m.iter().map(|(k, x)| format!("({k:?}, {})", doc(x, k, who))).collect();
            format!("Doc::Map(&[{}])", items.join(", "))
        }
        (_, Value::Array(a)) => {
            let items: Vec<String> = a.iter().map(|x| doc(x, "", who)).collect();
            format!("Doc::List(&[{}])", items.join(", "))
        }
        (_, Value::String(s)) => format!("Doc::Str({s:?})"),
        (_, Value::Number(n)) => format!("Doc::Int({})", n.as_i64().unwrap_or_else(|| fail(&format!("{who}: {key}")))),
        _ => fail(&format!("{who}: {key}: unexpected value in docs")),
    }
}
