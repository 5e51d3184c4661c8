//! The generic HTTP protocol of [`SystemOfRecord`] over reqwest: rustls, connect and
//! request timeouts, a bearer token.

use super::{Block, BoxFuture, SystemOfRecord, UpstreamError};
use crate::config::UpstreamConfig;
use chrono::{DateTime, SecondsFormat, Utc};
use reqwest::StatusCode;
use serde::Deserialize;

pub struct HttpSystemOfRecord {
    client: reqwest::Client,
    base: String,
    token: Option<crate::config::Secret>,
}

impl HttpSystemOfRecord {
    /// `None` when no `UPSTREAM_BASE_URL` is configured.
    pub fn from_config(config: &UpstreamConfig) -> Option<Self> {
        let base = config.base_url.as_ref()?.trim_end_matches('/').to_string();
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .timeout(config.request_timeout)
            .pool_idle_timeout(std::time::Duration::from_secs(30))
            .build()
            .ok()?;
        Some(Self { client, base, token: config.token.clone() })
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let r = self.client.request(method, format!("{}{}", self.base, path));
        match &self.token {
            Some(t) => r.bearer_auth(t.expose()),
            None => r,
        }
    }
}

fn ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::AutoSi, true)
}

/// Path segments come from our own data, but never trust them into a URL raw.
fn segment(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Transport failures are outcomes unknown: the request may have been processed.
fn transport(e: reqwest::Error) -> UpstreamError {
    UpstreamError::Unknown(if e.is_timeout() { "timeout".into() } else { format!("transport: {e}") })
}

fn classify(status: StatusCode) -> Option<UpstreamError> {
    match status.as_u16() {
        401 | 403 => Some(UpstreamError::Unauthorized),
        409 => Some(UpstreamError::Taken),
        500..=599 => Some(UpstreamError::Unknown(format!("status {status}"))),
        _ => None,
    }
}

#[derive(Deserialize)]
struct TakenBody {
    taken: Vec<Block>,
}

#[derive(Deserialize)]
struct Charge {
    charge_id: String,
}

impl SystemOfRecord for HttpSystemOfRecord {
    fn taken(
        &self,
        seat: &str,
        from: DateTime<Utc>,
        to: DateTime<Utc>,
    ) -> BoxFuture<'_, Result<Vec<Block>, UpstreamError>> {
        let req = self
            .request(reqwest::Method::GET, &format!("/seats/{}/availability", segment(seat)))
            .query(&[("from", ts(from)), ("to", ts(to))]);
        Box::pin(async move {
            let resp = req.send().await.map_err(transport)?;
            match resp.status() {
                StatusCode::OK => {
                    Ok(resp.json::<TakenBody>().await.map_err(|e| UpstreamError::Protocol(e.to_string()))?.taken)
                }
                s => Err(classify(s).unwrap_or_else(|| UpstreamError::Protocol(format!("status {s}")))),
            }
        })
    }

    fn reserve(
        &self,
        seat: &str,
        start: DateTime<Utc>,
        end: DateTime<Utc>,
        reference: &str,
    ) -> BoxFuture<'_, Result<String, UpstreamError>> {
        let req = self
            .request(reqwest::Method::POST, &format!("/seats/{}/reservations", segment(seat)))
            .json(&serde_json::json!({"start": ts(start), "end": ts(end), "reference": reference}));
        Box::pin(async move {
            let resp = req.send().await.map_err(transport)?;
            match resp.status() {
                StatusCode::CREATED | StatusCode::OK => {
                    // Accepted but unreadable: the write happened, so this is not "unknown
                    // and retryable"; the current-charge read will find the id.
                    resp.json::<Charge>()
                        .await
                        .map(|c| c.charge_id)
                        .map_err(|e| UpstreamError::Unknown(format!("body: {e}")))
                }
                s => Err(classify(s).unwrap_or_else(|| UpstreamError::Protocol(format!("status {s}")))),
            }
        })
    }

    fn current_charge(&self, reference: &str) -> BoxFuture<'_, Result<Option<String>, UpstreamError>> {
        let req = self.request(reqwest::Method::GET, "/charges/current").query(&[("reference", reference)]);
        Box::pin(async move {
            let resp = req.send().await.map_err(transport)?;
            match resp.status() {
                StatusCode::OK => {
                    Ok(Some(resp.json::<Charge>().await.map_err(|e| UpstreamError::Protocol(e.to_string()))?.charge_id))
                }
                StatusCode::NOT_FOUND => Ok(None),
                s => Err(classify(s).unwrap_or_else(|| UpstreamError::Protocol(format!("status {s}")))),
            }
        })
    }

    fn cancel(&self, charge_id: &str) -> BoxFuture<'_, Result<(), UpstreamError>> {
        let req = self.request(reqwest::Method::DELETE, &format!("/charges/{}", segment(charge_id)));
        Box::pin(async move {
            let resp = req.send().await.map_err(transport)?;
            match resp.status() {
                StatusCode::NO_CONTENT | StatusCode::OK | StatusCode::NOT_FOUND => Ok(()),
                s => Err(classify(s).unwrap_or_else(|| UpstreamError::Protocol(format!("status {s}")))),
            }
        })
    }
}
