//! A stream's subject transforms, compiled from its configuration: the input transform
//! (`subject_transform`: a publish on a matching subject is stored under the mapped one,
//! anything else keeps its subject) and the republish transform (`republish`: which
//! stored messages are published again, and on what subject). Both use the account
//! mapping engine of [`crate::core::transform`]; the configuration checks (in
//! `api::stream_check`) have already refused what does not compile.

use crate::core::transform::SubjectTransform;
use crate::jetstream::api::config::StreamConfig;

/// The compiled transforms of one stream.
#[derive(Default)]
pub struct Flows {
    input: Option<SubjectTransform>,
    republish: Option<SubjectTransform>,
    headers_only: bool,
}

fn rand_u64() -> u64 {
    rand::random()
}

impl Flows {
    /// Compile the transforms of `cfg`. A transform that does not compile (only possible
    /// for a configuration the checks did not see, such as one recovered from disk) is
    /// left out and logged.
    pub fn new(cfg: &StreamConfig) -> Flows {
        let compile = |what: &str, src: &str, dest: &str| match SubjectTransform::new(src, dest) {
            Ok(t) => Some(t),
            Err(e) => {
                tracing::warn!("JetStream stream '{}' {what} from '{src}' to '{dest}': {e}", cfg.name);
                None
            }
        };
        let input = cfg
            .subject_transform
            .as_ref()
            .filter(|t| !t.dest.is_empty())
            .and_then(|t| compile("subject transform", &t.src, &t.dest));
        // An empty destination makes no republish transform, as in the reference.
        let republish = cfg.republish.as_ref().filter(|r| !r.dest.is_empty()).and_then(|r| {
            let src = if r.src.is_empty() { ">" } else { r.src.as_str() };
            compile("republish", src, &r.dest)
        });
        Flows {
            input,
            republish,
            headers_only: cfg.republish.as_ref().is_some_and(|r| r.headers_only),
        }
    }

    /// The subject a publish on `subject` is stored under, when the input transform
    /// changes it (`None`: store it as published).
    pub fn input(&self, subject: &str) -> Option<String> {
        let t = self.input.as_ref()?;
        let mapped = t.try_match(subject.as_bytes(), &mut rand_u64).ok()?;
        String::from_utf8(mapped).ok()
    }

    /// Where a message stored on `subject` is republished, if it is.
    pub fn republish_to(&self, subject: &str) -> Option<String> {
        let t = self.republish.as_ref()?;
        let mapped = t.try_match(subject.as_bytes(), &mut rand_u64).ok()?;
        String::from_utf8(mapped).ok()
    }

    /// Does the stream republish at all?
    pub fn republishes(&self) -> bool {
        self.republish.is_some()
    }

    /// Republish only the headers (and `Nats-Msg-Size`)?
    pub fn headers_only(&self) -> bool {
        self.headers_only
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jetstream::api::config::{RePublish, SubjectTransform as TransformCfg};

    fn cfg(transform: Option<(&str, &str)>, republish: Option<(&str, &str, bool)>) -> StreamConfig {
        StreamConfig {
            name: "S".into(),
            subject_transform: transform.map(|(s, d)| TransformCfg {
                src: s.into(),
                dest: d.into(),
            }),
            republish: republish.map(|(s, d, h)| RePublish {
                src: s.into(),
                dest: d.into(),
                headers_only: h,
            }),
            ..Default::default()
        }
    }

    #[test]
    fn input_transform() {
        let f = Flows::new(&cfg(Some(("foo.*", "bar.$1")), None));
        let cases = [("foo.a", Some("bar.a")), ("foo.a.b", None), ("other", None)];
        for (subject, want) in cases {
            assert_eq!(f.input(subject).as_deref(), want, "{subject}");
        }
        assert!(!f.republishes());
        // The source may be empty (every subject).
        let f = Flows::new(&cfg(Some(("", "in.>")), None));
        assert_eq!(f.input("a.b").as_deref(), Some("in.a.b"));
        // No transform at all.
        assert_eq!(Flows::new(&cfg(None, None)).input("a"), None);
    }

    #[test]
    fn republish_transform() {
        let f = Flows::new(&cfg(None, Some((">", "rp.>", false))));
        assert_eq!(f.republish_to("$KV.b.k").as_deref(), Some("rp.$KV.b.k"));
        assert!(!f.headers_only());
        let f = Flows::new(&cfg(None, Some(("a.*", "rp.{{wildcard(1)}}", true))));
        assert_eq!(f.republish_to("a.x").as_deref(), Some("rp.x"));
        assert_eq!(f.republish_to("b.x"), None);
        assert!(f.headers_only());
        // An empty source is every subject; an empty destination republishes nothing.
        assert_eq!(
            Flows::new(&cfg(None, Some(("", "rp.>", false))))
                .republish_to("q")
                .as_deref(),
            Some("rp.q")
        );
        assert!(!Flows::new(&cfg(None, Some((">", "", false)))).republishes());
    }
}
