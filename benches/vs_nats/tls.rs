//! Certificates for lintel over TLS (`--tls`): a CA and a node certificate for 127.0.0.1 and
//! `localhost`, made with rcgen when the run starts and written as PEM files for the processes.

use std::path::{Path, PathBuf};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};

/// The PEM files a TLS node and its clients are started with.
#[derive(Debug, Clone)]
pub struct TlsFiles {
    /// The CA every client (and a peered node) trusts.
    pub ca: PathBuf,
    /// The node's certificate and key, naming 127.0.0.1 and `localhost`.
    pub cert: PathBuf,
    pub key: PathBuf,
}

impl TlsFiles {
    /// A fresh CA and node certificate written into `dir`.
    ///
    /// # Errors
    /// Generation or writing failed, as text.
    pub fn generate(dir: &Path) -> Result<Self, String> {
        let fail = |err: &dyn std::fmt::Display| format!("cannot make TLS certificates: {err}");
        std::fs::create_dir_all(dir).map_err(|err| fail(&err))?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).map_err(|e| fail(&e))?;
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "vs_nats bench CA");
        let ca_key = KeyPair::generate().map_err(|err| fail(&err))?;
        let ca = ca_params.self_signed(&ca_key).map_err(|err| fail(&err))?;
        let key = KeyPair::generate().map_err(|err| fail(&err))?;
        let names = vec!["127.0.0.1".to_owned(), "localhost".to_owned()];
        let cert = CertificateParams::new(names)
            .and_then(|params| params.signed_by(&key, &ca, &ca_key))
            .map_err(|err| fail(&err))?;
        let files = Self {
            ca: dir.join("ca.pem"),
            cert: dir.join("node.pem"),
            key: dir.join("node.key"),
        };
        for (path, text) in [
            (&files.ca, ca.pem()),
            (&files.cert, cert.pem()),
            (&files.key, key.serialize_pem()),
        ] {
            std::fs::write(path, text).map_err(|err| fail(&err))?;
        }
        Ok(files)
    }

    /// `lintel serve` arguments that make it listen with TLS and trust the CA for its peers.
    pub fn serve_args(&self) -> Vec<String> {
        vec![
            "--tls-cert".into(),
            path_arg(&self.cert),
            "--tls-key".into(),
            path_arg(&self.key),
            "--tls-ca".into(),
            path_arg(&self.ca),
        ]
    }

    /// `lintel worker` / `lintel bench` arguments that make it dial with TLS.
    pub fn client_args(&self) -> Vec<String> {
        vec!["--tls-ca".into(), path_arg(&self.ca)]
    }
}

fn path_arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}
