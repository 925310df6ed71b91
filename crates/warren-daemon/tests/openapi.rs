//! The OpenAPI document (docs/api/openapi.json) and the router agree both ways: every
//! documented operation is served (neither the 404 fallback nor 405), and every route
//! the sources register is documented.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request};
use tower::ServiceExt;
use warren_daemon::access::{Access, Level};
use warren_daemon::api::{router, OPENAPI, ROUTES};
use warren_daemon::App;

fn documented() -> BTreeSet<(String, String)> {
    let doc: serde_json::Value = serde_json::from_str(OPENAPI).expect("openapi.json is JSON");
    assert_eq!(
        doc["openapi"].as_str().map(|v| &v[..2]),
        Some("3."),
        "an OpenAPI 3 document"
    );
    let mut out = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for method in item.as_object().expect("a path item").keys() {
            out.insert((method.clone(), path.clone()));
        }
    }
    out
}

/// The routes the sources register: each `.route("PATH", get(..).post(..))`, the
/// handlers read up to the call's closing line.
fn registered() -> BTreeSet<(String, String)> {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/src/api");
    let mut out = BTreeSet::new();
    for f in std::fs::read_dir(dir).expect("src/api") {
        let text = std::fs::read_to_string(f.expect("an entry").path()).expect("a source file");
        for piece in text.split(".route(").skip(1) {
            let Some(path) = piece.split('"').nth(1) else {
                continue;
            };
            let call = piece.split("\n        .").next().unwrap_or("");
            let call = call.split("\n        )").next().unwrap_or(call);
            for m in ["get", "post", "patch", "delete", "put"] {
                if call.contains(&format!(" {m}(")) || call.contains(&format!(".{m}(")) {
                    out.insert((m.to_string(), path.to_string()));
                }
            }
        }
    }
    out
}

#[test]
fn the_document_lists_exactly_the_routes() {
    let doc = documented();
    let table: BTreeSet<(String, String)> = ROUTES
        .iter()
        .map(|(m, p)| (m.to_string(), p.to_string()))
        .collect();
    assert_eq!(doc, table, "docs/api/openapi.json and api::ROUTES differ");
    assert_eq!(
        registered(),
        table,
        "the routes registered in src/api and api::ROUTES differ"
    );
}

#[tokio::test]
async fn every_documented_operation_is_served() {
    let root = tempfile::tempdir().expect("a temp dir");
    let app = Arc::new(App {
        root: root.path().to_path_buf(),
        oci_root: root.path().join("oci"),
        // Verbs fail to start (500): what matters here is that the route exists.
        helper_exe: root.path().join("absent-helper"),
        cli_exe: root.path().join("absent-warren"),
        lock_wait: Duration::from_secs(1),
        ops: Default::default(),
        metrics: None,
    });
    let r = router(app);
    for (method, path) in documented() {
        let uri = path
            .replace("{zone}", "x")
            .replace("{key}", "memory.max")
            .replace("{id}", "op-1")
            .replace("{name}", "t");
        let mut req = Request::builder()
            .method(Method::from_bytes(method.to_uppercase().as_bytes()).expect("a method"))
            .uri(&uri)
            .header("content-type", "application/json")
            .body(Body::from("{}"))
            .expect("a request");
        req.extensions_mut().insert(Access {
            uid: 0,
            level: Level::ReadWrite,
        });
        let resp = r.clone().oneshot(req).await.expect("infallible");
        let status = resp.status().as_u16();
        if uri == "/1.0/events" {
            assert_eq!(status, 200, "the event stream opens");
            continue;
        }
        let body = axum::body::to_bytes(resp.into_body(), 1 << 20)
            .await
            .unwrap_or_default();
        let text = String::from_utf8_lossy(&body);
        assert!(
            status != 405 && !text.contains("no such API path"),
            "{method} {uri}: not served ({status} {text})"
        );
    }
}
