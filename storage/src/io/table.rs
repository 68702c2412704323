//! The open files of a backend, by [`FileNo`]: numbers are reused after a close, and a
//! removed file's number stops resolving (both backends keep their files this way).

use super::FileNo;
use std::io;

pub struct FileTable<F> {
    files: Vec<Option<F>>,
    names: Vec<String>,
}

impl<F> Default for FileTable<F> {
    fn default() -> Self {
        FileTable {
            files: Vec::new(),
            names: Vec::new(),
        }
    }
}

impl<F> FileTable<F> {
    /// Keep `f` (opened as `name`) under the first free number.
    pub fn insert(&mut self, name: &str, f: F) -> FileNo {
        let no = match self.files.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.files.push(None);
                self.names.push(String::new());
                self.files.len() - 1
            }
        };
        if let (Some(slot), Some(n)) = (self.files.get_mut(no), self.names.get_mut(no)) {
            *slot = Some(f);
            *n = name.to_string();
        }
        no as FileNo
    }

    pub fn close(&mut self, file: FileNo) {
        if let Some(slot) = self.files.get_mut(file as usize) {
            *slot = None;
        }
    }

    /// Forget every number open on `name` (the file is being removed).
    pub fn close_name(&mut self, name: &str) {
        for (slot, n) in self.files.iter_mut().zip(&self.names) {
            if n == name {
                *slot = None;
            }
        }
    }

    pub fn get(&self, file: FileNo) -> io::Result<&F> {
        self.files
            .get(file as usize)
            .and_then(Option::as_ref)
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "file not open"))
    }
}
