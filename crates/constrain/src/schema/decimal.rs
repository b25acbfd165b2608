//! Exact decimal numbers for schema bounds and steps.
//!
//! Bounds must be compared and scaled without binary rounding: `multipleOf: 0.01`
//! is one hundredth, not the double nearest to it. A schema number arrives from
//! serde_json either as an exact 64-bit integer or as an `f64`; the latter is
//! read back through its shortest round-trip decimal form, which is the text the
//! schema author wrote whenever that text had at most 17 significant digits.

use std::cmp::Ordering;

/// Largest power of ten used when aligning scales (10^38 < 2^127).
const MAX_SCALE: u32 = 38;

/// `(-1)^negative * mantissa / 10^scale`, kept with no trailing zeros in the
/// mantissa when `scale > 0`, and `negative == false` for zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Decimal {
    negative: bool,
    mantissa: u128,
    scale: u32,
}

/// 10^k as `u128`, `None` when it overflows.
pub(super) fn pow10(k: u32) -> Option<u128> {
    10u128.checked_pow(k)
}

impl Decimal {
    /// Zero.
    pub const ZERO: Decimal = Decimal {
        negative: false,
        mantissa: 0,
        scale: 0,
    };

    /// Builds `±mantissa / 10^scale`, normalised.
    pub fn new(negative: bool, mantissa: u128, scale: u32) -> Decimal {
        let mut d = Decimal {
            negative: negative && mantissa != 0,
            mantissa,
            scale,
        };
        while d.scale > 0 && d.mantissa.is_multiple_of(10) {
            d.mantissa /= 10;
            d.scale -= 1;
        }
        d
    }

    /// An integer.
    pub fn from_i128(v: i128) -> Decimal {
        Decimal::new(v < 0, v.unsigned_abs(), 0)
    }

    /// Reads a JSON number exactly as the schema wrote it (see the module note);
    /// `None` when it does not fit 38 digits.
    pub fn from_json(n: &serde_json::Number) -> Option<Decimal> {
        if let Some(i) = n.as_i64() {
            return Some(Decimal::from_i128(i as i128));
        }
        if let Some(u) = n.as_u64() {
            return Some(Decimal::new(false, u as u128, 0));
        }
        let f = n.as_f64()?;
        if !f.is_finite() {
            return None;
        }
        // Rust's `Display` for f64 is the shortest round-trip form, never with an exponent.
        Decimal::parse(&format!("{f}"))
    }

    /// Parses `-?digits(.digits)?` (no exponent).
    pub fn parse(text: &str) -> Option<Decimal> {
        let (negative, body) = match text.strip_prefix('-') {
            Some(rest) => (true, rest),
            None => (false, text),
        };
        let (int, frac) = body.split_once('.').unwrap_or((body, ""));
        if int.is_empty() || !int.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        if !frac.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        let frac = frac.trim_end_matches('0');
        let mut mantissa: u128 = 0;
        for b in int.bytes().chain(frac.bytes()) {
            mantissa = mantissa.checked_mul(10)?.checked_add((b - b'0') as u128)?;
        }
        let scale = u32::try_from(frac.len()).ok()?;
        if scale > MAX_SCALE {
            return None;
        }
        Some(Decimal::new(negative, mantissa, scale))
    }

    /// True for a negative value.
    pub fn is_negative(&self) -> bool {
        self.negative
    }

    /// True for zero.
    pub fn is_zero(&self) -> bool {
        self.mantissa == 0
    }

    /// Digits after the decimal point (0 for an integer).
    pub fn scale(&self) -> u32 {
        self.scale
    }

    /// The magnitude's digits as an integer (`|self| * 10^scale`).
    pub fn mantissa(&self) -> u128 {
        self.mantissa
    }

    /// True when the value is a whole number.
    pub fn is_integer(&self) -> bool {
        self.scale == 0
    }

    /// `self * 10^k` rounded towards negative infinity, as an integer.
    pub fn floor_scaled(&self, k: u32) -> Option<i128> {
        self.scaled(k, false)
    }

    /// `self * 10^k` rounded towards positive infinity, as an integer.
    pub fn ceil_scaled(&self, k: u32) -> Option<i128> {
        self.scaled(k, true)
    }

    fn scaled(&self, k: u32, ceil: bool) -> Option<i128> {
        let magnitude: u128 = if k >= self.scale {
            self.mantissa.checked_mul(pow10(k - self.scale)?)?
        } else {
            let div = pow10(self.scale - k)?;
            let q = self.mantissa / div;
            let exact = self.mantissa.is_multiple_of(div);
            // Round the magnitude away from zero when that is the requested direction.
            let away = !exact && (ceil != self.negative);
            q + away as u128
        };
        let m = i128::try_from(magnitude).ok()?;
        Some(if self.negative { -m } else { m })
    }

    /// Both numbers' magnitudes at a common scale.
    fn aligned(&self, other: &Decimal) -> Option<(u128, u128, u32)> {
        let s = self.scale.max(other.scale);
        let a = self.mantissa.checked_mul(pow10(s - self.scale)?)?;
        let b = other.mantissa.checked_mul(pow10(s - other.scale)?)?;
        Some((a, b, s))
    }

    /// True when `self` is an integer multiple of `step` (`step > 0`); `None` on overflow.
    pub fn is_multiple_of(&self, step: &Decimal) -> Option<bool> {
        if step.is_zero() {
            return None;
        }
        let (a, b, _) = self.aligned(step)?;
        Some(a % b == 0)
    }

    /// `Some(k)` when the value is exactly `10^k` (k may be negative).
    pub fn power_of_ten(&self) -> Option<i32> {
        if self.negative || self.mantissa == 0 {
            return None;
        }
        let mut m = self.mantissa;
        let mut k: i32 = 0;
        while m.is_multiple_of(10) {
            m /= 10;
            k += 1;
        }
        (m == 1).then(|| k - self.scale as i32)
    }

    /// The least common multiple of two positive steps, when it fits.
    pub fn lcm(&self, other: &Decimal) -> Option<Decimal> {
        let (a, b, s) = self.aligned(other)?;
        if a == 0 || b == 0 {
            return None;
        }
        let l = (a / gcd(a, b)).checked_mul(b)?;
        Some(Decimal::new(false, l, s))
    }
}

/// Greatest common divisor.
pub(super) fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

impl Ord for Decimal {
    fn cmp(&self, other: &Decimal) -> Ordering {
        match (self.negative, other.negative) {
            (false, true) => return Ordering::Greater,
            (true, false) => return Ordering::Less,
            _ => {}
        }
        let magnitude = match self.aligned(other) {
            Some((a, b, _)) => a.cmp(&b),
            // Cannot overflow both ways: compare integer parts, then the rest digit-wise.
            None => compare_text(&self.abs_text(), &other.abs_text()),
        };
        if self.negative {
            magnitude.reverse()
        } else {
            magnitude
        }
    }
}

impl PartialOrd for Decimal {
    fn partial_cmp(&self, other: &Decimal) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Decimal {
    fn abs_text(&self) -> (String, String) {
        let digits = self.mantissa.to_string();
        let s = self.scale as usize;
        if digits.len() > s {
            let (i, f) = digits.split_at(digits.len() - s);
            (i.to_string(), f.to_string())
        } else {
            (
                "0".to_string(),
                format!("{}{}", "0".repeat(s - digits.len()), digits),
            )
        }
    }
}

fn compare_text(a: &(String, String), b: &(String, String)) -> Ordering {
    a.0.len()
        .cmp(&b.0.len())
        .then_with(|| a.0.cmp(&b.0))
        .then_with(|| {
            let n = a.1.len().max(b.1.len());
            let pad = |s: &str| format!("{s:0<n$}");
            pad(&a.1).cmp(&pad(&b.1))
        })
}

impl std::fmt::Display for Decimal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (i, frac) = self.abs_text();
        if self.negative {
            f.write_str("-")?;
        }
        f.write_str(&i)?;
        if !frac.is_empty() {
            write!(f, ".{frac}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn d(s: &str) -> Decimal {
        Decimal::parse(s).unwrap()
    }

    #[test]
    fn parses_and_prints_exactly() {
        assert_eq!(d("0.010").to_string(), "0.01");
        assert_eq!(d("-4.50").to_string(), "-4.5");
        assert_eq!(d("-0.0").to_string(), "0");
        let n: serde_json::Number = serde_json::from_str("0.01").unwrap();
        assert_eq!(Decimal::from_json(&n), Some(d("0.01")));
        let n: serde_json::Number = serde_json::from_str("1e3").unwrap();
        assert_eq!(Decimal::from_json(&n), Some(d("1000")));
    }

    #[test]
    fn orders_and_scales() {
        assert!(d("-1.5") < d("-1.25"));
        assert!(d("0.1") > d("0.099"));
        assert_eq!(d("2.5").ceil_scaled(0), Some(3));
        assert_eq!(d("-2.5").ceil_scaled(0), Some(-2));
        assert_eq!(d("-2.5").floor_scaled(0), Some(-3));
        assert_eq!(d("0.015").floor_scaled(2), Some(1));
        assert_eq!(d("0.015").ceil_scaled(2), Some(2));
    }

    #[test]
    fn steps() {
        assert_eq!(d("0.01").power_of_ten(), Some(-2));
        assert_eq!(d("100").power_of_ten(), Some(2));
        assert_eq!(d("0.5").power_of_ten(), None);
        assert_eq!(d("4.5").is_multiple_of(&d("0.01")), Some(true));
        assert_eq!(d("4.505").is_multiple_of(&d("0.01")), Some(false));
        assert_eq!(d("4").lcm(&d("6")), Some(d("12")));
        assert_eq!(d("0.1").lcm(&d("0.01")), Some(d("0.1")));
    }
}
