//! Certificates made at test time with rcgen: a CA per test, leaves it signs, PEM files.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};

use lintel::sdk::{ClientTls, PemIdentity};
use lintel::NodeConfig;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// A certificate authority made for one test, and the files it wrote; removed on drop.
pub struct Pki {
    ca: rcgen::Certificate,
    ca_key: KeyPair,
    /// Where this CA's files are written; removed on drop.
    pub dir: PathBuf,
}

/// A certificate and its key, as PEM text.
pub struct Leaf {
    pub cert: String,
    pub key: String,
}

impl Leaf {
    pub fn identity(&self) -> PemIdentity<'_> {
        PemIdentity {
            chain: self.cert.as_bytes(),
            key: self.key.as_bytes(),
        }
    }
}

impl Default for Pki {
    fn default() -> Self {
        Self::new()
    }
}

impl Pki {
    pub fn new() -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "lintel-tls-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        let dir = std::env::temp_dir().join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        // Each CA its own name, so a stranger's CA is unknown rather than a bad signature.
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} CA"));
        let ca_key = KeyPair::generate().unwrap();
        let ca = params.self_signed(&ca_key).unwrap();
        let pki = Self { ca, ca_key, dir };
        pki.write("ca.pem", &pki.ca_pem());
        pki
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A certificate naming `names` (IP addresses as IP names), signed by this CA.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let names: Vec<String> = names.iter().map(|name| (*name).to_owned()).collect();
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.ca, &self.ca_key)
            .unwrap();
        Leaf {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }

    /// Writes `text` to `name` in this test's directory.
    pub fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A node certificate for 127.0.0.1 and `localhost`, written as `{prefix}.pem` and
    /// `{prefix}.key`.
    pub fn node_files(&self, prefix: &str) -> (PathBuf, PathBuf) {
        let leaf = self.leaf(&["127.0.0.1", "localhost"]);
        (
            self.write(&format!("{prefix}.pem"), &leaf.cert),
            self.write(&format!("{prefix}.key"), &leaf.key),
        )
    }

    /// Where `new` wrote the CA certificate.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A node config serving TLS on loopback with a fresh node certificate.
    pub fn node_config(&self, prefix: &str) -> NodeConfig {
        let (cert, key) = self.node_files(prefix);
        NodeConfig {
            tls_cert: Some(cert),
            tls_key: Some(key),
            ..NodeConfig::default()
        }
    }

    /// Client TLS trusting this CA, presenting `identity` when given.
    pub fn client(&self, identity: Option<&Leaf>) -> ClientTls {
        ClientTls::from_pem(self.ca_pem().as_bytes(), identity.map(Leaf::identity))
            .expect("the CA's own PEM reads")
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
