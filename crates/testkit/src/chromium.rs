//! Headless Chromium for the tests that look at a page as a browser lays it
//! out (the HTML report, the history page): where it is, and one run of it
//! with the flags CI uses, offline.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Chromium: `$CHROMIUM`, or the first of its usual names on `PATH`.
pub fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |d| d.join(name)))
    .find(|p| p.is_file())
}

/// Runs headless Chromium with the flags CI uses on the file `page`;
/// gives up after 90 s. Its stdout (`--dump-dom`'s page).
pub fn chromium(exe: &Path, profile: &Path, extra: &[&str], page: &Path) -> String {
    let url = format!("file://{}", page.canonicalize().unwrap().display());
    let mut child = Command::new(exe)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(extra)
        .arg(url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stdout.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            assert!(status.success(), "chromium exited with {status}");
            break;
        }
        if start.elapsed() > Duration::from_secs(90) {
            let _ = child.kill();
            panic!("chromium did not finish in 90 s");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    reader.join().unwrap()
}

/// The text of `<pre id="ID">` in a page Chromium dumped (`--dump-dom`),
/// unescaped: what a probe script appended to the page wrote there.
pub fn pre_text(dom: &str, id: &str) -> String {
    let tag = format!("<pre id=\"{id}\">");
    let start = dom.find(&tag).expect("the probe ran") + tag.len();
    let end = start + dom[start..].find("</pre>").expect("the probe's end");
    dom[start..end]
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&amp;", "&")
}
