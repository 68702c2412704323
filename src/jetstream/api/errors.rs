//! JetStream API errors: `{"code": <http-like>, "err_code": <n>, "description": "..."}`.
//! The table itself is generated from nats-server's errors.json ([`super::errors_table`],
//! `tools/gen-js-errors`); templated descriptions (`{err}`, `{seq}`...) are filled with
//! [`ErrDef::with`].

use serde::{Deserialize, Serialize};

/// One entry of the error table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ErrDef {
    pub code: u16,
    pub err_code: u16,
    /// The description, possibly with `{placeholders}`.
    pub text: &'static str,
    /// The reference's constant name.
    pub name: &'static str,
}

/// An API error as responses carry it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiError {
    pub code: u16,
    #[serde(default, skip_serializing_if = "is_zero")]
    pub err_code: u16,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub description: String,
}

fn is_zero(v: &u16) -> bool {
    *v == 0
}

impl ErrDef {
    /// The error with its description as is.
    pub fn err(&self) -> ApiError {
        ApiError {
            code: self.code,
            err_code: self.err_code,
            description: self.text.to_string(),
        }
    }

    /// The error with `{name}` placeholders replaced.
    pub fn with(&self, args: &[(&str, &str)]) -> ApiError {
        let mut d = self.text.to_string();
        for (k, v) in args {
            d = d.replace(&format!("{{{k}}}"), v);
        }
        ApiError {
            code: self.code,
            err_code: self.err_code,
            description: d,
        }
    }

    /// The error with its `{err}` placeholder replaced.
    pub fn err_with(&self, err: impl std::fmt::Display) -> ApiError {
        self.with(&[("err", &err.to_string())])
    }

    /// Look an entry up by its error code.
    pub fn by_code(err_code: u16) -> Option<ErrDef> {
        super::errors_table::ALL
            .iter()
            .copied()
            .find(|e| e.err_code == err_code)
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (err_code={})", self.description, self.err_code)
    }
}

impl std::error::Error for ApiError {}

#[cfg(test)]
mod tests {
    use super::super::errors_table as t;

    #[test]
    fn templates_are_filled() {
        let e = t::JS_STREAM_WRONG_LAST_SEQUENCE_ERR_F.with(&[("seq", "2")]);
        assert_eq!(e.description, "wrong last sequence: 2");
        assert_eq!((e.code, e.err_code), (400, 10071));
        let j = serde_json::to_string(&t::JS_STREAM_NOT_FOUND_ERR.err()).unwrap();
        assert_eq!(j, r#"{"code":404,"err_code":10059,"description":"stream not found"}"#);
    }

    /// The generated table matches errors.json wherever the spec is checked out beside
    /// the project (it is not copied into the repository).
    #[test]
    fn generated_table_matches_errors_json() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/spec/errors.json");
        let Ok(text) = std::fs::read_to_string(&path) else {
            return;
        };
        let v: Vec<serde_json::Value> = serde_json::from_str(&text).unwrap();
        assert_eq!(v.len(), t::ALL.len());
        for e in &v {
            let name = e["constant"].as_str().unwrap();
            let def = t::ALL
                .iter()
                .find(|d| d.name == name)
                .unwrap_or_else(|| panic!("{name} missing"));
            assert_eq!(u64::from(def.err_code), e["error_code"].as_u64().unwrap(), "{name}");
            assert_eq!(u64::from(def.code), e["code"].as_u64().unwrap(), "{name}");
            assert_eq!(def.text, e["description"].as_str().unwrap(), "{name}");
        }
    }
}
