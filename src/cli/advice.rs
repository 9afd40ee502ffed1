//! What a client command says when it cannot use the node: what happened, and what to do.

use lintel_client::ConnectError;
use lintel_wire::{Foreign, RefusalCode};
use rustls::{AlertDescription, CertificateError};

/// The line for a failure to connect to `addr`.
pub(super) fn cannot_connect(addr: &str, err: &ConnectError) -> String {
    match hint(err) {
        Some(hint) => format!("cannot connect to {addr}: {err}: {hint}"),
        None => format!("cannot connect to {addr}: {err}"),
    }
}

/// What to do about `err`, when something can be done from the command line.
fn hint(err: &ConnectError) -> Option<&'static str> {
    Some(match err {
        ConnectError::Foreign(Foreign::Tls) => {
            "it speaks TLS: pass --tls-ca FILE, the CA of the node's certificate (or set \
             LINTEL_CLIENT_TLS_CA)"
        }
        ConnectError::Foreign(Foreign::HttpResponse | Foreign::HttpRequest) => {
            "this is an HTTP endpoint (the node's admin listener?): --connect takes the \
             address the node listens on for frames"
        }
        ConnectError::Io(io) if io.kind() == std::io::ErrorKind::ConnectionRefused => {
            "nothing listens there: is the node running (lintel serve), and is this its \
             --listen address?"
        }
        ConnectError::Tls(tls) => tls_hint(tls)?,
        ConnectError::Refused(refusal) => match refusal.code {
            RefusalCode::Unauthorized => {
                "the node wants other credentials: --auth-token (LINTEL_AUTH_TOKEN), or a \
                 client certificate with a grant (--tls-cert, --tls-key)"
            }
            RefusalCode::VersionMismatch => "the node and this command speak no common version",
            _ => return None,
        },
        ConnectError::Timeout(_) => {
            "is this a lintel node? A node answers a hello at once; check --connect"
        }
        _ => return None,
    })
}

fn tls_hint(err: &rustls::Error) -> Option<&'static str> {
    Some(match err {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => {
            "the node's certificate is not signed by a CA in --tls-ca"
        }
        rustls::Error::InvalidCertificate(
            CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
        ) => {
            "the node's certificate does not name the host of --connect: connect by a name it \
             carries, or pass --tls-server-name"
        }
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the node requires a client certificate: pass --tls-cert and --tls-key"
        }
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown,
        ) => "the node refused the client certificate: it is not signed by the CA the node trusts",
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the node did not answer in TLS: it may listen in plaintext; drop --tls-ca (and \
             LINTEL_CLIENT_TLS_CA)"
        }
        _ => return None,
    })
}
