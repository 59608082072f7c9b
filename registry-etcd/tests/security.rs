//! Authentication and TLS against real, private etcd servers (enabling auth on the shared test
//! server would break every other test): right credentials work, wrong or missing ones fail at
//! connect time with a clear `Auth` error, a role confines a user to its namespace, and a TLS
//! server is reachable with its CA and refused without it.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use etcd_client::{Permission, UserAddOptions};
use shardcron_core::registry::{CoordinatorRegistry, CreateMode, RegistryError};
use shardcron_registry_etcd::{EtcdOptions, EtcdRegistry};
use support::{endpoint, PrivateServer};

/// A server with auth on: `root`/`rootpw`, and `app`/`apppw` allowed only below `/app/`.
async fn server_with_auth() -> PrivateServer {
    let server = PrivateServer::start("auth", &[]).await;
    let mut admin = support::admin(&server.endpoint()).await;
    admin.user_add("root", "rootpw", None::<UserAddOptions>).await.unwrap();
    admin.user_grant_role("root", "root").await.unwrap();
    admin.role_add("app").await.unwrap();
    admin
        .role_grant_permission("app", Permission::read_write("/app/").with_prefix())
        .await
        .unwrap();
    admin.user_add("app", "apppw", None::<UserAddOptions>).await.unwrap();
    admin.user_grant_role("app", "app").await.unwrap();
    admin.auth_enable().await.unwrap();
    server
}

fn url(server: &PrivateServer, namespace: &str, query: &str) -> String {
    format!(
        "etcd://127.0.0.1:{}/{namespace}?ttl_s=4&connect_timeout_ms=5000&{query}",
        server.client_port
    )
}

async fn connect_url(url: &str) -> Result<EtcdRegistry, RegistryError> {
    EtcdRegistry::connect(EtcdOptions::from_url(url).unwrap()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn credentials_are_checked_at_connect() {
    if endpoint().is_none() {
        return;
    }
    let server = server_with_auth().await;

    let root = connect_url(&url(&server, "app", "user=root&password=rootpw")).await.unwrap();
    root.create("/job/instances/i1", b"x", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(root.get("/job/instances/i1").await.unwrap().unwrap().data, b"x");
    let mut stream = root.watch("/job").await.unwrap();
    assert!(futures::StreamExt::next(&mut stream).await.is_some());

    let err = connect_url(&url(&server, "app", "user=root&password=wrong")).await.unwrap_err();
    let RegistryError::Auth { ref reason, .. } = err else { panic!("wrong password: {err}") };
    assert!(reason.contains("user \"root\"") && reason.contains("user name or password"), "{err}");
    eprintln!("wrong password: {err}");

    let err = connect_url(&url(&server, "app", "")).await.unwrap_err();
    assert!(matches!(err, RegistryError::Auth { .. }), "no credentials: {err}");
    assert!(err.to_string().contains("give a user and password"), "{err}");
    eprintln!("no credentials: {err}");
    root.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_role_confines_a_user_to_its_namespace() {
    if endpoint().is_none() {
        return;
    }
    let server = server_with_auth().await;
    let app = connect_url(&url(&server, "app", "user=app&password=apppw")).await.unwrap();
    app.create("/job/config", b"cron", CreateMode::Persistent).await.unwrap();
    app.create("/job/instances/i1", b"", CreateMode::Ephemeral).await.unwrap();
    assert_eq!(app.children("/job").await.unwrap(), vec!["config", "instances"]);
    app.delete_recursive("/job").await.unwrap();

    // The same user in a namespace its role does not cover is refused at connect time.
    let err = connect_url(&url(&server, "other", "user=app&password=apppw")).await.unwrap_err();
    assert!(matches!(err, RegistryError::Auth { .. }), "outside its prefix: {err}");
    assert!(err.to_string().contains("roles do not cover"), "{err}");
    eprintln!("outside the namespace: {err}");
    app.close().await.unwrap();
}

/// Makes a CA and a server certificate for 127.0.0.1 with the openssl tool; `false` if absent.
fn make_certs(dir: &Path) -> bool {
    let run = |args: &[&str]| {
        Command::new("openssl")
            .args(args)
            .current_dir(dir)
            .output()
            .map(|o| o.status.success())
            .unwrap_or(false)
    };
    std::fs::write(dir.join("ext.cnf"), "subjectAltName=IP:127.0.0.1,DNS:localhost\n").unwrap();
    run(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=shardcron test CA",
    ]) && run(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]) && run(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_with_and_without_the_ca() {
    if endpoint().is_none() {
        return;
    }
    let dir = std::env::temp_dir().join(format!("shardcron-etcd-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    if !make_certs(&dir) {
        eprintln!("note: the openssl tool is missing or failed; skipping the TLS test");
        return;
    }
    let cert = dir.join("server.pem").display().to_string();
    let key = dir.join("server.key").display().to_string();
    let server = PrivateServer::start("tls", &["--cert-file", &cert, "--key-file", &key]).await;
    let ca = dir.join("ca.pem").display().to_string();

    let url = format!("etcds://127.0.0.1:{}/tls?ttl_s=4&ca={ca}", server.client_port);
    let registry = connect_url(&url).await.unwrap();
    registry.create("/over/tls", b"secret", CreateMode::Persistent).await.unwrap();
    assert_eq!(registry.get("/over/tls").await.unwrap().unwrap().data, b"secret");
    registry.close().await.unwrap();

    // Without the CA the server's certificate cannot be verified: connect fails, quickly.
    let mut options =
        EtcdOptions::from_url(&format!("etcds://127.0.0.1:{}/tls", server.client_port)).unwrap();
    options.connect_timeout = Duration::from_secs(3);
    let err = EtcdRegistry::connect(options).await.unwrap_err();
    eprintln!("TLS without the CA: {err}");
    assert!(!matches!(err, RegistryError::Auth { .. }), "{err}");
    // A plain-text client against the TLS port fails too.
    let plain = format!("etcd://127.0.0.1:{}/tls?connect_timeout_ms=3000", server.client_port);
    assert!(connect_url(&plain).await.is_err());
    let _ = std::fs::remove_dir_all(&dir);
}
