//! `/api/pull` on the server's terms: a URL pull never takes over an existing name
//! (409, the old model intact) unless asked to replace it, a private address is
//! refused without `-allow-private-pulls`, a body's `"insecure"` is ignored, a
//! lying `Content-Length` leaves nothing behind, and a pull stops when its client
//! leaves. The files come from servers of the test's own on loopback.

mod common;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use common::serve::{client, post, Server};
use serde_json::{json, Value};

/// The flags a server needs to pull from the test's own servers at all.
const LOCAL_PULLS: [&str; 2] = ["-allow-private-pulls", "-insecure"];

/// A tiny GGUF to serve.
fn tiny_gguf() -> Vec<u8> {
    let path = llamay_testdata::tiny_models()
        .into_iter()
        .find(|p| p.to_string_lossy().contains("llama"))
        .unwrap_or_else(|| llamay_testdata::tiny_models().remove(0));
    std::fs::read(path).unwrap()
}

/// The server's store folder (`common::serve` names it after this process and the port).
fn store_dir(s: &Server) -> PathBuf {
    let port = s.base.rsplit(':').next().unwrap();
    std::env::temp_dir().join(format!("llamay-serve-test-{}-{port}", std::process::id()))
}

/// The store digest `/api/tags` lists for `name`.
fn listed_digest(s: &Server, name: &str) -> Option<String> {
    let tags: Value = client()
        .get(s.url("/api/tags"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    tags["models"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == name)
        .map(|m| m["digest"].as_str().unwrap().to_string())
}

/// What a file server of the test saw and did.
#[derive(Default)]
struct Log {
    /// "METHOD /path" per request.
    requests: Vec<String>,
}

/// Serves `bytes` at `/files/<any>.gguf` (whole, 200) and, at `/slow/<any>.gguf`, a
/// 32 MiB file (one range for a pull) that sends 256 KiB and then 1 KiB every
/// 50 ms, so it would take half an hour. Each GET body of `/slow` reports on
/// `events` when it starts and when it is dropped (its client went away).
fn file_server(bytes: Vec<u8>, events: mpsc::Sender<&'static str>) -> (String, Arc<Mutex<Log>>) {
    let log = Arc::new(Mutex::new(Log::default()));
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let (bytes, state) = (Bytes::from(bytes), log.clone());
    let events = Arc::new(Mutex::new(events));
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let files = {
                let (bytes, state) = (bytes.clone(), state.clone());
                move |method: Method, uri: axum::http::Uri| {
                    let (bytes, state) = (bytes.clone(), state.clone());
                    async move {
                        state
                            .lock()
                            .unwrap()
                            .requests
                            .push(format!("{method} {uri}"));
                        (StatusCode::OK, bytes).into_response()
                    }
                }
            };
            let slow = move |method: Method, uri: axum::http::Uri| {
                let (state, events) = (state.clone(), events.clone());
                async move {
                    state
                        .lock()
                        .unwrap()
                        .requests
                        .push(format!("{method} {uri}"));
                    slow_body(method == Method::GET, events)
                }
            };
            let app = axum::Router::new()
                .route("/files/{name}", axum::routing::get(files))
                .route("/slow/{name}", axum::routing::get(slow));
            let l = tokio::net::TcpListener::from_std(listener).unwrap();
            let _ = tokio::time::timeout(Duration::from_secs(300), axum::serve(l, app)).await;
        });
    });
    (base, log)
}

/// Sends `dropped` on `events` when dropped.
struct DropSignal(Arc<Mutex<mpsc::Sender<&'static str>>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        let _ = self.0.lock().unwrap().send("dropped");
    }
}

/// A 32 MiB answer that trickles after its first 256 KiB.
fn slow_body(get: bool, events: Arc<Mutex<mpsc::Sender<&'static str>>>) -> Response {
    const SIZE: u64 = 32 << 20;
    let guard = get.then(|| DropSignal(events.clone()));
    let stream = futures_util::stream::unfold((0u64, guard), move |(sent, guard)| {
        let events = events.clone();
        async move {
            if sent == 0 {
                let _ = events.lock().unwrap().send("started");
                let mut piece = vec![0u8; 256 << 10];
                piece[..4].copy_from_slice(b"GGUF");
                return Some((
                    Ok::<_, std::io::Error>(Bytes::from(piece)),
                    (256 << 10, guard),
                ));
            }
            if sent >= SIZE {
                return None;
            }
            // Never silent long enough for a read timeout: only a client that
            // leaves ends this body early.
            tokio::time::sleep(Duration::from_millis(50)).await;
            Some((Ok(Bytes::from(vec![0u8; 1024])), (sent + 1024, guard)))
        }
    });
    let mut resp = Response::new(Body::from_stream(stream));
    resp.headers_mut()
        .insert(header::CONTENT_LENGTH, SIZE.into());
    resp
}

/// A raw HTTP server whose every answer is `200` with `Content-Length: 1 TiB` and
/// then 300,000 bytes of a GGUF-looking body before it closes the connection.
fn lying_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut reader = BufReader::new(conn.try_clone().unwrap());
                let mut request_line = String::new();
                let _ = reader.read_line(&mut request_line);
                let mut line = String::new();
                while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
                    line.clear();
                }
                let head = "HTTP/1.1 200 OK\r\nContent-Length: 1099511627776\r\nAccept-Ranges: bytes\r\nConnection: close\r\n\r\n";
                let _ = conn.write_all(head.as_bytes());
                if request_line.starts_with("GET") {
                    let mut body = vec![7u8; 300_000];
                    body[..4].copy_from_slice(b"GGUF");
                    let _ = conn.write_all(&body);
                }
                let _ = conn.flush();
                let _ = conn.shutdown(std::net::Shutdown::Both);
                let mut sink = Vec::new();
                let _ = conn.read_to_end(&mut sink);
            });
        }
    });
    base
}

#[test]
fn a_url_pull_onto_an_existing_name_is_409_and_the_old_model_stays() {
    let (tx, _rx) = mpsc::channel();
    let (base, log) = file_server(tiny_gguf(), tx);
    let s = Server::start_with(&LOCAL_PULLS, &["tiny-test"]);
    let c = client();
    let before = listed_digest(&s, "tiny-test:latest").expect("imported");
    let url = format!("{base}/files/tiny-test.gguf");

    // Streaming or not, the clash is a 409 before anything is fetched.
    for body in [
        json!({"model": url, "insecure": true}),
        json!({"model": url, "stream": false}),
    ] {
        let (st, v) = post(&c, &s.url("/api/pull"), &body);
        assert_eq!(st, 409, "{body}: {v}");
        assert!(
            v["error"].as_str().unwrap().contains("already exists"),
            "{v}"
        );
    }
    assert!(
        log.lock().unwrap().requests.is_empty(),
        "nothing was fetched"
    );
    assert_eq!(listed_digest(&s, "tiny-test:latest"), Some(before.clone()));
    // The old model still answers.
    let (st, v) = post(
        &c,
        &s.url("/api/generate"),
        &json!({"model": "tiny-test", "prompt": "Hi", "stream": false, "options": {"num_predict": 2}}),
    );
    assert_eq!(st, 200, "{v}");

    // Asked to replace it, the pull does.
    let (st, v) = post(
        &c,
        &s.url("/api/pull"),
        &json!({"model": url, "stream": false, "replace": true}),
    );
    assert_eq!((st, v["status"].as_str()), (200, Some("success")), "{v}");
    let after = listed_digest(&s, "tiny-test:latest").unwrap();
    assert_ne!(after, before);
}

#[test]
fn a_pull_to_a_private_address_is_refused_without_the_flag() {
    let (tx, _rx) = mpsc::channel();
    let (base, log) = file_server(tiny_gguf(), tx);
    let port = base.rsplit(':').next().unwrap().to_string();
    let s = Server::start(&["-insecure"]);
    let c = client();
    for url in [
        format!("{base}/files/private.gguf"),
        format!("http://localhost:{port}/files/private.gguf"),
        format!("http://[::ffff:127.0.0.1]:{port}/files/private.gguf"),
    ] {
        for stream in [true, false] {
            let (st, v) = post(
                &c,
                &s.url("/api/pull"),
                &json!({"model": url, "stream": stream}),
            );
            assert_eq!(st, 403, "{url}: {v}");
            let msg = v["error"].as_str().unwrap();
            assert!(msg.contains("-allow-private-pulls"), "{msg}");
        }
    }
    assert!(
        log.lock().unwrap().requests.is_empty(),
        "nothing was fetched"
    );
    assert_eq!(listed_digest(&s, "private:latest"), None);
    drop(s);

    // Without -insecure, a body's "insecure" does not make plain http acceptable.
    let s = Server::start(&["-allow-private-pulls"]);
    let (st, v) = post(
        &c,
        &s.url("/api/pull"),
        &json!({"model": format!("{base}/files/private.gguf"), "insecure": true}),
    );
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("plain http"), "{v}");
    assert!(log.lock().unwrap().requests.is_empty());

    // With the flag, the same pull works.
    let s = Server::start(&LOCAL_PULLS);
    let (st, v) = post(
        &c,
        &s.url("/api/pull"),
        &json!({"model": format!("{base}/files/private.gguf"), "stream": false}),
    );
    assert_eq!((st, v["status"].as_str()), (200, Some("success")), "{v}");
    assert!(listed_digest(&s, "private:latest").is_some());
}

#[test]
fn a_lying_content_length_leaves_nothing_behind() {
    let base = lying_server();
    let s = Server::start(&LOCAL_PULLS);
    let c = client();
    let (st, v) = post(
        &c,
        &s.url("/api/pull"),
        &json!({"model": format!("{base}/files/liar.gguf"), "stream": false}),
    );
    assert_eq!(st, 400, "{v}");
    let blobs = store_dir(&s).join("blobs");
    let left: Vec<(String, u64)> = std::fs::read_dir(&blobs)
        .map(|rd| {
            rd.filter_map(|e| e.ok())
                .map(|e| {
                    let len = e.metadata().map(|m| m.len()).unwrap_or(0);
                    (e.file_name().to_string_lossy().into_owned(), len)
                })
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(left, Vec::<(String, u64)>::new(), "in {}", blobs.display());
    assert_eq!(listed_digest(&s, "liar:latest"), None);
}

#[test]
fn a_pull_stops_when_its_client_leaves() {
    let (tx, rx) = mpsc::channel();
    let (base, _log) = file_server(Vec::new(), tx);
    let s = Server::start(&LOCAL_PULLS);
    let addr = s.base.trim_start_matches("http://").to_string();
    let wait = |what: &str| {
        let got = rx
            .recv_timeout(Duration::from_secs(60))
            .unwrap_or_else(|_| panic!("the file server never saw the pull {what}"));
        assert_eq!(got, what);
    };
    for (file, stream) in [("streamed", true), ("waited", false)] {
        let body =
            json!({"model": format!("{base}/slow/{file}.gguf"), "stream": stream}).to_string();
        let mut conn = std::net::TcpStream::connect(&addr).unwrap();
        write!(
            conn,
            "POST /api/pull HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        )
        .unwrap();
        wait("started");
        // The client leaves mid-pull; the pull must follow it.
        drop(conn);
        wait("dropped");
    }
    // The server is still there, and kept nothing it was asked for.
    assert_eq!(listed_digest(&s, "streamed:latest"), None);
    assert_eq!(listed_digest(&s, "waited:latest"), None);
}
