//! The few Java semantics the ElasticJob strategies depend on.
//!
//! ElasticJob derives instance orderings from `String.hashCode()` and `Math.abs`, and receives its
//! instance list sorted by `String.compareTo`. All three are defined on UTF-16 code units with
//! wrapping 32-bit arithmetic, which differs from Rust's byte-wise `str` behaviour for non-ASCII
//! text. Reproducing them exactly is what makes our assignments equal ElasticJob's.

use std::cmp::Ordering;

/// Java's `String.hashCode()`: `s[0]*31^(n-1) + ... + s[n-1]` over UTF-16 code units, with
/// wrapping `int` arithmetic.
///
/// A character outside the Basic Multilingual Plane counts as its two surrogate code units,
/// exactly as in Java.
///
/// ```
/// use shardcron_core::sharding::java_string_hash;
/// assert_eq!(java_string_hash("hello"), 99_162_322);
/// assert_eq!(java_string_hash("polygenelubricants"), i32::MIN);
/// ```
pub fn java_string_hash(s: &str) -> i32 {
    s.encode_utf16().fold(0i32, |hash, unit| hash.wrapping_mul(31).wrapping_add(i32::from(unit)))
}

/// Java's `Math.abs(int)`: like `i32::wrapping_abs`, so `i32::MIN` stays `i32::MIN` (negative).
pub fn java_abs(value: i32) -> i32 {
    value.wrapping_abs()
}

/// Java's `String.compareTo`: lexicographic over UTF-16 code units.
///
/// It agrees with Rust's `str` ordering except when comparing a character above U+FFFF with one in
/// U+E000..=U+FFFF (surrogates sort below the latter in UTF-16).
pub fn java_string_cmp(a: &str, b: &str) -> Ordering {
    if a.is_ascii() && b.is_ascii() {
        // Same order, without the UTF-16 encoder: the common case for `{ip}@-@{pid}` ids.
        return a.cmp(b);
    }
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values printed by `String.hashCode()` on OpenJDK 17 for the same strings.
    #[test]
    fn hash_matches_java() {
        let cases: &[(&str, i32)] = &[
            ("", 0),
            ("a", 97),
            ("ab", 3105),
            ("hello", 99_162_322),
            ("myJob", 104_343_153),
            ("testJob", -1_422_475_829),
            ("negOdd", -1_049_337_473),
            ("作业", 649_790),
            // U+1F600 is the surrogate pair D83D DE00.
            ("\u{1F600}", 1_772_899),
            ("polygenelubricants", i32::MIN),
            ("GydZG_", i32::MIN),
            ("DESIGNING WORKHOUSES", i32::MIN),
        ];
        for (input, expected) in cases {
            assert_eq!(java_string_hash(input), *expected, "hash of {input:?}");
        }
    }

    #[test]
    fn abs_keeps_min_value_negative() {
        assert_eq!(java_abs(-5), 5);
        assert_eq!(java_abs(7), 7);
        assert_eq!(java_abs(i32::MIN), i32::MIN);
    }

    #[test]
    fn compare_uses_utf16_code_units() {
        assert_eq!(java_string_cmp("a", "b"), Ordering::Less);
        assert_eq!(java_string_cmp("b", "a"), Ordering::Greater);
        assert_eq!(java_string_cmp("a", "a"), Ordering::Equal);
        assert_eq!(java_string_cmp("a", "ab"), Ordering::Less);
        // U+FF01 (one unit, 0xFF01) sorts after U+1F600 (0xD83D 0xDE00) in Java,
        // although its code point is smaller.
        assert_eq!(java_string_cmp("\u{FF01}", "\u{1F600}"), Ordering::Greater);
        assert_eq!("\u{FF01}".cmp("\u{1F600}"), Ordering::Less);
    }
}
