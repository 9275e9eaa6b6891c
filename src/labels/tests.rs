//! Unit tests of sets, selectors, the parser and validation: tables and properties.

use super::validation::*;
use super::*;
use proptest::prelude::*;

fn set(pairs: &[(&str, &str)]) -> Set {
    pairs.iter().copied().collect()
}

#[track_caller]
fn check_parse(input: &str, expected_display: &str) {
    let selector: Selector = match input.parse() {
        Ok(selector) => selector,
        Err(err) => panic!("parsing {input:?} failed: {err}"),
    };
    assert_eq!(selector.to_string(), expected_display, "input {input:?}");
    let reparsed: Selector = expected_display.parse().unwrap();
    assert_eq!(reparsed, selector, "round trip of {input:?}");
}

#[track_caller]
fn check_parse_error(input: &str, expected: ParseErrorKind) {
    match input.parse::<Selector>() {
        Ok(selector) => panic!("{input:?} parsed as {selector:?}, expected {expected:?}"),
        Err(err) => {
            assert_eq!(err.input, input);
            assert_eq!(err.kind, expected, "input {input:?}");
        }
    }
}

#[track_caller]
fn check_matches(selector: &str, labels: &[(&str, &str)], expected: bool) {
    let parsed: Selector = selector.parse().unwrap();
    let labels = set(labels);
    assert_eq!(
        parsed.matches(&labels),
        expected,
        "selector {selector:?} on labels {labels}"
    );
}

fn invalid_key(key: &str, reason: &str) -> ParseErrorKind {
    ParseErrorKind::InvalidKey {
        key: key.to_owned(),
        reason: reason.to_owned(),
    }
}

fn invalid_value(key: &str, value: &str, reason: &str) -> ParseErrorKind {
    ParseErrorKind::InvalidValue {
        key: key.to_owned(),
        value: value.to_owned(),
        reason: reason.to_owned(),
    }
}

fn unexpected(token: &str, position: usize) -> ParseErrorKind {
    ParseErrorKind::UnexpectedToken {
        token: token.to_owned(),
        position,
    }
}

fn unknown_operator(piece: &str) -> ParseErrorKind {
    ParseErrorKind::UnknownOperator {
        piece: piece.to_owned(),
    }
}

#[test]
fn parses_every_form() {
    check_parse("", "");
    check_parse(" \t\n ", "");
    check_parse("a=b", "a=b");
    check_parse("a==b", "a==b");
    check_parse("a!=b", "a!=b");
    check_parse("a=", "a=");
    check_parse("a==", "a==");
    check_parse("a!=", "a!=");
    check_parse("a in (x,y)", "a in (x,y)");
    check_parse("a in (y,x,y)", "a in (x,y)");
    check_parse("a notin (x)", "a notin (x)");
    check_parse("a", "a");
    check_parse("!a", "!a");
    check_parse("example.com/app=web-1", "example.com/app=web-1");
    check_parse("k8s.io/a.b_c-d", "k8s.io/a.b_c-d");
    check_parse("!k8s.io/x", "!k8s.io/x");
    // Keywords are ordinary keys and values outside the operator position.
    check_parse("in", "in");
    check_parse("in in (in,notin)", "in in (in,notin)");
    check_parse("notin notin (x)", "notin notin (x)");
    check_parse("!in", "!in");
    check_parse("in=notin", "in=notin");
}

#[test]
fn tolerates_whitespace_around_every_token() {
    check_parse(" a = b , c in ( x , y ) ", "a=b,c in (x,y)");
    check_parse("a\t!=\tb", "a!=b");
    check_parse("a ==b", "a==b");
    check_parse("a = ", "a=");
    check_parse("! a", "!a");
    check_parse("  a  ", "a");
    check_parse("a in(x)", "a in (x)");
    check_parse("a notin  (x)", "a notin (x)");
    check_parse("a\nin\n(\nx\n)", "a in (x)");
}

#[test]
fn keeps_requirements_in_canonical_order() {
    check_parse("b=1,a=2", "a=2,b=1");
    check_parse("a!=x,a=y,a==z", "a=y,a==z,a!=x");
    check_parse("!a,a,a notin (x),a in (x)", "a in (x),a notin (x),a,!a");
    check_parse("a=b,a=b", "a=b");
    check_parse("a in (y),a in (x)", "a in (x),a in (y)");
    assert_eq!(
        "x=1,y in (a,b),!z".parse::<Selector>().unwrap(),
        "!z , y in (b,a), x=1".parse::<Selector>().unwrap()
    );
}

#[test]
fn rejects_malformed_selectors() {
    use ParseErrorKind::*;
    let key = |key: &str| key.to_owned();

    check_parse_error("a=b,,c=d", EmptyRequirement { position: 4 });
    check_parse_error("a=b,", EmptyRequirement { position: 4 });
    check_parse_error(",a=b", EmptyRequirement { position: 0 });
    check_parse_error("a=b, ,c", EmptyRequirement { position: 4 });

    check_parse_error("a in", MissingValues { key: key("a") });
    check_parse_error("a notin x", MissingValues { key: key("a") });
    check_parse_error("a in (x", UnclosedParenthesis { key: key("a") });
    check_parse_error("a in (x,b=c", UnclosedParenthesis { key: key("a") });
    check_parse_error("a in ()", EmptyValueSet { key: key("a") });
    check_parse_error("a notin ( )", EmptyValueSet { key: key("a") });

    check_parse_error("a<b", unknown_operator("<"));
    check_parse_error("a=>b", unknown_operator("=>"));
    check_parse_error("a>=b", unknown_operator(">="));
    check_parse_error("a===b", unknown_operator("==="));
    check_parse_error("a!b", unknown_operator("!"));
    check_parse_error("a foo (x)", unknown_operator("foo"));

    check_parse_error("!a=b", unexpected("=", 2));
    check_parse_error("!a!=b", unexpected("!=", 2));
    check_parse_error("!!a", unexpected("!", 1));
    check_parse_error("!a b", unexpected("b", 3));
    check_parse_error("a=b c", unexpected("c", 4));
    check_parse_error("x=1, a = b c", unexpected("c", 11));
    check_parse_error("a in (x) y", unexpected("y", 9));
    check_parse_error("a in (x y)", unexpected("y", 8));
    check_parse_error("a b", unexpected("b", 2));
    check_parse_error("(x)", unexpected("(", 0));
    check_parse_error("a (x)", unexpected("(", 2));
    check_parse_error("a)", unexpected(")", 1));

    let name_chars = format!("name part {REASON_NAME_CHARS}");
    check_parse_error("A B=c", invalid_key("A B", &name_chars));
    check_parse_error("-a=b", invalid_key("-a", &name_chars));
    check_parse_error("=b", invalid_key("", REASON_EMPTY));
    check_parse_error("!=b", invalid_key("", REASON_EMPTY));
    check_parse_error("!", invalid_key("", REASON_EMPTY));
    check_parse_error("in (x)", invalid_key("", REASON_EMPTY));
    check_parse_error(
        "Example.com/a",
        invalid_key(
            "Example.com/a",
            &format!("prefix part {REASON_SUBDOMAIN_CHARS}"),
        ),
    );

    check_parse_error("a=-b", invalid_value("a", "-b", REASON_VALUE_CHARS));
    check_parse_error("a=(b)", invalid_value("a", "(b)", REASON_VALUE_CHARS));
    check_parse_error("a in (x,-y)", invalid_value("a", "-y", REASON_VALUE_CHARS));
    check_parse_error("a in (x,)", invalid_value("a", "", REASON_EMPTY_IN_SET));
    check_parse_error("a in (,)", invalid_value("a", "", REASON_EMPTY_IN_SET));
    check_parse_error(
        &format!("a={}", "v".repeat(64)),
        invalid_value("a", &"v".repeat(64), "must be no more than 63 characters"),
    );
}

#[test]
fn parse_errors_display_the_input_and_the_piece() {
    let cases = [
        (
            "a=b,,c",
            r#"invalid selector "a=b,,c": empty requirement at byte 4"#,
        ),
        (
            "A B=c",
            r#"invalid selector "A B=c": invalid key "A B": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"#,
        ),
        ("a<b", r#"invalid selector "a<b": unknown operator "<""#),
        (
            "a=b c",
            r#"invalid selector "a=b c": unexpected "c" at byte 4"#,
        ),
        (
            "a in ()",
            r#"invalid selector "a in ()": empty value set for key "a""#,
        ),
    ];
    for (input, expected) in cases {
        let err = input.parse::<Selector>().unwrap_err();
        assert_eq!(err.to_string(), expected);
    }
}

#[test]
fn requirement_new_validates_its_parts() {
    use Operator::*;
    let ok = [
        Requirement::new("a", Equals, ["b"]),
        Requirement::new("a", NotEquals, [""]),
        Requirement::new("a", In, ["x", "y", "x"]),
        Requirement::new("a", Exists, Vec::<String>::new()),
        Requirement::new("a", DoesNotExist, Vec::<String>::new()),
    ];
    for requirement in ok {
        let requirement = requirement.unwrap();
        let selector = Selector::from_requirements(vec![requirement.clone()]);
        assert_eq!(selector.to_string().parse::<Selector>().unwrap(), selector);
    }

    let wrong_count = |operator, count| ParseErrorKind::WrongValueCount {
        key: "a".to_owned(),
        operator,
        count,
    };
    let cases = [
        (
            Requirement::new("a", Equals, Vec::<String>::new()),
            wrong_count(Equals, 0),
        ),
        (
            Requirement::new("a", DoubleEquals, ["x", "x"]),
            wrong_count(DoubleEquals, 2),
        ),
        (
            Requirement::new("a", In, Vec::<String>::new()),
            wrong_count(In, 0),
        ),
        (Requirement::new("a", Exists, ["x"]), wrong_count(Exists, 1)),
        (
            Requirement::new("a b", Exists, Vec::<String>::new()),
            invalid_key("a b", &format!("name part {REASON_NAME_CHARS}")),
        ),
        (
            Requirement::new("a", NotIn, ["x", ""]),
            invalid_value("a", "", REASON_EMPTY_IN_SET),
        ),
        (
            Requirement::new("a", Equals, ["x,y"]),
            invalid_value("a", "x,y", REASON_VALUE_CHARS),
        ),
    ];
    for (result, expected) in cases {
        assert_eq!(result.unwrap_err().kind, expected);
    }

    let err = Requirement::new("a", In, Vec::<String>::new()).unwrap_err();
    assert_eq!(
        err.to_string(),
        r#"invalid selector "a in ()": operator "in" on key "a" takes at least one value, got 0"#
    );
}

#[test]
fn matching_follows_2014_semantics() {
    // The empty selector matches everything.
    check_matches("", &[], true);
    check_matches("", &[("a", "b")], true);

    check_matches("a=b", &[("a", "b")], true);
    check_matches("a=b", &[("a", "c")], false);
    check_matches("a=b", &[], false);
    check_matches("a==b", &[("a", "b")], true);
    check_matches("a==b", &[("a", "c")], false);

    // 2014: a missing key reads as "", so `k=` matches an object without k.
    check_matches("a=", &[], true);
    check_matches("a=", &[("a", "")], true);
    check_matches("a=", &[("a", "b")], false);

    check_matches("a!=b", &[], true);
    check_matches("a!=b", &[("a", "b")], false);
    check_matches("a!=b", &[("a", "c")], true);
    check_matches("a!=", &[], false);
    check_matches("a!=", &[("a", "")], false);
    check_matches("a!=", &[("a", "x")], true);

    check_matches("a in (b,c)", &[("a", "c")], true);
    check_matches("a in (b,c)", &[("a", "d")], false);
    check_matches("a in (b,c)", &[], false);

    check_matches("a notin (b,c)", &[], true);
    check_matches("a notin (b,c)", &[("a", "b")], false);
    check_matches("a notin (b,c)", &[("a", "d")], true);

    check_matches("a", &[("a", "")], true);
    check_matches("a", &[("b", "x")], false);
    check_matches("!a", &[], true);
    check_matches("!a", &[("a", "x")], false);

    check_matches("a=b,c=d", &[("a", "b"), ("c", "d"), ("e", "f")], true);
    check_matches("a=b,c=d", &[("a", "b")], false);
    check_matches("a=b,a=c", &[("a", "b")], false);
    check_matches("a,!b,c notin (x)", &[("a", "1"), ("c", "y")], true);
}

#[test]
fn requires_exact_match_reports_equality_requirements() {
    let cases = [
        ("a=b,c!=d", "a", Some("b")),
        ("a=b,c!=d", "c", None),
        ("a==b", "a", Some("b")),
        ("a in (b)", "a", None),
        ("a", "a", None),
        ("a=", "a", Some("")),
        ("x=1", "a", None),
        ("", "a", None),
    ];
    for (selector, key, expected) in cases {
        let selector: Selector = selector.parse().unwrap();
        assert_eq!(
            selector.requires_exact_match(key),
            expected,
            "{selector} on {key}"
        );
    }
}

#[test]
fn everything_is_empty_and_displays_as_nothing() {
    let everything = Selector::everything();
    assert!(everything.is_empty());
    assert_eq!(everything.to_string(), "");
    assert_eq!(everything, Selector::default());
    assert_eq!(everything, Selector::from_requirements(Vec::new()));
    assert!(!"a".parse::<Selector>().unwrap().is_empty());
}

#[test]
fn set_basics() {
    let mut labels = Set::new();
    assert!(labels.is_empty());
    assert_eq!(labels.insert("b", "2"), None);
    assert_eq!(labels.insert("a", ""), None);
    assert_eq!(labels.insert("b", "3"), Some("2".to_owned()));
    assert_eq!(labels.len(), 2);
    assert_eq!(labels.get("a"), Some(""));
    assert_eq!(labels.get("b"), Some("3"));
    assert_eq!(labels.get("c"), None);
    assert!(labels.has("a"));
    assert!(!labels.has("c"));
    let keys: Vec<&String> = labels.iter().map(|(key, _)| key).collect();
    assert_eq!(keys, ["a", "b"]);
    let map = BTreeMap::from([
        ("a".to_owned(), "".to_owned()),
        ("b".to_owned(), "3".to_owned()),
    ]);
    assert_eq!(labels.as_map(), &map);
    assert_eq!(Set::from(map), labels);
}

#[test]
fn set_displays_sorted_pairs() {
    let cases = [
        (set(&[]), ""),
        (set(&[("a", "1")]), "a=1"),
        (set(&[("z", "1"), ("a", ""), ("m", "x")]), "a=,m=x,z=1"),
    ];
    for (labels, expected) in cases {
        assert_eq!(labels.to_string(), expected);
    }
}

#[test]
fn set_as_selector_requires_every_pair() {
    let empty = Set::new().as_selector();
    assert!(empty.is_empty());
    assert_eq!(empty, Selector::everything());

    let labels = set(&[("b", "1"), ("a", "2")]);
    let selector = labels.as_selector();
    assert_eq!(selector.to_string(), "a=2,b=1");
    assert_eq!(selector, "b=1,a=2".parse().unwrap());
    assert!(selector.matches(&labels));
    assert!(!selector.matches(&set(&[("a", "2")])));
    assert_eq!(selector.requires_exact_match("a"), Some("2"));
}

#[test]
fn set_serializes_as_a_json_object() {
    let labels = set(&[("name", "web"), ("app", "")]);
    let json = serde_json::to_string(&labels).unwrap();
    assert_eq!(json, r#"{"app":"","name":"web"}"#);
    assert_eq!(serde_json::from_str::<Set>(&json).unwrap(), labels);
    assert_eq!(serde_json::from_str::<Set>("{}").unwrap(), Set::new());
}

#[test]
fn selector_serializes_as_its_string_form() {
    let selector: Selector = "b in (y,x), a=1".parse().unwrap();
    let json = serde_json::to_string(&selector).unwrap();
    assert_eq!(json, r#""a=1,b in (x,y)""#);
    assert_eq!(serde_json::from_str::<Selector>(&json).unwrap(), selector);
    assert_eq!(
        serde_json::from_str::<Selector>(r#""""#).unwrap(),
        Selector::everything()
    );
    let err = serde_json::from_str::<Selector>(r#""a<b""#).unwrap_err();
    assert!(err.to_string().contains("unknown operator"), "{err}");
}

#[test]
fn validates_keys() {
    let name_chars = format!("name part {REASON_NAME_CHARS}");
    let prefix_chars = format!("prefix part {REASON_SUBDOMAIN_CHARS}");
    let long_prefix = format!("{}.com/a", vec!["a".repeat(63); 4].join("."));
    let cases: Vec<(String, Result<(), String>)> = vec![
        ("a".into(), Ok(())),
        ("A-b_c.D9".into(), Ok(())),
        ("9".into(), Ok(())),
        ("x".repeat(63), Ok(())),
        ("example.com/app".into(), Ok(())),
        ("k8s-io.x1/App_Name".into(), Ok(())),
        ("a/b".into(), Ok(())),
        ("".into(), Err(REASON_EMPTY.into())),
        (
            "x".repeat(64),
            Err("name part must be no more than 63 characters".into()),
        ),
        ("-a".into(), Err(name_chars.clone())),
        ("a-".into(), Err(name_chars.clone())),
        ("_a".into(), Err(name_chars.clone())),
        ("a.".into(), Err(name_chars.clone())),
        ("a b".into(), Err(name_chars.clone())),
        ("é".into(), Err(name_chars.clone())),
        ("a/".into(), Err(format!("name part {REASON_EMPTY}"))),
        ("/a".into(), Err(format!("prefix part {REASON_EMPTY}"))),
        ("a/b/c".into(), Err(REASON_TOO_MANY_SLASHES.into())),
        ("Example.com/a".into(), Err(prefix_chars.clone())),
        ("example..com/a".into(), Err(prefix_chars.clone())),
        ("-example.com/a".into(), Err(prefix_chars.clone())),
        ("example-.com/a".into(), Err(prefix_chars.clone())),
        ("exa_mple.com/a".into(), Err(prefix_chars.clone())),
        (
            long_prefix,
            Err("prefix part must be no more than 253 characters".into()),
        ),
    ];
    for (key, expected) in cases {
        assert_eq!(validate_key(&key), expected, "key {key:?}");
    }
}

#[test]
fn validates_values() {
    let cases: Vec<(String, Result<(), String>)> = vec![
        ("".into(), Ok(())),
        ("a".into(), Ok(())),
        ("A.b-c_9".into(), Ok(())),
        ("v".repeat(63), Ok(())),
        (
            "v".repeat(64),
            Err("must be no more than 63 characters".into()),
        ),
        ("-a".into(), Err(REASON_VALUE_CHARS.into())),
        ("a_".into(), Err(REASON_VALUE_CHARS.into())),
        ("a/b".into(), Err(REASON_VALUE_CHARS.into())),
        ("a b".into(), Err(REASON_VALUE_CHARS.into())),
        ("a,b".into(), Err(REASON_VALUE_CHARS.into())),
    ];
    for (value, expected) in cases {
        assert_eq!(validate_value(&value), expected, "value {value:?}");
    }
}

#[test]
fn validates_dns_subdomains() {
    let cases: Vec<(String, Result<(), String>)> = vec![
        ("a".into(), Ok(())),
        ("my-app.example.com".into(), Ok(())),
        ("0.1".into(), Ok(())),
        ("a".repeat(253), Ok(())),
        (
            "a".repeat(254),
            Err("must be no more than 253 characters".into()),
        ),
        ("".into(), Err(REASON_EMPTY.into())),
        ("A".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
        ("a_b".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
        (".a".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
        ("a.".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
        ("a-".into(), Err(REASON_SUBDOMAIN_CHARS.into())),
    ];
    for (name, expected) in cases {
        assert_eq!(validate_dns_subdomain(&name), expected, "name {name:?}");
    }
}

/// A short name-like string: `[A-Za-z0-9]([A-Za-z0-9._-]{0,4}[A-Za-z0-9])?`.
fn name_strategy() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => "[A-Za-z0-9]([A-Za-z0-9._-]{0,4}[A-Za-z0-9])?",
        1 => Just("in".to_owned()),
        1 => Just("notin".to_owned()),
    ]
}

fn key_strategy() -> impl Strategy<Value = String> {
    let prefix = proptest::option::weighted(
        0.3,
        "[a-z0-9]([a-z0-9-]{0,3}[a-z0-9])?(\\.[a-z0-9]{1,3}){0,2}",
    );
    (prefix, name_strategy()).prop_map(|(prefix, name)| match prefix {
        Some(prefix) => format!("{prefix}/{name}"),
        None => name,
    })
}

fn operator_strategy() -> impl Strategy<Value = Operator> {
    prop::sample::select(vec![
        Operator::Equals,
        Operator::DoubleEquals,
        Operator::NotEquals,
        Operator::In,
        Operator::NotIn,
        Operator::Exists,
        Operator::DoesNotExist,
    ])
}

/// Small pools of keys and values, shared by selectors and label sets so that matching
/// is exercised on keys both have.
fn pools() -> impl Strategy<Value = (Vec<String>, Vec<String>)> {
    (
        prop::collection::btree_set(key_strategy(), 1..4),
        prop::collection::btree_set(name_strategy(), 1..4),
    )
        .prop_map(|(keys, values)| (keys.into_iter().collect(), values.into_iter().collect()))
}

fn requirement_strategy(
    keys: Vec<String>,
    values: Vec<String>,
) -> impl Strategy<Value = Requirement> {
    let mut single_values = values.clone();
    single_values.push(String::new());
    let count = values.len();
    (
        prop::sample::select(keys),
        operator_strategy(),
        prop::sample::select(single_values),
        prop::sample::subsequence(values, 1..=count),
    )
        .prop_map(|(key, operator, single, subset)| {
            let values = match operator {
                Operator::Equals | Operator::DoubleEquals | Operator::NotEquals => vec![single],
                Operator::In | Operator::NotIn => subset,
                Operator::Exists | Operator::DoesNotExist => Vec::new(),
            };
            Requirement::new(key, operator, values).unwrap()
        })
}

fn labels_strategy(keys: Vec<String>, values: Vec<String>) -> impl Strategy<Value = Set> {
    let mut any_value = values;
    any_value.push(String::new());
    prop::collection::vec(
        (prop::sample::select(keys), prop::sample::select(any_value)),
        0..4,
    )
    .prop_map(|pairs| pairs.into_iter().collect())
}

fn case_strategy() -> impl Strategy<Value = (Selector, Vec<Set>)> {
    pools().prop_flat_map(|(keys, values)| {
        (
            prop::collection::vec(requirement_strategy(keys.clone(), values.clone()), 0..5)
                .prop_map(Selector::from_requirements),
            prop::collection::vec(labels_strategy(keys, values), 1..8),
        )
    })
}

/// Renders a requirement with extra whitespace around every token.
fn spaced(requirement: &Requirement) -> String {
    let key = requirement.key();
    let values: Vec<&str> = requirement.values().iter().map(String::as_str).collect();
    match requirement.operator() {
        Operator::In | Operator::NotIn => format!(
            " {key}  {} ( {} ) ",
            requirement.operator(),
            values.join(" , ")
        ),
        Operator::Exists => format!(" {key} "),
        Operator::DoesNotExist => format!(" ! {key} "),
        operator => format!(" {key} {operator} {} ", values.join("")),
    }
}

proptest! {
    #[test]
    fn display_then_parse_round_trips((selector, label_sets) in case_strategy()) {
        let text = selector.to_string();
        let parsed: Selector = text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
        prop_assert_eq!(&parsed, &selector);
        prop_assert_eq!(parsed.to_string(), text);
        for labels in &label_sets {
            prop_assert_eq!(parsed.matches(labels), selector.matches(labels), "labels {}", labels);
        }

        let spaced_text: Vec<String> = selector.requirements().iter().map(spaced).collect();
        let spaced_text = spaced_text.join(",");
        let reparsed: Selector = spaced_text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
        prop_assert_eq!(reparsed, selector);
    }

    #[test]
    fn any_accepted_input_round_trips(
        input in prop_oneof![
            r"[a-c =!<>(),/.\t-]{0,16}",
            r"((in|notin|!|a|b|=|==|!=|\(|\)|,| )){0,10}",
            any::<String>(),
        ]
    ) {
        // Parsing never panics, and whatever parses displays as something that parses
        // back to the same selector.
        if let Ok(selector) = input.parse::<Selector>() {
            let text = selector.to_string();
            let reparsed: Selector = text.parse().map_err(|err| TestCaseError::fail(format!("{err}")))?;
            prop_assert_eq!(reparsed, selector);
        }
    }
}
