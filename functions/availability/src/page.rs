//! The booking page (`GET /app`, and `/` in the dev server): one HTML document with its
//! style and script inlined from `web/`, compiled into the binary, so the function
//! that serves the calendar reads also serves the page that shows them, and nothing
//! is fetched from a CDN or a bucket. The page itself holds no data: its script asks
//! the API on the same origin as whoever signs in on it.
//!
//! One document rather than three files: one route (one template event pair, one
//! OpenAPI path, one fixture) and one round trip before the page can draw.

use http::StatusCode;
use shared::config::{AuthMode, Config};
use shared::http::Reply;

const HTML: &str = include_str!("../../../web/index.html");
const CSS: &str = include_str!("../../../web/app.css");
const JS: &str = include_str!("../../../web/app.js");

/// How the page asks for an identity: a name sent as `X-Principal` (header mode) or a
/// token sent as `Authorization: Bearer` (jwt mode, behind API Gateway's authorizer).
fn identity(mode: AuthMode) -> &'static str {
    match mode {
        AuthMode::Header => "header",
        AuthMode::Jwt => "bearer",
    }
}

/// The page for this deployment's identity mode.
pub fn document(config: &Config) -> String {
    HTML.replacen("/*APP_CSS*/", CSS, 1).replacen("/*APP_JS*/", JS, 1).replacen(
        "__IDENTITY__",
        identity(config.auth_mode),
        1,
    )
}

pub fn reply(config: &Config) -> Reply {
    Reply::html(StatusCode::OK, document(config))
}

#[cfg(test)]
mod tests {
    use super::*;
    use shared::config::Defaults;

    fn config(mode: &str) -> Config {
        let mode = mode.to_string();
        Config::from_lookup(Defaults::DevServer, move |k| match k {
            "DATABASE_URL" => Some("postgres://x@127.0.0.1/x".into()),
            "AUTH_MODE" => Some(mode.clone()),
            _ => None,
        })
        .unwrap()
    }

    #[test]
    fn the_page_inlines_its_style_and_script_whole() {
        let page = document(&config("header"));
        assert!(page.contains(CSS.trim()) && page.contains(JS.trim()));
        assert!(!page.contains("/*APP_CSS*/") && !page.contains("/*APP_JS*/"));
        // Inlined text that closed its own element would cut the page short.
        assert!(!JS.to_ascii_lowercase().contains("</script"));
        assert!(!CSS.to_ascii_lowercase().contains("</style"));
    }

    #[test]
    fn the_page_asks_for_the_identity_the_deployment_reads() {
        assert!(document(&config("header")).contains(r#"data-identity="header""#));
        assert!(document(&config("jwt")).contains(r#"data-identity="bearer""#));
    }

    #[test]
    fn the_page_fetches_nothing_from_another_origin() {
        let page = document(&config("header"));
        for external in ["http://", "https://", "//cdn", "src=\"//", "href=\"//"] {
            assert!(!page.contains(external), "the page names {external}");
        }
    }
}
