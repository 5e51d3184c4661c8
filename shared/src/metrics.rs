//! CloudWatch Embedded Metric Format: one JSON line on stdout per batch of numbers,
//! which CloudWatch Logs turns into metrics without an API call or an agent. Emitted
//! only inside Lambda (or with `METRICS=emf`), so local runs and tests stay quiet.

use serde_json::{Map, Value, json};
use std::sync::OnceLock;

pub const NAMESPACE: &str = "Reservations";

fn enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var_os("AWS_LAMBDA_FUNCTION_NAME").is_some() || std::env::var("METRICS").as_deref() == Ok("emf")
    })
}

/// The EMF document for `metrics` (name, value, unit) under the `Function` dimension.
pub fn render(function: &str, metrics: &[(&str, f64, &str)], timestamp_ms: i64) -> Value {
    let definitions: Vec<Value> = metrics.iter().map(|(name, _, unit)| json!({"Name": name, "Unit": unit})).collect();
    let mut doc = Map::new();
    doc.insert(
        "_aws".into(),
        json!({
            "Timestamp": timestamp_ms,
            "CloudWatchMetrics": [{"Namespace": NAMESPACE, "Dimensions": [["Function"]], "Metrics": definitions}],
        }),
    );
    doc.insert("Function".into(), function.into());
    for (name, value, _) in metrics {
        doc.insert((*name).into(), json!(value));
    }
    Value::Object(doc)
}

/// The `Function` dimension: the Lambda function's name, or `dev-server` locally.
fn function() -> &'static str {
    static NAME: OnceLock<String> = OnceLock::new();
    NAME.get_or_init(|| std::env::var("AWS_LAMBDA_FUNCTION_NAME").unwrap_or_else(|_| "dev-server".into()))
}

/// Emits numbers for an operator to watch: (name, value, unit).
pub fn emit(metrics: &[(&str, f64, &str)]) {
    if enabled() && !metrics.is_empty() {
        println!("{}", render(function(), metrics, chrono::Utc::now().timestamp_millis()));
    }
}

/// One count of one thing.
pub fn count(name: &str) {
    emit(&[(name, 1.0, "Count")]);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_metric_line_declares_its_metrics_and_carries_their_values() {
        let doc = render("reserve", &[("Holds", 1.0, "Count"), ("QueueLagSeconds", 2.5, "Seconds")], 1_700_000_000_000);
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Namespace"], "Reservations");
        assert_eq!(doc["_aws"]["CloudWatchMetrics"][0]["Dimensions"], json!([["Function"]]));
        assert_eq!(
            doc["_aws"]["CloudWatchMetrics"][0]["Metrics"][1],
            json!({"Name": "QueueLagSeconds", "Unit": "Seconds"})
        );
        assert_eq!((doc["Holds"].as_f64(), doc["Function"].as_str()), (Some(1.0), Some("reserve")));
        assert_eq!(doc["_aws"]["Timestamp"], 1_700_000_000_000i64);
    }
}
