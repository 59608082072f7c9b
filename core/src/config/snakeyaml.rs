//! What ElasticJob's SnakeYAML needs from the YAML we read and write.
//!
//! **Quoting.** `serde_norway` quotes a string only when YAML 1.2 would read it as something
//! else. SnakeYAML follows YAML 1.1, where plain `yes`, `off`, `1_000`, `12:30:00` or
//! `2024-01-31` are a boolean, numbers and a date. For a `String` field SnakeYAML converts them
//! back, but `props` is a `java.util.Properties` (untyped values), so `verbose: yes` would reach an
//! ElasticJob job as `"true"`. SnakeYAML itself single-quotes such strings; we do the same, which
//! also keeps our output byte-identical to ElasticJob's.
//!
//! **Class tags.** ElasticJob writes `jobExtraConfigurations` items as Java objects tagged with
//! their class, `!!org.apache...YamlTracingConfiguration`. `serde_norway` drops `!!` (secondary
//! handle) tags when reading into a `Value`, which would make the config unreadable for ElasticJob
//! after we rewrite it. Reading, we declare `%TAG !! !<marker>:` so those tags arrive as local tags
//! and rename them to `!!Class`; writing, we emit them under the marker and rename them back.
//!
//! `serde_norway` has no per-scalar style control, so each ambiguous string is swapped for a unique
//! plain token before emitting and the token for the quoted text afterwards.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex_lite::Regex;
use serde_norway::value::{Tag, TaggedValue};
use serde_norway::{Mapping, Value};

/// SnakeYAML 1.x's implicit resolvers: (characters a value may start with, pattern). A plain
/// scalar resolves to a non-string when a resolver registered for its first character matches.
static RESOLVERS: LazyLock<Vec<(&'static str, Option<Regex>)>> = LazyLock::new(|| {
    [
        // bool
        (
            "yYnNtTfFoO",
            r"^(?:yes|Yes|YES|no|No|NO|true|True|TRUE|false|False|FALSE|on|On|ON|off|Off|OFF)$",
        ),
        // int
        (
            "-+0123456789",
            r"^(?:[-+]?0b_*[0-1]+[0-1_]*|[-+]?0_*[0-7]+[0-7_]*|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x_*[0-9a-fA-F]+[0-9a-fA-F_]*|[-+]?[1-9][0-9_]*(?::[0-5]?[0-9])+)$",
        ),
        // float
        (
            "-+0123456789.",
            r"^(?:[-+]?(?:\.[0-9]+|[0-9_]+(?:\.[0-9_]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+\.[0-9_]*|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        ),
        // merge key
        ("<", r"^(?:<<)$"),
        // null
        ("~nN", r"^(?:~|null|Null|NULL| )$"),
        // timestamp
        (
            "0123456789",
            r"^(?:[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9]|[0-9][0-9][0-9][0-9]-[0-9][0-9]?-[0-9][0-9]?(?:[Tt]|[ \t]+)[0-9][0-9]?:[0-9][0-9]:[0-9][0-9](?:\.[0-9]*)?(?:[ \t]*(?:Z|[-+][0-9][0-9]?(?::[0-9][0-9])?))?)$",
        ),
    ]
    .into_iter()
    // A pattern that failed to compile yields `None`, which quotes every candidate: safe.
    .map(|(first, pattern)| (first, Regex::new(pattern).ok()))
    .collect()
});

/// True when SnakeYAML would read `s`, written as a plain scalar, as a non-string.
pub(super) fn resolves_to_non_string(s: &str) -> bool {
    let Some(first) = s.chars().next() else {
        return true; // the empty plain scalar is null
    };
    RESOLVERS.iter().any(|(starts, pattern)| {
        starts.contains(first) && pattern.as_ref().is_none_or(|p| p.is_match(s))
    })
}

/// The tag prefix ElasticJob's class tags carry in memory (`!!org.apache...`).
const JAVA_TAG: &str = "!!";

/// Parses a YAML document into a mapping, keeping `!!Class` tags (see the module docs).
pub(super) fn parse_mapping(text: &str) -> Result<Mapping, serde_norway::Error> {
    if !text.contains(JAVA_TAG) || text.contains("%TAG !! ") {
        return serde_norway::from_str(text);
    }
    let marker = unused_marker(&[text]);
    // Directives go before the document marker; add one only if the text has none.
    let starts_with_marker = text
        .lines()
        .map(str::trim_start)
        .find(|line| !line.is_empty() && !line.starts_with('#'))
        .is_some_and(|line| line.starts_with("---") || line.starts_with('%'));
    let document_start = if starts_with_marker {
        ""
    } else {
        "---
"
    };
    let local = format!(
        "%TAG !! !{marker}:
{document_start}{text}"
    );
    let Ok(mapping) = serde_norway::from_str::<Mapping>(&local) else {
        // Not a plain document; read it as is (class tags may be lost, the rest is intact).
        return serde_norway::from_str(text);
    };
    let local_prefix = format!("!{marker}:");
    let mut rename = |tag: Tag| {
        let tag = tag.to_string();
        match tag.strip_prefix(&local_prefix) {
            Some(class) => Tag::new(format!("{JAVA_TAG}{class}")),
            None => Tag::new(tag),
        }
    };
    let renamed = map_value(Value::Mapping(mapping), &mut |s| s, &mut rename);
    match renamed {
        Value::Mapping(mapping) => Ok(mapping),
        // map_value keeps the variant; this arm only satisfies the type checker.
        _ => serde_norway::from_str(text),
    }
}

/// Serialises `fields` as SnakeYAML would: ambiguous strings single-quoted, `!!Class` tags kept.
pub(super) fn to_string(fields: BTreeMap<String, Value>) -> Result<String, serde_norway::Error> {
    let mut texts = Vec::new();
    for (key, value) in &fields {
        texts.push(key.clone());
        collect_texts(value, &mut texts);
    }
    let texts: Vec<&str> = texts.iter().map(String::as_str).collect();
    let marker = unused_marker(&texts);
    let local_prefix = format!("!{marker}:");
    let mut quoted = Vec::new();
    let mut swap = |s: String| -> String {
        if !resolves_to_non_string(&s) {
            return s;
        }
        // The trailing '_' keeps token 1 from being a prefix of token 10.
        let token = format!("{marker}{}_", quoted.len());
        quoted.push((token.clone(), format!("'{}'", s.replace('\'', "''"))));
        token
    };
    let mut retag = |tag: Tag| {
        let tag = tag.to_string();
        match tag.strip_prefix(JAVA_TAG) {
            Some(class) => Tag::new(format!("{local_prefix}{class}")),
            None => Tag::new(tag),
        }
    };
    let fields: BTreeMap<String, Value> = fields
        .into_iter()
        .map(|(key, value)| (swap(key), map_value(value, &mut swap, &mut retag)))
        .collect();
    let mut text = serde_norway::to_string(&fields)?;
    for (token, replacement) in &quoted {
        text = text.replace(token, replacement);
    }
    Ok(text.replace(&local_prefix, JAVA_TAG))
}

/// A plain-scalar-safe marker (letters, digits, '_') that occurs in none of `texts`.
fn unused_marker(texts: &[&str]) -> String {
    let mut marker = String::from("q_");
    while texts.iter().any(|text| text.contains(&marker)) {
        marker.push('q');
    }
    marker
}

/// Every string and tag in `value`, for choosing a marker that cannot clash.
fn collect_texts(value: &Value, out: &mut Vec<String>) {
    match value {
        Value::String(s) => out.push(s.clone()),
        Value::Sequence(items) => items.iter().for_each(|item| collect_texts(item, out)),
        Value::Mapping(map) => map.iter().for_each(|(k, v)| {
            collect_texts(k, out);
            collect_texts(v, out);
        }),
        Value::Tagged(tagged) => {
            out.push(tagged.tag.to_string());
            collect_texts(&tagged.value, out);
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

/// Rebuilds `value` with every string (keys too) passed through `string` and every tag through
/// `tag`.
fn map_value(
    value: Value,
    string: &mut impl FnMut(String) -> String,
    tag: &mut impl FnMut(Tag) -> Tag,
) -> Value {
    match value {
        Value::String(s) => Value::String(string(s)),
        Value::Sequence(items) => {
            Value::Sequence(items.into_iter().map(|item| map_value(item, string, tag)).collect())
        }
        Value::Mapping(map) => Value::Mapping(
            map.into_iter()
                .map(|(k, v)| (map_value(k, string, tag), map_value(v, string, tag)))
                .collect::<Mapping>(),
        ),
        Value::Tagged(tagged) => {
            let TaggedValue { tag: old, value } = *tagged;
            Value::Tagged(Box::new(TaggedValue {
                tag: tag(old),
                value: map_value(value, string, tag),
            }))
        }
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What SnakeYAML 1.33's `dumpAsMap` writes for `{k: <value>}`.
    #[test]
    fn quotes_like_snakeyaml() {
        let cases: &[(&str, &str)] = &[
            ("yes", "k: 'yes'\n"),
            ("Off", "k: 'Off'\n"),
            ("y", "k: y\n"),
            ("true", "k: 'true'\n"),
            ("null", "k: 'null'\n"),
            ("~", "k: '~'\n"),
            ("", "k: ''\n"),
            ("=", "k: =\n"),
            ("<<", "k: '<<'\n"),
            ("007", "k: '007'\n"),
            ("0x1F", "k: '0x1F'\n"),
            ("0b101", "k: '0b101'\n"),
            ("1_000", "k: '1_000'\n"),
            ("1:20", "k: '1:20'\n"),
            ("12:30:00", "k: '12:30:00'\n"),
            ("1.5", "k: '1.5'\n"),
            ("1.5.3", "k: 1.5.3\n"),
            (".5", "k: '.5'\n"),
            ("1e3", "k: '1e3'\n"),
            ("-.inf", "k: '-.inf'\n"),
            (".nan", "k: '.nan'\n"),
            ("+1", "k: '+1'\n"),
            ("2001-12-14", "k: '2001-12-14'\n"),
            ("2001-12-14t21:59:43.10-05:00", "k: '2001-12-14t21:59:43.10-05:00'\n"),
            ("2001-12-14 21:59:43.10 -5", "k: '2001-12-14 21:59:43.10 -5'\n"),
            ("0/5 * * * * ?", "k: 0/5 * * * * ?\n"),
            ("x,y", "k: x,y\n"),
            ("123abc", "k: 123abc\n"),
            ("a: b", "k: 'a: b'\n"),
            ("é", "k: é\n"),
        ];
        for (value, expected) in cases {
            let fields = BTreeMap::from([("k".to_string(), Value::String(value.to_string()))]);
            assert_eq!(to_string(fields).unwrap(), *expected, "value {value:?}");
        }
    }

    #[test]
    fn keeps_java_class_tags() {
        let text = "items:\n- !!org.apache.X\n  nested: !!org.apache.Y\n    a: 1\n  type: RDB\n";
        let mapping = parse_mapping(text).unwrap();
        let items = &mapping["items"][0];
        let Value::Tagged(tagged) = items else { panic!("not tagged: {items:?}") };
        assert_eq!(tagged.tag.to_string(), "!!org.apache.X");
        let fields: BTreeMap<String, Value> =
            mapping.into_iter().map(|(k, v)| (k.as_str().unwrap().to_string(), v)).collect();
        assert_eq!(to_string(fields).unwrap(), text);
        // Documents that already start with a marker or a directive still parse.
        assert!(parse_mapping(&format!("---\n{text}")).is_ok());
        assert!(parse_mapping(&format!("# c\n%YAML 1.1\n---\n{text}")).is_ok());
    }

    #[test]
    fn quotes_keys_and_nested_strings_and_avoids_token_clashes() {
        let nested: Value =
            serde_norway::from_str("{on: [yes, q_0_, plain], k: !tag {v: 1_0}}").unwrap();
        let fields = BTreeMap::from([("props".to_string(), nested)]);
        assert_eq!(
            to_string(fields).unwrap(),
            "props:\n  'on':\n  - 'yes'\n  - q_0_\n  - plain\n  k: !tag\n    v: '1_0'\n"
        );
    }
}
