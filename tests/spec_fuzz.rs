//! Hostile specs: a generated corpus of malformed specs (mutations of every
//! shipped spec) through the compiler and the plan in-process, then a
//! sample through the real binary.
//!
//! - In-process, every case either compiles and plans, or is rejected with
//!   errors that carry file:line:col wherever the problem has a place in the
//!   file; none panics, none takes more than [`CASE_LIMIT`].
//! - Through the binary, `validate`, `plan` and `run` agree on the exit code
//!   of a rejected spec (2), and nothing runs.
//! - A property test: arbitrary TOML-ish text never panics the compiler.
//!
//! The generator is deterministic (a fixed seed), so a failure names a
//! case that can be rebuilt: `CORPUS_CASE=N cargo test --test spec_fuzz`
//! writes case N to stdout.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use infer_bench::plan::Plan;
use infer_bench::spec;

/// Cases generated from the shipped specs.
const CASES: usize = 3_200;
/// Longest a single case may take in-process.
const CASE_LIMIT: Duration = Duration::from_secs(2);

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every shipped spec: specs/ and tests/specs/, with its folder.
fn seeds() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    for dir in ["specs", "tests/specs"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(root().join(dir))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "toml"))
            .collect();
        files.sort();
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            out.push((f, text));
        }
    }
    assert!(out.len() >= 10, "the shipped specs are the corpus's seeds");
    out
}

/// splitmix64: small, deterministic, good enough to pick mutations.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

const NUMBERS: &[&str] = &[
    "0",
    "-1",
    "1e300",
    "-1e300",
    "nan",
    "inf",
    "-inf",
    "1e-300",
    "18446744073709551615",
    "9223372036854775807",
    "4294967296",
    "4294967295",
    "1000000000",
    "0.0000001",
    "1.0000001",
    "-0.0",
];

fn strings() -> Vec<String> {
    vec![
        String::new(),
        "../../x".into(),
        "\\r\\n".into(),
        "a\\r\\nInjected: 1".into(),
        "x".repeat(10_000),
        "/proc/self/environ".into(),
        "/dev/zero".into(),
        "/dev/urandom".into(),
        "/".into(),
        "{env.HOME}".into(),
        "{precision.weights}".into(),
        "{nope}".into(),
        "1e300/s".into(),
        "9223372036854775808/s".into(),
        "0s".into(),
        "100000000h".into(),
        "< 150%".into(),
        "< 1e300%".into(),
        "p99 < 1e300ms".into(),
        "http://127.0.0.1:99999/v1".into(),
        "empirical(file=\\\"/proc/self/environ\\\")".into(),
        "uniform(0, 4294967295)".into(),
        "normal(mean=1e300, std=1e300)".into(),
        "\\u0000".into(),
        "é🙂".into(),
    ]
}

/// The value of a `key = value` line, as a byte range.
fn value_range(line: &str) -> Option<std::ops::Range<usize>> {
    let t = line.trim_start();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let eq = line.find('=')?;
    let start = eq + 1 + (line[eq + 1..].len() - line[eq + 1..].trim_start().len());
    let end = line.find(" #").filter(|e| *e > start).unwrap_or(line.len());
    (start < end).then_some(start..end)
}

/// One mutation of `text`.
fn mutate(text: &str, rng: &mut Rng) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        lines.push(String::new());
    }
    let n = lines.len();
    let valued: Vec<usize> = (0..n)
        .filter(|&i| value_range(&lines[i]).is_some())
        .collect();
    match rng.below(10) {
        0 => {
            lines.remove(rng.below(n));
        }
        1 => {
            let i = rng.below(n);
            let l = lines[i].clone();
            lines.insert(i, l);
        }
        2 if valued.len() >= 2 => {
            let a = *rng.pick(&valued);
            let b = *rng.pick(&valued);
            let (ra, rb) = (
                value_range(&lines[a]).unwrap(),
                value_range(&lines[b]).unwrap(),
            );
            let (va, vb) = (
                lines[a][ra.clone()].to_string(),
                lines[b][rb.clone()].to_string(),
            );
            lines[a].replace_range(ra, &vb);
            if a != b {
                let rb = value_range(&lines[b]).unwrap();
                lines[b].replace_range(rb, &va);
            }
        }
        3 => {
            // A number anywhere (in a value, an inline table, a string).
            let i = rng.below(n);
            let l = &lines[i];
            let digits: Vec<usize> = l
                .char_indices()
                .filter(|(_, c)| c.is_ascii_digit())
                .map(|(b, _)| b)
                .collect();
            if let Some(&at) = digits.get(rng.below(digits.len())) {
                let end = l[at..]
                    .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                    .map_or(l.len(), |e| at + e);
                let with = *rng.pick(NUMBERS);
                lines[i].replace_range(at..end, with);
            }
        }
        4 if !valued.is_empty() => {
            let i = *rng.pick(&valued);
            let r = value_range(&lines[i]).unwrap();
            let s = rng.pick(&strings()).clone();
            lines[i].replace_range(r, &format!("\"{s}\""));
        }
        5 => {
            let i = rng.below(n);
            let junk = [
                "\u{0}", "\u{7}", "\r", "\"", "[", "]]", "{", "=", "é", "🙂", "\\", "'''",
                "\"\"\"", "[[x]]", "= =",
            ];
            let l = &mut lines[i];
            let mut at = rng.below(l.len() + 1);
            while !l.is_char_boundary(at) {
                at -= 1;
            }
            let j = *rng.pick(&junk[..]);
            l.insert_str(at, j);
        }
        6 => {
            let depth = [2, 10, 100, 1_000, 5_000][rng.below(5)];
            let key = vec!["k"; depth].join(".");
            lines.insert(rng.below(n + 1), format!("{key} = 1"));
        }
        7 => {
            // A table of hostile values in a known section.
            let extra = [
                "[load]\nconcurrency = 100000000",
                "[load.ramp]\nfrom = 1\nfactor = 1.0000001\nevery = \"1s\"\nto = 100000",
                "[targets.t.sim]\nslowdown = 1e300",
                "[workloads.w]\ninput_tokens = 4294967295\noutput_tokens = 1\nconversation = { turns = 4294967295 }",
                "[models.m.precisions.\"../../x\"]\ndtype = \"fp8\"",
                "[matrix]\nconcurrency = [1, 1, 1]",
                "[slo]\nerror_rate = \"< 150%\"",
                "[targets.t]\nkind = \"openai\"\nbase_url = \"http://h:99999\"\nheaders = { \"a b\" = \"c\\r\\nd\" }",
            ];
            lines.push(rng.pick(&extra[..]).to_string());
        }
        _ => {
            // Truncate at a random byte (on a character boundary: the
            // compiler's input is text; non-UTF-8 is the reader's case).
            let joined = lines.join("\n");
            let mut at = rng.below(joined.len() + 1);
            while !joined.is_char_boundary(at) {
                at -= 1;
            }
            return joined[..at].to_string();
        }
    }
    lines.join("\n") + "\n"
}

/// Case `i` of the corpus: its seed's index and its text.
fn case(seeds: &[(PathBuf, String)], i: usize) -> (usize, String) {
    let mut rng = Rng(0x5eed_0000 + i as u64);
    let s = i % seeds.len();
    let mut text = seeds[s].1.clone();
    for _ in 0..1 + rng.below(3) {
        text = mutate(&text, &mut rng);
    }
    (s, text)
}

#[derive(Default, Debug)]
struct Tally {
    cases: usize,
    accepted: usize,
    rejected: usize,
    panics: Vec<usize>,
    slow: Vec<(usize, Duration)>,
    /// (case, message) of rejections without a position.
    unplaced: Vec<(usize, String)>,
    /// Errors that rightly have no position (see `may_lack_position`).
    placeless: usize,
}

/// Errors that have no place in the file: about the file as a whole, or
/// about something the file lacks.
fn may_lack_position(e: &spec::SpecError) -> bool {
    e.message.starts_with("the spec defines no ")
        || e.message.starts_with("invalid TOML: ")
            && (e.message.contains("recursion") || e.message.contains("recurse"))
            && e.line > 0
}

fn compile_and_plan(seed: &Path, text: &str) -> Result<usize, spec::SpecErrors> {
    let base = seed.parent().unwrap();
    let s = spec::compile(&seed.display().to_string(), text, base)?;
    Ok(Plan::build(&s)?.points.len())
}

#[test]
fn a_corpus_of_malformed_specs_never_panics_hangs_or_loses_its_position() {
    let seeds = seeds();
    if let Some(n) = std::env::var("CORPUS_CASE")
        .ok()
        .and_then(|s| s.parse().ok())
    {
        print!("{}", case(&seeds, n).1);
        return;
    }
    let (tx, rx) = mpsc::channel::<(
        usize,
        Duration,
        Result<Result<(), Vec<spec::SpecError>>, ()>,
    )>();
    let started = mpsc::channel::<usize>();
    let worker_seeds = seeds.clone();
    let default_hook = std::panic::take_hook();
    std::panic::set_hook(Box::new(|_| {}));
    let worker = std::thread::Builder::new()
        .stack_size(64 << 20)
        .spawn(move || {
            for i in 0..CASES {
                let (s, text) = case(&worker_seeds, i);
                let seed = worker_seeds[s].0.clone();
                started.0.send(i).ok();
                let t = Instant::now();
                let r = std::panic::catch_unwind(|| {
                    compile_and_plan(&seed, &text).map(|_| ()).map_err(|e| e.0)
                })
                .map_err(|_| ());
                if tx.send((i, t.elapsed(), r)).is_err() {
                    return;
                }
            }
        })
        .unwrap();
    let mut tally = Tally::default();
    let all = Instant::now();
    for _ in 0..CASES {
        // A case that never ends is a hang: the limit, plus slack for a
        // loaded machine, and the case's number to rebuild it.
        let (i, took, r) = match rx.recv_timeout(CASE_LIMIT * 5) {
            Ok(x) => x,
            Err(_) => {
                let stuck = started.1.try_iter().last();
                std::panic::set_hook(default_hook);
                panic!("case {stuck:?} hangs: no answer in {:?}", CASE_LIMIT * 5);
            }
        };
        tally.cases += 1;
        if took > CASE_LIMIT {
            tally.slow.push((i, took));
        }
        match r {
            Err(()) => tally.panics.push(i),
            Ok(Ok(())) => tally.accepted += 1,
            Ok(Err(errors)) => {
                tally.rejected += 1;
                assert!(!errors.is_empty(), "case {i}: rejected without a word");
                for e in errors {
                    if e.line == 0 && !may_lack_position(&e) {
                        tally
                            .unplaced
                            .push((i, format!("{}: {}", e.key, e.message)));
                    } else if e.line == 0 {
                        tally.placeless += 1;
                    }
                }
            }
        }
    }
    std::panic::set_hook(default_hook);
    worker.join().unwrap();
    eprintln!(
        "spec corpus: {} cases, {} accepted, {} rejected, {} panics, {} slow, {} errors without position ({} of them rightly: the file lacks a section), in {:?}",
        tally.cases,
        tally.accepted,
        tally.rejected,
        tally.panics.len(),
        tally.slow.len(),
        tally.unplaced.len() + tally.placeless,
        tally.placeless,
        all.elapsed()
    );
    assert!(
        tally.panics.is_empty(),
        "cases that panic: {:?}",
        tally.panics
    );
    assert!(
        tally.slow.is_empty(),
        "cases slower than {CASE_LIMIT:?}: {:?}",
        tally.slow
    );
    assert!(
        tally.unplaced.is_empty(),
        "rejections without file:line:col: {:#?}",
        &tally.unplaced[..tally.unplaced.len().min(20)]
    );
    assert!(
        tally.rejected > CASES / 4,
        "the mutations should break specs: {tally:?}"
    );
    assert!(tally.accepted > 0, "some mutations keep a spec valid");
}

/// A spec file the binary reads, in its own folder.
fn write_case(dir: &Path, name: &str, text: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p
}

fn exit_of(args: &[&str], spec: &Path, cwd: &Path) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_infer-bench"))
        .current_dir(cwd)
        .args(args)
        .arg(spec)
        .env_remove("INFER_BENCH_ALLOW_LAUNCH")
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn validate_plan_and_run_agree_on_rejected_specs() {
    let seeds = seeds();
    let dir = tempfile::tempdir().unwrap();
    let mut cases: Vec<(String, Vec<u8>, PathBuf)> = Vec::new();
    // The named cases of the issue: each must be refused by all three.
    let named = root().join("tests/invalid-specs");
    for f in [
        "cap-input-tokens",
        "cap-rate",
        "cap-ramp-factor",
        "cap-slowdown",
        "cap-runs",
        "cap-matrix",
        "slo-percent-150",
        "precision-path-name",
        "params-b-disagrees",
        "kv-cache-zero",
        "sim-70b-one-a100",
        "port-99999",
        "header-crlf",
        "startup-timeout-zero",
        "launch-missing-weights",
        "launch-missing-cwd",
        "not-a-tokenizer",
        "dataset-bad-line",
        "dataset-images-file-url",
        "dataset-images-not-an-image",
        "empirical-environ",
        "ca-cert-not-pem",
        "deep-dotted-key",
        "not-utf8",
    ] {
        let text = std::fs::read(named.join(format!("{f}.toml"))).unwrap();
        cases.push((f.to_string(), text, named.clone()));
    }
    // And generated ones the compiler rejects.
    let mut i = 0;
    while cases.len() < 64 {
        let (s, text) = case(&seeds, 10_000 + i);
        i += 1;
        if compile_and_plan(&seeds[s].0, &text).is_err() {
            cases.push((
                format!("case-{}", 10_000 + i - 1),
                text.into_bytes(),
                dir.path().to_path_buf(),
            ));
        }
    }
    let mut disagree = Vec::new();
    for (n, (name, text, cwd)) in cases.iter().enumerate() {
        // Named cases stay in their folder (they name files beside them).
        let path = if cwd == dir.path() {
            write_case(dir.path(), &format!("c{n}.toml"), text)
        } else {
            cwd.join(format!("{name}.toml"))
        };
        let out = dir.path().join(format!("out{n}"));
        let out_s = out.display().to_string();
        let v = exit_of(&["validate"], &path, cwd);
        let p = exit_of(&["plan"], &path, cwd);
        let r = exit_of(&["run", "--out", &out_s], &path, cwd);
        for (what, (code, stderr)) in [("validate", &v), ("plan", &p), ("run", &r)] {
            assert!(!stderr.contains("panicked"), "{name}: {what}: {stderr}");
            if *code != Some(2) {
                disagree.push(format!("{name}: {what} exited {code:?}: {stderr}"));
            }
        }
        assert!(!out.exists(), "{name}: run created its output folder");
        assert!(
            !v.1.contains("HOME=") && !v.1.contains("PATH="),
            "{name}: the environment leaked: {}",
            v.1
        );
    }
    // Accepted ones: validate and plan both succeed (running them is the
    // other suites' business).
    let mut accepted = 0;
    let mut i = 0;
    while accepted < 8 {
        let (s, text) = case(&seeds, 20_000 + i);
        i += 1;
        if compile_and_plan(&seeds[s].0, &text).is_err() || seeds[s].1.contains("tokenizer") {
            continue;
        }
        accepted += 1;
        let path = write_case(dir.path(), &format!("ok{i}.toml"), text.as_bytes());
        for what in ["validate", "plan"] {
            let (code, stderr) = exit_of(&[what], &path, dir.path());
            if code != Some(0) {
                disagree.push(format!(
                    "case {}: {what} exited {code:?}: {stderr}",
                    20_000 + i - 1
                ));
            }
        }
    }
    assert!(disagree.is_empty(), "{}", disagree.join("\n"));
}

mod property {
    use super::*;
    use proptest::prelude::*;

    fn tomlish() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("name = \"x\"\n".to_string()),
            Just("[targets.sim]\nkind = \"sim\"\n".to_string()),
            Just("[models.m]\npreset = \"llama-3.1-8b\"\n".to_string()),
            Just("[workloads.w]\ninput_tokens = 8\noutput_tokens = 8\n".to_string()),
            Just("[load]\nconcurrency = 1\nrequests = 1\n".to_string()),
            Just("[matrix]\n".to_string()),
            "[a-z_.]{1,12} = [0-9e.+-]{1,8}\n",
            "[a-z_.]{1,12} = \"[ -~]{0,12}\"\n",
            "\\[[a-z_.]{1,16}\\]\n",
            "[ -~\n\t\r]{0,40}",
        ];
        proptest::collection::vec(piece, 0..12).prop_map(|v| v.concat())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]
        #[test]
        fn arbitrary_tomlish_text_never_panics_the_compiler(text in tomlish()) {
            let _ = compile_and_plan(&root().join("specs/x.toml"), &text);
        }
    }
}
