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
