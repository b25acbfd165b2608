//! `format`: the formats whose language is regular, as anchored patterns written from
//! their RFC grammars (kept small: each is a few hundred DFA states at most).
//!
//! - `date`, `time`, `date-time`: RFC 3339 §5.6 (`full-date`, `full-time`, `date-time`);
//!   days per month and February 29 only in leap years (Gregorian: every 4th year,
//!   centuries only when divisible by 400); second 60 (a leap second) only as UTC
//!   23:59:60 (`Z` or `±00:00`): the same second at another offset is refused, the
//!   one place the language is narrower than the RFC's; `T` and `Z` in either case.
//! - `duration`: RFC 3339 Appendix A (ISO 8601 durations: `P3Y6M4DT12H30M5S`, `PT36H`, `P1W`).
//! - `email`: RFC 5321 §4.1.2 `Mailbox` (dot-string or quoted local part of at most 64
//!   octets, §4.5.3.1.1 (a dotted one of at most 32 atom characters); domain labels as a
//!   hostname's; an IPv4 literal or an `IPv6:` literal; 254 characters in all).
//! - `hostname`: RFC 1123 §2.1 (labels of letters, digits and hyphens, not starting or
//!   ending with a hyphen, at most 63 characters; the name at most 253, as a length bound).
//! - `ipv4`: RFC 3986 `IPv4address` (no leading zeros); `ipv6`: RFC 4291 §2.2 text forms as
//!   RFC 3986 `IPv6address` writes them.
//! - `uuid`: RFC 4122 §3 (8-4-4-4-12 hex digits, either case).
//! - `uri`: RFC 3986 §3 `URI` (a scheme, so an absolute URI; percent-encoding checked).
//!
//! Any other format (`uri-reference`, `regex`, `idn-email`...) stays ignored and reported.

/// The string `format`s a schema is held to (any other is reported as not enforced),
/// as the catalog lists them.
pub const ENFORCED_FORMATS: &[&str] = &[
    "date-time",
    "date",
    "time",
    "duration",
    "email",
    "hostname",
    "ipv4",
    "ipv6",
    "uuid",
    "uri",
];

/// Most characters of a hostname (RFC 1123 §2.1 via RFC 1035's 255 octets on the wire).
pub(super) const HOSTNAME_MAX: u64 = 253;

/// Most characters of an email address (RFC 5321 §4.5.3.1.3: a path of 256 octets,
/// its angle brackets included).
pub(super) const EMAIL_MAX: u64 = 254;

/// The length bound a format brings, if any.
pub(super) fn max_length(format: &str) -> Option<u64> {
    match format {
        "hostname" => Some(HOSTNAME_MAX),
        "email" => Some(EMAIL_MAX),
        _ => None,
    }
}

/// The whole-value pattern of `format`, anchored, or `None` for a format left ignored.
pub(super) fn pattern(format: &str) -> Option<String> {
    Some(match format {
        "date-time" => format!("^{}[Tt]{}$", full_date(), full_time()),
        "date" => format!("^{}$", full_date()),
        "time" => format!("^{}$", full_time()),
        "duration" => format!("^{DURATION}$"),
        "email" => format!("^{}$", mailbox()),
        "hostname" => format!("^{}$", hostname()),
        "ipv4" => format!("^{}$", ipv4()),
        "ipv6" => format!("^{}$", ipv6()),
        "uuid" => format!("^{H}{{8}}-{H}{{4}}-{H}{{4}}-{H}{{4}}-{H}{{12}}$"),
        "uri" => format!("^{}$", uri()),
        _ => return None,
    })
}

/// One hex digit.
const H: &str = "[0-9A-Fa-f]";

fn full_date() -> String {
    // 31-day months, 30-day months, February to 28; February 29 in leap years.
    let leap = "(?:[0-9]{2}(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)";
    format!(
        "(?:[0-9]{{4}}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12][0-9]|3[01])|(?:0[469]|11)-(?:0[1-9]|[12][0-9]|30)|02-(?:0[1-9]|1[0-9]|2[0-8]))|{leap}-02-29)"
    )
}

fn full_time() -> String {
    // A leap second is a UTC 23:59:60; which local times that is depends on the offset
    // (1,440 pairs), so only the UTC spellings are taken: a subset, never an invalid time.
    let frac = "(?:\\.[0-9]+)?";
    format!(
        "(?:(?:[01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9]{frac}(?:[Zz]|[+-](?:[01][0-9]|2[0-3]):[0-5][0-9])|23:59:60{frac}(?:[Zz]|[+-]00:00))"
    )
}

const DURATION: &str = "P(?:(?:[0-9]+D|[0-9]+M(?:[0-9]+D)?|[0-9]+Y(?:[0-9]+M(?:[0-9]+D)?)?)(?:T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S))?|T(?:[0-9]+H(?:[0-9]+M(?:[0-9]+S)?)?|[0-9]+M(?:[0-9]+S)?|[0-9]+S)|[0-9]+W)";

fn dec_octet() -> &'static str {
    "(?:25[0-5]|2[0-4][0-9]|1[0-9]{2}|[1-9]?[0-9])"
}

fn ipv4() -> String {
    let o = dec_octet();
    format!("(?:{o}\\.{o}\\.{o}\\.{o})")
}

fn ipv6() -> String {
    let h16 = format!("{H}{{1,4}}");
    let ls32 = format!("(?:{h16}:{h16}|{})", ipv4());
    // `[ *n( h16 ":" ) h16 ]` of RFC 3986: up to n+1 groups before the `::`.
    let before = |n: usize| format!("(?:(?:{h16}:){{0,{n}}}{h16})?");
    let forms = [
        format!("(?:{h16}:){{6}}{ls32}"),
        format!("::(?:{h16}:){{5}}{ls32}"),
        format!("(?:{h16})?::(?:{h16}:){{4}}{ls32}"),
        format!("{}::(?:{h16}:){{3}}{ls32}", before(1)),
        format!("{}::(?:{h16}:){{2}}{ls32}", before(2)),
        format!("{}::{h16}:{ls32}", before(3)),
        format!("{}::{ls32}", before(4)),
        format!("{}::{h16}", before(5)),
        format!("{}::", before(6)),
    ];
    format!("(?:{})", forms.join("|"))
}

fn label() -> &'static str {
    "[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
}

fn hostname() -> String {
    let l = label();
    format!("(?:{l}(?:\\.{l})*)")
}

fn mailbox() -> String {
    let a = "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]";
    // RFC 5321 §4.5.3.1.1: a local part is at most 64 octets. A dot-string of atoms up to
    // 64 without dots, or up to 32 atom characters with dots (so at most 63 in all):
    // a subset, never a local part that is too long.
    let dot_string = format!("(?:{a}{{1,64}}|{a}(?:\\.?{a}){{0,31}})");
    // qtextSMTP (%d32-33 / %d35-91 / %d93-126) or a quoted pair, at most 64 with the quotes.
    let quoted = "\"(?:[ !#-\\[\\]-~]|\\\\[ -~]){0,31}\"";
    let l = label();
    let domain = format!("{l}(?:\\.{l})*");
    let literal = format!("\\[(?:{}|IPv6:{})\\]", ipv4(), ipv6());
    format!("(?:(?:{dot_string}|{quoted})@(?:{domain}|{literal}))")
}

fn uri() -> String {
    let unreserved = "A-Za-z0-9._~\\-";
    let sub_delims = "!$&'()*+,;=";
    let pct = format!("%{H}{H}");
    let pchar = format!("(?:[{unreserved}{sub_delims}:@]|{pct})");
    let scheme = "[A-Za-z][A-Za-z0-9+.-]*";
    let userinfo = format!("(?:[{unreserved}{sub_delims}:]|{pct})*");
    let reg_name = format!("(?:[{unreserved}{sub_delims}]|{pct})*");
    let ip_future = format!("[vV]{H}+\\.[{unreserved}{sub_delims}:]+");
    let host = format!("(?:\\[(?:{}|{ip_future})\\]|{}|{reg_name})", ipv6(), ipv4());
    let authority = format!("(?:{userinfo}@)?{host}(?::[0-9]*)?");
    let segment = format!("{pchar}*");
    let segment_nz = format!("{pchar}+");
    let abempty = format!("(?:/{segment})*");
    let hier = format!(
        "(?://{authority}{abempty}|/(?:{segment_nz}(?:/{segment})*)?|{segment_nz}(?:/{segment})*|)"
    );
    let query = format!("(?:{pchar}|[/?])*");
    format!("(?:{scheme}:{hier}(?:\\?{query})?(?:#{query})?)")
}

#[cfg(test)]
mod tests {
    use super::super::pattern::{Pattern, MAX_PATTERN_STATES};
    use super::*;

    #[test]
    fn every_format_compiles_within_the_pattern_limit() {
        for f in ENFORCED_FORMATS {
            let p = Pattern::compile(&pattern(f).unwrap(), "the schema").unwrap();
            assert!(p.states <= MAX_PATTERN_STATES, "{f}: {} states", p.states);
        }
        assert_eq!(pattern("uri-reference"), None);
    }
}
