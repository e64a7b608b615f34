//! Log-safe display of untrusted text (docs/MATH.md §10): rejection
//! messages quote what a client sent (unknown field names, query ids), and
//! a client must not be able to forge log lines or flood the log with it.
//!
//! [`Untrusted`] writes its text with every control character (newlines,
//! carriage returns, ANSI escapes, ...) and every invisible bidirectional
//! or line-separator character escaped as `\u{..}` (`\n`, `\r`, `\t` as
//! such), and cuts it after [`MAX_UNTRUSTED_CHARS`] characters, saying how
//! many bytes were left out.
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

fn needs_escape(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2066}'..='\u{2069}' | '\u{feff}'
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
                c if needs_escape(c) => write!(f, "\\u{{{:x}}}", c as u32)?,
                c => fmt::Write::write_char(f, c)?,
            }
        }
        Ok(())
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
        let long = "é".repeat(300);
        let s = Untrusted(&long).to_string();
        assert!(s.ends_with("... (200 more bytes)"), "{s}");
    }
}
