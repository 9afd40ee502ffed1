//! What a client command says when it cannot use the node: what happened, and what to do.

use lintel_client::ConnectError;
use lintel_wire::{Foreign, RefusalCode};
use rustls::{AlertDescription, CertificateError};

use super::tls::ClientTlsArgs;

/// The line for a failure to connect to `addr` with the TLS settings `tls`.
pub(super) fn cannot_connect(addr: &str, tls: &ClientTlsArgs, err: &ConnectError) -> String {
    match hint(tls, err) {
        Some(hint) => format!("cannot connect to {addr}: {err}: {hint}"),
        None => format!("cannot connect to {addr}: {err}"),
    }
}

/// What to do about `err`, when something can be done from the command line.
fn hint(tls: &ClientTlsArgs, err: &ConnectError) -> Option<String> {
    let said = match err {
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
        ConnectError::Tls(err) => return tls_hint(tls, err),
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
    };
    Some(said.to_owned())
}

fn tls_hint(tls: &ClientTlsArgs, err: &rustls::Error) -> Option<String> {
    let file = |path: Option<&std::path::Path>| {
        path.map_or_else(String::new, |path| format!(" ({})", path.display()))
    };
    Some(match err {
        rustls::Error::InvalidCertificate(CertificateError::UnknownIssuer) => format!(
            "the node's certificate is not signed by a CA in --tls-ca{}",
            file(tls.ca())
        ),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected,
            presented,
        }) => name_hint(
            expected.to_str().as_ref(),
            presented,
            tls.server_name().is_some(),
        ),
        rustls::Error::InvalidCertificate(CertificateError::NotValidForName) => {
            "the node's certificate does not carry the name checked: connect by a name it \
             carries, or pass --tls-server-name with one"
                .to_owned()
        }
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the node requires a client certificate: pass --tls-cert and --tls-key".to_owned()
        }
        rustls::Error::AlertReceived(
            AlertDescription::BadCertificate
            | AlertDescription::UnknownCA
            | AlertDescription::CertificateUnknown,
        ) => format!(
            "the node refused the client certificate{}: it is not signed by the CA the node \
             trusts",
            file(tls.cert())
        ),
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the node did not answer in TLS: it may listen in plaintext; drop --tls-ca (and \
             LINTEL_CLIENT_TLS_CA)"
                .to_owned()
        }
        _ => return None,
    })
}

/// What to do when the node's certificate does not carry `expected`: the DNS and IP names it
/// does carry (`presented`, as rustls lists them), and which flag to change.
fn name_hint(expected: &str, presented: &[String], server_name_given: bool) -> String {
    let names: Vec<String> = presented.iter().filter_map(|name| san(name)).collect();
    let carried = if names.is_empty() {
        "no DNS or IP name".to_owned()
    } else {
        names.join(", ")
    };
    if server_name_given {
        format!(
            "the node's certificate carries {carried}, not {expected:?} (--tls-server-name): \
             pass one of those"
        )
    } else {
        format!(
            "the node's certificate carries {carried}, not {expected:?} (the host of \
             --connect): connect by one of those, or pass --tls-server-name with one"
        )
    }
}

/// A subjectAltName as rustls lists it (`DnsName("a")`, `IpAddress(1.2.3.4)`), as openssl
/// writes it (`DNS:a`, `IP:1.2.3.4`); `None` for other kinds of name.
fn san(listed: &str) -> Option<String> {
    if let Some(dns) = listed
        .strip_prefix("DnsName(\"")
        .and_then(|rest| rest.strip_suffix("\")"))
    {
        return Some(format!("DNS:{dns}"));
    }
    let ip = listed
        .strip_prefix("IpAddress(")
        .and_then(|rest| rest.strip_suffix(')'))?;
    Some(format!("IP:{ip}"))
}

#[cfg(test)]
mod tests {
    use super::{name_hint, san};

    #[test]
    fn a_name_mismatch_lists_the_names_the_certificate_carries() {
        let presented = [
            "DnsName(\"localhost\")".to_owned(),
            "IpAddress(127.0.0.1)".to_owned(),
            "UniformResourceIdentifier(\"spiffe://x\")".to_owned(),
        ];
        assert_eq!(
            name_hint("127.0.0.2", &presented, false),
            "the node's certificate carries DNS:localhost, IP:127.0.0.1, not \"127.0.0.2\" (the \
             host of --connect): connect by one of those, or pass --tls-server-name with one"
        );
        assert_eq!(
            name_hint("wrong", &presented, true),
            "the node's certificate carries DNS:localhost, IP:127.0.0.1, not \"wrong\" \
             (--tls-server-name): pass one of those"
        );
        assert_eq!(san("DirectoryName"), None);
    }
}
