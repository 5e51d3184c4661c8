//! template.yaml's alarms against what they watch: every dead-letter queue has a depth
//! alarm, every alarm notifies the operator's topic when one is given, and every
//! metric of the project's own namespace that an alarm or the dashboard reads is one
//! the code writes. Runs without AWS.

use serde_yaml_ng::Value;
use std::collections::BTreeSet;

const TEMPLATE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../template.yaml");

fn template() -> (String, Value) {
    let text = std::fs::read_to_string(TEMPLATE).unwrap_or_else(|e| panic!("reading {TEMPLATE}: {e}"));
    let value = serde_yaml_ng::from_str(&text).unwrap_or_else(|e| panic!("parsing {TEMPLATE}: {e}"));
    (text, value)
}

/// `(logical id, properties)` of every resource of `kind`.
fn resources_of<'a>(template: &'a Value, kind: &str) -> Vec<(String, &'a Value)> {
    template["Resources"]
        .as_mapping()
        .expect("Resources")
        .iter()
        .filter(|(_, r)| r["Type"].as_str() == Some(kind))
        .map(|(id, r)| (id.as_str().unwrap().to_string(), &r["Properties"]))
        .collect()
}

/// A value as YAML text (tags such as `!GetAtt` included), for matching references.
fn text(v: &Value) -> String {
    serde_yaml_ng::to_string(v).unwrap()
}

#[test]
fn every_dead_letter_queue_has_a_depth_alarm() {
    let (_, t) = template();
    let queues = resources_of(&t, "AWS::SQS::Queue");
    let dead_letter: BTreeSet<String> = queues
        .iter()
        .filter_map(|(_, p)| p.get("RedrivePolicy"))
        .map(|policy| text(&policy["deadLetterTargetArn"]))
        .map(|arn| {
            queues
                .iter()
                .find(|(id, _)| arn.contains(&format!("{id}.Arn")))
                .expect("a queue of this template")
                .0
                .clone()
        })
        .collect();
    assert_eq!(dead_letter.len(), 2, "the intents and events queues each have a dead-letter queue");
    let alarms = resources_of(&t, "AWS::CloudWatch::Alarm");
    for dlq in &dead_letter {
        let watched = alarms.iter().any(|(_, a)| {
            a["Namespace"].as_str() == Some("AWS/SQS")
                && a["MetricName"].as_str() == Some("ApproximateNumberOfMessagesVisible")
                && text(&a["Dimensions"]).contains(&format!("{dlq}.QueueName"))
        });
        assert!(watched, "{dlq} has an alarm on its depth");
    }
}

#[test]
fn every_alarm_notifies_the_operator_topic_on_alarm_and_on_recovery() {
    let (_, t) = template();
    let alarms = resources_of(&t, "AWS::CloudWatch::Alarm");
    assert!(alarms.len() >= 7, "DLQs, 5xx rate, p99 latency, breaker, unsettled intents, sweeper");
    for (id, a) in alarms {
        for actions in ["AlarmActions", "OKActions"] {
            assert!(text(&a[actions]).contains("AlarmTopicArn"), "{id}: {actions} go to AlarmTopicArn");
        }
        assert!(a["AlarmDescription"].as_str().is_some_and(|d| !d.is_empty()), "{id} says what it means");
    }
}

#[test]
fn the_alarms_and_the_dashboard_read_only_metrics_the_code_writes() {
    let (_, t) = template();
    let mut sources = String::new();
    for dir in ["shared/src", "functions"] {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir);
        let mut stack = vec![root];
        while let Some(p) = stack.pop() {
            for entry in std::fs::read_dir(&p).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    sources.push_str(&std::fs::read_to_string(&path).unwrap());
                }
            }
        }
    }
    let mut names: BTreeSet<String> = BTreeSet::new();
    for (_, a) in resources_of(&t, "AWS::CloudWatch::Alarm") {
        if a["Namespace"].as_str() == Some("Reservations") {
            names.insert(a["MetricName"].as_str().unwrap().to_string());
        }
        for m in a["Metrics"].as_sequence().into_iter().flatten() {
            let metric = &m["MetricStat"]["Metric"];
            if metric["Namespace"].as_str() == Some("Reservations") {
                names.insert(metric["MetricName"].as_str().unwrap().to_string());
            }
        }
    }
    // The dashboard's body is a `!Sub` of JSON: with its `${...}` references replaced by
    // their names it parses, and each widget's rows name [namespace, metric, ...], "."
    // repeating the row above.
    let body = &t["Resources"]["Dashboard"]["Properties"]["DashboardBody"];
    let Value::Tagged(sub) = body else { panic!("the dashboard body is a !Sub") };
    let source = sub.value[0].as_str().expect("the !Sub's text");
    let mut plain = String::new();
    let mut rest = source;
    while let Some(i) = rest.find("${") {
        let end = i + rest[i..].find('}').expect("a closed ${...}");
        plain.push_str(&rest[..i]);
        plain.push_str(&rest[i + 2..end]);
        rest = &rest[end + 1..];
    }
    plain.push_str(rest);
    let json: serde_json::Value = serde_json::from_str(&plain).expect("the dashboard is JSON");
    for widget in json["widgets"].as_array().unwrap() {
        let mut previous: Vec<String> = Vec::new();
        for row in widget["properties"]["metrics"].as_array().unwrap() {
            let fields: Vec<String> = row
                .as_array()
                .unwrap()
                .iter()
                .enumerate()
                .filter_map(|(i, f)| f.as_str().map(|s| if s == "." { previous[i].clone() } else { s.to_string() }))
                .collect();
            if fields[0] == "Reservations" {
                names.insert(fields[1].clone());
            }
            previous = fields;
        }
    }
    assert!(names.contains("OldestUnsettledIntentSeconds") && names.contains("BreakerOpen"), "{names:?}");
    for name in names {
        assert!(sources.contains(&format!("\"{name}\"")), "the code writes the metric {name}");
    }
}
