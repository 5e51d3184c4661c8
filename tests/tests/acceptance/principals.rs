//! Who a person is in header identity mode: any printable name, sent in `X-Principal`
//! as its UTF-8 bytes percent-encoded (RFC 3986), so a name with a space or an accent
//! travels in a header, which carries ASCII only.

use acceptance::{TestApp, hours, send, slug};
use reqwest::StatusCode;
use serde_json::json;

/// `name` as a client puts it in `X-Principal`: every byte outside `A-Za-z0-9-._~` as
/// `%XX`.
fn encoded(name: &str) -> String {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
                (b as char).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

#[tokio::test]
async fn a_name_with_a_space_or_an_accent_books_and_lists_as_itself() {
    let app = TestApp::spawn().await;
    let room = app.resource(2).await;
    let (s, e) = hours(10, 11);
    for (name, sent) in
        [("Bob Smith", "Bob%20Smith"), ("José", "Jos%C3%A9"), ("Zoë O'Brien-Åsa", &encoded("Zoë O'Brien-Åsa"))]
    {
        let (status, held) = send(app.post(
            sent,
            "/v1/reservations",
            &json!({"resource_id": room, "start": s, "end": e, "quantity": 1}),
        ))
        .await;
        if name == "Zoë O'Brien-Åsa" {
            // Capacity 2: the third name is refused for capacity, so it was let in.
            assert_eq!(status, StatusCode::CONFLICT, "{held}");
            assert_eq!(slug(&held), "slot-unavailable");
            continue;
        }
        assert_eq!(status, StatusCode::CREATED, "{name}: {held}");
        assert_eq!(held["owner"], name, "the owner is the name, decoded");
        let (status, mine) = send(app.get(sent, "/v1/reservations")).await;
        assert_eq!(status, StatusCode::OK, "{mine}");
        let owners: Vec<_> = mine["items"].as_array().unwrap().iter().map(|r| r["owner"].clone()).collect();
        assert_eq!(owners, [json!(name)], "{name} lists only its own booking");
        let path = format!("/v1/reservations?owner={}", encoded(name));
        let (status, by_owner) = send(app.get(sent, &path)).await;
        assert_eq!(status, StatusCode::OK, "{name} may name itself as the owner: {by_owner}");
        assert_eq!(by_owner["items"].as_array().unwrap().len(), 1);
    }
}

#[tokio::test]
async fn a_name_sent_plain_or_percent_encoded_is_the_same_principal() {
    let app = TestApp::spawn().await;
    let room = app.resource(1).await;
    let held = app.hold("alice", room, 10, 11).await;
    let (status, read) = send(app.get("%61lice", &format!("/v1/reservations/{}", held["id"].as_str().unwrap()))).await;
    assert_eq!(status, StatusCode::OK, "{read}");
    assert_eq!(read["owner"], "alice");
    let (status, _) = send(app.get("%61dmin", "/v1/webhooks")).await;
    assert_eq!(status, StatusCode::OK, "an admin's name percent-encoded is still the admin");
}

#[tokio::test]
async fn a_principal_header_that_is_not_a_percent_encoded_printable_name_is_refused() {
    let app = TestApp::spawn().await;
    for sent in [
        "bad principal!", // a raw space: not percent-encoded
        "Jos%C3",         // a truncated UTF-8 sequence
        "Jos%E9",         // latin-1, not UTF-8
        "100%",           // a % that starts no escape
        "a%zz",           // a % followed by no hex digits
        "line%0Abreak",   // a control character
        "%20",            // nothing but white space
        "",
    ] {
        let (status, problem) = send(app.get(sent, "/v1/reservations")).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{sent:?}: {problem}");
        assert_eq!(slug(&problem), "unauthenticated");
    }
    let raw = app
        .http
        .get(app.url("/v1/reservations"))
        .header("x-principal", reqwest::header::HeaderValue::from_bytes(b"Jos\xe9").unwrap());
    assert_eq!(send(raw).await.0, StatusCode::UNAUTHORIZED, "a raw latin-1 byte is not a name");
    let long = "a".repeat(256);
    assert_eq!(
        send(app.get(&long, "/v1/reservations")).await.0,
        StatusCode::UNAUTHORIZED,
        "256 characters is too long"
    );
    let longest = "é".repeat(255);
    assert_eq!(
        send(app.get(&encoded(&longest), "/v1/reservations")).await.0,
        StatusCode::OK,
        "255 characters, each two bytes"
    );
}
