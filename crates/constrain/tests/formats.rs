//! `format` enforced: each format's accept and reject examples, taken from its RFC,
//! walked through a compiled constraint (token masks and bytes), plus the report.

mod common;

use common::{accepts_tokens, synthetic_vocab};
use llamay_constrain::{schema_grammar, Constraint, NotEnforced};
use serde_json::json;

/// Whether the JSON string `value` is accepted as a whole document by `{"type":"string","format":F}`.
fn accepts(format: &str, value: &str) -> bool {
    let (vocab, eog, _) = synthetic_vocab(&[]);
    let s = json!({"type": "string", "format": format});
    let (c, report) = Constraint::from_schema(&s, vocab).unwrap();
    assert!(report.is_fully_enforced(), "{format}: {report}");
    assert_eq!(report.formats, vec![format!("{format} at the schema")]);
    let text = serde_json::to_string(value).unwrap();
    let by_tokens = accepts_tokens(&c, eog, text.as_bytes()).is_ok();
    // The bytes alone say the same (no token boundary changes the language).
    let mut m = c.matcher();
    let by_bytes = m.commit_bytes(text.as_bytes()).is_ok() && m.is_accepting();
    assert_eq!(by_tokens, by_bytes, "{format} {value:?}");
    by_tokens
}

fn check(format: &str, good: &[&str], bad: &[&str]) {
    for g in good {
        assert!(accepts(format, g), "{format} refused {g:?}");
    }
    for b in bad {
        assert!(!accepts(format, b), "{format} accepted {b:?}");
    }
}

#[test]
fn date_time_rfc3339() {
    // RFC 3339 §5.8's examples.
    let good = [
        "1985-04-12T23:20:50.52Z",
        "1996-12-19T16:39:57-08:00",
        "1990-12-31T23:59:60Z",
        "1990-12-31T23:59:60.5+00:00",
        "1937-01-01T12:00:27.87+00:20",
        "2000-02-29t00:00:00z",
    ];
    let bad = [
        "1985-04-12",
        "1985-04-12 23:20:50Z",
        "1985-13-12T23:20:50Z",
        "1985-04-31T23:20:50Z",
        "1985-04-12T24:00:00Z",
        "1985-04-12T23:20:50",
        "1985-04-12T23:20:50.Z",
        "1900-02-29T00:00:00Z",
        "1996-12-19T16:39:57-08",
        // A leap second that is not 23:59:60 UTC.
        "1990-12-31T22:59:60Z",
        "4522-12-18T20:44:60-22:13",
        // §5.8's leap second at -08:00 is valid, but refused by design (see format.rs).
        "1990-12-31T15:59:60-08:00",
    ];
    check("date-time", &good, &bad);
}

#[test]
fn date_and_time_rfc3339() {
    let good = ["1985-04-12", "2000-02-29", "2024-02-29", "1999-11-30"];
    let bad = [
        "1985-4-12",
        "1900-02-29",
        "2023-02-29",
        "1999-11-31",
        "85-04-12",
        "1985-04-12T",
    ];
    check("date", &good, &bad);
    let good = [
        "23:20:50.52Z",
        "16:39:57-08:00",
        "23:59:60Z",
        "12:00:27.87+00:20",
    ];
    let bad = ["23:20:50", "24:00:00Z", "23:60:00Z", "23:20Z", "1:02:03Z"];
    check("time", &good, &bad);
}

#[test]
fn duration_rfc3339_appendix_a() {
    let good = [
        "P3Y6M4DT12H30M5S",
        "PT36H",
        "P1W",
        "P4W",
        "P1D",
        "PT1M",
        "P1Y2M",
        "PT0S",
    ];
    let bad = [
        "P", "PT", "P1S", "P1Y2W", "1Y", "P1H", "PT1D", "P1.5Y", "P1DT",
    ];
    check("duration", &good, &bad);
}

#[test]
fn email_rfc5321() {
    let long_local = format!("{}@example.com", "a".repeat(65));
    let long_label_domain = format!("a@{}.com", "b".repeat(64));
    let ok_local = format!("{}@example.com", "a".repeat(64));
    // RFC 3696 §3's examples of valid local parts, and RFC 5321's address literals.
    let good = [
        "user@example.com",
        "\"Abc@def\"@example.com",
        "\"Fred Bloggs\"@example.com",
        "customer/department=shipping@example.com",
        "$A12345@example.com",
        "!def!xyz%abc@example.com",
        "_somename@example.com",
        "user@[192.0.2.1]",
        "user@[IPv6:2001:db8::1]",
        &ok_local,
    ];
    let bad = [
        "Abc.example.com",
        "A@b@c@example.com",
        "a..b@example.com",
        ".a@example.com",
        "a.@example.com",
        "a@-example.com",
        "a@example-.com",
        "a@",
        "@example.com",
        "a b@example.com",
        "user@[192.0.2.256]",
        // RFC 5321 §4.5.3.1.1: a local part of 65 octets.
        &long_local,
        &long_label_domain,
    ];
    check("email", &good, &bad);
}

#[test]
fn hostname_rfc1123() {
    let long_label = "a".repeat(63);
    let too_long_label = "a".repeat(64);
    let long_name = [long_label.as_str(); 4].join("."); // 255 characters
    let good = [
        "example.com",
        "www.ietf.org",
        "3com.com",
        "a",
        "xn--bcher-kva.example",
        &long_label,
    ];
    let bad = [
        "-example.com",
        "example-.com",
        "exa_mple.com",
        "example..com",
        ".example.com",
        "example.com.",
        "",
        &too_long_label,
        &long_name,
    ];
    check("hostname", &good, &bad);
}

#[test]
fn ipv4_rfc3986() {
    let good = ["192.0.2.1", "0.0.0.0", "255.255.255.255", "10.0.0.254"];
    let bad = [
        "256.0.0.1",
        "192.0.2",
        "01.2.3.4",
        "1.2.3.4.5",
        "1.2.3.04",
        "1..2.3",
        " 1.2.3.4",
    ];
    check("ipv4", &good, &bad);
}

#[test]
fn ipv6_rfc4291() {
    // RFC 4291 §2.2's examples.
    let good = [
        "ABCD:EF01:2345:6789:ABCD:EF01:2345:6789",
        "2001:DB8:0:0:8:800:200C:417A",
        "2001:DB8::8:800:200C:417A",
        "FF01::101",
        "::1",
        "::",
        "0:0:0:0:0:0:13.1.68.3",
        "::13.1.68.3",
        "::FFFF:129.144.52.38",
        "fe80::1",
    ];
    let bad = [
        "2001:DB8::8::417A",
        "12345::1",
        "1:2:3:4:5:6:7:8:9",
        "1:2:3:4:5:6:7",
        "::1.2.3.256",
        ":1:2:3:4:5:6:7",
        "1::2:3:4:5:6:7:8",
        "g::1",
    ];
    check("ipv6", &good, &bad);
}

#[test]
fn uuid_rfc4122() {
    let good = [
        "f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
        "F81D4FAE-7DEC-11D0-A765-00A0C91E6BF6",
    ];
    let bad = [
        "f81d4fae7dec11d0a76500a0c91e6bf6",
        "f81d4fae-7dec-11d0-a765-00a0c91e6bfg",
        "{f81d4fae-7dec-11d0-a765-00a0c91e6bf6}",
        "f81d4fae-7dec-11d0-a765-00a0c91e6bf",
        "urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6",
    ];
    check("uuid", &good, &bad);
}

#[test]
fn uri_rfc3986() {
    // RFC 3986 §1.1.2's examples.
    let good = [
        "ftp://ftp.is.co.za/rfc/rfc1808.txt",
        "http://www.ietf.org/rfc/rfc2396.txt",
        "ldap://[2001:db8::7]/c=GB?objectClass?one",
        "mailto:John.Doe@example.com",
        "news:comp.infosystems.www.servers.unix",
        "tel:+1-816-555-1212",
        "telnet://192.0.2.16:80/",
        "urn:oasis:names:specification:docbook:dtd:xml:4.1.2",
        "foo://example.com:8042/over/there?name=ferret#nose",
        "http://a/b/c/d;p?q",
        "https://example.com/%7Euser",
    ];
    let bad = [
        "//example.com/path",
        "example",
        "http://exa mple.com",
        "1http://example.com",
        "http://[::1/",
        "https://example.com/%7",
        "http://example.com/a#b#c",
        "",
    ];
    check("uri", &good, &bad);
}

#[test]
fn other_formats_stay_reported_and_a_pattern_beside_a_format_wins() {
    let (g, report) =
        schema_grammar(&json!({"type": "string", "format": "uri-reference"})).unwrap();
    drop(g);
    let e = report.of_kind(NotEnforced::Ignored).next().unwrap();
    assert_eq!(
        (e.keyword.as_str(), e.location.as_str()),
        ("format", "the schema")
    );
    assert!(report.formats.is_empty());
    let s = json!({"type": "string", "format": "date", "pattern": "^x"});
    let (_, report) = schema_grammar(&s).unwrap();
    assert!(report.formats.is_empty());
    assert_eq!(report.of_kind(NotEnforced::Ignored).count(), 1);
    // A format inside an object's property is located there.
    let s = json!({"type": "object", "properties": {"when": {"type": "string", "format": "date"}}});
    let (_, report) = schema_grammar(&s).unwrap();
    assert!(report.is_fully_enforced());
    assert_eq!(report.formats, vec!["date at properties.when".to_string()]);
}
