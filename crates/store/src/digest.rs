//! sha256 digests: the `sha256:<hex>` spelling of manifests and the registry, the
//! `sha256-<hex>` spelling of blob file names, and hashing files.

use std::fmt;
use std::io::Read;
use std::path::Path;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest as _, Sha256};

use crate::error::{IoContext, Result, StoreError};

/// A validated sha256 digest (64 lower-case hex digits).
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Digest {
    hex: String,
}

impl Digest {
    /// Parses `sha256:<64 hex>` (also accepting the file-name form `sha256-<hex>`).
    pub fn parse(s: &str) -> Result<Digest> {
        let hex = s
            .strip_prefix("sha256:")
            .or_else(|| s.strip_prefix("sha256-"))
            .ok_or_else(|| StoreError::Other(format!("bad digest {s:?}: expected sha256:<hex>")))?;
        if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(StoreError::Other(format!(
                "bad digest {s:?}: expected 64 hex digits"
            )));
        }
        Ok(Digest {
            hex: hex.to_ascii_lowercase(),
        })
    }

    /// The digest of a finished hasher.
    pub(crate) fn from_hasher(h: Sha256) -> Digest {
        Digest {
            hex: to_hex(&h.finalize()),
        }
    }

    /// The sha256 of a byte string.
    pub fn of_bytes(bytes: &[u8]) -> Digest {
        let mut h = Sha256::new();
        h.update(bytes);
        Digest::from_hasher(h)
    }

    /// The sha256 of a file's contents, read in 1 MiB pieces.
    pub fn of_file(path: &Path) -> Result<Digest> {
        let mut f = std::fs::File::open(path).at(path)?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf).at(path)?;
            if n == 0 {
                break;
            }
            h.update(&buf[..n]);
        }
        Ok(Digest::from_hasher(h))
    }

    /// The 64 hex digits.
    pub fn hex(&self) -> &str {
        &self.hex
    }

    /// The blob's file name in `blobs/`: `sha256-<hex>`.
    pub fn file_name(&self) -> String {
        format!("sha256-{}", self.hex)
    }

    /// The short form Ollama shows in progress lines (12 hex digits).
    pub fn short(&self) -> &str {
        &self.hex[..12]
    }
}

fn to_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut s = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        s.push(HEX[(b >> 4) as usize] as char);
        s.push(HEX[(b & 15) as usize] as char);
    }
    s
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "sha256:{}", self.hex)
    }
}

impl fmt::Debug for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl Serialize for Digest {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Digest {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Digest::parse(&s).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vectors_and_spellings() {
        let d = Digest::of_bytes(b"abc");
        assert_eq!(
            d.hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Digest::parse(&d.to_string()).unwrap(), d);
        assert_eq!(Digest::parse(&d.file_name()).unwrap(), d);
        assert_eq!(d.short(), "ba7816bf8f01");
        assert!(Digest::parse("sha256:abc").is_err());
        assert!(Digest::parse("md5:00").is_err());
        assert!(Digest::parse(&format!("sha256:{}", "g".repeat(64))).is_err());
    }
}
