//! The SQL of every named statement against the migrated schema: a typo or a dropped
//! column fails here, not in a request.

use acceptance::TestApp;

#[tokio::test]
async fn every_named_statement_prepares_against_the_migrated_schema() {
    let app = TestApp::spawn().await;
    let db = app.db().await;
    let mut failures = Vec::new();
    for (name, sql) in shared::db::STATEMENTS {
        if let Err(e) = db.prepare(sql).await {
            failures.push(format!(
                "{name}: {}",
                e.as_db_error().map_or_else(|| e.to_string(), |d| d.message().to_string())
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
