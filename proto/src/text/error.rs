//! Why ovs-ofctl text was refused, and the helpers every reader of that text (flows, actions,
//! groups) uses to say so: one module that the parsers import, so that the action modules,
//! which read their own arguments, do not import the flow parser that imports them.

use crate::text::lexer::Token;
use crate::text::value::parse_uint;

/// Why a flow text was refused; every variant names the token at fault.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ParseError {
    #[error("unknown keyword `{0}`")]
    UnknownKeyword(String),
    #[error("`{token}`: {reason}")]
    BadToken { token: String, reason: String },
    #[error("`{token}` needs `{needs}` in the match (OpenFlow 1.3 prerequisite)")]
    Prerequisite { token: String, needs: &'static str },
    #[error("unsupported action `{0}`")]
    UnknownAction(String),
    #[error("a flow to add or modify needs `actions=...` (use `actions=drop` to drop)")]
    MissingActions,
    #[error("`{0}`: a delete takes no actions")]
    UnexpectedActions(String),
    #[error("{0}")]
    Syntax(String),
    #[error("the actions do not fit the match: {0}")]
    Inconsistent(String),
}

/// The token `token` is refused for `reason`.
pub(crate) fn bad(token: &Token<'_>, reason: impl Into<String>) -> ParseError {
    ParseError::BadToken {
        token: token.text.to_string(),
        reason: reason.into(),
    }
}

/// `text` (decimal, `0x` hex or `-1`) as a number that fits `T`, or an error naming `token`.
pub(crate) fn number<T: TryFrom<u64>>(token: &Token<'_>, text: &str) -> Result<T, ParseError> {
    parse_uint(text)
        .and_then(|v| T::try_from(v).ok())
        .ok_or_else(|| bad(token, format!("`{text}` is not a number in range")))
}
