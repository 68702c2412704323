//! Subject filters: literal subjects, `*` (one token) and `>` (one or more trailing tokens)
//! wildcards, and sets of filters (a consumer's `filter_subjects`). Matching follows NATS
//! token rules; the store does not validate subjects beyond that.

/// Does `subject` (a literal) match `filter` (which may hold wildcards)?
pub fn matches(filter: &str, subject: &str) -> bool {
    if filter == ">" {
        return !subject.is_empty();
    }
    let mut ft = filter.split('.');
    let mut st = subject.split('.');
    loop {
        match (ft.next(), st.next()) {
            (Some(">"), Some(_)) => return true,
            (Some("*"), Some(_)) => {}
            (Some(f), Some(s)) if f == s => {}
            (None, None) => return true,
            _ => return false,
        }
    }
}

/// Does `filter` hold a wildcard token?
pub fn has_wildcard(filter: &str) -> bool {
    filter.split('.').any(|t| t == "*" || t == ">")
}

/// The literal tokens of `filter` before its first wildcard, with the trailing dot
/// (`"orders.*.eu"` -> `"orders."`), or the whole filter when it is literal.
pub fn literal_prefix(filter: &str) -> &str {
    let mut end = 0;
    for tok in filter.split('.') {
        if tok == "*" || tok == ">" {
            return filter.get(..end).unwrap_or("");
        }
        end += tok.len() + 1;
    }
    filter
}

/// A set of subject filters; empty, `""` and `">"` mean every subject.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filter {
    subjects: Vec<String>,
    all: bool,
}

impl Filter {
    /// Every subject.
    pub fn all() -> Filter {
        Filter {
            subjects: Vec::new(),
            all: true,
        }
    }

    /// One filter subject (`""` or `">"` for all).
    pub fn new(subject: &str) -> Filter {
        Filter::many([subject])
    }

    /// Several filter subjects; a message matches if it matches any of them.
    pub fn many<I, S>(subjects: I) -> Filter
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let mut f = Filter::default();
        for s in subjects {
            let s = s.as_ref();
            if s.is_empty() || s == ">" {
                return Filter::all();
            }
            if !f.subjects.iter().any(|x| x == s) {
                f.subjects.push(s.to_string());
            }
        }
        if f.subjects.is_empty() {
            f.all = true;
        }
        f
    }

    pub fn is_all(&self) -> bool {
        self.all
    }

    /// The single literal subject of this filter, if that is what it is.
    pub fn as_literal(&self) -> Option<&str> {
        match self.subjects.as_slice() {
            [one] if !has_wildcard(one) => Some(one),
            _ => None,
        }
    }

    pub fn subjects(&self) -> &[String] {
        &self.subjects
    }

    pub fn matches(&self, subject: &str) -> bool {
        self.all || self.subjects.iter().any(|f| matches(f, subject))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn token_matching() {
        let cases = [
            ("foo", "foo", true),
            ("foo", "foo.bar", false),
            ("foo.*", "foo.bar", true),
            ("foo.*", "foo.bar.baz", false),
            ("foo.>", "foo.bar.baz", true),
            ("foo.>", "foo", false),
            ("*.bar", "foo.bar", true),
            ("*", "foo", true),
            (">", "a.b.c", true),
            ("a.*.c", "a.b.c", true),
            ("a.*.c", "a.b.d", false),
            ("foo*", "foo.bar", false),
        ];
        for (f, s, want) in cases {
            assert_eq!(matches(f, s), want, "{f} vs {s}");
        }
    }

    #[test]
    fn prefixes_and_sets() {
        assert_eq!(literal_prefix("orders.*.eu"), "orders.");
        assert_eq!(literal_prefix("orders.new"), "orders.new");
        assert_eq!(literal_prefix(">"), "");
        let f = Filter::many(["a.*", "b"]);
        assert!(f.matches("a.x") && f.matches("b") && !f.matches("c"));
        assert!(Filter::many(["a", ">"]).is_all());
        assert_eq!(Filter::new("a.b").as_literal(), Some("a.b"));
        assert_eq!(Filter::new("a.*").as_literal(), None);
    }
}
