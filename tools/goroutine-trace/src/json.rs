//! Just enough JSON writing for the two outputs: escaped strings (also safe
//! inside an HTML `<script>` element) and number arrays.

use std::io::{self, Write};

/// Writes `s` as a JSON string literal. `<`, `>` and `&` are escaped as
/// `\u003c` etc. so the text can never close a `<script>` element.
pub fn write_str<W: Write + ?Sized>(w: &mut W, s: &str) -> io::Result<()> {
    w.write_all(b"\"")?;
    let bytes = s.as_bytes();
    let mut start = 0;
    for (i, &c) in bytes.iter().enumerate() {
        let esc: Option<&[u8]> = match c {
            b'"' => Some(b"\\\""),
            b'\\' => Some(b"\\\\"),
            b'\n' => Some(b"\\n"),
            b'\r' => Some(b"\\r"),
            b'\t' => Some(b"\\t"),
            b'<' => Some(b"\\u003c"),
            b'>' => Some(b"\\u003e"),
            b'&' => Some(b"\\u0026"),
            0..=0x1f => None,
            _ => continue,
        };
        w.write_all(&bytes[start..i])?;
        match esc {
            Some(e) => w.write_all(e)?,
            None => write!(w, "\\u{:04x}", c)?,
        }
        start = i + 1;
    }
    w.write_all(&bytes[start..])?;
    w.write_all(b"\"")
}

/// The JSON string literal of `s`.
pub fn string(s: &str) -> String {
    let mut v = Vec::with_capacity(s.len() + 2);
    write_str(&mut v, s).expect("writing to a Vec cannot fail");
    String::from_utf8(v).expect("escaping keeps UTF-8")
}

/// Writes `[a,b,c]`.
pub fn write_nums<W: Write + ?Sized, I: IntoIterator<Item = u64>>(
    w: &mut W,
    it: I,
) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, x) in it.into_iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{x}")?;
    }
    w.write_all(b"]")
}

/// Writes `[a,b,c]` of signed numbers.
pub fn write_inums<W: Write + ?Sized, I: IntoIterator<Item = i64>>(
    w: &mut W,
    it: I,
) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, x) in it.into_iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        write!(w, "{x}")?;
    }
    w.write_all(b"]")
}

/// Writes a time in ns as microseconds with three decimals (the Trace Event
/// Format's unit), exactly: no float rounding.
pub fn write_us<W: Write + ?Sized>(w: &mut W, ns: u64) -> io::Result<()> {
    write!(w, "{}.{:03}", ns / 1000, ns % 1000)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strings_are_escaped_for_json_and_script() {
        assert_eq!(string("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(string("</script>"), r#""\u003c/script\u003e""#);
        assert_eq!(string("x\u{1}\n&ü"), r#""x\u0001\n\u0026ü""#);
    }

    #[test]
    fn microseconds_are_exact() {
        let mut v = Vec::new();
        write_us(&mut v, 1_234_567_891_234).unwrap();
        write_us(&mut v, 5).unwrap();
        assert_eq!(String::from_utf8(v).unwrap(), "1234567891.2340.005");
    }
}
