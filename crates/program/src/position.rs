//! Mapping positions in the script the VM runs back to the user's program.
//!
//! The script differs from what the user wrote in three ways, each undone
//! here: text inserted on a line (the wrapper's prefix on line 1, a
//! `return ` before a trailing expression, `return (`/`)` around a
//! multi-line `export default`), and, for TypeScript, the whole script being
//! generated code, mapped back through the code generator's source map. Line
//! breaks are never added or removed, so lines map one to one except through
//! the source map.
//!
//! Columns reported to users are 1-based and count characters (Unicode
//! scalar values) on the user's line; QuickJS reports byte columns, the
//! source map UTF-16 columns, and both are converted.

/// Text inserted into a line: `len` bytes starting at byte column `at`
/// (0-based, in the text after the insertion) of line `line` (1-based).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Insert {
    pub line: u32,
    pub at: u32,
    pub len: u32,
}

/// The insertions made into one text, in text order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shifts(Vec<Insert>);

impl Shifts {
    pub(crate) fn push(&mut self, insert: Insert) {
        self.0.push(insert);
    }

    /// The byte column (0-based) before the insertions of the byte column
    /// `col` on `line`. A column inside inserted text maps to where the
    /// insertion was made.
    pub(crate) fn undo(&self, line: u32, mut col: u32) -> u32 {
        for ins in self.0.iter().rev().filter(|i| i.line == line) {
            if col >= ins.at + ins.len {
                col -= ins.len;
            } else if col >= ins.at {
                col = ins.at;
            }
        }
        col
    }
}

/// One mapping of the source map: generated (line, UTF-16 column) to
/// original (line, UTF-16 column), all 0-based.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Mapping {
    pub gen_line: u32,
    pub gen_col: u32,
    pub src_line: u32,
    pub src_col: u32,
}

/// The code generator's source map with the two texts it relates.
#[derive(Debug, Clone)]
pub(crate) struct SourceMapped {
    /// The generated JavaScript (the script without the wrapper).
    pub generated: String,
    /// The TypeScript it was generated from (the user's text after edits).
    pub original: String,
    /// Sorted by generated position.
    pub mappings: Vec<Mapping>,
}

/// Where each position of the script the VM runs comes from in the user's
/// program. Owned by the normalised program; used for error positions and
/// stack text.
#[derive(Debug, Clone, Default)]
pub struct PositionMap {
    /// Insertions into the script (the wrapper, and for JavaScript a
    /// trailing `return `).
    pub(crate) runtime: Shifts,
    /// For TypeScript: the generated code's source map.
    pub(crate) mapped: Option<Box<SourceMapped>>,
    /// Insertions into the user's text before it was parsed as a module
    /// (`return ` for `export default` over lines or a trailing expression).
    pub(crate) edits: Shifts,
    /// The user's program after the fence was stripped (same lines).
    pub(crate) user: String,
}

impl PositionMap {
    /// The user's (line, column), both 1-based, column in characters, of the
    /// script's (line, column) as QuickJS reports them (1-based, bytes).
    pub fn user_position(&self, line: u32, column: u32) -> (u32, u32) {
        let col = self.runtime.undo(line, column.saturating_sub(1));
        let (line, col) = match &self.mapped {
            None => (line, col),
            Some(m) => m.original_position(line, col),
        };
        let col = self.edits.undo(line, col);
        (line, char_column(&self.user, line, col))
    }

    /// [`PositionMap::user_position`] of where an error was thrown: a
    /// position inside a `throw` statement's argument (where QuickJS places
    /// an error made there, e.g. at a call in a template literal) becomes
    /// the statement's start (`throw_site.rs`).
    pub fn thrown_at(&self, line: u32, column: u32) -> (u32, u32) {
        let (line, column) = self.user_position(line, column);
        super::throw_site::throw_statement_start(&self.user, line, column).unwrap_or((line, column))
    }

    /// The user's (line, column) of a byte offset in the user's text after
    /// edits (a parse error in the module parse of that text).
    pub(crate) fn edited_offset(&self, text: &str, offset: u32) -> (u32, u32) {
        let (line, col) = line_col(text, offset);
        let col = self.edits.undo(line, col);
        (line, char_column(&self.user, line, col))
    }
}

impl SourceMapped {
    /// The original (line 1-based, byte column 0-based) of a generated one.
    fn original_position(&self, line: u32, col: u32) -> (u32, u32) {
        let gen_line = line.saturating_sub(1);
        let gen_col = utf16_column(line_text(&self.generated, line), col);
        let key = (gen_line, gen_col);
        let idx = self.mappings.partition_point(|m| (m.gen_line, m.gen_col) <= key);
        let Some(m) = idx.checked_sub(1).map(|i| self.mappings[i]).or_else(|| self.mappings.first().copied())
        else {
            return (line, col);
        };
        let src_line = m.src_line + 1;
        (src_line, byte_column(line_text(&self.original, src_line), m.src_col))
    }
}

/// (line 1-based, byte column 0-based) of byte `offset` in `text`.
pub(crate) fn line_col(text: &str, offset: u32) -> (u32, u32) {
    let offset = (offset as usize).min(text.len());
    let before = &text.as_bytes()[..offset];
    let line = before.iter().filter(|&&b| b == b'\n').count() as u32 + 1;
    let start = before.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    (line, (offset - start) as u32)
}

/// The text of line `line` (1-based) without its line break; empty past the end.
fn line_text(text: &str, line: u32) -> &str {
    let l = text.split('\n').nth(line.saturating_sub(1) as usize).unwrap_or("");
    l.strip_suffix('\r').unwrap_or(l)
}

/// 1-based character column of byte column `col` (0-based) on `line`.
pub(crate) fn char_column(text: &str, line: u32, col: u32) -> u32 {
    let l = line_text(text, line);
    let mut b = (col as usize).min(l.len());
    while !l.is_char_boundary(b) {
        b -= 1;
    }
    l[..b].chars().count() as u32 + 1 + (col as usize).saturating_sub(l.len()) as u32
}

/// UTF-16 column of byte column `col` on the line `l`.
fn utf16_column(l: &str, col: u32) -> u32 {
    let mut b = (col as usize).min(l.len());
    while !l.is_char_boundary(b) {
        b -= 1;
    }
    l[..b].encode_utf16().count() as u32
}

/// Byte column of UTF-16 column `col16` on the line `l`.
fn byte_column(l: &str, col16: u32) -> u32 {
    let mut units = 0u32;
    for (i, c) in l.char_indices() {
        if units >= col16 {
            return i as u32;
        }
        units += c.len_utf16() as u32;
    }
    l.len() as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inserts_are_undone_right_to_left() {
        let mut s = Shifts::default();
        s.push(Insert { line: 1, at: 0, len: 14 });
        s.push(Insert { line: 1, at: 20, len: 7 });
        assert_eq!(s.undo(1, 14), 0);
        assert_eq!(s.undo(1, 5), 0);
        assert_eq!(s.undo(1, 22), 6);
        assert_eq!(s.undo(1, 30), 9);
        assert_eq!(s.undo(2, 30), 30);
    }

    #[test]
    fn columns_count_characters() {
        let map = PositionMap { user: "é = 1;\nconst ünï = x".into(), ..Default::default() };
        assert_eq!(map.user_position(2, 12), (2, 10));
        assert_eq!(map.user_position(1, 4), (1, 3));
    }

    #[test]
    fn line_col_of_offsets() {
        assert_eq!(line_col("ab\ncd", 4), (2, 1));
        assert_eq!(line_col("ab\ncd", 0), (1, 0));
        assert_eq!(line_col("ab", 99), (1, 2));
    }

    #[test]
    fn utf16_and_bytes() {
        assert_eq!(utf16_column("a😀b", 5), 3);
        assert_eq!(byte_column("a😀b", 3), 5);
    }
}
