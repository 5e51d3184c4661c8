//! AWS Signature Version 4 for the SQS client's requests: a POST of a JSON body to the
//! endpoint's root, with no query string, signing the headers [`Request`] names. The
//! steps and their names are AWS's ("Create a signed AWS API request"); the tests check
//! the result against AWS's own signer, the `aws-sigv4` crate.

use crate::config::Secret;
use chrono::{DateTime, Utc};
use hmac::{Hmac, KeyInit, Mac};
use sha2::{Digest, Sha256};

/// A role's credentials: what the Lambda service puts in a function's environment.
#[derive(Clone, Debug)]
pub struct Credentials {
    pub access_key_id: String,
    pub secret_access_key: Secret,
    /// The session token of temporary credentials (a function role's always are).
    pub session_token: Option<Secret>,
}

/// One request to sign. Its `host` is the `Host` header as sent: with the port when
/// the endpoint names one that is not its scheme's default.
pub struct Request<'a> {
    pub host: &'a str,
    pub path: &'a str,
    pub content_type: &'a str,
    pub target: &'a str,
    pub body: &'a [u8],
    pub region: &'a str,
    pub service: &'a str,
}

/// The headers that carry a signature: `X-Amz-Date`, and `Authorization`.
pub struct Signature {
    pub amz_date: String,
    pub authorization: String,
}

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

pub fn sign(request: &Request<'_>, credentials: &Credentials, time: DateTime<Utc>) -> Signature {
    let amz_date = time.format("%Y%m%dT%H%M%SZ").to_string();
    let date = &amz_date[..8];
    // Canonical headers: lowercase names in order, one per line.
    let mut headers = vec![
        ("content-type", request.content_type),
        ("host", request.host),
        ("x-amz-date", amz_date.as_str()),
        ("x-amz-target", request.target),
    ];
    if let Some(token) = &credentials.session_token {
        headers.push(("x-amz-security-token", token.expose()));
    }
    headers.sort_by_key(|(name, _)| *name);
    let canonical_headers: String = headers.iter().map(|(name, value)| format!("{name}:{}\n", value.trim())).collect();
    let signed_headers = headers.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(";");
    let canonical_request = format!(
        "POST\n{}\n\n{canonical_headers}\n{signed_headers}\n{}",
        request.path,
        hex(&Sha256::digest(request.body))
    );
    let scope = format!("{date}/{}/{}/aws4_request", request.region, request.service);
    let string_to_sign = format!("{ALGORITHM}\n{amz_date}\n{scope}\n{}", hex(&Sha256::digest(canonical_request)));
    let mut key = hmac(format!("AWS4{}", credentials.secret_access_key.expose()).as_bytes(), date.as_bytes());
    for part in [request.region, request.service, "aws4_request"] {
        key = hmac(&key, part.as_bytes());
    }
    let signature = hex(&hmac(&key, string_to_sign.as_bytes()));
    let authorization = format!(
        "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
        credentials.access_key_id
    );
    Signature { amz_date, authorization }
}

fn hmac(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes a key of any length");
    mac.update(data);
    mac.finalize().into_bytes().to_vec()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What AWS's signer makes of the same request, credentials and time.
    fn signed_by_aws(request: &Request<'_>, credentials: &Credentials, time: DateTime<Utc>) -> (String, String) {
        use aws_sigv4::http_request::{SignableBody, SignableRequest, SigningSettings, sign};
        let identity = aws_credential_types::Credentials::new(
            &credentials.access_key_id,
            credentials.secret_access_key.expose(),
            credentials.session_token.as_ref().map(|t| t.expose().to_string()),
            None,
            "test",
        )
        .into();
        let params = aws_sigv4::sign::v4::SigningParams::builder()
            .identity(&identity)
            .region(request.region)
            .name(request.service)
            .time(time.into())
            .settings(SigningSettings::default())
            .build()
            .unwrap()
            .into();
        let headers =
            [("content-type", request.content_type), ("host", request.host), ("x-amz-target", request.target)];
        let url = format!("https://{}{}", request.host, request.path);
        let signable =
            SignableRequest::new("POST", &url, headers.into_iter(), SignableBody::Bytes(request.body)).unwrap();
        let (instructions, _) = sign(signable, &params).unwrap().into_parts();
        let header = |name: &str| {
            instructions.headers().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.to_string()).unwrap()
        };
        (header("x-amz-date"), header("authorization"))
    }

    fn request<'a>(host: &'a str, body: &'a [u8]) -> Request<'a> {
        Request {
            host,
            path: "/",
            content_type: "application/x-amz-json-1.0",
            target: "AmazonSQS.SendMessageBatch",
            body,
            region: "eu-west-1",
            service: "sqs",
        }
    }

    fn credentials(session_token: Option<&str>) -> Credentials {
        Credentials {
            access_key_id: "AKIDEXAMPLE".into(),
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY".into(),
            session_token: session_token.map(Secret::from),
        }
    }

    #[test]
    fn a_request_is_signed_as_aws_signs_it() {
        let time = "2026-12-06T21:15:42Z".parse().unwrap();
        let body = br#"{"QueueUrl":"https://sqs.eu-west-1.amazonaws.com/123456789012/events.fifo","Entries":[]}"#;
        for (host, token) in [
            ("sqs.eu-west-1.amazonaws.com", None),
            ("sqs.eu-west-1.amazonaws.com", Some("IQoJb3JpZ2luX2VjEJr//////////wEaCXVz+ZWFzdC0x/token=")),
            ("127.0.0.1:5000", Some("a-token")),
        ] {
            let (request, credentials) = (request(host, body), credentials(token));
            let ours = sign(&request, &credentials, time);
            let (amz_date, authorization) = signed_by_aws(&request, &credentials, time);
            assert_eq!(ours.amz_date, amz_date);
            assert_eq!(ours.authorization, authorization, "{host}, session token {token:?}");
        }
    }

    #[test]
    fn every_byte_of_the_body_is_signed() {
        let time = "2026-12-06T21:15:42Z".parse().unwrap();
        let credentials = credentials(None);
        let one = sign(&request("sqs.eu-west-1.amazonaws.com", b"{\"a\":1}"), &credentials, time);
        let other = sign(&request("sqs.eu-west-1.amazonaws.com", b"{\"a\":2}"), &credentials, time);
        assert_ne!(one.authorization, other.authorization);
    }
}
