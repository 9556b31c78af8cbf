//! Splits ovs-ofctl text into `key`, `key=value`, `key:value` and `key(value)` tokens the way
//! ofputil_parse_key_value does: tokens end at a comma or white space outside parentheses.

/// One token; `value` is `None` for a bare keyword such as `ip` or `drop`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Token<'a> {
    pub key: &'a str,
    pub value: Option<&'a str>,
    /// The whole token as written, for error messages.
    pub text: &'a str,
}

fn is_delimiter(c: char) -> bool {
    matches!(c, ',' | ' ' | '\t' | '\r' | '\n')
}

/// Tokens of `s`; unbalanced parentheses give `Err` with the offending token.
pub(crate) fn tokens(s: &str) -> Result<Vec<Token<'_>>, String> {
    let mut out = Vec::new();
    let mut rest = s;
    loop {
        rest = rest.trim_start_matches(is_delimiter);
        if rest.is_empty() {
            return Ok(out);
        }
        let (token, tail) = next_token(rest)?;
        out.push(token);
        rest = tail;
    }
}

fn next_token(s: &str) -> Result<(Token<'_>, &str), String> {
    let key_end = s
        .find(|c: char| is_delimiter(c) || matches!(c, '=' | ':' | '('))
        .unwrap_or(s.len());
    let key = &s[..key_end];
    let after_key = &s[key_end..];
    let (value, consumed) = match after_key.chars().next() {
        Some('=') | Some(':') => {
            let body = &after_key[1..];
            let len = value_len(body, false).ok_or_else(|| unbalanced(s))?;
            (Some(&body[..len]), key_end + 1 + len)
        }
        Some('(') => {
            let body = &after_key[1..];
            let len = value_len(body, true).ok_or_else(|| unbalanced(s))?;
            // Skip the closing parenthesis too.
            (Some(&body[..len]), key_end + 1 + len + 1)
        }
        _ => (None, key_end),
    };
    let consumed = consumed.min(s.len());
    let token = Token {
        key,
        value,
        text: &s[..consumed],
    };
    Ok((token, &s[consumed..]))
}

/// Length of a value: up to a delimiter (or, inside `key(...)`, the closing parenthesis) that
/// is not nested in parentheses. `None` when parentheses do not balance.
fn value_len(s: &str, in_parens: bool) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' if depth > 0 => depth -= 1,
            ')' if in_parens => return Some(i),
            c if depth == 0 && !in_parens && is_delimiter(c) => return Some(i),
            _ => {}
        }
    }
    (depth == 0 && !in_parens).then_some(s.len())
}

fn unbalanced(s: &str) -> String {
    let end = s.find(is_delimiter).unwrap_or(s.len());
    format!("unbalanced parentheses in `{}`", &s[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kv(s: &str) -> Vec<(&str, Option<&str>)> {
        tokens(s)
            .unwrap()
            .into_iter()
            .map(|t| (t.key, t.value))
            .collect()
    }

    #[test]
    fn splits_like_ovs() {
        assert_eq!(
            kv("table=0, priority=200, in_port=1, arp, arp_sha=0a:58:0a:81:00:05"),
            vec![
                ("table", Some("0")),
                ("priority", Some("200")),
                ("in_port", Some("1")),
                ("arp", None),
                ("arp_sha", Some("0a:58:0a:81:00:05")),
            ]
        );
        assert_eq!(
            kv("load:42->NXM_NX_REG0[], note:01.02,write_actions(output:1,LOCAL),drop"),
            vec![
                ("load", Some("42->NXM_NX_REG0[]")),
                ("note", Some("01.02")),
                ("write_actions", Some("output:1,LOCAL")),
                ("drop", None),
            ]
        );
        assert!(tokens("write_actions(output:1").is_err());
        assert!(tokens("a=b)").is_ok());
    }
}
