//! What a function logs: JSON lines whose span fields name the route, the principal
//! and the ids a request touched, so an operator can follow one reservation or one
//! user through CloudWatch Logs Insights. Its own test binary, because the subscriber
//! it installs is process-wide, as in a function.

use acceptance::{TestApp, hours, json_of, lambda_request};
use serde_json::{Value, json};

/// Log output captured, written by the same JSON formatter the Lambda runtime's
/// subscriber uses when the function's log format is JSON.
#[derive(Clone, Default)]
struct CapturedLogs(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for CapturedLogs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl CapturedLogs {
    fn lines(&self) -> Vec<Value> {
        let bytes = self.0.lock().unwrap().clone();
        String::from_utf8(bytes).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    /// The closing line of the request on `route`.
    fn request_line(&self, route: &str) -> Value {
        self.lines()
            .into_iter()
            .find(|l| l["fields"]["message"] == "request" && l["span"]["route"] == route)
            .unwrap_or_else(|| panic!("no request line for {route} in {:#?}", self.lines()))
    }
}

#[tokio::test]
async fn each_request_logs_one_json_line_naming_its_route_principal_and_reservation() {
    use lambda_http::tracing::subscriber;
    let logs = CapturedLogs::default();
    let writer = logs.clone();
    // The process-wide subscriber, as in a function: this binary holds this one test.
    subscriber::fmt().json().with_target(false).with_writer(move || writer.clone()).init();
    let app = TestApp::spawn().await;
    let state = &app.state;
    let resource = json!({"name": "Desk 5"});
    let created = admin::handler(state, lambda_request("POST", "/v1/resources", Some("admin"), Some(&resource)));
    let room = json_of(created.await.unwrap().body())["id"].as_str().unwrap().to_string();
    let (s, e) = hours(10, 11);
    let body = json!({"resource_id": room, "start": s, "end": e});
    let held = reserve::handler(state, lambda_request("POST", "/v1/reservations", Some("alice"), Some(&body)));
    let id = json_of(held.await.unwrap().body())["id"].as_str().unwrap().to_string();
    let path = format!("/v1/reservations/{id}/confirm");
    confirm::handler(state, lambda_request("POST", &path, Some("alice"), None)).await.unwrap();
    let missing = format!("/v1/reservations/{}", uuid::Uuid::new_v4());
    availability::handler(state, lambda_request("GET", &missing, Some("bob"), None)).await.unwrap();

    // The new reservation's id comes from the Location of the answer.
    let hold = logs.request_line("/v1/reservations");
    assert_eq!(hold["span"]["principal"], "alice");
    assert_eq!(hold["span"]["reservation_id"], id.as_str());
    assert_eq!(hold["fields"]["status"], 201);
    let confirm = logs.request_line("/v1/reservations/{id}/confirm");
    assert_eq!(confirm["span"]["principal"], "alice");
    assert_eq!(confirm["span"]["reservation_id"], id.as_str());
    assert_eq!(confirm["span"]["method"], "POST");
    assert_eq!(confirm["fields"]["status"], 200);
    assert!(confirm["fields"]["ms"].is_u64(), "{confirm}");
    let not_found = logs.request_line("/v1/reservations/{id}");
    assert_eq!(
        (not_found["span"]["principal"].as_str(), not_found["fields"]["status"].as_u64()),
        (Some("bob"), Some(404))
    );
    assert_eq!(logs.request_line("/v1/resources")["span"]["resource_id"], room.as_str());
}
