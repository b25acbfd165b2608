//! The server's boundary where it needs the process: `llamay serve` refuses to listen
//! beyond loopback without a key, and closes a connection that never finishes its
//! headers. What reaches a handler (origins, hosts, body types, CORS, `curl -d`) is
//! tested in-process: crates/server/tests/http/boundary.rs.

mod common;

use std::time::Duration;

use common::serve::Server;

#[test]
fn beyond_loopback_the_server_wants_a_key() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llamay"))
        .args(["serve", "-m", "/nonexistent.gguf", "-addr", "0.0.0.0:0"])
        .env_remove("LLAMAY_API_KEY")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("-api-key") && err.contains("-insecure-no-key"),
        "{err}"
    );
}

#[test]
fn a_connection_that_never_finishes_its_headers_is_closed() {
    use std::io::{Read, Write};
    let s = Server::start(&[]);
    let addr = s.base.trim_start_matches("http://").to_string();
    let mut conn = std::net::TcpStream::connect(&addr).unwrap();
    conn.write_all(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        .unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let t0 = std::time::Instant::now();
    let mut buf = Vec::new();
    // Closed by the server (EOF, possibly after a 408), not by our read timeout.
    let r = conn.read_to_end(&mut buf);
    assert!(
        r.is_ok(),
        "the connection was still open after {:?}: {r:?}",
        t0.elapsed()
    );
    assert!(t0.elapsed() < Duration::from_secs(25), "{:?}", t0.elapsed());
}
