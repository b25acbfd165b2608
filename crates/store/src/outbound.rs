//! Which addresses a pull may reach.
//!
//! A pull the server makes for a client must not become a way into the user's own
//! machine or network (any web page can ask a local server to pull), so unless
//! private pulls are allowed it may reach public addresses only. The rule holds
//! where the address is finally known: a DNS resolver that drops non-public
//! addresses (so a name that resolves, or rebinds, to 127.0.0.1 is refused), and a
//! check of URLs that are literal IPs (which never reach a resolver), made before
//! the first request and before following each redirect.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, ToSocketAddrs};

use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use crate::error::StoreError;

/// Redirects followed before a pull gives up (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// A host refused because every address it has is non-public.
#[derive(Debug, Clone)]
pub(crate) struct Refused {
    pub host: String,
    pub reason: String,
}

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refusing {}: {}", self.host, self.reason)
    }
}

impl std::error::Error for Refused {}

impl From<Refused> for StoreError {
    fn from(r: Refused) -> StoreError {
        StoreError::PrivateAddress {
            host: r.host,
            reason: r.reason,
        }
    }
}

/// The `Refused` somewhere in an error's chain of causes, if any.
pub(crate) fn find_refused(e: &(dyn std::error::Error + 'static)) -> Option<Refused> {
    let mut cause = Some(e);
    while let Some(c) = cause {
        if let Some(r) = c.downcast_ref::<Refused>() {
            return Some(r.clone());
        }
        cause = c.source();
    }
    None
}

/// Why `ip` is not a public address, or `None` if it is one.
pub(crate) fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    let [a, b, c, _] = ip.octets();
    let reason = if ip.is_loopback() {
        "a loopback address"
    } else if ip.is_private() || (a == 100 && (64..128).contains(&b)) {
        // 10/8, 172.16/12, 192.168/16 and the carrier-grade NAT range 100.64/10.
        "a private address"
    } else if ip.is_link_local() {
        "a link-local address"
    } else if a == 0 {
        "an unspecified address"
    } else if ip.is_broadcast() || ip.is_multicast() || a >= 240 {
        "a broadcast, multicast or reserved address"
    } else if ip.is_documentation() || (a == 198 && (b & 0xfe) == 18) || (a, b, c) == (192, 0, 0) {
        "a documentation, benchmarking or protocol address"
    } else {
        return None;
    };
    Some(reason)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let reason = if ip.is_loopback() {
        "a loopback address"
    } else if ip.is_unspecified() {
        "an unspecified address"
    } else if ip.to_ipv4_mapped().is_some() || s[..6] == [0; 6] {
        // ::ffff:a.b.c.d and the old ::a.b.c.d reach IPv4 hosts through IPv6
        // sockets; refused outright rather than judged by the IPv4 inside.
        "an IPv4-mapped address"
    } else if (s[0] & 0xfe00) == 0xfc00 {
        "a unique local address"
    } else if (s[0] & 0xffc0) == 0xfe80 || (s[0] & 0xffc0) == 0xfec0 {
        "a link-local address"
    } else if (s[0] & 0xff00) == 0xff00 {
        "a multicast address"
    } else if s[0] == 0x2001 && s[1] == 0x0db8 {
        "a documentation address"
    } else if s[0] == 0x0064 && s[1] == 0xff9b {
        // NAT64 (64:ff9b::/96 and the local-use 64:ff9b:1::/48): the IPv4 inside decides.
        let v4 = Ipv4Addr::new((s[6] >> 8) as u8, s[6] as u8, (s[7] >> 8) as u8, s[7] as u8);
        return if s[2] == 0 {
            non_public_v4(v4)
        } else {
            Some("a NAT64 local-use address")
        };
    } else if s[0] == 0x2002 {
        // 6to4 carries an IPv4 address in its second and third segments.
        let v4 = Ipv4Addr::new((s[1] >> 8) as u8, s[1] as u8, (s[2] >> 8) as u8, s[2] as u8);
        return non_public_v4(v4);
    } else {
        return None;
    };
    Some(reason)
}

/// The IP of a URL whose host is a literal address (`http://10.0.0.1/`, `http://[::1]/`).
fn literal_ip(url: &reqwest::Url) -> Option<IpAddr> {
    let host = url.host_str()?;
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.parse().ok()
}

/// Refuses a URL whose host is a literal non-public IP (names are left to the
/// resolver, which sees what they resolve to).
pub(crate) fn check_literal(url: &reqwest::Url) -> Result<(), Refused> {
    match literal_ip(url).and_then(|ip| Some((ip, non_public(ip)?))) {
        Some((ip, reason)) => Err(Refused {
            host: ip.to_string(),
            reason: format!("it is {reason}"),
        }),
        None => Ok(()),
    }
}

/// Resolves with the system resolver and keeps the public addresses only; a name
/// with none left is refused.
pub(crate) struct PublicOnly;

impl Resolve for PublicOnly {
    fn resolve(&self, name: Name) -> Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let lookup = host.clone();
            let addrs: Vec<SocketAddr> = tokio::task::spawn_blocking(move || {
                (lookup.as_str(), 0)
                    .to_socket_addrs()
                    .map(Iterator::collect)
            })
            .await??;
            let public: Vec<SocketAddr> = addrs
                .iter()
                .copied()
                .filter(|a| non_public(a.ip()).is_none())
                .collect();
            if public.is_empty() {
                let reason = match addrs.first() {
                    Some(a) => format!(
                        "it resolves to {} ({})",
                        a.ip(),
                        non_public(a.ip()).unwrap_or("not public")
                    ),
                    None => "it resolves to no address".to_string(),
                };
                return Err(Box::new(Refused { host, reason }) as _);
            }
            Ok(Box::new(public.into_iter()) as Addrs)
        })
    }
}

/// Redirects: at most [`MAX_REDIRECTS`], never from https down to http unless
/// `insecure`, and (unless `allow_private`) never to a literal non-public IP.
pub(crate) fn redirect_policy(insecure: bool, allow_private: bool) -> reqwest::redirect::Policy {
    reqwest::redirect::Policy::custom(move |attempt| {
        if attempt.previous().len() >= MAX_REDIRECTS {
            return attempt.error(format!("more than {MAX_REDIRECTS} redirects"));
        }
        if !insecure && attempt.url().scheme() != "https" {
            let msg = format!(
                "redirected to {}, which is not https; pass --insecure to allow it",
                attempt.url()
            );
            return attempt.error(msg);
        }
        if !allow_private {
            if let Err(r) = check_literal(attempt.url()) {
                return attempt.error(r);
            }
        }
        attempt.follow()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(s: &str) -> Option<&'static str> {
        non_public(s.parse().unwrap())
    }

    #[test]
    fn public_and_non_public_addresses() {
        for private in [
            "127.0.0.1",
            "127.3.2.1",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "0.1.2.3",
            "255.255.255.255",
            "224.0.0.1",
            "::1",
            "::",
            "::ffff:127.0.0.1",
            "::ffff:8.8.8.8",
            "::127.0.0.1",
            "fc00::1",
            "fd12:3456::1",
            "fe80::1",
            "ff02::1",
            "64:ff9b::10.0.0.1",
            "2002:c0a8:0101::1",
        ] {
            assert!(verdict(private).is_some(), "{private} must be refused");
        }
        for public in [
            "8.8.8.8",
            "1.1.1.1",
            "172.32.0.1",
            "100.128.0.1",
            "2606:4700:4700::1111",
            "64:ff9b::8.8.8.8",
            "2002:0808:0808::1",
        ] {
            assert_eq!(verdict(public), None, "{public} is public");
        }
    }

    #[test]
    fn literal_urls_are_checked_and_names_are_left_to_the_resolver() {
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_literal(&url("http://127.0.0.1:8080/m.gguf")).is_err());
        assert!(check_literal(&url("http://[::1]/m.gguf")).is_err());
        assert!(check_literal(&url("http://[::ffff:7f00:1]/m.gguf")).is_err());
        assert!(check_literal(&url("http://2130706433/m.gguf")).is_err()); // 127.0.0.1 as one number
        assert!(check_literal(&url("https://8.8.8.8/m.gguf")).is_ok());
        assert!(check_literal(&url("https://example.com/m.gguf")).is_ok());
    }

    #[test]
    fn the_resolver_refuses_a_name_with_only_private_addresses() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let err = rt
            .block_on(PublicOnly.resolve("localhost".parse().unwrap()))
            .err()
            .expect("localhost must be refused");
        let refused = find_refused(err.as_ref()).expect("a Refused error");
        assert_eq!(refused.host, "localhost");
        assert!(refused.reason.contains("loopback"), "{}", refused.reason);
    }
}
