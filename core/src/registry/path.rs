//! Registry paths: `/a/b/c`, absolute, UTF-8, no empty segment.
//!
//! Every backend validates paths with [`validate`] before touching the server, so a bad path gets
//! the same [`RegistryError::InvalidPath`] everywhere instead of a backend-specific surprise
//! (ZooKeeper rejects some of these itself, etcd would happily store them as keys).
//!
//! The rules: a path starts with `/`; `/` alone is the root; otherwise it has no trailing `/`, no
//! empty segment (`//`), no `.` or `..` segment, and no NUL or other control character.

use super::error::RegistryError;

/// The root of the client's namespace.
pub const ROOT: &str = "/";

/// Checks a path against the rules; the error names the path and the rule it breaks.
pub fn validate(path: &str) -> Result<(), RegistryError> {
    let invalid = |reason| Err(RegistryError::InvalidPath { path: path.to_owned(), reason });
    if path.is_empty() {
        return invalid("path is empty; paths are absolute, like /job/config");
    }
    if !path.starts_with('/') {
        return invalid("path must start with '/'");
    }
    if path == ROOT {
        return Ok(());
    }
    if path.ends_with('/') {
        return invalid("path must not end with '/'");
    }
    // Byte loops: every operation checks its paths, a transaction of a tick's fires thousands
    // of them, and decoding each character to ask whether it is a control character cost more
    // than the operation on the in-memory registry.
    let bytes = path.as_bytes();
    if let Some(control) = first_control(bytes) {
        return if control == 0 {
            invalid("path contains a NUL character")
        } else {
            invalid("path contains a control character")
        };
    }
    for segment in bytes[1..].split(|&b| b == b'/') {
        match segment {
            b"" => return invalid("path has an empty segment ('//')"),
            b"." | b".." => return invalid("path has a '.' or '..' segment"),
            _ => {}
        }
    }
    Ok(())
}

/// The first byte of a control character (`char::is_control`: U+0000 to U+001F and U+007F to
/// U+009F) in UTF-8 `bytes`: the ASCII ones are single bytes, U+0080 to U+009F are `C2 80` to
/// `C2 9F` (and `C2` starts no other character that follows in those bytes).
fn first_control(bytes: &[u8]) -> Option<u8> {
    let mut at = 0;
    while at < bytes.len() {
        let b = bytes[at];
        if b < 0x20 || b == 0x7F {
            return Some(b);
        }
        if b == 0xC2 && bytes.get(at + 1).is_some_and(|&next| (0x80..=0x9F).contains(&next)) {
            return Some(b);
        }
        at += 1;
    }
    None
}

/// Checks a path that names a node to write: any valid path except the root.
pub fn validate_node(path: &str) -> Result<(), RegistryError> {
    validate(path)?;
    if path == ROOT {
        return Err(RegistryError::InvalidPath {
            path: path.to_owned(),
            reason: "the root cannot be created, changed or deleted",
        });
    }
    Ok(())
}

/// Checks a single child name (a segment) as used by [`join`].
pub fn validate_segment(segment: &str) -> Result<(), RegistryError> {
    validate_node(&format!("/{segment}"))?;
    if segment.contains('/') {
        return Err(RegistryError::InvalidPath {
            path: segment.to_owned(),
            reason: "a node name must not contain '/'",
        });
    }
    Ok(())
}

/// The parent of a valid path; `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == ROOT {
        return None;
    }
    match path.rfind('/') {
        Some(0) => Some(ROOT),
        Some(i) => Some(&path[..i]),
        None => None,
    }
}

/// The last segment of a valid path (empty for the root).
pub fn name(path: &str) -> &str {
    path.rfind('/').map_or(path, |i| &path[i + 1..])
}

/// `parent` + `/` + `child`, without doubling the slash at the root. Concatenated, not
/// formatted: listings and snapshots join every child's path (the formatter cost several
/// times the copy).
pub fn join(parent: &str, child: &str) -> String {
    let parent = if parent == ROOT { "" } else { parent };
    let mut path = String::with_capacity(parent.len() + 1 + child.len());
    path.push_str(parent);
    path.push('/');
    path.push_str(child);
    path
}

/// The prefix every path strictly below `parent` starts with: `parent` + `/` (`/` for the
/// root).
pub fn below(parent: &str) -> String {
    if parent == ROOT {
        return ROOT.to_owned();
    }
    let mut prefix = String::with_capacity(parent.len() + 1);
    prefix.push_str(parent);
    prefix.push('/');
    prefix
}

/// Whether `path` is `root` or lies below it.
pub fn is_within(path: &str, root: &str) -> bool {
    root == ROOT
        || path == root
        || (path.len() > root.len()
            && path.starts_with(root)
            && path.as_bytes()[root.len()] == b'/')
}

/// How many segments a valid path has: `/` none, `/a` one, `/a/b` two.
pub fn depth(path: &str) -> usize {
    if path == ROOT {
        0
    } else {
        path.bytes().filter(|&b| b == b'/').count()
    }
}

/// The ancestors of a valid path from the top down, excluding the root and the path itself:
/// `/a/b/c` gives `/a`, `/a/b`.
pub fn ancestors(path: &str) -> impl Iterator<Item = &str> {
    // A byte search: scope checks ask this of every path a job reads or a watch publishes,
    // and `match_indices` of a char cost a tenth of a simulation.
    path.bytes().enumerate().skip(1).filter(|&(_, b)| b == b'/').map(move |(i, _)| &path[..i])
}

/// `text.split('/')`, found by a byte search: every watch event's path is cut into segments
/// (to route it, to tell an execution record), and the library's search for a `char` costs
/// several times the rest of that work on paths this short.
pub fn segments(text: &str) -> impl Iterator<Item = &str> {
    let mut rest = Some(text);
    std::iter::from_fn(move || {
        let current = rest?;
        match current.bytes().position(|b| b == b'/') {
            Some(at) => {
                rest = Some(&current[at + 1..]);
                Some(&current[..at])
            }
            None => {
                rest = None;
                Some(current)
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn joins_and_prefixes_as_formatting_did() {
        for (parent, child) in [("/", "a"), ("/a", "b"), ("/a/b", "c-d"), ("/é", "ü")] {
            let formatted =
                if parent == ROOT { format!("/{child}") } else { format!("{parent}/{child}") };
            assert_eq!(join(parent, child), formatted);
            let prefix = if parent == ROOT { "/".to_owned() } else { format!("{parent}/") };
            assert_eq!(below(parent), prefix);
        }
    }

    #[test]
    fn segments_split_as_the_library_does() {
        for text in ["", "/", "a", "a/b", "/a/b/", "//", "job/sharding/0/running", "é/ü//x"] {
            assert_eq!(segments(text).collect::<Vec<_>>(), text.split('/').collect::<Vec<_>>());
        }
    }

    #[test]
    fn accepts_ordinary_paths() {
        for p in ["/", "/a", "/a/b", "/job-1/sharding/0/instance", "/192.168.0.1@-@42", "/δ/ü"] {
            assert!(validate(p).is_ok(), "{p}");
        }
    }

    /// The rules as first written, a character at a time: the byte loops must agree.
    fn reference(path: &str) -> Result<(), &'static str> {
        if path.is_empty() || !path.starts_with('/') {
            return Err("start");
        }
        if path == ROOT {
            return Ok(());
        }
        if path.ends_with('/') {
            return Err("end");
        }
        if let Some(c) = path.chars().find(|c| c.is_control()) {
            return Err(if c == '\0' { "NUL" } else { "control" });
        }
        for segment in path[1..].split('/') {
            if matches!(segment, "" | "." | "..") {
                return Err("segment");
            }
        }
        Ok(())
    }

    #[test]
    fn byte_checks_agree_with_the_character_rules() {
        let pieces = [
            "a", "é", "\u{80}", "\u{9f}", "\u{a0}", "\u{7f}", "\u{1f}", "\0", "\u{85}", "\u{ff}",
            "\u{100}", "\u{2028}", ".", "..", "/", "//", "ü\u{9f}", "\u{c2}",
        ];
        for a in pieces {
            for b in pieces {
                for path in [format!("/{a}{b}"), format!("/{a}/{b}"), format!("/x/{a}{b}/y")] {
                    let kind = |r: Result<(), RegistryError>| match r {
                        Ok(()) => Ok(()),
                        Err(RegistryError::InvalidPath { reason, .. }) => {
                            Err(if reason.contains("NUL") {
                                "NUL"
                            } else if reason.contains("control") {
                                "control"
                            } else if reason.contains("end with") {
                                "end"
                            } else {
                                "segment"
                            })
                        }
                        Err(_) => Err("other"),
                    };
                    assert_eq!(kind(validate(&path)), reference(&path), "{path:?}");
                }
            }
        }
    }

    #[test]
    fn rejects_each_rule_with_its_reason() {
        let cases = [
            ("", "empty"),
            ("a/b", "start with '/'"),
            ("/a/", "end with '/'"),
            ("/a//b", "empty segment"),
            ("/a/./b", "'.' or '..'"),
            ("/a/..", "'.' or '..'"),
            ("/a\0b", "NUL"),
            ("/a\nb", "control character"),
        ];
        for (p, reason) in cases {
            match validate(p) {
                Err(RegistryError::InvalidPath { path, reason: r }) => {
                    assert_eq!(path, p);
                    assert!(r.contains(reason), "{p:?}: {r}");
                }
                other => panic!("{p:?} gave {other:?}"),
            }
        }
        assert!(validate_node("/").is_err());
        assert!(validate_segment("a/b").is_err());
        assert!(validate_segment("..").is_err());
    }

    #[test]
    fn navigation() {
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/a"), Some("/"));
        assert_eq!(parent("/"), None);
        assert_eq!(name("/a/b"), "b");
        assert_eq!(join("/", "a"), "/a");
        assert_eq!(join("/a", "b"), "/a/b");
        assert!(is_within("/a/b", "/a"));
        assert!(is_within("/a", "/a"));
        assert!(!is_within("/ab", "/a"));
        assert!(is_within("/ab", "/"));
        assert_eq!(ancestors("/a/b/c").collect::<Vec<_>>(), vec!["/a", "/a/b"]);
        assert_eq!(ancestors("/a").count(), 0);
        assert_eq!([depth("/"), depth("/a"), depth("/a/b"), depth("/a/b/c")], [0, 1, 2, 3]);
    }
}
