//! The TLS port against the built binary: certificates made at test time
//! with the `openssl` command (a CA, a server and a client certificate;
//! the tests are skipped, with a message, without it), a rustls client
//! (PING/SET/GET, pub/sub, a large value), client certificates required
//! or optional, and — where installed — `redis-cli --tls` and redis-py's
//! `ssl=True`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{free_port, Server};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};

/// Makes `ca.crt`, `server.{crt,key}` (for localhost and 127.0.0.1) and
/// `client.{crt,key}` in `dir`; false if `openssl` is missing or fails.
fn make_certs(dir: &Path) -> bool {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    std::fs::write(dir.join("server.ext"), "subjectAltName=DNS:localhost,IP:127.0.0.1\n").unwrap();
    std::fs::write(dir.join("client.ext"), "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n").unwrap();
    let ok = run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=strata-test-ca",
    ]);
    ok && ["server", "client"].iter().all(|n| {
        let cn = if *n == "server" { "/CN=localhost" } else { "/CN=client" };
        let (key, csr, crt, ext) = (format!("{n}.key"), format!("{n}.csr"), format!("{n}.crt"), format!("{n}.ext"));
        run(&["req", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &csr, "-subj", cn])
            && run(&[
                "x509",
                "-req",
                "-in",
                &csr,
                "-CA",
                "ca.crt",
                "-CAkey",
                "ca.key",
                "-CAcreateserial",
                "-out",
                &crt,
                "-days",
                "2",
                "-extfile",
                &ext,
            ])
    })
}

/// A temporary directory with certificates, or `None` (test skipped).
fn certs() -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    if make_certs(dir.path()) {
        Some(dir)
    } else {
        eprintln!("skipped: the openssl command is missing or failed");
        None
    }
}

/// Starts the server with `flags` and waits until `port` accepts TCP.
fn start_with(data: &Path, port: u16, flags: &[String]) -> Server {
    let child = Command::new(env!("CARGO_BIN_EXE_strata-server"))
        .arg("--dir")
        .arg(data)
        .args(["--pm-size", "128mb"])
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let srv = Server { child, port };
    let deadline = Instant::now() + Duration::from_secs(60);
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    }
    srv
}

fn tls_flags(certs: &Path, port: u16, tls_port: u16, ca: bool, extra: &[&str]) -> Vec<String> {
    let p = |n: &str| certs.join(n).display().to_string();
    let mut f = vec![
        "--port".into(),
        port.to_string(),
        "--tls-port".into(),
        tls_port.to_string(),
        "--tls-cert-file".into(),
        p("server.crt"),
        "--tls-key-file".into(),
        p("server.key"),
    ];
    if ca {
        f.extend(["--tls-ca-cert-file".into(), p("ca.crt")]);
    }
    f.extend(extra.iter().map(|s| s.to_string()));
    f
}

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A rustls client for `port`, presenting the client certificate if `cert`.
fn client(certs: &Path, port: u16, cert: bool) -> Tls {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_file_iter(certs.join("ca.crt")).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = if cert {
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_file_iter(certs.join("client.crt")).unwrap().map(|c| c.unwrap()).collect();
        let key = PrivateKeyDer::from_pem_file(certs.join("client.key")).unwrap();
        b.with_client_auth_cert(chain, key).unwrap()
    } else {
        b.with_no_client_auth()
    };
    let name = ServerName::try_from("localhost").unwrap();
    let conn = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let sock = TcpStream::connect(("127.0.0.1", port)).unwrap();
    sock.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    rustls::StreamOwned::new(conn, sock)
}

fn roundtrip(s: &mut impl ReadWrite, req: &[u8], want: &[u8]) {
    s.write_all(req).unwrap();
    s.flush().unwrap();
    let mut got = vec![0u8; want.len()];
    s.read_exact(&mut got).unwrap();
    assert_eq!(String::from_utf8_lossy(&got), String::from_utf8_lossy(want));
}

trait ReadWrite: Read + Write {}
impl<T: Read + Write> ReadWrite for T {}

#[test]
fn tls_only_with_client_certificates() {
    let Some(certs) = certs() else { return };
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let _srv = start_with(data.path(), port, &tls_flags(certs.path(), 0, port, true, &[]));
    let mut c = client(certs.path(), port, true);
    roundtrip(&mut c, b"PING\r\n", b"+PONG\r\n");
    roundtrip(&mut c, b"SET k v\r\nGET k\r\n", b"+OK\r\n$1\r\nv\r\n");
    // A value larger than the session's buffers, both ways.
    let big = vec![b'x'; 3 << 20];
    let mut req = format!("*3\r\n$3\r\nSET\r\n$3\r\nbig\r\n${}\r\n", big.len()).into_bytes();
    req.extend_from_slice(&big);
    req.extend_from_slice(b"\r\nGET big\r\n");
    let mut want = format!("+OK\r\n${}\r\n", big.len()).into_bytes();
    want.extend_from_slice(&big);
    want.extend_from_slice(b"\r\n");
    roundtrip(&mut c, &req, &want);
    // Pub/sub over TLS: a message from another TLS client.
    let mut p = client(certs.path(), port, true);
    roundtrip(&mut c, b"SUBSCRIBE ch\r\n", b"*3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n");
    roundtrip(&mut p, b"PUBLISH ch hi\r\n", b":1\r\n");
    let want = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n";
    let mut got = vec![0u8; want.len()];
    c.read_exact(&mut got).unwrap();
    assert_eq!(&got, want);
    // Without a client certificate the handshake fails.
    let mut anon = client(certs.path(), port, false);
    let r = anon.write_all(b"PING\r\n").and_then(|_| anon.flush()).and_then(|_| {
        let mut b = [0u8; 7];
        anon.read_exact(&mut b)
    });
    assert!(r.is_err(), "a client without a certificate was served");
    // Plain TCP on the TLS port gets no reply.
    let mut plain = TcpStream::connect(("127.0.0.1", port)).unwrap();
    plain.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let _ = plain.write_all(b"PING\r\n");
    let mut b = [0u8; 7];
    assert!(plain.read_exact(&mut b).is_err() || &b != b"+PONG\r\n");
}

#[test]
fn plain_and_tls_ports_with_optional_client_certificates() {
    let Some(certs) = certs() else { return };
    let data = tempfile::tempdir().unwrap();
    let (port, tls_port) = (free_port(), free_port());
    let flags = tls_flags(certs.path(), port, tls_port, true, &["--tls-auth-clients", "optional"]);
    let _srv = start_with(data.path(), tls_port, &flags);
    let mut anon = client(certs.path(), tls_port, false);
    roundtrip(&mut anon, b"SET a 1\r\n", b"+OK\r\n");
    let mut with_cert = client(certs.path(), tls_port, true);
    roundtrip(&mut with_cert, b"GET a\r\n", b"$1\r\n1\r\n");
    let mut plain = common::connect(port);
    roundtrip(
        &mut plain,
        b"GET a\r\nCONFIG GET tls-port\r\n",
        format!("$1\r\n1\r\n*2\r\n$8\r\ntls-port\r\n${}\r\n{tls_port}\r\n", tls_port.to_string().len()).as_bytes(),
    );
}

/// `redis-cli --tls` and redis-py `ssl=True`, where installed.
#[test]
fn redis_cli_and_redis_py_over_tls() {
    let Some(certs) = certs() else { return };
    let data = tempfile::tempdir().unwrap();
    let port = free_port();
    let _srv = start_with(data.path(), port, &tls_flags(certs.path(), 0, port, true, &[]));
    let p = |n: &str| certs.path().join(n).display().to_string();
    let cli = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--tls", "--cacert", &p("ca.crt"), "--cert", &p("client.crt")])
        .args(["--key", &p("client.key"), "PING"])
        .output();
    match cli {
        Ok(out) => assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "PONG", "{out:?}"),
        Err(e) => eprintln!("skipped redis-cli: {e}"),
    }
    // The venv scripts/test.d/20-server.sh makes (redis-py and pytest), if any.
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    let venv = target.join("strata-server-venv/bin/python");
    let python = std::env::var("STRATA_TEST_PYTHON").ok().unwrap_or_else(|| {
        if venv.exists() {
            venv.display().to_string()
        } else {
            "python3".into()
        }
    });
    let has_redis_py = Command::new(&python).args(["-c", "import redis"]).output().is_ok_and(|o| o.status.success());
    if !has_redis_py {
        eprintln!(
            "skipped redis-py: `{python} -c 'import redis'` fails (set STRATA_TEST_PYTHON to a python with redis-py)"
        );
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python/tls_check.py");
    let out = Command::new(&python)
        .arg(script)
        .args([port.to_string(), p("ca.crt"), p("client.crt"), p("client.key")])
        .output()
        .unwrap();
    assert!(out.status.success(), "redis-py over TLS: {}", String::from_utf8_lossy(&out.stderr));
}
