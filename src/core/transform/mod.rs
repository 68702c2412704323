//! Subject transforms: subject mappings, import/export rewriting and their functions.
