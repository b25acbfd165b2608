//! Numeric ranges as digit patterns.
//!
//! A range of non-negative integers splits into sequences of digit classes, each
//! matching numbers of one width: `[7, 312]` is `[7-9]`, `[1-9][0-9]`, `[1-2][0-9][0-9]`,
//! `3(0[0-9]|1[0-2])`. A decimal with exactly `k` fraction digits is an integer
//! scaled by `10^k` written with a point before its last `k` digits, so the same
//! splitting serves bounded numbers. The result renders as a regular expression
//! (no leading zeros, no `-0`).

/// One element of a digit pattern.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// One digit in `lo..=hi`.
    Digit(u8, u8),
    /// The decimal point.
    Point,
    /// `min` or more digits, any of 0-9.
    AnyDigits(u32),
}

/// Largest width handled (10^38 < 2^127).
const MAX_WIDTH: u32 = 38;

fn pow10(k: u32) -> u128 {
    10u128.pow(k)
}

/// Digits of `v` (1 for zero).
pub(super) fn width(v: u128) -> u32 {
    let mut w = 1;
    let mut x = v / 10;
    while x > 0 {
        w += 1;
        x /= 10;
    }
    w
}

/// Digit-class sequences of exactly `w` digits (leading zeros allowed) covering the
/// zero-padded numbers in `[a, b]`, `a <= b < 10^w`.
pub(super) fn fixed_width(a: u128, b: u128, w: u32) -> Vec<Vec<Piece>> {
    debug_assert!(a <= b && (w == MAX_WIDTH || b < pow10(w)));
    if w == 0 {
        return vec![vec![]];
    }
    let unit = pow10(w - 1);
    let (da, ra) = ((a / unit) as u8, a % unit);
    let (db, rb) = ((b / unit) as u8, b % unit);
    let full = unit - 1;
    let prefixed = |d_lo: u8, d_hi: u8, rest: Vec<Vec<Piece>>| -> Vec<Vec<Piece>> {
        rest.into_iter()
            .map(|r| {
                let mut v = vec![Piece::Digit(d_lo, d_hi)];
                v.extend(r);
                v
            })
            .collect()
    };
    if da == db {
        return prefixed(da, da, fixed_width(ra, rb, w - 1));
    }
    let mut out = Vec::new();
    // The first digit's lowest value, unless its tail covers everything.
    let mid_lo = if ra == 0 {
        da
    } else {
        out.extend(prefixed(da, da, fixed_width(ra, full, w - 1)));
        da + 1
    };
    let mid_hi = if rb == full { db } else { db - 1 };
    if mid_lo <= mid_hi {
        out.extend(prefixed(mid_lo, mid_hi, fixed_width(0, full, w - 1)));
    }
    if rb != full {
        out.extend(prefixed(db, db, fixed_width(0, rb, w - 1)));
    }
    out
}

/// Patterns for the numbers `m` in `[lo, hi]` (`hi = None`: unbounded) written
/// with exactly `frac` fraction digits: `m / 10^frac` as `int.frac`, the integer
/// part without leading zeros. `None` when widths exceed 38 digits.
pub(super) fn unsigned(lo: u128, hi: Option<u128>, frac: u32) -> Option<Vec<Vec<Piece>>> {
    if hi.is_some_and(|h| h < lo) {
        return Some(vec![]);
    }
    let min_width = frac + 1;
    let top_width = match hi {
        Some(h) => width(h).max(min_width),
        None => width(lo).max(min_width),
    };
    if top_width > MAX_WIDTH {
        return None;
    }
    let mut out = Vec::new();
    for w in min_width..=top_width {
        let floor = if w == min_width { 0 } else { pow10(w - 1) };
        let ceil = if w == MAX_WIDTH {
            u128::MAX
        } else {
            pow10(w) - 1
        };
        let a = lo.max(floor);
        let b = hi.map_or(ceil, |h| h.min(ceil));
        if a <= b {
            out.extend(fixed_width(a, b, w));
        }
    }
    if hi.is_none() {
        // Every number wider than `top_width`: [1-9] then at least `top_width` digits.
        // The last `frac` digits stay separate so the point can go before them.
        let mut v = vec![Piece::Digit(1, 9), Piece::AnyDigits(top_width - frac)];
        v.extend(std::iter::repeat_n(Piece::Digit(0, 9), frac as usize));
        out.push(v);
    }
    if frac > 0 {
        for p in &mut out {
            let at = p.len() - frac as usize;
            p.insert(at, Piece::Point);
        }
    }
    Some(out)
}

/// Patterns for the integers in `[lo, hi]` (either side open), sign included.
pub(super) fn signed(
    lo: Option<i128>,
    hi: Option<i128>,
    frac: u32,
) -> Option<Vec<(bool, Vec<Piece>)>> {
    let mut out = Vec::new();
    if hi.is_none_or_ge(0) {
        let a = lo.map_or(0, |l| l.max(0)) as u128;
        let b = hi.map(|h| h as u128);
        out.extend(unsigned(a, b, frac)?.into_iter().map(|p| (false, p)));
    }
    if lo.is_none_or_lt(0) {
        // Negative side by magnitude; magnitude 0 would be `-0`, never written.
        let a = hi.map_or(1, |h| h.min(-1).unsigned_abs()).max(1);
        let b = lo.map(|l| l.unsigned_abs());
        out.extend(unsigned(a, b, frac)?.into_iter().map(|p| (true, p)));
    }
    Some(out)
}

trait OpenBound {
    fn is_none_or_ge(&self, v: i128) -> bool;
    fn is_none_or_lt(&self, v: i128) -> bool;
}

impl OpenBound for Option<i128> {
    fn is_none_or_ge(&self, v: i128) -> bool {
        self.is_none_or(|x| x >= v)
    }
    fn is_none_or_lt(&self, v: i128) -> bool {
        self.is_none_or(|x| x < v)
    }
}

/// Renders patterns as one regular expression (an alternation).
pub(super) fn to_regex(patterns: &[(bool, Vec<Piece>)]) -> String {
    let mut alts = Vec::with_capacity(patterns.len());
    for (negative, pieces) in patterns {
        let mut s = String::new();
        if *negative {
            s.push('-');
        }
        for p in pieces {
            match *p {
                Piece::Digit(a, b) if a == b => s.push((b'0' + a) as char),
                Piece::Digit(a, b) => s.push_str(&format!("[{a}-{b}]")),
                Piece::Point => s.push_str("\\."),
                Piece::AnyDigits(n) => s.push_str(&format!("[0-9]{{{n},}}")),
            }
        }
        alts.push(s);
    }
    if alts.is_empty() {
        // Nothing: a class that matches no byte.
        return "[^\\x00-\\x{10FFFF}]".to_string();
    }
    format!("(?:{})", alts.join("|"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use regex_automata::meta::Regex;

    fn full(re: &str) -> Regex {
        Regex::new(&format!("^{re}$")).unwrap()
    }

    #[test]
    fn fixed_width_covers_exactly() {
        for (a, b, w) in [
            (7u128, 9, 1),
            (0, 999, 3),
            (123, 456, 3),
            (5, 7, 3),
            (100, 199, 3),
            (0, 0, 2),
        ] {
            let pats = fixed_width(a, b, w);
            let re = full(&to_regex(
                &pats.into_iter().map(|p| (false, p)).collect::<Vec<_>>(),
            ));
            for v in 0..10u128.pow(w) {
                let text = format!("{v:0width$}", width = w as usize);
                assert_eq!(
                    re.is_match(&text),
                    (a..=b).contains(&v),
                    "[{a},{b}] w{w} {text}"
                );
            }
        }
    }

    #[test]
    fn signed_integer_ranges_exhaustive() {
        for (lo, hi) in [
            (-120i128, 37i128),
            (7, 312),
            (0, 0),
            (-5, -1),
            (-1000, 1000),
            (999, 1001),
        ] {
            let re = full(&to_regex(&signed(Some(lo), Some(hi), 0).unwrap()));
            for v in -2000i128..=2000 {
                assert_eq!(
                    re.is_match(&v.to_string()),
                    (lo..=hi).contains(&v),
                    "[{lo},{hi}] {v}"
                );
            }
            assert!(!re.is_match("-0") && !re.is_match("007") && !re.is_match("+1"));
        }
    }

    #[test]
    fn open_ranges() {
        let re = full(&to_regex(&signed(Some(42), None, 0).unwrap()));
        for v in -100i128..5000 {
            assert_eq!(re.is_match(&v.to_string()), v >= 42, "{v}");
        }
        assert!(re.is_match("123456789012345678901234567890"));
        let re = full(&to_regex(&signed(None, Some(-3), 0).unwrap()));
        for v in -5000i128..100 {
            assert_eq!(re.is_match(&v.to_string()), v <= -3, "{v}");
        }
        let re = full(&to_regex(&signed(None, None, 0).unwrap()));
        assert!(re.is_match("0") && re.is_match("-17") && !re.is_match("-0") && !re.is_match("01"));
    }

    #[test]
    fn eighteen_digit_bounds_are_exact() {
        let lo = 999_999_999_999_999_990i128;
        let hi = 999_999_999_999_999_999i128;
        let re = full(&to_regex(&signed(Some(lo), Some(hi), 0).unwrap()));
        assert!(re.is_match("999999999999999995"));
        assert!(!re.is_match("999999999999999989"));
        assert!(!re.is_match("1000000000000000000"));
    }

    #[test]
    fn fixed_point_numbers() {
        // Two fraction digits, [-1.50, 2.25] scaled by 100.
        let re = full(&to_regex(&signed(Some(-150), Some(225), 2).unwrap()));
        for (t, ok) in [
            ("0.00", true),
            ("2.25", true),
            ("2.26", false),
            ("-1.50", true),
            ("-1.51", false),
            ("0.5", false),
            ("00.50", false),
            ("-0.00", false),
            ("-0.01", true),
            (".50", false),
        ] {
            assert_eq!(re.is_match(t), ok, "{t}");
        }
        let re = full(&to_regex(&signed(Some(5), None, 1).unwrap()));
        for (t, ok) in [
            ("0.5", true),
            ("0.4", false),
            ("123456.7", true),
            ("1.0", true),
            ("-0.5", false),
        ] {
            assert_eq!(re.is_match(t), ok, "{t}");
        }
    }
}
