//! The SQLite store: two kernels sharing one file, foreign files refused,
//! readers that never wait on a writer.

mod common;

use common::{append_request, item, plan_request, NOW};
use ctxkernel_host::{ErrorCode, Kernel, Runtime, SqliteStore};
use serde_json::json;

#[test]
fn two_kernels_share_one_sqlite_file() {
    let dir = std::env::temp_dir().join(format!("ctxk-share-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let runtime = Runtime::new().unwrap();
    let mut a = Kernel::with_runtime(runtime.clone(), SqliteStore::open(&path).unwrap());
    let mut b = Kernel::with_runtime(runtime, SqliteStore::open(&path).unwrap());

    a.append_events(&append_request(0, 2)).unwrap();
    let seen = b.plan_context(&plan_request()).unwrap();
    assert_eq!(seen["binding"]["sessionHead"]["seq"], 2, "b sees a's writes");
    // Both build on seq 2; the second writer loses the race and learns the head.
    let won = a.append_events(&append_request(2, 1)).unwrap();
    let lost = b.append_events(&append_request(2, 1)).unwrap_err();
    assert_eq!(lost.code, ErrorCode::Stale);
    assert_eq!(lost.detail["currentHead"], won["head"]);
    // b recomputes from the current head and succeeds.
    b.append_events(&json!({"schemaVersion": 1, "sessionId": "s1", "expectedHead": won["head"],
        "items": [item(40, "assistant", "from b")], "now": NOW})).unwrap();
    let info_a = a.info().unwrap();
    let info_b = b.info().unwrap();
    assert_eq!(info_a["store"], info_b["store"]);
    assert_eq!(info_a["store"]["revision"], 3);
    assert_eq!(a.plan_context(&plan_request()).unwrap(), b.plan_context(&plan_request()).unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn foreign_files_are_not_opened_as_stores() {
    let dir = std::env::temp_dir().join(format!("ctxk-foreign-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let garbage = dir.join("garbage.sqlite");
    std::fs::write(&garbage, vec![0x42u8; 8192]).unwrap();
    assert!(SqliteStore::open(&garbage).is_err());
    let other = dir.join("other.sqlite");
    rusqlite::Connection::open(&other).unwrap().execute_batch("CREATE TABLE invoices (id INTEGER);").unwrap();
    let err = SqliteStore::open(&other).err().unwrap().to_string();
    assert!(err.contains("not a ctxkernel store"), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn readers_never_wait_on_a_writer_and_a_busy_writer_gets_a_typed_error() {
    let dir = std::env::temp_dir().join(format!("ctxk-busy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("store.sqlite");
    let _ = std::fs::remove_file(&path);
    let mut kernel = Kernel::new(SqliteStore::open_with(&path, std::time::Duration::from_millis(300)).unwrap()).unwrap();
    kernel.append_events(&append_request(0, 2)).unwrap();
    // Another connection holds the write lock, as a long compaction would.
    let writer = rusqlite::Connection::open(&path).unwrap();
    writer.execute_batch("BEGIN IMMEDIATE; UPDATE ctxk_entries SET revision = revision + 1;").unwrap();
    // The lock is held throughout: a read that waited for it would fail busy.
    assert_eq!(kernel.plan_context(&plan_request()).unwrap()["binding"]["sessionHead"]["seq"], 2);
    assert_eq!(kernel.read_events(&json!({"schemaVersion": 1, "sessionId": "s1"})).unwrap()["events"].as_array().unwrap().len(), 2);
    assert_eq!(kernel.info().unwrap()["store"]["revision"], 1, "readers see the last commit, not the open transaction");
    let started = std::time::Instant::now();
    let busy = kernel.append_events(&append_request(2, 1)).unwrap_err();
    assert!(started.elapsed().as_millis() >= 290);
    assert_eq!(busy.code, ErrorCode::StorageFailure);
    assert_eq!(busy.message, "cannot begin a transaction: the store is busy: another connection held its write lock for more than 300 ms");
    writer.execute_batch("ROLLBACK").unwrap();
    assert_eq!(kernel.append_events(&append_request(2, 1)).unwrap()["head"]["seq"], 3);
    std::fs::remove_dir_all(&dir).unwrap();
}
