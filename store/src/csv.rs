//! CSV out, for the statistics and the link export (RFC 4180: CRLF line ends, a field with a comma, quote or line
//! break in double quotes, quotes doubled). Values can come from visitors (referrer hosts) and users (titles), so a
//! text field that a spreadsheet would read as a formula (starting with `=`, `+`, `-`, `@`, a tab or a carriage
//! return) gets a leading `'`, as OWASP advises against CSV injection. In the store because the API and the
//! dashboard both write the link export.

/// Appends one text field.
pub fn text(out: &mut String, value: &str) {
    let guard = matches!(
        value.as_bytes().first(),
        Some(b'=' | b'+' | b'-' | b'@' | b'\t' | b'\r')
    );
    let quote = value.contains([',', '"', '\r', '\n']);
    if quote {
        out.push('"');
    }
    if guard {
        out.push('\'');
    }
    for c in value.chars() {
        if c == '"' {
            out.push('"');
        }
        out.push(c);
    }
    if quote {
        out.push('"');
    }
}

/// Appends one record of text fields and a number, with its line end.
pub fn record(out: &mut String, texts: &[&str], number: i64) {
    for t in texts {
        text(out, t);
        out.push(',');
    }
    out.push_str(&number.to_string());
    out.push_str("\r\n");
}

/// Appends one record of text fields, with its line end.
pub fn row(out: &mut String, fields: &[&str]) {
    for (i, f) in fields.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        text(out, f);
    }
    out.push_str("\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(v: &str) -> String {
        let mut out = String::new();
        text(&mut out, v);
        out
    }

    #[test]
    fn escapes_and_guards() {
        assert_eq!(one("news.example"), "news.example");
        assert_eq!(one(""), "");
        assert_eq!(one("a,b"), "\"a,b\"");
        assert_eq!(one("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(one("line\nbreak"), "\"line\nbreak\"");
        assert_eq!(one("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        for f in ["+1", "-1", "@SUM(A1)", "\tx", "=1"] {
            assert!(one(f).starts_with('\''), "{f}");
        }
        let mut out = String::new();
        record(&mut out, &["country", "DE"], 3);
        assert_eq!(out, "country,DE,3\r\n");
        let mut out = String::new();
        row(&mut out, &["a", "", "-1", "x,y"]);
        assert_eq!(out, "a,,'-1,\"x,y\"\r\n");
    }
}
