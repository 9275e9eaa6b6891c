//! The selector grammar (2014 `pkg/labels/selector.go`'s `ParseSelector`, extended with the
//! set-based forms of 2015).

use std::str::FromStr;

use super::{Operator, ParseErrorKind, ParseSelectorError, Requirement, Selector};

/// Characters that start an operator in the equality forms (or an unknown operator).
const OPERATOR_CHARS: [char; 4] = ['=', '!', '<', '>'];

fn is_operator_char(c: char) -> bool {
    OPERATOR_CHARS.contains(&c)
}

fn is_special(c: char) -> bool {
    is_operator_char(c) || c == '(' || c == ')'
}

pub(super) fn parse_selector(input: &str) -> Result<Selector, ParseErrorKind> {
    if input.trim().is_empty() {
        return Ok(Selector::everything());
    }
    let mut requirements = Vec::new();
    for (offset, piece) in split_requirements(input) {
        if piece.trim().is_empty() {
            return Err(ParseErrorKind::EmptyRequirement { position: offset });
        }
        requirements.push(parse_requirement(piece, offset)?);
    }
    Ok(Selector::from_requirements(requirements))
}

/// Splits `input` at commas outside parentheses, returning each piece with its byte offset.
/// An unclosed parenthesis makes the rest of the input one piece, which the requirement
/// parser then reports.
fn split_requirements(input: &str) -> Vec<(usize, &str)> {
    let mut pieces = Vec::new();
    let mut depth = 0usize;
    let mut start = 0;
    for (i, c) in input.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                pieces.push((start, &input[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    pieces.push((start, &input[start..]));
    pieces
}

/// Returns the whitespace-separated words of `text` with their byte offsets.
fn words(text: &str) -> Vec<(usize, &str)> {
    let mut words = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        match (c.is_whitespace(), start) {
            (true, Some(s)) => {
                words.push((s, &text[s..i]));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        words.push((s, &text[s..]));
    }
    words
}

/// Returns the single word of `text` (`""` if it is blank); `base` is `text`'s offset in
/// the input, for the error on a second word.
fn single_word(text: &str, base: usize) -> Result<&str, ParseErrorKind> {
    let words = words(text);
    if let Some(&(at, token)) = words.get(1) {
        return Err(ParseErrorKind::UnexpectedToken {
            token: token.to_owned(),
            position: base + at,
        });
    }
    Ok(words.first().map_or("", |&(_, word)| word))
}

/// Returns the token starting at `text[at..]` that begins with a special character: a run of
/// operator characters, or a single parenthesis.
fn special_token(text: &str, at: usize) -> &str {
    let rest = &text[at..];
    if rest.starts_with(is_operator_char) {
        let end = rest.find(|c| !is_operator_char(c)).unwrap_or(rest.len());
        &rest[..end]
    } else {
        &rest[..1]
    }
}

/// Parses one non-blank requirement; `offset` is the piece's byte offset in the input.
fn parse_requirement(piece: &str, offset: usize) -> Result<Requirement, ParseErrorKind> {
    let base = offset + (piece.len() - piece.trim_start().len());
    let body = piece.trim();

    if let Some(rest) = body.strip_prefix('!') {
        if !rest.starts_with('=') {
            return parse_does_not_exist(rest, base + 1);
        }
    }

    match body.find(is_special) {
        Some(at) if body[at..].starts_with(is_operator_char) => {
            let operator_text = special_token(body, at);
            let operator = match operator_text {
                "=" => Operator::Equals,
                "==" => Operator::DoubleEquals,
                "!=" => Operator::NotEquals,
                _ => {
                    return Err(ParseErrorKind::UnknownOperator {
                        piece: operator_text.to_owned(),
                    })
                }
            };
            let value_at = at + operator_text.len();
            let value = single_word(&body[value_at..], base + value_at)?;
            let key = body[..at].trim();
            Requirement::build(key.to_owned(), operator, vec![value.to_owned()])
        }
        Some(at) if body[at..].starts_with('(') => parse_set_based(body, at, base),
        Some(at) => Err(ParseErrorKind::UnexpectedToken {
            token: special_token(body, at).to_owned(),
            position: base + at,
        }),
        None => parse_exists(body, base),
    }
}

/// Parses `!k`; `rest` is what follows the `!` and starts at byte `base` of the input.
fn parse_does_not_exist(rest: &str, base: usize) -> Result<Requirement, ParseErrorKind> {
    if let Some(at) = rest.find(is_special) {
        return Err(ParseErrorKind::UnexpectedToken {
            token: special_token(rest, at).to_owned(),
            position: base + at,
        });
    }
    let key = single_word(rest, base)?;
    Requirement::build(key.to_owned(), Operator::DoesNotExist, Vec::new())
}

/// Parses a requirement without special characters: `k`, or a set-based form missing its
/// value list.
fn parse_exists(body: &str, base: usize) -> Result<Requirement, ParseErrorKind> {
    let words = words(body);
    let operator_word = words
        .iter()
        .enumerate()
        .skip(1)
        .find(|(_, (_, word))| matches!(*word, "in" | "notin"));
    if let Some((_, &(at, _))) = operator_word {
        return Err(ParseErrorKind::MissingValues {
            key: body[..at].trim().to_owned(),
        });
    }
    let key = single_word(body, base)?;
    Requirement::build(key.to_owned(), Operator::Exists, Vec::new())
}

/// Parses `k in (a,b)` or `k notin (a,b)`; `open` is the index of `(` in `body`, which
/// starts at byte `base` of the input.
fn parse_set_based(body: &str, open: usize, base: usize) -> Result<Requirement, ParseErrorKind> {
    let head = words(&body[..open]);
    // `k (a)` lacks an operator; `in (a)` has one and an empty key, reported by validation.
    let (operator_at, operator_word) = match head.as_slice() {
        [.., last] if head.len() >= 2 || matches!(last.1, "in" | "notin") => *last,
        _ => {
            return Err(ParseErrorKind::UnexpectedToken {
                token: "(".to_owned(),
                position: base + open,
            })
        }
    };
    let operator = match operator_word {
        "in" => Operator::In,
        "notin" => Operator::NotIn,
        _ => {
            return Err(ParseErrorKind::UnknownOperator {
                piece: operator_word.to_owned(),
            })
        }
    };
    let key = body[..operator_at].trim().to_owned();

    let inner_at = open + 1;
    let Some(close) = body[inner_at..].find(')').map(|i| inner_at + i) else {
        return Err(ParseErrorKind::UnclosedParenthesis { key });
    };
    let after_at = close + 1;
    if let Some(&(at, token)) = words(&body[after_at..]).first() {
        return Err(ParseErrorKind::UnexpectedToken {
            token: token.to_owned(),
            position: base + after_at + at,
        });
    }

    let inner = &body[inner_at..close];
    if inner.trim().is_empty() {
        return Err(ParseErrorKind::EmptyValueSet { key });
    }
    let mut values = Vec::new();
    let mut element_at = inner_at;
    for element in inner.split(',') {
        values.push(single_word(element, base + element_at)?.to_owned());
        element_at += element.len() + 1;
    }
    Requirement::build(key, operator, values)
}

/// Parses a selector.
///
/// Grammar: requirements separated by `,` (a comma inside parentheses belongs to a value
/// list), each one of `k=v`, `k==v`, `k!=v` (2014), or `k in (a,b)`, `k notin (a,b)`, `k`,
/// `!k` (2015 set-based). Whitespace is allowed around every token. An empty or
/// all-whitespace string is [`Selector::everything()`]. Unlike 2014's `ParseSelector`,
/// empty requirements (`a=b,,c=d`, a trailing comma) are rejected instead of skipped.
impl FromStr for Selector {
    type Err = ParseSelectorError;

    fn from_str(input: &str) -> Result<Selector, ParseSelectorError> {
        parse_selector(input).map_err(|kind| ParseSelectorError {
            input: input.to_owned(),
            kind,
        })
    }
}
