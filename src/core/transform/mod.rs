//! Subject transforms: subject mappings, import/export rewriting and their functions.
//!
//! Sans-IO and allocation-lean, for the publish path: a compiled [`SubjectTransform`]
//! matches a subject without allocating and writes the mapped subject into one `Vec`.
//! [`MappingSet`] holds an account's weighted [`Mapping`]s. Behaviour, error texts and
//! partition numbers follow nats-server 2.14 (checked against the 2.14.0 binary, see the
//! tests).
//!
//! Destination syntax: literal tokens, `$N` / `{{wildcard(N)}}`, `{{partition(n,i,...)}}`,
//! `{{split(i,delim)}}`, `{{splitFromLeft(i,n)}}`, `{{splitFromRight(i,n)}}`,
//! `{{sliceFromLeft(i,n)}}`, `{{sliceFromRight(i,n)}}`, `{{left(i,n)}}`, `{{right(i,n)}}`,
//! `{{random(n)}}` and a trailing `>`.
//!
//! Allocation: building allocates (config time). Applying allocates only the output `Vec`
//! (sized from an upper bound, never regrown): matching records token offsets in a stack
//! array, so a subject that matches nothing costs nothing; a weighted draw that falls in a
//! dropped share returns an empty, unallocated `Vec`.
//!
//! Precedence: a [`MappingSet`] tries its mappings in insertion order and the first whose
//! source matches wins (no "most specific" rule), as the reference does with its list.

pub mod error;
pub mod mapping;
mod placeholder;
mod render;
pub mod subject_transform;

pub use error::{DestErrorKind, MappingError, TransformError};
pub use mapping::{validate_mapping, MapDest, Mapping, MappingSet};
pub use subject_transform::{tokenize, untokenize, SubjectTransform};

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_mapping;
