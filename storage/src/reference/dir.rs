//! Reading a reference `store_dir` stream directory (filled in with the import).
