//! The typed configuration tree: [`Value`], [`Map`], [`Position`] and [`DateTime`].

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use indexmap::IndexMap;

/// Where a key, a value or an error sits in a configuration file.
///
/// `line` and `column` are both 1-based; the column counts bytes, as nats-server does. The
/// [`Display`](fmt::Display) form is `file:line:column` exactly as nats-server prints it,
/// which includes the reference's quirk of a 0-based column on the first line of a file
/// (see [`Position::reference_column`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct Position {
    /// The file, as it was named to the parser (includes are joined to their parent's
    /// directory); `None` for text parsed from a string.
    pub file: Option<Arc<Path>>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column in bytes.
    pub column: usize,
}

impl Position {
    /// The column number nats-server reports: a byte offset that is 0-based on the first
    /// line of a file and 1-based on every later line (the reference measures from the
    /// preceding newline).
    pub fn reference_column(&self) -> usize {
        if self.line <= 1 {
            self.column.saturating_sub(1)
        } else {
            self.column
        }
    }

    /// The file name as displayed in messages ("" when parsing a string).
    pub fn file_display(&self) -> String {
        match &self.file {
            Some(p) => p.display().to_string(),
            None => String::new(),
        }
    }
}

impl fmt::Display for Position {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.file_display(), self.line, self.reference_column())
    }
}

/// A calendar time in UTC written as an unquoted ISO 8601 Zulu literal
/// (`2016-05-04T18:53:41Z`). Always a valid date and time of day.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DateTime {
    pub year: u16,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl DateTime {
    /// Builds a date-time, checking the ranges the reference checks (Gregorian calendar,
    /// no leap seconds). `None` when out of range.
    pub fn new(year: u16, month: u8, day: u8, hour: u8, minute: u8, second: u8) -> Option<DateTime> {
        if year > 9999 || !(1..=12).contains(&month) || day == 0 || day > days_in_month(year, month) {
            return None;
        }
        if hour > 23 || minute > 59 || second > 59 {
            return None;
        }
        Some(DateTime {
            year,
            month,
            day,
            hour,
            minute,
            second,
        })
    }
}

fn days_in_month(year: u16, month: u8) -> u8 {
    match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        _ => {
            let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
            if leap {
                29
            } else {
                28
            }
        }
    }
}

impl fmt::Display for DateTime {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}Z",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        )
    }
}

/// What a [`Value`] holds.
#[derive(Clone, Debug, PartialEq)]
pub enum ValueKind {
    /// Quoted, bare and block strings, and durations such as `"2s"` (kept as written).
    String(String),
    /// Integers, with size suffixes already applied (`1K` = 1000, `1KB` = 1024).
    Integer(i64),
    Float(f64),
    /// `true/false/yes/no/on/off`, any case.
    Bool(bool),
    DateTime(DateTime),
    Array(Vec<Value>),
    Map(Map),
}

/// One value of the configuration tree with where it was written.
///
/// Equality compares the data only: positions and the used-as-variable flag are metadata.
#[derive(Clone, Debug)]
pub struct Value {
    pub kind: ValueKind,
    /// Where the value starts (for quoted strings: the first character inside the quotes;
    /// for a value taken from a variable: the `$` of the reference).
    pub pos: Position,
    /// Set on a map entry's value when a later `$name` reference used it. nats-server does
    /// not report such keys as unknown fields.
    pub used_as_variable: bool,
}

impl PartialEq for Value {
    fn eq(&self, other: &Value) -> bool {
        self.kind == other.kind
    }
}

impl Value {
    /// A value with a position and the used-as-variable flag cleared.
    pub fn new(kind: ValueKind, pos: Position) -> Value {
        Value {
            kind,
            pos,
            used_as_variable: false,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            ValueKind::String(s) => Some(s),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self.kind {
            ValueKind::Integer(i) => Some(i),
            _ => None,
        }
    }

    pub fn as_f64(&self) -> Option<f64> {
        match self.kind {
            ValueKind::Float(f) => Some(f),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self.kind {
            ValueKind::Bool(b) => Some(b),
            _ => None,
        }
    }

    pub fn as_datetime(&self) -> Option<DateTime> {
        match self.kind {
            ValueKind::DateTime(d) => Some(d),
            _ => None,
        }
    }

    pub fn as_array(&self) -> Option<&[Value]> {
        match &self.kind {
            ValueKind::Array(a) => Some(a),
            _ => None,
        }
    }

    pub fn as_map(&self) -> Option<&Map> {
        match &self.kind {
            ValueKind::Map(m) => Some(m),
            _ => None,
        }
    }

    /// The Go type name nats-server prints with `%T` in its "unsupported type" errors.
    pub fn go_type_name(&self) -> &'static str {
        match self.kind {
            ValueKind::String(_) => "string",
            ValueKind::Integer(_) => "int64",
            ValueKind::Float(_) => "float64",
            ValueKind::Bool(_) => "bool",
            ValueKind::DateTime(_) => "time.Time",
            ValueKind::Array(_) => "[]interface {}",
            ValueKind::Map(_) => "map[string]interface {}",
        }
    }

    /// (depth, approximate heap cost in bytes) of this value, used to bound variable
    /// expansion.
    pub(crate) fn measure(&self) -> (usize, usize) {
        let node = std::mem::size_of::<Value>();
        match &self.kind {
            ValueKind::String(s) => (0, node.saturating_add(s.len())),
            ValueKind::Array(items) => {
                let mut depth = 0;
                let mut cost = node;
                for item in items {
                    let (d, c) = item.measure();
                    depth = depth.max(d);
                    cost = cost.saturating_add(c);
                }
                (depth + 1, cost)
            }
            ValueKind::Map(map) => {
                let mut depth = 0;
                let mut cost = node;
                for (key, entry) in map.iter() {
                    let (d, c) = entry.value.measure();
                    depth = depth.max(d);
                    cost = cost.saturating_add(c).saturating_add(key.len() + node);
                }
                (depth + 1, cost)
            }
            _ => (0, node),
        }
    }

    /// Sets the position of this value and of everything inside it.
    pub(crate) fn set_positions(&mut self, pos: &Position) {
        self.pos = pos.clone();
        match &mut self.kind {
            ValueKind::Array(items) => items.iter_mut().for_each(|v| v.set_positions(pos)),
            ValueKind::Map(map) => {
                for entry in map.entries.values_mut() {
                    entry.key_pos = pos.clone();
                    entry.value.set_positions(pos);
                }
            }
            _ => {}
        }
    }
}

/// A map entry: the key's position and the value. Equality compares the values only.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Where the key was written (for quoted keys: the first character inside the quotes).
    /// nats-server reports errors about an entry at this position.
    pub key_pos: Position,
    pub value: Value,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Entry) -> bool {
        self.value == other.value
    }
}

/// A map with keys kept as written and in the order first written. A key written twice
/// keeps its first place but takes the last value and position, as the reference does.
/// Equality ignores order and positions.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Map {
    entries: IndexMap<String, Entry>,
}

impl Map {
    pub fn new() -> Map {
        Map::default()
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The value under exactly `key`.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.entries.get(key).map(|e| &e.value)
    }

    /// The entry under exactly `key`.
    pub fn get_entry(&self, key: &str) -> Option<&Entry> {
        self.entries.get(key)
    }

    pub(crate) fn get_entry_mut(&mut self, key: &str) -> Option<&mut Entry> {
        self.entries.get_mut(key)
    }

    /// The first entry (in written order) whose key equals `key` ignoring ASCII case, with
    /// the key as written. nats-server lower-cases most keys before matching them.
    pub fn get_ignore_case(&self, key: &str) -> Option<(&str, &Entry)> {
        self.entries
            .iter()
            .find(|(k, _)| k.eq_ignore_ascii_case(key))
            .map(|(k, e)| (k.as_str(), e))
    }

    /// The value of [`Map::get_ignore_case`].
    pub fn value_ignore_case(&self, key: &str) -> Option<&Value> {
        self.get_ignore_case(key).map(|(_, e)| &e.value)
    }

    pub fn contains_key(&self, key: &str) -> bool {
        self.entries.contains_key(key)
    }

    /// Entries in written order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Entry)> {
        self.entries.iter().map(|(k, e)| (k.as_str(), e))
    }

    /// Keys in written order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.entries.keys().map(String::as_str)
    }

    /// Sets `key`, returning the entry it replaces. A replaced key keeps its place.
    pub fn insert(&mut self, key: impl Into<String>, key_pos: Position, value: Value) -> Option<Entry> {
        self.entries.insert(key.into(), Entry { key_pos, value })
    }

    /// Removes `key`, keeping the order of the others.
    pub fn remove(&mut self, key: &str) -> Option<Entry> {
        self.entries.shift_remove(key)
    }
}

impl<'a> IntoIterator for &'a Map {
    type Item = (&'a String, &'a Entry);
    type IntoIter = indexmap::map::Iter<'a, String, Entry>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.iter()
    }
}

impl IntoIterator for Map {
    type Item = (String, Entry);
    type IntoIter = indexmap::map::IntoIter<String, Entry>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}
