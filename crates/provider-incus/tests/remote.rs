//! `incus-remote`: the same daemon over HTTPS on loopback, with a client
//! certificate this test makes (openssl CLI) and adds to its trust store.

mod common;

use std::net::TcpListener;
use std::process::Command;
use std::time::Duration;

use common::{ok, provider, spec, unique};
use corral_provider_incus::{IncusConfig, IncusProvider, RemoteCredentials};
use corral_sandbox_core::SandboxKind;
use corral_sandbox_core::sandbox::{ExecRequest, SandboxProvider};
use http::Method;
use serde_json::{Value, json};

#[tokio::test]
async fn a_remote_over_https_with_a_client_certificate() {
    let Some(local) = provider().await else {
        return;
    };
    let dir = ok(tempfile::tempdir(), "tempdir");
    let (cert, key) = (dir.path().join("c.pem"), dir.path().join("k.pem"));
    let made = ok(
        Command::new("openssl")
            .args([
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:prime256v1",
                "-nodes",
                "-days",
                "1",
                "-subj",
                "/CN=corral-test",
            ])
            .arg("-keyout")
            .arg(&key)
            .arg("-out")
            .arg(&cert)
            .output(),
        "openssl",
    );
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
    let cert_pem = ok(std::fs::read_to_string(&cert), "cert");
    let key_pem = ok(std::fs::read_to_string(&key), "key");

    let client = local.client();
    let server: Value = ok(client.get("/1.0").await, "GET /1.0");
    let server_cert = server["environment"]["certificate"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(server_cert.contains("BEGIN CERTIFICATE"));
    // Incus wants the certificate's base64 DER: the PEM body.
    let der_b64: String = cert_pem
        .lines()
        .filter(|l| !l.starts_with("-----"))
        .collect();
    let cert_name = format!("corral-test-{}", std::process::id());
    ok(
        client
            .call(
                Method::POST,
                "/1.0/certificates",
                Some(&json!({
                    "type": "client", "name": cert_name, "certificate": der_b64,
                    "restricted": false, "projects": [],
                })),
            )
            .await,
        "trust client certificate",
    );
    let port = ok(TcpListener::bind("127.0.0.1:0"), "free port")
        .local_addr()
        .map_or(0, |a| a.port());
    let address = format!("127.0.0.1:{port}");
    ok(
        client
            .call(
                Method::PATCH,
                "/1.0",
                Some(&json!({"config": {"core.https_address": address}})),
            )
            .await,
        "listen on loopback",
    );

    let creds = RemoteCredentials {
        server_cert_pem: server_cert.clone(),
        client_cert_pem: cert_pem.clone(),
        client_key_pem: key_pem.clone(),
    };
    let name = unique("remote");
    let _cleanup = common::Cleanup::new(&local, &[&name]);
    let result = async {
        let remote =
            IncusProvider::connect(IncusConfig::remote(address.clone(), creds.clone())).await?;
        assert_eq!(remote.kind(), SandboxKind::IncusRemote);
        let sb = remote.create(&spec(&name)).await?;
        sb.start().await?;
        let out = sb
            .exec(&ExecRequest::new(["echo", "over tls"]).with_timeout(Duration::from_secs(30)))
            .await?;
        assert_eq!(out.stdout_text(), "over tls\n");
        assert!(remote.list().await?.iter().any(|i| i.name == name));
        // Incus's own client reaches a local daemon only: the shell and
        // the escape hatch are refused, saying where the daemon is.
        let hatch = sb.client().await.err().map(|e| e.to_string());
        assert!(
            hatch.as_deref().is_some_and(|e| e.contains("corral incus")
                && e.contains(&address)
                && e.contains("run it on that host")),
            "{hatch:?}"
        );
        let shell = sb
            .terminal(&["sh".to_owned()])
            .await
            .err()
            .map(|e| e.to_string());
        assert!(
            shell
                .as_deref()
                .is_some_and(|e| e.contains("corral shell") && e.contains(&address)),
            "{shell:?}"
        );
        sb.delete().await?;
        // A different pinned server certificate is refused.
        let wrong = RemoteCredentials {
            server_cert_pem: cert_pem.clone(),
            ..creds.clone()
        };
        let err = IncusProvider::connect(IncusConfig::remote(address.clone(), wrong))
            .await
            .err();
        assert!(
            err.is_some_and(|e| e.to_string().contains("TLS")),
            "a wrong server certificate was accepted"
        );
        Ok::<_, corral_sandbox_core::sandbox::ProviderError>(())
    }
    .await;

    // Put the daemon back as it was, whatever happened.
    let _ = client
        .call(
            Method::PATCH,
            "/1.0",
            Some(&json!({"config": {"core.https_address": ""}})),
        )
        .await;
    let certs: Vec<Value> = client
        .get("/1.0/certificates?recursion=1")
        .await
        .unwrap_or_default();
    for c in certs.iter().filter(|c| c["name"] == cert_name.as_str()) {
        if let Some(fp) = c["fingerprint"].as_str() {
            let _ = client
                .call(Method::DELETE, &format!("/1.0/certificates/{fp}"), None)
                .await;
        }
    }
    ok(result, "remote lifecycle");
}
