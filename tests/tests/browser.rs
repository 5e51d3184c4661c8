//! The booking page in a real browser: headless Chromium from Debian's packages
//! (`chromium`, `chromium-driver`), driven over WebDriver by a small client of its own
//! on the HTTP client the tests already use. Each test starts a chromedriver on a free
//! port and a dev server on its own database, clicks through the page as a person
//! would, and checks the outcome in SQL. The screenshots of docs/screenshots/ are
//! written here.
//!
//! A binary of its own, so the main suite is not slowed by browsers; its tests run one
//! at a time (two Chromiums are plenty for two cores). Without chromedriver the tests
//! are skipped on a workstation and fail under CI (`CI` set), where scripts/test
//! installs it.

use acceptance::{TestApp, send};
use reqwest::StatusCode;
use serde_json::{Value, json};
use std::os::unix::process::CommandExt;
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

/// A chromedriver of this test, stopped when dropped.
struct Chromedriver {
    child: Child,
    url: String,
    http: reqwest::Client,
}

impl Drop for Chromedriver {
    /// Stops chromedriver with the browsers it started: they share its process group.
    fn drop(&mut self) {
        let _ = Command::new("/usr/bin/kill").args(["-KILL", "--", &format!("-{}", self.child.id())]).status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn chromedriver_path() -> Option<PathBuf> {
    let path = PathBuf::from(std::env::var("CHROMEDRIVER").unwrap_or_else(|_| "/usr/bin/chromedriver".into()));
    path.exists().then_some(path)
}

impl Chromedriver {
    /// A running chromedriver, or `None` off CI when none is installed.
    async fn start() -> Option<Chromedriver> {
        let Some(path) = chromedriver_path() else {
            assert!(
                std::env::var_os("CI").is_none(),
                "chromedriver is missing under CI: scripts/test installs chromium and chromium-driver"
            );
            eprintln!("skipped: no chromedriver (apt-get install -y chromium chromium-driver)");
            return None;
        };
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let child = Command::new(path)
            .arg(format!("--port={port}"))
            .process_group(0)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver starts");
        let driver = Chromedriver { child, url: format!("http://127.0.0.1:{port}"), http: reqwest::Client::new() };
        let started = Instant::now();
        loop {
            if let Ok(r) = driver.http.get(format!("{}/status", driver.url)).send().await
                && let Ok(v) = r.json::<Value>().await
                && v["value"]["ready"] == true
            {
                return Some(driver);
            }
            assert!(started.elapsed() < PATIENCE, "chromedriver did not become ready");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// A new headless Chromium window.
    async fn browser(&self) -> Browser {
        let caps = json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": std::env::var("CHROMIUM").unwrap_or_else(|_| "/usr/bin/chromium".into()),
                "args": ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                         "--disable-gpu", "--lang=en-GB"],
            },
        }}});
        let answer = call(&self.http, reqwest::Method::POST, &format!("{}/session", self.url), Some(caps)).await;
        let id = answer["sessionId"].as_str().unwrap_or_else(|| panic!("no session: {answer}")).to_string();
        Browser { http: self.http.clone(), session: format!("{}/session/{id}", self.url) }
    }
}

async fn call(http: &reqwest::Client, method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    let mut req = http.request(method.clone(), url);
    if let Some(body) = body {
        req = req.json(&body);
    }
    let resp = req.send().await.unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let status = resp.status();
    let value: Value = resp.json().await.unwrap_or(Value::Null);
    assert!(status.is_success(), "{method} {url}: {status} {value}");
    value["value"].clone()
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
    async fn click(&self, css: &str) {
        let css_json = serde_json::to_string(css).unwrap();
        self.wait_for(&format!("{css} to be enabled"), &format!("!document.querySelector({css_json})?.disabled")).await;
        let id = self.element(css).await;
        self.post(&format!("/element/{id}/click"), json!({})).await;
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

    /// Opens the page, signs in as `who`, picks `resource` and shows next week (every
    /// hour of it lies ahead, whenever the test runs).
    async fn open(&self, app: &TestApp, query: &str, who: &str, resource: Uuid) {
        self.goto(&app.url(&format!("/{query}"))).await;
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
        self.click("#week-next").await;
        self.wait_for("the week painted", "document.querySelector('#calendar button[data-state]')").await;
    }

    /// Waits for one more refresh of the page than it has done now.
    async fn refreshed(&self) {
        let now = self.js("return Number(document.body.dataset.refreshed || 0)", json!([])).await;
        self.click("#refresh").await;
        self.wait_for("a refresh", &format!("Number(document.body.dataset.refreshed || 0) > {now}")).await;
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

#[tokio::test]
async fn a_person_holds_a_free_hour_in_the_resources_zone_confirms_it_and_cancels_it() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(driver) = Chromedriver::start().await else { return };
    let app = TestApp::spawn().await;
    let zone = "Europe/Berlin";
    let room = app.resource_with(json!({"name": "Room 101", "capacity": 1, "time_zone": zone})).await;
    let page = driver.browser().await;
    page.open(&app, "", "alice", room).await;

    // Others' claims of next week, made beside the page: a booking and a hold.
    let (bob_start, bob_end) = (cell_start(&page, 2, 12).await, cell_start(&page, 2, 14).await);
    let (status, _) = send(app.post(
        "bob",
        "/v1/reservations",
        &json!({"resource_id": room, "start": bob_start, "end": bob_end, "confirm": true}),
    ))
    .await;
    assert_eq!(status, StatusCode::CREATED);
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
    assert!(
        countdown.starts_with("4:") || countdown.starts_with("5:"),
        "a countdown of about five minutes: {countdown}"
    );
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
    page.click("#mine li[data-status=CONFIRMED] button").await;
    page.wait_for_cell(2, 10, "free").await;
    assert!(page.message().await.starts_with("Cancelled Room 101"), "{}", page.message().await);
    assert_eq!(stored(&app, room, zone).await[2], row("alice", "CANCELLED", "Wed 10:00"));
}

#[tokio::test]
async fn two_browsers_race_for_one_slot_one_holds_it_and_the_other_is_told_it_was_just_taken() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(driver) = Chromedriver::start().await else { return };
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Focus booth", "capacity": 1})).await;
    let (alice, bob) = (driver.browser().await, driver.browser().await);
    // Both views go stale on purpose: no refresh of their own until the race is run.
    alice.open(&app, "?refresh=600", "alice", room).await;
    bob.open(&app, "?refresh=600", "bob", room).await;
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
    assert_eq!(winner.cell_state(1, 11).await, "mine-held");
    assert!(loser.message().await.contains("someone else got"), "{}", loser.message().await);
    // The loser's calendar was read again at once: the hour shows as held by another.
    loser.wait_for_cell(1, 11, "held").await;
    loser.screenshot("just-taken.png").await;

    let start = cell_start(&alice, 1, 11).await;
    let active: i64 = app
        .db()
        .await
        .query_one(
            "SELECT count(*) FROM reservations WHERE resource_id = $1 AND starts_at = $2::text::timestamptz \
             AND status IN ('HELD','CONFIRMING','CONFIRMED')",
            &[&room, &start],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(active, 1, "one reservation for the slot");
}

#[tokio::test]
async fn a_hold_lapses_on_screen_when_its_countdown_reaches_zero() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(driver) = Chromedriver::start().await else { return };
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Quick room", "capacity": 1, "hold_ttl_seconds": 4})).await;
    let page = driver.browser().await;
    page.open(&app, "", "alice", room).await;

    page.click(&cell(0, 9)).await;
    page.wait_for_cell(0, 9, "mine-held").await;
    let countdown = page.text("#hold-countdown").await;
    assert!(["0:04", "0:03", "0:02", "0:01"].contains(&countdown.as_str()), "a short countdown: {countdown}");

    page.wait_for_cell(0, 9, "free").await;
    page.wait_for("the panel gone", "document.getElementById('hold').hidden").await;
    assert!(page.message().await.contains("expired; the time is free again"), "{}", page.message().await);
    assert!(acceptance::active_claims(&app.db().await, room).await.is_empty(), "the lapsed hold claims nothing");
}

#[tokio::test]
async fn a_person_joins_the_waitlist_of_a_full_hour_and_accepts_the_offer_when_it_frees() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(driver) = Chromedriver::start().await else { return };
    let app = TestApp::spawn().await;
    let room = app.resource_with(json!({"name": "Meeting room", "capacity": 1})).await;
    let (alice, bob) = (driver.browser().await, driver.browser().await);
    alice.open(&app, "", "alice", room).await;
    alice.click(&cell(3, 15)).await;
    alice.wait_for_cell(3, 15, "mine-held").await;
    alice.click("#confirm").await;
    alice.wait_for_cell(3, 15, "mine").await;

    bob.open(&app, "", "bob", room).await;
    assert_eq!(bob.cell_state(3, 15).await, "taken");
    bob.click(&cell(3, 15)).await;
    bob.wait_for("the waiting entry", "document.querySelector('#waits li[data-status=WAITING]')").await;
    assert!(bob.message().await.contains("on the waitlist"), "{}", bob.message().await);
    assert!(bob.text("#waits").await.contains("position 1"), "{}", bob.text("#waits").await);

    // Alice cancels from her list; the freed hour is offered to bob in that transaction.
    alice.click("#mine li[data-status=CONFIRMED] button").await;
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
async fn an_admin_creates_a_resource_cancels_a_booking_of_it_and_archives_it() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let Some(driver) = Chromedriver::start().await else { return };
    let app = TestApp::spawn().await;
    let lobby = app.resource_with(json!({"name": "Lobby"})).await;
    let page = driver.browser().await;
    page.open(&app, "", "admin", lobby).await;

    page.click("#admin summary").await;
    page.type_into("#new-name", "Studio").await;
    page.type_into("#new-capacity", "2").await;
    page.type_into("#new-zone", "America/New_York").await;
    page.click("#create-resource").await;
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
    page.wait_for_cell(1, 10, "free").await;
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
