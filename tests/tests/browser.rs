//! The booking page in a real browser: headless Chromium from Debian's packages
//! (`chromium`, `chromium-driver`), driven over WebDriver by a small client of its own
//! on the HTTP client the tests already use. Each test starts a chromedriver on a free
//! port and a dev server on its own database, clicks through the page as a person
//! would, and checks the outcome in SQL. The screenshots of docs/screenshots/ are
//! written here.
//!
//! A binary of its own, so the main suite is not slowed by browsers; its tests run one
//! at a time (two Chromiums are plenty for two cores). The tests that need a browser
//! are ignored by a bare `cargo test`, which reports them as ignored; scripts/test
//! installs Chromium and runs them (`cargo test -p acceptance --test browser --
//! --ignored`), and without chromedriver they fail, naming the packages to install.

use acceptance::{TestApp, send};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use uuid::Uuid;

/// One browser test at a time, across the test threads of this binary.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// How long a wait for the page may take before the test gives up. A guard against a
/// hang, not a measure: every wait ends as soon as its condition holds.
const PATIENCE: Duration = Duration::from_secs(30);

const ELEMENT: &str = "element-6066-11e4-a52e-4f735466cecf";

/// A chromedriver of this test, stopped when dropped: its sessions are deleted first
/// (chromedriver then quits their Chromiums itself), then chromedriver is killed, then
/// any Chromium process left from its tree, each by the exact id read from /proc before
/// the kill. Never a process group and never a negative id: a kill of "-1" ends every
/// process of the machine.
struct Chromedriver {
    child: Child,
    url: String,
    http: reqwest::Client,
    sessions: std::sync::Mutex<Vec<String>>,
    /// This test's turn, given back once the chromedriver is gone.
    _turn: tokio::sync::MutexGuard<'static, ()>,
}

impl Drop for Chromedriver {
    fn drop(&mut self) {
        for session in std::mem::take(&mut *self.sessions.lock().unwrap_or_else(|e| e.into_inner())) {
            delete_blocking(&self.url, &session);
        }
        let left = descendants(self.child.id());
        let _ = self.child.kill();
        let _ = self.child.wait();
        let left: Vec<String> =
            left.into_iter().filter(|&pid| still_chromium(pid)).map(|pid| pid.to_string()).collect();
        if !left.is_empty() {
            let _ = Command::new("/usr/bin/kill").arg("-KILL").args(&left).stderr(Stdio::null()).status();
        }
    }
}

/// `DELETE /session/{id}` without the async runtime, which a `Drop` cannot wait on.
fn delete_blocking(base: &str, session: &str) {
    use std::io::{Read, Write};
    let Some(authority) = base.strip_prefix("http://") else { return };
    let Ok(mut stream) = std::net::TcpStream::connect(authority) else { return };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(10)));
    let request = format!("DELETE /session/{session} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_ok() {
        let _ = stream.read_to_end(&mut Vec::new());
    }
}

/// Every process below `pid`, from the kernel's lists of each thread's children. Ids
/// above 1 only, so nothing read here can name "every process".
fn descendants(pid: u32) -> Vec<u32> {
    let mut found = Vec::new();
    let mut todo = vec![pid];
    while let Some(parent) = todo.pop() {
        let Ok(tasks) = std::fs::read_dir(format!("/proc/{parent}/task")) else { continue };
        for task in tasks.flatten() {
            let children = std::fs::read_to_string(task.path().join("children")).unwrap_or_default();
            for child in children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()).filter(|&c| c > 1) {
                if !found.contains(&child) {
                    found.push(child);
                    todo.push(child);
                }
            }
        }
    }
    found
}

/// Whether `pid` is still a Chromium process (and not an id the kernel has since given
/// to something else).
fn still_chromium(pid: u32) -> bool {
    pid > 1
        && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|comm| comm.trim_end().starts_with("chrom"))
}

fn chromedriver_path() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into()));
    path.exists().then_some(path)
}

impl Chromedriver {
    /// A running chromedriver, once it is this test's turn. Fails when none is installed.
    async fn start() -> Chromedriver {
        let turn = ONE_AT_A_TIME.lock().await;
        let path = chromedriver_path().unwrap_or_else(|| {
            panic!("no chromedriver: apt-get install -y chromium chromium-driver (or set CHROMEDRIVER)")
        });
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Chromedriver {
            child,
            url: format!("http://127.0.0.1:{port}"),
            http: reqwest::Client::new(),
            sessions: std::sync::Mutex::new(Vec::new()),
            _turn: turn,
        };
        let started = Instant::now();
        loop {
            if let Ok(r) = driver.http.get(format!("{}/status", driver.url)).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return driver;
            }
            assert!(started.elapsed() < PATIENCE, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless Chromium window, 1280 x 900.
    async fn browser(&self) -> Browser {
        self.session(json!({})).await
    }

    /// A new headless Chromium as a phone: a 390 x 844 screen, touch, and scrollbars
    /// drawn over the page as a phone's are (not beside it, as a desktop's).
    async fn phone(&self) -> Browser {
        self.session(json!({"mobileEmulation": {"deviceMetrics": {"width": 390, "height": 844, "pixelRatio": 1, "touch": true}}}))
            .await
    }

    async fn session(&self, options: Value) -> Browser {
        let mut chrome = json!({
            "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
            "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                     "--disable-gpu", "--lang=en-GB"],
        });
        for (k, v) in options.as_object().unwrap() {
            chrome[k] = v.clone();
        }
        let caps = json!({"capabilities": {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": chrome}}});
        let url = format!("{}/session", self.url);
        // A Chromium that dies while starting on a loaded machine ("DevToolsActivePort
        // file doesn't exist") is started again, twice at most: the browser is the
        // test's tool, not what it tests.
        let mut answer = try_call(&self.http, reqwest::Method::POST, &url, Some(caps.clone())).await;
        for _ in 0..2 {
            match &answer {
                Err((_, e)) if e["value"]["error"] == "session not created" => {
                    answer = try_call(&self.http, reqwest::Method::POST, &url, Some(caps.clone())).await;
                }
                _ => break,
            }
        }
        let answer = answer.unwrap_or_else(|(status, e)| panic!("POST {url}: {status} {e}"));
        let id = answer["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_string();
        self.sessions.lock().unwrap().push(id.clone());
        Browser { http: self.http.clone(), session: format!("{}/session/{id}", self.url) }
    }
}

/// One WebDriver command: its `value`, or the status and error document of a refusal.
async fn try_call(
    http: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<Value>,
) -> Result<Value, (StatusCode, Value)> {
    let mut req = http.request(method.clone(), url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status();
    let value: Value = resp.json().await.unwrap_or(Value::Null);
    if status.is_success() { Ok(value["value"].clone()) } else { Err((status, value)) }
}

async fn call(http: &reqwest::Client, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    match try_call(http, method.clone(), url, body).await {
        Ok(value) => value,
        Err((status, value)) => panic!("{method} {url}: {status} {value}"),
    }
}

/// One WebDriver session: a browser window.
struct Browser {
    http: reqwest::Client,
    session: String,
}

impl Browser {
    async fn post(&self, path: &str, body: Value) -> Value {
        call(&self.http, reqwest::Method::POST, &format!("{}{path}", self.session), Some(body)).await
    }

    async fn goto(&self, url: &str) {
        self.post("/url", json!({"url": url})).await;
    }

    async fn js(&self, script: &str, args: Value) -> Value {
        self.post("/execute/sync", json!({"script": script, "args": args})).await
    }

    /// Waits until `predicate` (a JavaScript expression) is truthy.
    async fn wait_for(&self, what: &str, predicate: &str) {
        let script = format!("return !!({predicate});");
        let started = Instant::now();
        while self.js(&script, json!([])).await != true {
            if started.elapsed() > PATIENCE {
                let said = self.message().await;
                panic!("waited in vain for {what}; the page says {said:?}");
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn element(&self, css: &str) -> String {
        let css_json = serde_json::to_string(css).unwrap();
        self.wait_for(&format!("an element {css}"), &format!("document.querySelector({css_json})")).await;
        let found = self.post("/element", json!({"using": "css selector", "value": css})).await;
        found[ELEMENT].as_str().expect("an element reference").to_string()
    }

    /// A real click (WebDriver's, with the pointer), on the element once it is enabled.
    /// The page redraws its lists on every refresh, so an element found a moment ago may
    /// be gone: then the one that replaced it is found and clicked.
    async fn click(&self, css: &str) {
        let css_json = serde_json::to_string(css).unwrap();
        let started = Instant::now();
        loop {
            self.wait_for(&format!("{css} to be enabled"), &format!("!document.querySelector({css_json})?.disabled"))
                .await;
            let id = self.element(css).await;
            let url = format!("{}/element/{id}/click", self.session);
            match try_call(&self.http, reqwest::Method::POST, &url, Some(json!({}))).await {
                Ok(_) => return,
                Err((_, e)) if e["value"]["error"] == "stale element reference" && started.elapsed() < PATIENCE => {}
                Err((status, e)) => panic!("POST {url}: {status} {e}"),
            }
        }
    }

    async fn type_into(&self, css: &str, text: &str) {
        let id = self.element(css).await;
        self.post(&format!("/element/{id}/clear"), json!({})).await;
        self.post(&format!("/element/{id}/value"), json!({"text": text})).await;
    }

    async fn text(&self, css: &str) -> String {
        let css_json = serde_json::to_string(css).unwrap();
        let v = self.js(&format!("return document.querySelector({css_json})?.textContent ?? null"), json!([])).await;
        v.as_str().unwrap_or_default().to_string()
    }

    async fn message(&self) -> String {
        self.text("#messages").await
    }

    /// The `data-state` of the calendar cell of `day` (0 = Monday) at `hour`.
    async fn cell_state(&self, day: u8, hour: u8) -> String {
        let v = self
            .js(&format!("return document.querySelector('{}')?.dataset.state ?? null", cell(day, hour)), json!([]))
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    async fn wait_for_cell(&self, day: u8, hour: u8, state: &str) {
        let predicate = format!("document.querySelector('{}')?.dataset.state === '{state}'", cell(day, hour));
        self.wait_for(&format!("cell {day}/{hour} to be {state}"), &predicate).await;
    }

    /// Opens the page at `path` (`/` or `/app`, with a query or without), signs in as
    /// `who`, picks `resource` and shows next week (every hour of it lies ahead, whenever
    /// the test runs).
    async fn open(&self, app: &TestApp, path: &str, who: &str, resource: Uuid) {
        self.sign_in(app, path, who, resource).await;
        self.go_to_week(resource, 1).await;
    }

    /// Opens the page at `path`, signs in as `who` and picks `resource`; returns once the
    /// calendar shows it, at the week the page opens on.
    async fn sign_in(&self, app: &TestApp, path: &str, who: &str, resource: Uuid) {
        self.goto(&app.url(path)).await;
        self.type_into("#who", who).await;
        self.click("#sign-in").await;
        self.wait_for(
            "the resource list",
            &format!("[...document.querySelectorAll('#resource option')].some(o => o.value === '{resource}')"),
        )
        .await;
        self.js(
            "const s = document.getElementById('resource'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
            json!([resource]),
        )
        .await;
        self.wait_for(
            &format!("{resource} painted"),
            &format!("document.getElementById('calendar').dataset.resource === '{resource}'"),
        )
        .await;
    }

    /// Steps the calendar of `resource` from the week it shows to `week` (0 = this one).
    async fn go_to_week(&self, resource: Uuid, week: i64) {
        loop {
            let shown = self.js("return Number(document.getElementById('calendar').dataset.week)", json!([])).await;
            let shown = shown.as_i64().expect("a week shown");
            if shown == week {
                break;
            }
            self.click(if shown < week { "#week-next" } else { "#week-prev" }).await;
            let next = if shown < week { shown + 1 } else { shown - 1 };
            self.wait_for_week(resource, next as u8).await;
        }
        self.wait_for_week(resource, week as u8).await;
    }

    /// From now on, every document this browser opens reads the time as `now` plus the
    /// time passed since this call (the service's own clock is the test's ManualClock).
    async fn set_clock(&self, now: chrono::DateTime<chrono::Utc>) {
        let source = format!(
            "(() => {{ const shift = {} - {}; const Real = Date; \
               class Shifted extends Real {{ constructor(...a) {{ if (a.length) super(...a); else super(Real.now() + shift); }} \
                 static now() {{ return Real.now() + shift; }} }} \
               window.Date = Shifted; }})();",
            now.timestamp_millis(),
            chrono::Utc::now().timestamp_millis()
        );
        self.post(
            "/goog/cdp/execute",
            json!({"cmd": "Page.addScriptToEvaluateOnNewDocument", "params": {"source": source}}),
        )
        .await;
    }

    /// Waits until the calendar shows `resource` in `week` (0 = this one) in colour.
    async fn wait_for_week(&self, resource: Uuid, week: u8) {
        let d = "document.getElementById('calendar').dataset";
        self.wait_for(
            &format!("week {week} of {resource} painted"),
            &format!("{d}.resource === '{resource}' && {d}.week === '{week}'"),
        )
        .await;
    }

    /// Asks the page to refresh and waits for a round of reads that began after the ask
    /// (one already under way may have read too early).
    async fn refreshed(&self) {
        let started = self.js("return Number(document.body.dataset.started || 0)", json!([])).await;
        self.click("#refresh").await;
        self.wait_for("a refresh", &format!("Number(document.body.dataset.refreshed || 0) > {started}")).await;
    }

    /// Sets the window's size, and waits until the page has it as its viewport.
    async fn resize(&self, width: u32, height: u32) {
        self.post("/window/rect", json!({"width": width, "height": height})).await;
        self.wait_for(&format!("a viewport {width} wide"), &format!("window.innerWidth === {width}")).await;
    }

    /// The `data-state` of the start at local `time` ("09:30") of `day` (0 = Monday).
    async fn slot_state(&self, day: u8, time: &str) -> String {
        let v = self
            .js(&format!("return document.querySelector('{}')?.dataset.state ?? null", slot(day, time)), json!([]))
            .await;
        v.as_str().unwrap_or_default().to_string()
    }

    async fn wait_for_slot(&self, day: u8, time: &str, state: &str) {
        let predicate = format!("document.querySelector('{}')?.dataset.state === '{state}'", slot(day, time));
        self.wait_for(&format!("{time} of day {day} to be {state}"), &predicate).await;
    }

    /// Whether the element is laid out (not hidden by the page or its style).
    async fn shown(&self, css: &str) -> bool {
        let css_json = serde_json::to_string(css).unwrap();
        self.js(&format!("return document.querySelector({css_json})?.getBoundingClientRect().width > 0"), json!([]))
            .await
            == true
    }

    /// Whether the element is wholly inside the viewport.
    async fn in_view(&self, css: &str) -> bool {
        let css_json = serde_json::to_string(css).unwrap();
        let script = format!(
            "const r = document.querySelector({css_json}).getBoundingClientRect(); \
             return r.width > 0 && r.top >= 0 && r.left >= 0 && r.bottom <= window.innerHeight && r.right <= window.innerWidth;"
        );
        self.js(&script, json!([])).await == true
    }

    /// axe-core's serious and critical findings on the page as it is, one line each:
    /// the rule, then the elements that break it. axe-core is injected into the page
    /// from the cache `axe_core` fills. Besides its default rules it runs
    /// label-content-name-mismatch (WCAG 2.5.3, Label in Name), which axe 4 ships as
    /// experimental and off: a control's visible words must be part of its name.
    async fn accessibility_findings(&self) -> Vec<String> {
        self.js(&format!("{}\nreturn typeof axe === 'object';", axe_core()), json!([])).await;
        let script = "const done = arguments[arguments.length - 1]; \
            axe.run(document, {resultTypes: ['violations'], rules: {'label-content-name-mismatch': {enabled: true}}}) \
              .then((r) => done(r.violations \
              .filter((v) => v.impact === 'serious' || v.impact === 'critical') \
              .map((v) => v.id + ' (' + v.impact + '): ' + v.nodes.map((n) => n.target.join(' ')).join(', ')))) \
              .catch((e) => done(['axe failed: ' + e]));";
        let found = self.post("/execute/async", json!({"script": script, "args": []})).await;
        found
            .as_array()
            .expect("a list of findings")
            .iter()
            .map(|f| f.as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// The accessible name of the element, as the browser computes it for a screen
    /// reader (WebDriver's Get Computed Label).
    async fn accessible_name(&self, css: &str) -> String {
        let id = self.element(css).await;
        let url = format!("{}/element/{id}/computedlabel", self.session);
        call(&self.http, reqwest::Method::GET, &url, None).await.as_str().unwrap_or_default().to_string()
    }

    /// Fails on any serious or critical axe-core finding, naming the view.
    async fn assert_accessible(&self, view: &str) {
        let findings = self.accessibility_findings().await;
        assert!(findings.is_empty(), "{view}: axe-core's serious and critical findings: {findings:#?}");
    }

    async fn screenshot(&self, name: &str) {
        let png = base64_decode(self.js_screenshot().await.as_str().expect("a base64 PNG"));
        let dir = acceptance::workspace_root().join("docs/screenshots");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), png).unwrap();
    }

    async fn js_screenshot(&self) -> Value {
        call(&self.http, reqwest::Method::GET, &format!("{}/screenshot", self.session), None).await
    }
}

/// The seconds of a countdown shown as `m:ss`.
fn seconds(countdown: &str) -> u32 {
    let (m, s) = countdown.split_once(':').unwrap_or_else(|| panic!("a countdown: {countdown:?}"));
    m.parse::<u32>().unwrap() * 60 + s.parse::<u32>().unwrap()
}

/// The start at local `time` ("09:30") of `day` (0 = Monday) in the shown week.
fn slot(day: u8, time: &str) -> String {
    format!("#calendar button[data-day=\"{day}\"][data-time=\"{time}\"]")
}

/// The axe-core version the accessibility checks run.
const AXE_CORE: &str = "axe-core@4.10.3";

/// axe-core's script: from `AXE_CORE_JS` when set, else from a cache under target/
/// that npm fills on first use (nothing of it is committed).
fn axe_core() -> String {
    let path = match std::env::var("AXE_CORE_JS") {
        Ok(path) => PathBuf::from(path),
        Err(_) => {
            let cache = acceptance::workspace_root().join("target/axe-core");
            let path = cache.join("node_modules/axe-core/axe.min.js");
            if !path.exists() {
                std::fs::create_dir_all(&cache).unwrap();
                let status = Command::new("npm")
                    .args(["install", "--no-save", "--no-audit", "--no-fund", "--prefix"])
                    .arg(&cache)
                    .arg(AXE_CORE)
                    .stdout(Stdio::null())
                    .status()
                    .unwrap_or_else(|e| panic!("npm, to install {AXE_CORE} for the accessibility checks: {e}"));
                assert!(status.success(), "npm install {AXE_CORE} failed");
            }
            path
        }
    };
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("axe-core at {}: {e}", path.display()))
}

/// A salon chair: open Monday to Friday 09:00-17:00 in New York, on a 30-minute grid,
/// keeping 10 minutes free after each booking, booked for 30 minutes unless asked.
async fn salon_chair(app: &TestApp) -> Uuid {
    let day = json!([["09:00", "17:00"]]);
    app.resource_with(json!({
        "name": "Salon chair",
        "time_zone": "America/New_York",
        "schedule": {"weekly": {"mon": day, "tue": day, "wed": day, "thu": day, "fri": day}, "exceptions": []},
        "slot_minutes": 30,
        "buffer_after_minutes": 10,
        "default_duration_minutes": 30,
    }))
    .await
}

/// Sunday 14 March 2027, 18:40 in Berlin (CET); 12:40 in New York.
fn sunday_evening() -> chrono::DateTime<chrono::Utc> {
    chrono::DateTime::parse_from_rfc3339("2027-03-14T18:40:00+01:00").unwrap().to_utc()
}

/// A desk in Berlin open every day from 09:00 to 20:00, on a 30-minute grid.
async fn late_desk(app: &TestApp) -> Uuid {
    let day = json!([["09:00", "20:00"]]);
    app.resource_with(json!({
        "name": "Late desk", "time_zone": "Europe/Berlin", "slot_minutes": 30,
        "schedule": {"weekly": {"mon": day, "tue": day, "wed": day, "thu": day, "fri": day, "sat": day, "sun": day},
                     "exceptions": []},
    }))
    .await
}

/// The reservations of `resource` as stored: (owner, status, local start and end).
async fn stored_ranges(app: &TestApp, resource: Uuid, zone: &str) -> Vec<(String, String, String)> {
    app.db()
        .await
        .query(
            "SELECT owner, status::text, to_char(starts_at AT TIME ZONE $2, 'Dy HH24:MI') || '-' || \
             to_char(ends_at AT TIME ZONE $2, 'HH24:MI') FROM reservations WHERE resource_id = $1 ORDER BY created_at",
            &[&resource, &zone],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

fn cell(day: u8, hour: u8) -> String {
    format!("#calendar button[data-day=\"{day}\"][data-hour=\"{hour}\"]")
}

fn base64_decode(text: &str) -> Vec<u8> {
    let value = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = text.bytes().filter(|c| !c.is_ascii_whitespace() && *c != b'=').map(value).collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        let n = chunk.iter().enumerate().fold(0u32, |n, (i, &v)| n | (u32::from(v) << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// How many resources named `name` exist (asked of the API, not the page).
async fn resources_named(app: &TestApp, name: &str) -> usize {
    let (_, list) = send(app.get("admin", "/v1/resources?limit=100")).await;
    list["items"].as_array().unwrap().iter().filter(|r| r["name"] == name).count()
}

/// The reservations of `resource` as stored: (owner, status, local start in `zone`).
async fn stored(app: &TestApp, resource: Uuid, zone: &str) -> Vec<(String, String, String)> {
    app.db()
        .await
        .query(
            "SELECT owner, status::text, to_char(starts_at AT TIME ZONE $2, 'Dy HH24:MI') FROM reservations \
             WHERE resource_id = $1 ORDER BY created_at",
            &[&resource, &zone],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect()
}

fn row(owner: &str, status: &str, at: &str) -> (String, String, String) {
    (owner.into(), status.into(), at.into())
}

/// The instant of a calendar cell as the page computed it.
async fn cell_start(browser: &Browser, day: u8, hour: u8) -> String {
    let v = browser.js(&format!("return document.querySelector('{}').dataset.start", cell(day, hour)), json!([])).await;
    v.as_str().expect("a start").to_string()
}

#[test]
fn screenshots_are_decoded_from_base64() {
    assert_eq!(base64_decode("iVBORw0KGgo="), b"\x89PNG\r\n\x1a\n");
    assert_eq!(base64_decode("YWJj"), b"abc");
    assert_eq!(base64_decode("YWI="), b"ab");
}

#[test]
fn countdowns_are_read_as_seconds() {
    assert_eq!(seconds("4:59"), 299);
    assert_eq!(seconds("0:04"), 4);
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_holds_a_free_hour_in_the_resources_zone_confirms_it_and_cancels_it() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "Europe/Berlin";
    let room = app.resource_with(json!({"name": "Room 101", "capacity": 1, "time_zone": zone})).await;
    let page = driver.browser().await;
    page.open(&app, "/", "alice", room).await;

    // Others' claims of next week, made beside the page: a booking and a hold.
    let (bob_start, bob_end) = (cell_start(&page, 2, 12).await, cell_start(&page, 2, 14).await);
    let (status, body) = send(app.post(
        "bob",
        "/v1/reservations",
        &json!({"resource_id": room, "start": bob_start, "end": bob_end, "confirm": true}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
    let (carol_start, carol_end) = (cell_start(&page, 3, 9).await, cell_start(&page, 3, 10).await);
    let (status, _) = app.reserve("carol", room, (&carol_start, &carol_end), 1).await;
    assert_eq!(status, StatusCode::CREATED);
    page.refreshed().await;
    assert_eq!(page.cell_state(2, 12).await, "taken");
    assert_eq!(page.cell_state(2, 13).await, "taken");
    assert_eq!(page.cell_state(3, 9).await, "held");
    assert_eq!(page.cell_state(2, 10).await, "free");

    page.click(&cell(2, 10)).await;
    page.wait_for_cell(2, 10, "mine-held").await;
    page.wait_for("the hold panel", "!document.getElementById('hold').hidden").await;
    let countdown = page.text("#hold-countdown").await;
    assert!((240..=300).contains(&seconds(&countdown)), "a countdown of about five minutes: {countdown}");
    assert!(page.message().await.contains("Held"), "{}", page.message().await);
    page.screenshot("week-with-hold.png").await;
    assert_eq!(
        stored(&app, room, zone).await,
        vec![
            row("bob", "CONFIRMED", "Wed 12:00"),
            row("carol", "HELD", "Thu 09:00"),
            row("alice", "HELD", "Wed 10:00")
        ]
    );

    page.click("#confirm").await;
    page.wait_for_cell(2, 10, "mine").await;
    assert!(page.message().await.starts_with("Confirmed: Room 101"), "{}", page.message().await);
    page.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
    page.screenshot("booked.png").await;
    assert_eq!(stored(&app, room, zone).await[2], row("alice", "CONFIRMED", "Wed 10:00"));

    // A second hold, released from its panel.
    page.click(&cell(4, 16)).await;
    page.wait_for_cell(4, 16, "mine-held").await;
    page.click("#release").await;
    page.wait_for_cell(4, 16, "free").await;
    assert!(page.message().await.starts_with("Released"), "{}", page.message().await);
    assert_eq!(stored(&app, room, zone).await[3], row("alice", "RELEASED", "Fri 16:00"));

    // The booking, cancelled from the list of my reservations.
    page.click("#mine li[data-status=CONFIRMED] button.cancel").await;
    page.wait_for_cell(2, 10, "free").await;
    assert!(page.message().await.starts_with("Cancelled Room 101"), "{}", page.message().await);
    assert_eq!(stored(&app, room, zone).await[2], row("alice", "CANCELLED", "Wed 10:00"));
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn two_browsers_race_for_one_slot_one_holds_it_and_the_other_is_told_it_was_just_taken() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Focus booth", "capacity": 1})).await;
    let (alice, bob) = (driver.browser().await, driver.browser().await);
    // Both views go stale on purpose: no refresh of their own until the race is run.
    alice.open(&app, "/?refresh=600", "alice", room).await;
    bob.open(&app, "/?refresh=600", "bob", room).await;
    assert_eq!(alice.cell_state(1, 11).await, "free");
    assert_eq!(bob.cell_state(1, 11).await, "free");

    let slot = cell(1, 11);
    tokio::join!(alice.click(&slot), bob.click(&slot));

    let mut outcomes = Vec::new();
    for page in [&alice, &bob] {
        page.wait_for("the outcome", "/^(Held|Just taken)/.test(document.getElementById('messages').textContent)")
            .await;
        outcomes.push(page.message().await.starts_with("Held"));
    }
    assert_eq!(outcomes.iter().filter(|won| **won).count(), 1, "exactly one browser holds the slot");
    let (winner, loser) = if outcomes[0] { (&alice, &bob) } else { (&bob, &alice) };
    // The message is written before the calendar is drawn again: wait for the cell.
    winner.wait_for_cell(1, 11, "mine-held").await;
    assert!(loser.message().await.contains("someone else got"), "{}", loser.message().await);
    // The loser's calendar was read again at once: the hour shows as held by another.
    loser.wait_for_cell(1, 11, "held").await;
    loser.screenshot("just-taken.png").await;

    let start = cell_start(&alice, 1, 11).await;
    let active = app
        .count(
            "SELECT count(*) FROM reservations WHERE resource_id = $1 AND starts_at = $2::text::timestamptz \
             AND status IN ('HELD','CONFIRMING','CONFIRMED')",
            &[&room, &start],
        )
        .await;
    assert_eq!(active, 1, "one reservation for the slot");
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_hold_lapses_on_screen_when_its_countdown_reaches_zero() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Quick room", "capacity": 1, "hold_ttl_seconds": 4})).await;
    let page = driver.browser().await;
    // The page at its route in AWS, `/app`, rather than the dev server's `/`.
    page.open(&app, "/app", "alice", room).await;

    page.click(&cell(0, 9)).await;
    page.wait_for_cell(0, 9, "mine-held").await;
    let countdown = page.text("#hold-countdown").await;
    assert!(seconds(&countdown) <= 4, "a countdown of the resource's four seconds at most: {countdown}");

    page.wait_for_cell(0, 9, "free").await;
    page.wait_for("the panel gone", "document.getElementById('hold').hidden").await;
    assert!(page.message().await.contains("expired; the time is free again"), "{}", page.message().await);
    assert!(acceptance::active_claims(&app.db().await, room).await.is_empty(), "the lapsed hold claims nothing");
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_joins_the_waitlist_of_a_full_hour_and_accepts_the_offer_when_it_frees() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Meeting room", "capacity": 1})).await;
    let (alice, bob) = (driver.browser().await, driver.browser().await);
    alice.open(&app, "/", "alice", room).await;
    alice.click(&cell(3, 15)).await;
    alice.wait_for_cell(3, 15, "mine-held").await;
    alice.click("#confirm").await;
    alice.wait_for_cell(3, 15, "mine").await;

    bob.open(&app, "/", "bob", room).await;
    assert_eq!(bob.cell_state(3, 15).await, "taken");
    bob.click(&cell(3, 15)).await;
    bob.wait_for("the waiting entry", "document.querySelector('#waits li[data-status=WAITING]')").await;
    assert!(bob.message().await.contains("on the waitlist"), "{}", bob.message().await);
    assert!(bob.text("#waits").await.contains("position 1"), "{}", bob.text("#waits").await);
    // Another browser of bob's, with storage of its own, shows the same entry: the page
    // reads a person's entries from the server (`GET /v1/waitlist`).
    let elsewhere = driver.browser().await;
    elsewhere.open(&app, "/", "bob", room).await;
    elsewhere
        .wait_for("the entry in bob's other browser", "document.querySelector('#waits li[data-status=WAITING]')")
        .await;
    assert!(elsewhere.text("#waits").await.contains("position 1"), "{}", elsewhere.text("#waits").await);

    // Alice cancels from her list; the freed hour is offered to bob in that transaction.
    alice.click("#mine li[data-status=CONFIRMED] button.cancel").await;
    alice.wait_for_cell(3, 15, "held").await;

    bob.wait_for("the offer", "document.getElementById('accept-offer')").await;
    assert!(bob.message().await.starts_with("An offer arrived"), "{}", bob.message().await);
    bob.wait_for_cell(3, 15, "mine-held").await;
    bob.screenshot("waitlist-offer.png").await;
    bob.click("#accept-offer").await;
    bob.wait_for_cell(3, 15, "mine").await;
    assert!(bob.message().await.starts_with("Confirmed"), "{}", bob.message().await);

    let db = app.db().await;
    let entry: String = db
        .query_one("SELECT status::text FROM waitlist_entries WHERE resource_id = $1 AND owner = 'bob'", &[&room])
        .await
        .unwrap()
        .get(0);
    assert_eq!(entry, "ACCEPTED");
    let statuses = stored(&app, room, "UTC").await.into_iter().map(|(o, s, _)| (o, s)).collect::<Vec<_>>();
    assert_eq!(statuses, vec![("alice".into(), "CANCELLED".into()), ("bob".into(), "CONFIRMED".into())]);
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn an_admin_creates_a_resource_cancels_a_booking_of_it_and_archives_it() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let lobby = app.resource_with(json!({"name": "Lobby"})).await;
    let page = driver.browser().await;
    page.open(&app, "/", "admin", lobby).await;

    page.click("#admin summary").await;
    page.click("#new-resource").await;
    page.type_into("#set-name", "Studio").await;
    page.type_into("#set-capacity", "2").await;
    page.type_into("#set-zone", "America/New_York").await;
    page.click("#save-settings").await;
    page.wait_for(
        "the new resource chosen",
        "document.querySelector('#resource option:checked')?.textContent === 'Studio (2 places)'",
    )
    .await;
    let studio: Uuid =
        page.js("return document.getElementById('resource').value", json!([])).await.as_str().unwrap().parse().unwrap();
    let (zone, capacity): (String, i32) = {
        let r = app
            .db()
            .await
            .query_one("SELECT time_zone, capacity FROM resources WHERE id = $1", &[&studio])
            .await
            .unwrap();
        (r.get(0), r.get(1))
    };
    assert_eq!((zone.as_str(), capacity), ("America/New_York", 2));

    page.click("#week-next").await;
    page.wait_for_week(studio, 2).await;
    assert_eq!(page.cell_state(1, 10).await, "free");
    let (start, end) = (cell_start(&page, 1, 10).await, cell_start(&page, 1, 11).await);
    let (status, _) = send(app.post(
        "alice",
        "/v1/reservations",
        &json!({"resource_id": studio, "start": start, "end": end, "confirm": true}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED);
    page.refreshed().await;
    page.wait_for("alice's booking listed", "document.querySelector('#bookings li[data-owner=alice]')").await;
    assert_eq!(page.cell_state(1, 10).await, "free", "one of two places is still free");
    page.screenshot("admin.png").await;

    page.click("#bookings li[data-owner=alice] button").await;
    page.wait_for("the list emptied", "!document.querySelector('#bookings li[data-owner=alice]')").await;
    assert_eq!(stored(&app, studio, "America/New_York").await, vec![row("alice", "CANCELLED", "Tue 10:00")]);

    // The resource's rules, set from the panel: hours on Tuesdays, a buffer, a default length.
    assert!(page.js("return document.getElementById('set-always-open').checked", json!([])).await == true);
    page.click("#set-always-open").await;
    page.type_into("#set-hours-tue", "09:00-12:00, 13:00-17:00").await;
    page.type_into("#set-exceptions", "2027-12-24 09:00-12:00").await;
    page.type_into("#set-buffer-after", "15").await;
    page.type_into("#set-notice", "120").await;
    page.type_into("#set-grid", "15").await;
    page.type_into("#set-default-duration", "45").await;
    page.click("#save-settings").await;
    page.wait_for("the settings saved", "document.getElementById('messages').textContent.startsWith('Saved')").await;
    let rules: (Value, i32, i32, Option<i32>, Option<i32>) = {
        let r = app
            .db()
            .await
            .query_one(
                "SELECT jsonb_build_object('tue', schedule -> 'weekly' -> 'tue', 'mon', schedule -> 'weekly' -> 'mon', \
                 'exceptions', schedule -> 'exceptions'), buffer_after_minutes, min_notice_minutes, slot_minutes, \
                 default_duration_minutes FROM resources WHERE id = $1",
                &[&studio],
            )
            .await
            .unwrap();
        (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))
    };
    assert_eq!(
        rules,
        (
            json!({"tue": [["09:00", "12:00"], ["13:00", "17:00"]], "mon": null,
                   "exceptions": [{"date": "2027-12-24", "hours": [["09:00", "12:00"]]}]}),
            15,
            120,
            Some(15),
            Some(45)
        )
    );
    page.wait_for("the new default length", "document.getElementById('calendar').dataset.length === '45'").await;

    page.click("#archive").await;
    page.wait_for(
        "the studio gone from the list",
        &format!("![...document.querySelectorAll('#resource option')].some(o => o.value === '{studio}')"),
    )
    .await;
    assert!(page.message().await.starts_with("Archived Studio"), "{}", page.message().await);
    let archived: bool = app
        .db()
        .await
        .query_one("SELECT archived_at IS NOT NULL FROM resources WHERE id = $1", &[&studio])
        .await
        .unwrap()
        .get(0);
    assert!(archived);
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn on_a_phone_a_person_books_half_past_nine_for_half_an_hour_and_the_time_after_it_reads_as_kept_free() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "America/New_York";
    let chair = salon_chair(&app).await;
    let page = driver.phone().await;
    page.open(&app, "/", "alice", chair).await;
    assert!(
        page.js("return document.getElementById('admin').hidden", json!([])).await == true,
        "no admin panel for alice"
    );
    assert_eq!(page.js("return document.getElementById('duration').value", json!([])).await, "30");

    // One day at a time: Tuesday from the day picker, then its list of times.
    page.click("#day-1").await;
    page.wait_for("Tuesday chosen", "document.getElementById('calendar').dataset.day === '1'").await;
    assert!(page.shown(&slot(1, "09:30")).await, "Tuesday's times are shown");
    assert!(!page.shown(&slot(2, "09:30")).await, "Wednesday's are not");
    assert_eq!(page.slot_state(1, "09:30").await, "free");
    assert_eq!(page.slot_state(1, "16:30").await, "free", "the last start ends at closing time");
    assert_eq!(page.slot_state(1, "17:00").await, "", "no row for a time closed every day");
    page.click(&slot(1, "09:30")).await;
    page.wait_for_slot(1, "09:30", "mine-held").await;
    page.wait_for("the hold panel", "!document.getElementById('hold').hidden").await;
    assert!(page.in_view("#confirm").await, "Confirm stays in view after the click");
    assert!(page.in_view("#hold-countdown").await, "so does the countdown");
    page.screenshot("phone-hold.png").await;

    page.click("#confirm").await;
    page.wait_for_slot(1, "09:30", "mine").await;
    assert!(page.message().await.starts_with("Confirmed: Salon chair"), "{}", page.message().await);
    assert_eq!(stored_ranges(&app, chair, zone).await, vec![row("alice", "CONFIRMED", "Tue 09:30-10:00")]);

    // The ten minutes after the booking are kept free: 10:00 cannot start, and says why;
    // so does 09:00, whose own ten minutes after would reach into the booking.
    page.wait_for_slot(1, "10:00", "buffer").await;
    assert!(page.text(&slot(1, "10:00")).await.contains("Kept free"), "{}", page.text(&slot(1, "10:00")).await);
    assert_eq!(page.slot_state(1, "09:00").await, "buffer");
    assert_eq!(page.slot_state(1, "10:30").await, "free");
    page.screenshot("phone.png").await;

    let width = page.js("return window.innerWidth", json!([])).await;
    assert_eq!(width, json!(390));
    let scroll = page.js("return document.documentElement.scrollWidth", json!([])).await;
    assert_eq!(scroll, width, "nothing scrolls sideways");
    let small: Vec<Value> = page
        .js(
            "return [...document.querySelectorAll('button, select, input:not([type=checkbox])')] \
               .filter((e) => e.offsetParent !== null && e.getBoundingClientRect().height < 44).map((e) => e.id || e.outerHTML.slice(0, 80))",
            json!([]),
        )
        .await
        .as_array()
        .unwrap()
        .clone();
    assert!(small.is_empty(), "every control is at least 44 px tall: {small:?}");
    let findings = page.accessibility_findings().await;
    assert!(findings.is_empty(), "axe-core's serious and critical findings: {findings:#?}");
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn on_a_wide_screen_a_person_books_half_past_nine_in_the_week_and_moves_it_from_the_page() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "America/New_York";
    let chair = salon_chair(&app).await;
    let page = driver.browser().await;
    page.resize(1280, 900).await;
    page.open(&app, "/", "alice", chair).await;
    assert!(!page.shown("#day-1").await, "no day picker beside the week");
    assert!(page.shown(&slot(3, "09:30")).await, "the whole week shows");
    assert_eq!(page.slot_state(5, "09:30").await, "closed", "Saturday is closed");

    page.click(&slot(1, "09:30")).await;
    page.wait_for_slot(1, "09:30", "mine-held").await;
    assert!(page.in_view("#confirm").await, "Confirm in view beside the week");
    page.click("#confirm").await;
    page.wait_for_slot(1, "09:30", "mine").await;
    page.wait_for_slot(1, "10:00", "buffer").await;
    // The name a screen reader gets, as the browser computes it.
    assert!(
        page.accessible_name(&slot(1, "10:00")).await.ends_with("kept free around a booking"),
        "the reason is in words for a screen reader too"
    );
    page.screenshot("desktop.png").await;
    assert_eq!(stored_ranges(&app, chair, zone).await, vec![row("alice", "CONFIRMED", "Tue 09:30-10:00")]);
    let findings = page.accessibility_findings().await;
    assert!(findings.is_empty(), "axe-core's serious and critical findings: {findings:#?}");

    // Moved to 14:00 from the list of my reservations, by keyboard: the booking is
    // the same row, at its new time.
    page.click("#mine li[data-status=CONFIRMED] button.move").await;
    page.wait_for("the move banner", "!document.getElementById('move-banner').hidden").await;
    page.wait_for("the week drawn for the move", "document.getElementById('calendar').dataset.moving !== ''").await;
    page.wait_for_slot(1, "14:00", "free").await;
    page.js(&format!("document.querySelector('{}').focus()", slot(1, "14:00")), json!([])).await;
    page.post(
        "/actions",
        json!({"actions": [{"type": "key", "id": "keyboard", "actions": [
        {"type": "keyDown", "value": "\u{E007}"}, {"type": "keyUp", "value": "\u{E007}"}]}]}),
    )
    .await;
    page.wait_for_slot(1, "14:00", "mine").await;
    assert!(page.message().await.starts_with("Moved: Salon chair"), "{}", page.message().await);
    page.wait_for_slot(1, "09:30", "free").await;
    assert_eq!(stored_ranges(&app, chair, zone).await, vec![row("alice", "CONFIRMED", "Tue 14:00-14:30")]);
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_holds_an_hour_repeated_weekly_skips_the_week_taken_and_confirms_every_week_at_once() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "Europe/Berlin";
    let room = app.resource_with(json!({"name": "Team room", "capacity": 1, "time_zone": zone})).await;
    let page = driver.browser().await;
    page.open(&app, "/", "alice", room).await;

    // Bob has the second week after the one shown, around Wednesday 10:00 (wide enough
    // to cover a change of offset between the weeks).
    let start: chrono::DateTime<chrono::Utc> = cell_start(&page, 2, 10).await.parse().unwrap();
    let (from, to) = (
        start + chrono::Duration::days(14) - chrono::Duration::hours(1),
        start + chrono::Duration::days(14) + chrono::Duration::hours(2),
    );
    let (status, body) = app.reserve("bob", room, (&acceptance::rfc3339(from), &acceptance::rfc3339(to)), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");

    page.click("#repeat-weekly").await;
    page.js(
        "const s = document.getElementById('repeat-count'); s.value = '3'; s.dispatchEvent(new Event('change'));",
        json!([]),
    )
    .await;
    page.click(&cell(2, 10)).await;
    page.wait_for_cell(2, 10, "mine-held").await;
    page.wait_for("the hold panel", "!document.getElementById('hold').hidden").await;
    let said = page.message().await;
    assert!(said.starts_with("Held 2 of 3 weeks") && said.contains("Not held:"), "{said}");
    let weekly = "SELECT count(*) FROM reservations WHERE owner = 'alice' AND series_id IS NOT NULL AND status = $1";
    assert_eq!(app.count(weekly, &[&"HELD"]).await, 2);
    let at_ten = stored(&app, room, zone).await.into_iter().filter(|r| r.0 == "alice").map(|r| r.2).collect::<Vec<_>>();
    assert_eq!(at_ten, ["Wed 10:00", "Wed 10:00"]);

    page.click("#confirm").await;
    page.wait_for_cell(2, 10, "mine").await;
    let said = page.message().await;
    assert!(said.starts_with("Confirmed 2 weekly times: Team room"), "{said}");
    assert_eq!(app.count(weekly, &[&"CONFIRMED"]).await, 2);
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_sees_the_day_their_limit_closed_and_why_their_booking_can_no_longer_be_cancelled() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "Europe/Berlin";
    // One booking a day per person, and cancels up to a year before the start: every
    // booking of next week is past its cancel deadline.
    let room = app
        .resource_with(json!({"name": "Studio", "capacity": 2, "time_zone": zone,
                              "limits": [{"max": 1, "window": "day"}], "cancel_notice_minutes": 525600}))
        .await;
    let page = driver.browser().await;
    page.open(&app, "/", "alice", room).await;

    page.click(&cell(2, 10)).await;
    page.wait_for_cell(2, 10, "mine-held").await;
    page.click("#confirm").await;
    page.wait_for_cell(2, 10, "mine").await;
    page.wait_for_cell(2, 14, "limit").await;
    assert_eq!(page.cell_state(3, 10).await, "free", "the next day is another window");
    let said = page.text(&cell(2, 14)).await;
    assert!(said.contains("Limit reached"), "said in words, not only by colour: {said}");

    page.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
    let disabled = page
        .js(
            "return document.querySelector('#mine li[data-status=CONFIRMED] button.cancel').getAttribute('aria-disabled')",
            json!([]),
        )
        .await;
    assert_eq!(disabled, "true", "past its cancel deadline");
    let why = page.text("#mine li[data-status=CONFIRMED] .why").await;
    assert!(why.contains("cancelling closed"), "the reason is written out: {why}");
    let findings = page.accessibility_findings().await;
    assert!(findings.is_empty(), "no serious or critical accessibility findings: {findings:?}");

    // Bob, beside the page, is not limited by Alice's booking.
    let (start, end) = (cell_start(&page, 2, 14).await, cell_start(&page, 2, 15).await);
    let (status, body) = app.reserve("bob", room, (&start, &end), 1).await;
    assert_eq!(status, StatusCode::CREATED, "{body}");
}

/// A webhook receiver on 127.0.0.1 that accepts every delivery with a 204; stops when
/// its task is aborted.
async fn accepting_receiver() -> (String, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            tokio::spawn(async move {
                let service = hyper::service::service_fn(|_req| async {
                    let empty = http_body_util::Full::new(hyper::body::Bytes::new());
                    Ok::<_, std::convert::Infallible>(hyper::Response::builder().status(204).body(empty).unwrap())
                });
                let io = hyper_util::rt::TokioIo::new(stream);
                let _ = hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
            });
        }
    });
    (url, task)
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn an_admin_reads_an_endpoints_recent_deliveries_accepted_and_failed_in_the_admin_panel() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let lobby = app.resource_with(json!({"name": "Lobby"})).await;
    let (receiver_url, receiver) = accepting_receiver().await;
    let register = async |url: &str| {
        let body = json!({"url": url, "event_types": ["reservation.held"]});
        let (status, endpoint) = send(app.post("admin", "/v1/webhooks", &body)).await;
        assert_eq!(status, StatusCode::CREATED, "{endpoint}");
        endpoint["id"].as_str().unwrap().to_string()
    };
    let taking = register(&receiver_url).await;
    // Nothing listens on port 1: every attempt there fails without an answer.
    let refusing = register("http://127.0.0.1:1/hook").await;
    app.hold("alice", lobby, 10, 11).await;
    let notifier = notifier::Notifier {
        state: app.state.clone(),
        sender: shared::notify::Sender::new(Duration::from_secs(5)),
        queue: None,
    };
    for event in app.take_messages(shared::outbox::Topic::Events).await {
        notifier::process_message(&notifier, &acceptance::sqs_record(&event)).await;
    }
    receiver.abort();
    let page = driver.browser().await;
    page.open(&app, "/", "admin", lobby).await;
    page.click("#admin summary").await;
    let choose = async |endpoint: &str| {
        page.wait_for(
            "the endpoints listed",
            &format!("[...document.querySelectorAll('#webhook option')].some(o => o.value === '{endpoint}')"),
        )
        .await;
        page.js(
            "const s = document.getElementById('webhook'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
            json!([endpoint]),
        )
        .await;
    };

    choose(&taking).await;
    page.wait_for("the accepted delivery", "document.querySelector('#deliveries li[data-outcome=accepted]')").await;
    let accepted = page.text("#deliveries li").await;
    assert!(accepted.contains("reservation.held · try 1") && accepted.contains("HTTP 204"), "{accepted}");
    assert!(accepted.contains("accepted"), "{accepted}");
    let zone = page.text("#deliveries-zone").await;
    assert!(zone.contains("the zone of this browser"), "the log's times name their zone: {zone:?}");

    choose(&refusing).await;
    page.wait_for("the failed delivery", "document.querySelector('#deliveries li[data-outcome=failed]')").await;
    let failed = page.text("#deliveries li").await;
    assert!(failed.contains("reservation.held · try 1") && failed.contains("no answer"), "{failed}");
    assert!(failed.contains("next try"), "the queue tries again: {failed}");
    let findings = page.accessibility_findings().await;
    assert!(findings.is_empty(), "{findings:#?}");
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_named_with_a_space_or_an_accent_signs_in_and_books_on_a_phone_and_a_wide_screen() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "Europe/Berlin";
    let room = app.resource_with(json!({"name": "Room 101", "capacity": 2, "time_zone": zone})).await;
    let phone = driver.phone().await;
    let desk = driver.browser().await;
    for (page, name) in [(&phone, "Bob Smith"), (&desk, "José")] {
        page.open(&app, "/", name, room).await;
        assert_eq!(page.text("#signed-in").await, format!("Signed in as {name}."));
        let said = page.message().await;
        assert!(!said.contains("Sign in"), "signed in, and nothing says otherwise: {said}");
        if page.shown("#day-2").await {
            page.click("#day-2").await;
        }
        page.click(&cell(2, 10)).await;
        page.wait_for_cell(2, 10, "mine-held").await;
        page.click("#confirm").await;
        page.wait_for_cell(2, 10, "mine").await;
        page.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
    }
    let owners: Vec<String> = stored(&app, room, zone).await.into_iter().map(|(owner, ..)| owner).collect();
    assert_eq!(owners, ["Bob Smith", "José"], "each booking is its person's, by the name they typed");

    // A name the API would refuse is explained before anything is sent.
    let fresh = driver.browser().await;
    fresh.goto(&app.url("/")).await;
    for (typed, says) in [("x".repeat(256), "at most 255 characters")] {
        fresh.type_into("#who", &typed).await;
        fresh.click("#sign-in").await;
        fresh
            .wait_for("a reason", &format!("document.getElementById('messages').textContent.includes('{says}')"))
            .await;
        assert_eq!(fresh.text("#signed-in").await, "", "not signed in");
        assert!(!fresh.shown("#app").await, "nothing to book until a name is taken");
        let invalid = fresh.js("return document.getElementById('who').getAttribute('aria-invalid')", json!([])).await;
        assert_eq!(invalid, "true");
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn every_view_passes_axe_core_on_a_phone_and_a_wide_screen_and_a_slot_is_read_as_its_time_and_state() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let chair = salon_chair(&app).await;
    for (page, device) in [(driver.phone().await, "phone"), (driver.browser().await, "wide screen")] {
        page.goto(&app.url("/")).await;
        page.assert_accessible(&format!("{device}, signed out")).await;
        page.open(&app, "/", "admin", chair).await;
        page.assert_accessible(&format!("{device}, the resource list and the week")).await;
        if page.shown("#day-1").await {
            let day = page.accessible_name("#day-1").await;
            assert!(day.starts_with("Tue") && day.contains("Tuesday"), "a day reads as its day: {day:?}");
            page.click("#day-1").await;
        }
        let free = page.accessible_name(&slot(1, "09:30")).await;
        assert!(free.starts_with("09:30 Free"), "{device}: a slot reads as its time, then its state: {free:?}");
        assert!(free.contains("Tuesday") && free.contains("10:00"), "then its day and its end: {free:?}");
        page.click(&slot(1, "09:30")).await;
        page.wait_for_slot(1, "09:30", "mine-held").await;
        page.wait_for("the hold sheet", "!document.getElementById('hold').hidden").await;
        let held = page.accessible_name(&slot(1, "09:30")).await;
        assert!(held.starts_with("09:30 Your hold"), "{device}: {held:?}");
        page.assert_accessible(&format!("{device}, the hold sheet")).await;
        page.click("#confirm").await;
        page.wait_for_slot(1, "09:30", "mine").await;
        page.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
        page.assert_accessible(&format!("{device}, my reservations")).await;
        page.click("#admin summary").await;
        page.wait_for("the admin panel open", "document.getElementById('admin').open").await;
        page.wait_for("its bookings", "document.querySelector('#bookings li[data-id]')").await;
        page.assert_accessible(&format!("{device}, the admin panel")).await;
        page.click("#mine li[data-status=CONFIRMED] button.cancel").await;
        page.wait_for_slot(1, "09:30", "free").await;
    }
}

/// A confirmed booking of `who` on `resource` over `[start, start + 1 h)`, made beside the
/// page.
async fn booked(app: &TestApp, who: &str, resource: Uuid, start: chrono::DateTime<chrono::Utc>) -> String {
    let end = start + chrono::Duration::hours(1);
    let body = json!({"resource_id": resource, "start": start.to_rfc3339(), "end": end.to_rfc3339(), "confirm": true});
    let (status, made) = send(app.post(who, "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["id"].as_str().unwrap().to_string()
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn my_reservations_in_two_zones_are_in_the_order_they_happen_and_each_names_its_zone() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let new_york = app.resource_with(json!({"name": "Salon chair", "time_zone": "America/New_York"})).await;
    let berlin = app.resource_with(json!({"name": "Studio", "time_zone": "Europe/Berlin"})).await;
    let soon = chrono::Utc::now().date_naive().and_hms_opt(15, 0, 0).unwrap().and_utc() + chrono::Duration::days(8);
    // Made first but happening last; the API lists the newest first.
    let last = booked(&app, "alice", new_york, soon + chrono::Duration::days(2)).await;
    let first = booked(&app, "alice", berlin, soon).await;
    let middle = booked(&app, "alice", new_york, soon + chrono::Duration::days(1)).await;
    for page in [driver.phone().await, driver.browser().await] {
        page.open(&app, "/", "alice", berlin).await;
        page.wait_for("three bookings in my list", "document.querySelectorAll('#mine li[data-id]').length === 3").await;
        let order = page
            .js("return [...document.querySelectorAll('#mine li[data-id]')].map((li) => li.dataset.id)", json!([]))
            .await;
        assert_eq!(order, json!([first, middle, last]), "by start, soonest first");
        let studio = page.text(&format!("#mine li[data-id=\"{first}\"] .what")).await;
        assert!(
            studio.contains("Studio") && studio.contains("Berlin"),
            "the list mixes zones, so each names its own: {studio}"
        );
        let chair = page.text(&format!("#mine li[data-id=\"{last}\"] .what")).await;
        assert!(chair.contains("New York"), "{chair}");
        assert!(
            page.text(&format!("#mine li[data-id=\"{last}\"] .what")).await.contains("10:00"),
            "in the chair's own zone: {chair}"
        );
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_button_past_its_deadline_looks_disabled_and_its_reason_is_read_with_it() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let room = app
        .resource_with(json!({"name": "Studio", "time_zone": "Europe/Berlin", "cancel_notice_minutes": 525600,
                              "reschedule_notice_minutes": 525600}))
        .await;
    let soon = chrono::Utc::now().date_naive().and_hms_opt(9, 0, 0).unwrap().and_utc() + chrono::Duration::days(8);
    let id = booked(&app, "alice", room, soon).await;
    for page in [driver.phone().await, driver.browser().await] {
        page.open(&app, "/", "alice", room).await;
        let cancel = format!("#mine li[data-id=\"{id}\"] button.cancel");
        page.element(&cancel).await;
        let look = |css: &str| {
            format!(
                "const s = getComputedStyle(document.querySelector({})); return [s.backgroundColor, s.color, s.borderStyle, s.cursor];",
                serde_json::to_string(css).unwrap()
            )
        };
        let disabled = page.js(&look(&cancel), json!([])).await;
        let enabled = page.js(&look("#refresh"), json!([])).await;
        assert_ne!(disabled[0], enabled[0], "another background than an enabled button's: {disabled} {enabled}");
        assert_ne!(disabled[1], enabled[1], "another ink: {disabled} {enabled}");
        assert_eq!(disabled[2], "dashed", "a dashed border, seen without colour: {disabled}");
        assert_eq!(disabled[3], "not-allowed");
        let described = page
            .js(
                "const b = document.querySelector(arguments[0]); \
                 return document.getElementById(b.getAttribute('aria-describedby')).textContent",
                json!([cancel]),
            )
            .await;
        assert!(
            described.as_str().unwrap().contains("cancelling closed"),
            "the reason is read with the button: {described}"
        );
        // It stays in the tab order, so that focus reaches it and reads its reason, and
        // a press says why in the page's messages and changes nothing.
        let focused = page
            .js(
                "const b = document.querySelector(arguments[0]); b.focus(); \
                 return [document.activeElement === b, b.getAttribute('aria-disabled')]",
                json!([cancel]),
            )
            .await;
        assert_eq!(focused, json!([true, "true"]), "focusable, and said to be unavailable");
        page.click(&cancel).await;
        page.wait_for(
            "the reason said",
            "document.getElementById('messages').textContent.includes('cancelling closed')",
        )
        .await;
        let kept = app.reservation("alice", &json!(id)).await;
        assert_eq!(kept["status"], "CONFIRMED", "a press past the deadline cancels nothing: {kept}");
        page.assert_accessible("a booking past its deadlines").await;
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn on_a_sunday_evening_the_page_opens_at_the_first_time_that_can_be_booked_with_no_past_rows_before_it() {
    let driver = Chromedriver::start().await;
    let sunday = sunday_evening();
    let app = TestApp::spawn_with_clock(std::sync::Arc::new(shared::clock::ManualClock::new(sunday))).await;
    let desk = late_desk(&app).await;
    let chair = salon_chair(&app).await;
    let times = |day: u8| {
        format!(
            "return [...document.querySelectorAll('#calendar button[data-day=\"{day}\"]')].map((b) => b.dataset.time + ' ' + b.dataset.state)"
        )
    };
    for page in [driver.phone().await, driver.browser().await] {
        page.set_clock(sunday).await;
        page.sign_in(&app, "/", "alice", desk).await;
        let d = "document.getElementById('calendar').dataset";
        assert_eq!(page.js(&format!("return [{d}.week, {d}.day]"), json!([])).await, json!(["0", "6"]), "this Sunday");
        assert_eq!(
            page.js(&times(6), json!([])).await,
            json!(["19:00 free", "19:30 free"]),
            "the first time that can be booked comes first: no row of the day before it is drawn"
        );
        let past_rows = page
            .js("return [...document.querySelectorAll('#calendar button[data-state=past]')].filter((b) => b.dataset.time < '19:00').length", json!([]))
            .await;
        assert_eq!(past_rows, 0, "no past row before the first free time on any day");

        // The salon chair is closed at weekends: it opens on next week's Monday.
        page.js(
            "const s = document.getElementById('resource'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
            json!([chair]),
        )
        .await;
        page.wait_for_week(chair, 1).await;
        assert_eq!(page.js(&format!("return {d}.day"), json!([])).await, "0", "Monday");
        let monday = page.js(&times(0), json!([])).await;
        assert_eq!(monday[0], "09:00 free", "{monday}");
        page.assert_accessible("the first view").await;
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn booking_together_the_page_moves_to_the_first_time_both_are_free() {
    let driver = Chromedriver::start().await;
    let sunday = sunday_evening();
    let app = TestApp::spawn_with_clock(std::sync::Arc::new(shared::clock::ManualClock::new(sunday))).await;
    let desk = late_desk(&app).await;
    let room = app.resource_with(json!({"name": "Back room", "time_zone": "Europe/Berlin"})).await;
    // Bob has the back room until Wednesday noon.
    let noon = chrono::DateTime::parse_from_rfc3339("2027-03-17T12:00:00+01:00").unwrap().to_utc();
    let body = json!({"resource_id": room, "start": sunday.to_rfc3339(), "end": noon.to_rfc3339(), "confirm": true});
    let (status, made) = send(app.post("bob", "/v1/reservations", &body)).await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    for page in [driver.phone().await, driver.browser().await] {
        page.set_clock(sunday).await;
        page.sign_in(&app, "/", "alice", desk).await;
        let d = "document.getElementById('calendar').dataset";
        assert_eq!(
            page.js(&format!("return [{d}.week, {d}.day]"), json!([])).await,
            json!(["0", "6"]),
            "the desk alone"
        );
        page.js(
            "const s = document.getElementById('with'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
            json!([format!("resource:{room}")]),
        )
        .await;
        page.wait_for("next Wednesday", &format!("{d}.week === '1' && {d}.day === '2'")).await;
        page.wait_for_slot(2, "12:00", "free").await;
        assert_eq!(page.slot_state(2, "11:30").await, "apart", "the back room is Bob's until noon");
        page.assert_accessible("the first view together").await;
    }
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn an_admin_makes_a_resource_with_every_setting_in_one_form_and_reads_each_error_beside_its_field() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Room 101"})).await;
    for (page, name) in [(driver.phone().await, "Chair one"), (driver.browser().await, "Chair two")] {
        page.open(&app, "/", "admin", room).await;
        page.click("#admin summary").await;
        page.click("#new-resource").await;
        page.wait_for("a blank form", "document.getElementById('settings').dataset.mode === 'new'").await;
        assert_eq!(page.text("#settings-title").await, "New resource");
        page.type_into("#set-name", name).await;
        page.type_into("#set-capacity", "2").await;
        page.type_into("#set-zone", "Mars/Olympus").await;
        page.click("#set-always-open").await;
        page.type_into("#set-hours-tue", "09:00-12:00").await;
        page.type_into("#set-grid", "30").await;
        page.type_into("#set-buffer-after", "10").await;
        page.type_into("#set-cancel-notice", "60").await;
        page.type_into("#set-reschedule-notice", "120").await;
        page.type_into("#set-limits", "2 per day").await;
        page.type_into("#set-notice", "-5").await;
        page.click("#save-settings").await;

        page.wait_for("the zone marked", "document.getElementById('set-zone').getAttribute('aria-invalid') === 'true'")
            .await;
        let beside = |id: &str| {
            format!(
                "const i = document.getElementById('{id}'); \
                 return (i.getAttribute('aria-describedby') || '').split(' ').map((d) => document.getElementById(d)?.textContent || '').join(' ')"
            )
        };
        let zone_error = page.js(&beside("set-zone"), json!([])).await;
        assert!(
            zone_error.as_str().unwrap().contains("Time zone must be an IANA time zone name"),
            "the zone's error is beside it, in words: {zone_error}"
        );
        let notice_error = page.js(&beside("set-notice"), json!([])).await;
        assert!(notice_error.as_str().unwrap().starts_with("Notice"), "every bad field has its own: {notice_error}");
        let said = page.message().await;
        assert!(!said.contains("See errors for each field") && !said.contains("time_zone"), "no API words: {said}");
        let focused = page.js("return document.activeElement.id", json!([])).await;
        assert_eq!(focused, "set-zone", "focus on the first field to fix");
        assert_eq!(resources_named(&app, name).await, 0, "nothing made");

        page.type_into("#set-zone", "Europe/Berlin").await;
        page.type_into("#set-notice", "0").await;
        page.click("#save-settings").await;
        page.wait_for("made", &format!("document.getElementById('messages').textContent.startsWith('Created {name}')"))
            .await;
        let invalid =
            page.js("return document.querySelectorAll('#settings [aria-invalid=true]').length", json!([])).await;
        assert_eq!(invalid, 0, "the errors are gone");
        let id = page.js("return document.getElementById('resource').value", json!([])).await;
        let (_, made) = send(app.get("admin", &format!("/v1/resources/{}", id.as_str().unwrap()))).await;
        assert_eq!(made["name"], name);
        assert_eq!(made["capacity"], 2);
        assert_eq!(made["time_zone"], "Europe/Berlin");
        assert_eq!(made["schedule"]["weekly"]["tue"], json!([["09:00", "12:00"]]));
        assert_eq!((made["slot_minutes"].clone(), made["buffer_after_minutes"].clone()), (json!(30), json!(10)));
        assert_eq!(made["cancel_notice_minutes"], 60);
        assert_eq!(made["reschedule_notice_minutes"], 120);
        assert_eq!(made["limits"], json!([{"max": 2, "window": "day"}]));
        assert_eq!(page.text("#settings-title").await, "This resource", "the form now edits what it made");
        page.assert_accessible("the resource form").await;
    }
}

/// A pool of `members` made by the admin ("any free one of them"); returns its id.
async fn pool_of(app: &TestApp, name: &str, members: &[Uuid]) -> Uuid {
    let (status, made) =
        send(app.post("admin", "/v1/pools", &json!({"name": name, "resource_ids": members, "strategy": "ordered"})))
            .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    made["id"].as_str().unwrap().parse().unwrap()
}

/// Each booking of `who` as stored: the names of its resources, with its local start.
async fn bookings_of(app: &TestApp, who: &str) -> Vec<(String, String)> {
    app.db()
        .await
        .query(
            "SELECT string_agg(s.name, ' + ' ORDER BY s.name), min(to_char(r.starts_at AT TIME ZONE s.time_zone, 'Dy HH24:MI')) \
             FROM reservations r JOIN resources s ON s.id = r.resource_id \
             WHERE r.owner = $1 AND r.status = 'CONFIRMED' GROUP BY r.booking_id ORDER BY 2",
            &[&who],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect()
}

#[tokio::test]
#[ignore = "needs chromium and chromium-driver; scripts/test installs them and runs these"]
async fn a_person_books_a_chair_and_a_room_together_and_sees_only_the_times_both_are_free() {
    let driver = Chromedriver::start().await;
    let app = TestApp::spawn().await;
    let zone = "America/New_York";
    let chair = salon_chair(&app).await;
    let room = app.resource_with(json!({"name": "Back room", "time_zone": zone})).await;
    let weekdays = json!([["09:00", "17:00"]]);
    let second = app
        .resource_with(json!({"name": "Window chair", "time_zone": zone, "slot_minutes": 30,
            "schedule": {"weekly": {"mon": weekdays, "tue": weekdays, "wed": weekdays, "thu": weekdays, "fri": weekdays},
                         "exceptions": []}}))
        .await;
    let chairs = pool_of(&app, "Chairs", &[second, chair]).await;

    // Alice, on a phone: the salon chair together with the back room, which Bob has
    // booked on Tuesday from 10:00 to 11:00.
    let phone = driver.phone().await;
    phone.open(&app, "/", "alice", chair).await;
    let (start, end) = (
        phone.js(&format!("return document.querySelector('{}').dataset.start", slot(1, "10:00")), json!([])).await,
        phone.js(&format!("return document.querySelector('{}').dataset.start", slot(1, "11:00")), json!([])).await,
    );
    let body = json!({"resource_id": room, "start": start, "end": end, "confirm": true});
    assert_eq!(send(app.post("bob", "/v1/reservations", &body)).await.0, StatusCode::CREATED);
    phone
        .js(
            "const s = document.getElementById('with'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
            json!([format!("resource:{room}")]),
        )
        .await;
    phone.click("#day-1").await;
    phone.wait_for_slot(1, "10:00", "apart").await;
    assert_eq!(phone.slot_state(1, "10:30").await, "apart", "the room is booked then");
    assert_eq!(phone.slot_state(1, "11:00").await, "free", "both are free again");
    let said = phone.accessible_name(&slot(1, "10:00")).await;
    assert!(said.contains("Back room"), "says which one is not free: {said}");
    phone.click(&slot(1, "09:30")).await;
    phone.wait_for_slot(1, "09:30", "mine-held").await;
    phone.wait_for("the hold sheet", "!document.getElementById('hold').hidden").await;
    let sheet = phone.text("#hold-what").await;
    assert!(sheet.contains("Salon chair") && sheet.contains("Back room"), "the sheet names both: {sheet}");
    phone.assert_accessible("a hold of two").await;
    phone.click("#confirm").await;
    phone.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
    let listed = phone.text("#mine li[data-status=CONFIRMED] .what").await;
    assert!(listed.contains("Salon chair") && listed.contains("Back room"), "my list names both: {listed}");
    assert_eq!(
        bookings_of(&app, "alice").await,
        vec![("Back room + Salon chair".to_string(), "Tue 09:30".to_string())]
    );

    // Carol, on a wide screen: the back room and any free chair.
    let desk = driver.browser().await;
    desk.open(&app, "/", "carol", room).await;
    desk.js(
        "const s = document.getElementById('with'); s.value = arguments[0]; s.dispatchEvent(new Event('change'));",
        json!([format!("pool:{chairs}")]),
    )
    .await;
    desk.wait_for_cell(5, 10, "apart").await; // Saturday: every chair is closed
    desk.wait_for_cell(2, 14, "free").await;
    desk.click(&cell(2, 14)).await;
    desk.wait_for_cell(2, 14, "mine-held").await;
    desk.click("#confirm").await;
    desk.wait_for("the booking in my list", "document.querySelector('#mine li[data-status=CONFIRMED]')").await;
    let listed = desk.text("#mine li[data-status=CONFIRMED] .what").await;
    assert!(listed.contains("Back room") && listed.contains("Window chair"), "the chair picked is named: {listed}");
    assert_eq!(
        bookings_of(&app, "carol").await,
        vec![("Back room + Window chair".to_string(), "Wed 14:00".to_string())]
    );
    desk.assert_accessible("together with a pool").await;
}
