//! Log-safe display of untrusted text (docs/MATH.md §10): rejection
//! messages quote what a client sent (unknown field names, query ids), and
//! a client must not be able to forge log lines or flood the log with it.
//!
//! [`Untrusted`] writes its text with every control character (newlines,
//! carriage returns, ANSI escapes, ...), every format character (Unicode
//! category Cf: bidi marks and isolates such as U+061C and U+2066..2069,
//! invisible operators U+2061..2064, the soft hyphen U+00AD, U+180E, the
//! interlinear annotation marks U+FFF9..FFFB, the tag characters
//! U+E0000..E007F, ...), the line and paragraph separators and the
//! invisible Hangul fillers escaped as `\u{..}` (`\n`, `\r`, `\t` as
//! such), a backslash doubled (`\\`, so that the escapes cannot be forged:
//! the text `x\nline 2` shows as `x\\nline 2`), and cuts it after
//! [`MAX_UNTRUSTED_CHARS`] characters, saying how many bytes were left out.
//!
//! ```
//! use geopriv::server::escape::Untrusted;
//!
//! let forged = "x\nline 1: report accepted\n\x1b[2J";
//! assert_eq!(
//!     Untrusted(forged).to_string(),
//!     "x\\nline 1: report accepted\\n\\u{1b}[2J"
//! );
//! assert!(Untrusted(&"a".repeat(10_000)).to_string().len() < 300);
//! ```

use core::fmt;

/// Characters of untrusted text shown before it is cut.
pub const MAX_UNTRUSTED_CHARS: usize = 200;

/// Untrusted text, displayed escaped and cut (module docs).
#[derive(Clone, Copy, Debug)]
pub struct Untrusted<'a>(pub &'a str);

/// Whether `c` is escaped: a control (Cc), a format character (every Cf
/// of Unicode 15.1, the whole tag block included), a line or paragraph
/// separator, or an invisible filler.
pub fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{ad}'
                | '\u{600}'..='\u{605}'
                | '\u{61c}'
                | '\u{6dd}'
                | '\u{70f}'
                | '\u{890}'..='\u{891}'
                | '\u{8e2}'
                | '\u{115f}'..='\u{1160}'
                | '\u{180e}'
                | '\u{200b}'..='\u{200f}'
                | '\u{2028}'..='\u{202e}'
                | '\u{2060}'..='\u{2064}'
                | '\u{2066}'..='\u{206f}'
                | '\u{3164}'
                | '\u{feff}'
                | '\u{ffa0}'
                | '\u{fff9}'..='\u{fffb}'
                | '\u{110bd}'
                | '\u{110cd}'
                | '\u{13430}'..='\u{1343f}'
                | '\u{1bca0}'..='\u{1bca3}'
                | '\u{1d173}'..='\u{1d17a}'
                | '\u{e0000}'..='\u{e007f}'
        )
}

impl fmt::Display for Untrusted<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (shown, (i, c)) in self.0.char_indices().enumerate() {
            if shown == MAX_UNTRUSTED_CHARS {
                return write!(f, "... ({} more bytes)", self.0.len() - i);
            }
            match c {
                '\n' => f.write_str("\\n")?,
                '\r' => f.write_str("\\r")?,
                '\t' => f.write_str("\\t")?,
                '\\' => f.write_str("\\\\")?,
                c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
    }
}

/// A file path from the command line or a configuration, displayed like
/// [`Untrusted`] text (lossy UTF-8, controls and format characters
/// escaped, cut): a path is chosen by whoever runs the tool, and may hold
/// a newline or terminal escapes.
///
/// ```
/// use geopriv::server::escape::UntrustedPath;
/// let p = std::path::Path::new("out\n\u{1b}[2Jx.json");
/// assert_eq!(UntrustedPath(p).to_string(), "out\\n\\u{1b}[2Jx.json");
/// ```
#[cfg(feature = "std")]
#[derive(Clone, Copy, Debug)]
pub struct UntrustedPath<'a>(pub &'a std::path::Path);

#[cfg(feature = "std")]
impl fmt::Display for UntrustedPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", Untrusted(&self.0.to_string_lossy()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::ToString;

    #[test]
    fn escapes_and_cuts() {
        assert_eq!(Untrusted("plain text").to_string(), "plain text");
        assert_eq!(
            Untrusted("a\u{202e}b\u{7f}").to_string(),
            "a\\u{202e}b\\u{7f}"
        );
        // Format characters (category Cf) and backslashes (issue 19 item 13).
        for c in [
            '\u{61c}',
            '\u{2061}',
            '\u{2064}',
            '\u{ad}',
            '\u{180e}',
            '\u{fff9}',
            '\u{e0001}',
            '\u{e0041}',
            '\u{e007f}',
            '\u{2066}',
            '\u{206f}',
            '\u{13439}',
        ] {
            let s = Untrusted(&alloc::format!("a{c}b")).to_string();
            assert_eq!(s, alloc::format!("a\\u{{{:x}}}b", c as u32));
        }
        assert_eq!(
            Untrusted("x\\nline 2: accepted").to_string(),
            "x\\\\nline 2: accepted"
        );
        assert_eq!(Untrusted("x\nline 2").to_string(), "x\\nline 2");
        let long = "é".repeat(300);
        let s = Untrusted(&long).to_string();
        assert!(s.ends_with("... (200 more bytes)"), "{s}");
    }
}
