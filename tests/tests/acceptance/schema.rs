//! The schema the migration step makes is the one checked in (sql/schema.sql), so a
//! change's effect on the database is reviewed as a diff of that file.

/// The migration step (the baseline and every function of sql/functions) on a fresh
/// database, dumped by `scripts/schema-dump --print`, is sql/schema.sql byte for byte.
#[tokio::test]
async fn a_migrated_database_has_the_checked_in_schema() {
    let url = acceptance::fresh_database().await;
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let out = std::process::Command::new("bash")
        .arg(format!("{root}/scripts/schema-dump"))
        .args(["--print", &url])
        .output()
        .expect("bash runs scripts/schema-dump");
    assert!(out.status.success(), "scripts/schema-dump --print failed: {}", String::from_utf8_lossy(&out.stderr));
    let migrated = String::from_utf8(out.stdout).expect("the dump is UTF-8");
    let checked_in = std::fs::read_to_string(format!("{root}/sql/schema.sql")).expect("sql/schema.sql is readable");
    if migrated != checked_in {
        let want: Vec<&str> = checked_in.split('\n').collect();
        let got: Vec<&str> = migrated.split('\n').collect();
        let line = (0..).find(|&i| want.get(i) != got.get(i)).expect("two different texts differ on some line");
        let [want, got] = [&want, &got].map(|lines| lines.get(line).copied().unwrap_or("<end of file>"));
        panic!(
            "sql/schema.sql is not the schema the migration step makes; run scripts/schema-dump and review \
             `git diff sql/schema.sql`. First difference, line {}:\n  checked in: {want}\n  migrated:   {got}",
            line + 1
        );
    }
}

/// The migration step applies every function again each time it runs, so a redeploy
/// applies a function's new definition to a database that is already migrated.
#[tokio::test]
async fn the_migration_step_applies_the_functions_again_on_a_migrated_database() {
    let url = acceptance::fresh_database().await;
    let (mut client, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls).await.unwrap();
    let task = tokio::spawn(connection);
    client
        .batch_execute(
            "CREATE OR REPLACE FUNCTION uuidv7() RETURNS uuid LANGUAGE sql AS \
             $$ SELECT '00000000-0000-0000-0000-000000000000'::uuid $$",
        )
        .await
        .unwrap();
    let applied = shared::db::migrate(&mut client).await.expect("the migration step runs again");
    assert_eq!(applied, 0, "no migration is pending");
    let id: uuid::Uuid = client.query_one("SELECT uuidv7()", &[]).await.unwrap().get(0);
    assert_eq!(id.get_version_num(), 7, "sql/functions/uuidv7.sql is the definition again: {id}");
    drop(client);
    let _ = task.await;
}
