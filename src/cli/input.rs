//! A dispatch's input: given on the command line, read from a file or from standard input,
//! its bytes as they are (UTF-8 or not), and read no further than the node takes.

use std::ffi::OsString;
use std::io::{self, IsTerminal, Read as _};
use std::path::PathBuf;

use bytes::Bytes;

/// Where the input comes from.
#[derive(Debug)]
pub(super) enum Source {
    /// `--input TEXT`: the argument's bytes.
    Given(OsString),
    /// `--input-file FILE`.
    File(PathBuf),
    /// `--input -`.
    Stdin,
}

/// The input, or how long it is when it is longer than allowed.
#[derive(Debug)]
pub(super) enum Read {
    Whole(Bytes),
    /// Longer than allowed: `len` bytes in all, read to the end and not kept.
    Over {
        len: u64,
    },
}

/// Why the input could not be read.
#[derive(Debug, thiserror::Error)]
pub(super) enum InputError {
    #[error("cannot read the input file {path}: {source}")]
    File {
        path: String,
        #[source]
        source: io::Error,
    },
    #[error("cannot read the input from standard input: {0}")]
    Stdin(#[source] io::Error),
    #[error("cannot read the input: {0}")]
    Reader(#[source] tokio::task::JoinError),
}

/// Reads the input from `source`, keeping at most `max` bytes; past that, reads on only to
/// count them.
///
/// # Errors
/// [`InputError`] naming the file or standard input that could not be read.
pub(super) async fn read(source: Source, max: usize) -> Result<Read, InputError> {
    match source {
        Source::Given(text) => {
            let bytes = text.into_encoded_bytes();
            Ok(if bytes.len() > max {
                Read::Over {
                    len: bytes.len() as u64,
                }
            } else {
                Read::Whole(Bytes::from(bytes))
            })
        }
        Source::File(path) => {
            let read = tokio::task::spawn_blocking(move || {
                std::fs::File::open(&path)
                    .and_then(|file| bounded(file, max))
                    .map_err(|source| InputError::File {
                        path: path.display().to_string(),
                        source,
                    })
            });
            read.await.map_err(InputError::Reader)?
        }
        Source::Stdin => {
            let stdin = io::stdin();
            if stdin.is_terminal() {
                eprintln!("reading the input from standard input until its end (Ctrl-D)");
            }
            let read = tokio::task::spawn_blocking(move || {
                bounded(stdin.lock(), max).map_err(InputError::Stdin)
            });
            read.await.map_err(InputError::Reader)?
        }
    }
}

/// The bytes of `reader` up to `max`, or how many it holds when more.
fn bounded(reader: impl io::Read, max: usize) -> io::Result<Read> {
    let mut kept = Vec::new();
    let mut reader = reader.take(u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1));
    reader.read_to_end(&mut kept)?;
    if kept.len() <= max {
        return Ok(Read::Whole(Bytes::from(kept)));
    }
    let rest = io::copy(&mut reader.into_inner(), &mut io::sink())?;
    Ok(Read::Over {
        len: kept.len() as u64 + rest,
    })
}

#[cfg(test)]
mod tests {
    use super::{bounded, Read};

    #[test]
    fn input_past_the_limit_is_counted_not_kept() {
        let input = [0xff_u8; 10];
        assert!(matches!(bounded(&input[..], 10), Ok(Read::Whole(bytes)) if bytes.len() == 10));
        assert!(matches!(bounded(&input[..], 9), Ok(Read::Over { len: 10 })));
        assert!(matches!(bounded(&input[..], 0), Ok(Read::Over { len: 10 })));
    }
}
