//! PostgreSQL over TLS (issue "Production"): managed PostgreSQL mostly refuses plain connections, so the origin must
//! speak TLS (`sslmode=require`) and check the server against a CA of the operator's choosing
//! (`sslmode=verify-full&sslrootcert=…`).
//!
//! The shared test server cannot be made to refuse plain connections without breaking every other test, and its
//! certificate is the distribution's self-signed one. So this test makes its own CA, signs a certificate for
//! 127.0.0.1, and starts a private PostgreSQL cluster (the machine's `initdb`/`pg_ctl`, as the `postgres` user) that
//! accepts TLS only. The store's own `Db::connect` (what `serve` and `migrate` use) is what connects.

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair};
use shortlink_store::Db;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The PostgreSQL programs of the machine's one installed major version.
fn pg_bin(name: &str) -> PathBuf {
    let versions = std::fs::read_dir("/usr/lib/postgresql").expect("PostgreSQL server installed");
    let dir = versions
        .filter_map(Result::ok)
        .map(|e| e.path().join("bin"))
        .find(|bin| bin.join(name).exists())
        .unwrap_or_else(|| panic!("{name} not found under /usr/lib/postgresql/*/bin"));
    dir.join(name)
}

/// Runs a PostgreSQL program as the `postgres` user (the server refuses to run as root).
fn as_postgres(program: &Path, args: &[&str]) {
    let out = Command::new("runuser")
        .args(["-u", "postgres", "--"])
        .arg(program)
        .args(args)
        .output()
        .expect("runuser");
    assert!(
        out.status.success(),
        "{} {args:?}: {}{}",
        program.display(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and what it signed, as PEM.
struct Pki {
    ca: String,
    server_cert: String,
    server_key: String,
}

/// A new CA, and a server certificate from it valid for 127.0.0.1 only (so `localhost` fails verify-full).
fn new_pki() -> Pki {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "Shortlink test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let server_key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "127.0.0.1");
    let server = params.signed_by(&server_key, &ca).unwrap();
    Pki {
        ca: ca.pem(),
        server_cert: server.pem(),
        server_key: server_key.serialize_pem(),
    }
}

/// A private cluster on a free port that takes TLS connections only; stopped and removed on drop.
struct TlsCluster {
    dir: PathBuf,
    port: u16,
}

impl TlsCluster {
    fn start(pki: &Pki) -> Self {
        let dir =
            std::env::temp_dir().join(format!("shortlink-tls-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("server.crt"), &pki.server_cert).unwrap();
        std::fs::write(dir.join("server.key"), &pki.server_key).unwrap();
        let chown = Command::new("chown")
            .args(["-R", "postgres:postgres"])
            .arg(&dir)
            .status()
            .unwrap();
        assert!(chown.success());
        // PostgreSQL refuses a key others can read.
        let chmod = Command::new("chmod")
            .arg("600")
            .arg(dir.join("server.key"))
            .status()
            .unwrap();
        assert!(chmod.success());
        let data = dir.join("data");
        let data_s = data.to_str().unwrap();
        as_postgres(
            &pg_bin("initdb"),
            &["-D", data_s, "-U", "postgres", "--auth=trust", "--no-sync"],
        );
        // TLS or nothing, as managed services are set up.
        std::fs::write(
            data.join("pg_hba.conf"),
            "hostssl all all 127.0.0.1/32 trust\nhostnossl all all 127.0.0.1/32 reject\n",
        )
        .unwrap();
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let options = format!(
            "-c listen_addresses=127.0.0.1 -c port={port} -c unix_socket_directories={dir} -c ssl=on \
             -c ssl_cert_file={dir}/server.crt -c ssl_key_file={dir}/server.key -c fsync=off",
            dir = dir.display()
        );
        let log = dir.join("server.log");
        as_postgres(
            &pg_bin("pg_ctl"),
            &[
                "-D",
                data_s,
                "-l",
                log.to_str().unwrap(),
                "-o",
                &options,
                "-w",
                "start",
            ],
        );
        Self { dir, port }
    }

    fn url(&self, host: &str, query: &str) -> String {
        format!("postgres://postgres@{host}:{}/postgres?{query}", self.port)
    }
}

impl Drop for TlsCluster {
    fn drop(&mut self) {
        let data = self.dir.join("data");
        let _ = Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(pg_bin("pg_ctl"))
            .args([
                "-D",
                data.to_str().unwrap(),
                "-m",
                "immediate",
                "-w",
                "stop",
            ])
            .output();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Connects, migrates and writes through the store: the whole path `serve` takes. Returns whether the session is
/// encrypted, as the server sees it.
async fn use_store(url: &str) -> Result<bool, String> {
    let db = Db::connect(url, 2).await.map_err(|e| e.to_string())?;
    db.migrate().await.map_err(|e| e.to_string())?;
    db.create_account(
        &format!("{}@example.com", uuid::Uuid::new_v4().simple()),
        true,
    )
    .await
    .map_err(|e| e.to_string())?;
    db.close().await;
    let pool = sqlx::PgPool::connect(url)
        .await
        .map_err(|e| e.to_string())?;
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .map_err(|e| e.to_string())?;
    pool.close().await;
    Ok(ssl)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_over_tls_require_and_verify_full() {
    sqlx::any::install_default_drivers();
    let pki = new_pki();
    let other = new_pki();
    let cluster = TlsCluster::start(&pki);
    let certs = tempfile_dir();
    let ca = certs.join("ca.pem");
    let wrong_ca = certs.join("other-ca.pem");
    std::fs::write(&ca, &pki.ca).unwrap();
    std::fs::write(&wrong_ca, &other.ca).unwrap();
    let (ca, wrong_ca) = (ca.display(), wrong_ca.display());

    // The server takes TLS only: a plain connection is refused, encryption without checks works.
    let err = use_store(&cluster.url("127.0.0.1", "sslmode=disable"))
        .await
        .unwrap_err();
    assert!(
        err.contains("no encryption") || err.contains("pg_hba"),
        "{err}"
    );
    assert_eq!(
        use_store(&cluster.url("127.0.0.1", "sslmode=require")).await,
        Ok(true)
    );
    // The default (prefer) takes TLS when offered.
    assert_eq!(use_store(&cluster.url("127.0.0.1", "")).await, Ok(true));

    // verify-full: our CA and the certificate's address work; another CA, or a name the certificate does not
    // carry, are refused before any query.
    let ok = cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert_eq!(use_store(&ok).await, Ok(true));
    let foreign = cluster.url(
        "127.0.0.1",
        &format!("sslmode=verify-full&sslrootcert={wrong_ca}"),
    );
    assert!(
        use_store(&foreign).await.is_err(),
        "another CA must not verify"
    );
    let wrong_name = cluster.url(
        "localhost",
        &format!("sslmode=verify-full&sslrootcert={ca}"),
    );
    assert!(
        use_store(&wrong_name).await.is_err(),
        "localhost is not in the certificate"
    );
    let _ = std::fs::remove_dir_all(&certs);
}

/// A plain connection still works where the server does not require TLS (the shared test server allows both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_without_tls_where_allowed() {
    sqlx::any::install_default_drivers();
    let _shared = crate::common::postgres_shared().await;
    let admin = crate::common::postgres_admin_url();
    let sep = if admin.contains('?') { '&' } else { '?' };
    let pool = sqlx::PgPool::connect(&format!("{admin}{sep}sslmode=disable"))
        .await
        .unwrap();
    let ssl: bool = sqlx::query_scalar("SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .fetch_one(&pool)
        .await
        .unwrap();
    assert!(!ssl);
    pool.close().await;
}

fn tempfile_dir() -> PathBuf {
    let dir =
        std::env::temp_dir().join(format!("shortlink-certs-{}", uuid::Uuid::new_v4().simple()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
