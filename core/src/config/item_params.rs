//! The `shardingItemParameters` format: `0=A,1=B,2=C`.
//!
//! ElasticJob splits on `,`, trims each pair, splits it on `=` and trims both sides. We keep that
//! and are stricter or more lenient where ElasticJob is surprising:
//! - a value may contain `=` (we split on the first one; ElasticJob rejects `0=a=b`);
//! - an empty value (`0=`) is allowed and means the empty string (ElasticJob rejects it);
//! - a repeated item is an error (ElasticJob silently keeps the last value);
//! - an item outside `0..shardingTotalCount` is an error (ElasticJob ignores it);
//! - trailing empty pairs (`0=A,`) are ignored, as Java's `String.split` does; empty pairs
//!   elsewhere are errors.

use std::collections::BTreeMap;

use super::ConfigError;

/// Parses `shardingItemParameters` for a job with `total_count` items into item → parameter.
///
/// An empty (or all-blank) string means no parameters.
///
/// ```
/// use shardcron_core::config::parse_sharding_item_parameters;
/// let params = parse_sharding_item_parameters(" 0=Beijing, 1 = Shanghai ,2=k=v", 3)?;
/// assert_eq!(params[&0], "Beijing");
/// assert_eq!(params[&1], "Shanghai");
/// assert_eq!(params[&2], "k=v");
/// # Ok::<(), shardcron_core::config::ConfigError>(())
/// ```
pub fn parse_sharding_item_parameters(
    input: &str,
    total_count: u32,
) -> Result<BTreeMap<u32, String>, ConfigError> {
    let mut result = BTreeMap::new();
    // The common case, no parameters, is read at every fire: no vector for it.
    if input.trim().is_empty() {
        return Ok(result);
    }
    let pairs: Vec<&str> = input.split(',').collect();
    // Java's split drops trailing empty strings; blank trailing pairs are dropped here too.
    let used = pairs.iter().rposition(|pair| !pair.trim().is_empty()).map_or(0, |last| last + 1);
    for (index, raw) in pairs[..used].iter().enumerate() {
        let (item, value) = parse_pair(raw, index + 1, total_count)?;
        if result.insert(item, value).is_some() {
            return Err(ConfigError::ItemParameterDuplicate { pair: raw.to_string(), item });
        }
    }
    Ok(result)
}

fn parse_pair(raw: &str, position: usize, total_count: u32) -> Result<(u32, String), ConfigError> {
    let malformed = || ConfigError::ItemParameterMalformed { pair: raw.to_string(), position };
    let (item, value) = raw.split_once('=').ok_or_else(malformed)?;
    let item = item.trim();
    if item.is_empty() {
        return Err(malformed());
    }
    // i64 so that "-1" and "4294967296" are reported as out of range rather than as non-numbers.
    let number: i64 = item.parse().map_err(|_| ConfigError::ItemParameterNotANumber {
        pair: raw.to_string(),
        item: item.to_string(),
    })?;
    let in_range = u32::try_from(number).ok().filter(|n| *n < total_count);
    let Some(number) = in_range else {
        return Err(ConfigError::ItemParameterOutOfRange {
            pair: raw.to_string(),
            item: number,
            total_count,
        });
    };
    Ok((number, value.trim().to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(input: &str, count: u32) -> Vec<(u32, String)> {
        parse_sharding_item_parameters(input, count).unwrap().into_iter().collect()
    }

    fn pairs(expected: &[(u32, &str)]) -> Vec<(u32, String)> {
        expected.iter().map(|(k, v)| (*k, v.to_string())).collect()
    }

    /// (input, total count, expected item → value pairs)
    type Case = (&'static str, u32, &'static [(u32, &'static str)]);

    #[test]
    fn parses_valid_inputs() {
        let cases: &[Case] = &[
            ("", 3, &[]),
            ("   ", 3, &[]),
            ("0=A,1=B,2=C", 3, &[(0, "A"), (1, "B"), (2, "C")]),
            (" 2 = C , 0=A ", 3, &[(0, "A"), (2, "C")]),
            ("0=a=b,1==", 2, &[(0, "a=b"), (1, "=")]),
            ("0=", 1, &[(0, "")]),
            ("0=北京,1=上海", 2, &[(0, "北京"), (1, "上海")]),
            ("0=A,", 1, &[(0, "A")]),
            ("0=A, ,", 1, &[(0, "A")]),
            // Integer.parseInt reads "+2" and "01" as 2 and 1.
            ("+2=x,01=y", 3, &[(1, "y"), (2, "x")]),
        ];
        for (input, count, expected) in cases {
            assert_eq!(parse(input, *count), pairs(expected), "input {input:?}");
        }
    }

    #[test]
    fn names_the_offending_pair() {
        let cases: &[(&str, u32, &str)] = &[
            (
                "0=A,1B",
                3,
                "shardingItemParameters: pair 2 (\"1B\") is not of the form item=value, as in 0=A,1=B",
            ),
            (
                "0=A,,1=B",
                3,
                "shardingItemParameters: pair 2 (\"\") is not of the form item=value, as in 0=A,1=B",
            ),
            (
                " =A",
                3,
                "shardingItemParameters: pair 1 (\" =A\") is not of the form item=value, as in 0=A,1=B",
            ),
            (
                "0=A,x=B",
                3,
                "shardingItemParameters: pair \"x=B\" has item \"x\", which is not an integer",
            ),
            (
                "1.5=B",
                3,
                "shardingItemParameters: pair \"1.5=B\" has item \"1.5\", which is not an integer",
            ),
            (
                "0=A,3=D",
                3,
                "shardingItemParameters: pair \"3=D\" names item 3, outside 0..3 (shardingTotalCount is 3)",
            ),
            (
                "-1=Z",
                3,
                "shardingItemParameters: pair \"-1=Z\" names item -1, outside 0..3 (shardingTotalCount is 3)",
            ),
            (
                "0=A, 0 = B",
                3,
                "shardingItemParameters: pair \" 0 = B\" repeats item 0; give each item one value",
            ),
        ];
        for (input, count, message) in cases {
            let err = parse_sharding_item_parameters(input, *count).unwrap_err();
            assert_eq!(err.to_string(), *message, "input {input:?}");
            assert_eq!(err.field(), Some("shardingItemParameters"));
        }
    }
}
