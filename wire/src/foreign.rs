//! Another protocol's first bytes where a lintel frame should start: a TLS record, an HTTP
//! request or an HTTP response.
//!
//! Read as a length prefix, each is hundreds of megabytes (a TLS record starts `0x14..=0x17
//! 0x03`, HTTP with ASCII letters), so a reader meets them as an oversize frame and can say
//! what it met instead; a listener can look before it reads.

use std::fmt;

/// HTTP request methods, by their first four bytes.
const HTTP_METHODS: [&[u8; 4]; 10] = [
    b"GET ", b"POST", b"PUT ", b"HEAD", b"DELE", b"OPTI", b"PATC", b"CONN", b"TRAC", b"PRI ",
];

/// A protocol spoken where lintel frames were expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Foreign {
    /// A TLS record: a handshake from a client, an alert or a handshake from a server.
    Tls,
    /// An HTTP request, such as a browser's or curl's.
    HttpRequest,
    /// An HTTP response, such as an admin listener's.
    HttpResponse,
}

impl Foreign {
    /// The protocol whose start `bytes` are, when they are not a lintel frame's; needs the
    /// first four bytes of the stream (or of the frame that should start there).
    pub fn recognise(bytes: &[u8]) -> Option<Self> {
        let start: &[u8; 4] = bytes.get(..4)?.try_into().ok()?;
        match start {
            [0x14..=0x17, 0x03, 0x00..=0x04, _] => Some(Foreign::Tls),
            b"HTTP" => Some(Foreign::HttpResponse),
            _ if HTTP_METHODS.contains(&start) => Some(Foreign::HttpRequest),
            _ => None,
        }
    }
}

impl fmt::Display for Foreign {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Foreign::Tls => "TLS",
            Foreign::HttpRequest => "an HTTP request",
            Foreign::HttpResponse => "an HTTP response",
        })
    }
}

#[cfg(test)]
mod tests {
    use super::Foreign;
    use crate::{encode_frame, Frame, Ping, PROTOCOL_VERSION};

    #[test]
    fn tls_records_and_http_are_recognised() {
        // A ClientHello, a TLS 1.2 alert, an HTTP request and the admin listener's answer.
        let cases: [(&[u8], Foreign); 4] = [
            (&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01], Foreign::Tls),
            (&[0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x46], Foreign::Tls),
            (b"GET / HTTP/1.1\r\n", Foreign::HttpRequest),
            (b"HTTP/1.1 404 Not Found\r\n", Foreign::HttpResponse),
        ];
        for (bytes, foreign) in cases {
            assert_eq!(Foreign::recognise(bytes), Some(foreign), "{bytes:?}");
        }
    }

    #[test]
    fn a_lintel_frame_or_too_few_bytes_is_nothing_foreign() {
        let mut frame = bytes::BytesMut::new();
        encode_frame(
            &Frame::Ping(Ping { nonce: 7 }),
            PROTOCOL_VERSION,
            &mut frame,
            1 << 20,
        )
        .unwrap();
        assert_eq!(Foreign::recognise(&frame), None);
        assert_eq!(Foreign::recognise(b"GET"), None);
    }
}
