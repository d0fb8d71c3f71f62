//! The code-review verdict: `<!-- severity: green|yellow|red -->` at the
//! start of a final report.
//!
//! Leading whitespace and blank lines may stand before the header; case and
//! spaces inside it are tolerated (`<!--Severity :RED-->`). Anything else
//! before it means the report has no verdict. The header is stripped from
//! what is shown; an unknown value (`<!-- severity: purple -->`) is stripped
//! too, gives no verdict, and is reported so the caller can raise a notice.

use crate::event::Severity;

/// A final report split into its verdict and the text to show.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict<'a> {
    pub severity: Option<Severity>,
    /// The report without its header (and without the blank space after it).
    pub body: &'a str,
    /// The value of a severity header that is not green, yellow or red.
    pub unknown: Option<&'a str>,
}

/// Splits a report into its severity header, if any, and its body.
pub fn parse(report: &str) -> Verdict<'_> {
    let none = Verdict {
        severity: None,
        body: report,
        unknown: None,
    };
    let Some(rest) = report.trim_start().strip_prefix("<!--") else {
        return none;
    };
    let Some(end) = rest.find("-->") else {
        return none;
    };
    let Some((key, value)) = rest[..end].split_once(':') else {
        return none;
    };
    if !key.trim().eq_ignore_ascii_case("severity") {
        return none;
    }
    let value = value.trim();
    let severity = if value.eq_ignore_ascii_case("green") {
        Some(Severity::Green)
    } else if value.eq_ignore_ascii_case("yellow") {
        Some(Severity::Yellow)
    } else if value.eq_ignore_ascii_case("red") {
        Some(Severity::Red)
    } else {
        None
    };
    Verdict {
        severity,
        body: rest[end + 3..].trim_start(),
        unknown: severity.is_none().then_some(value),
    }
}

/// The header a report must begin with to carry `severity`.
pub fn header(severity: Severity) -> String {
    format!("<!-- severity: {} -->", severity.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn plain_header() {
        let v = parse("<!-- severity: red -->\n## Findings\n- bug");
        assert_eq!(v.severity, Some(Severity::Red));
        assert_eq!(v.body, "## Findings\n- bug");
        assert_eq!(v.unknown, None);
    }

    #[test]
    fn leading_blank_lines_case_and_inner_spaces() {
        for report in [
            "\n\n  <!--severity:GREEN-->\nok",
            "\t<!--   Severity   :   green   -->\n\nok",
            "\r\n<!-- SEVERITY: Green -->ok",
        ] {
            let v = parse(report);
            assert_eq!(v.severity, Some(Severity::Green), "{report:?}");
            assert_eq!(v.body, "ok", "{report:?}");
        }
    }

    #[test]
    fn anything_before_the_header_means_no_verdict() {
        let report = "Here is my review.\n<!-- severity: red -->\nbad";
        assert_eq!(
            parse(report),
            Verdict {
                severity: None,
                body: report,
                unknown: None
            }
        );
    }

    #[test]
    fn other_comments_and_broken_headers_are_left_alone() {
        for report in [
            "<!-- reviewed by bot -->\ntext",
            "<!-- severity: red",
            "<!-- colour: red -->",
            "",
            "<!--",
        ] {
            let v = parse(report);
            assert_eq!(v.severity, None, "{report:?}");
            assert_eq!(v.body, report, "{report:?}");
            assert_eq!(v.unknown, None, "{report:?}");
        }
    }

    #[test]
    fn unknown_value_is_stripped_and_reported() {
        let v = parse("<!-- severity: purple -->\nhmm");
        assert_eq!(v.severity, None);
        assert_eq!(v.body, "hmm");
        assert_eq!(v.unknown, Some("purple"));
    }

    #[test]
    fn header_round_trips() {
        for s in [Severity::Green, Severity::Yellow, Severity::Red] {
            assert_eq!(parse(&header(s)).severity, Some(s));
        }
    }

    fn any_severity() -> impl Strategy<Value = Severity> {
        prop_oneof![
            Just(Severity::Green),
            Just(Severity::Yellow),
            Just(Severity::Red)
        ]
    }

    proptest! {
        #[test]
        fn arbitrary_text_never_panics(report in any::<String>()) {
            let v = parse(&report);
            // The body is always a suffix of the report.
            prop_assert!(report.ends_with(v.body));
        }

        #[test]
        fn arbitrary_comment_like_text_never_panics(report in "[ \n<!-seviryGREDlow:>x]{0,40}") {
            let v = parse(&report);
            prop_assert!(report.ends_with(v.body));
        }

        #[test]
        fn a_header_added_to_any_report_is_found_and_stripped(
            severity in any_severity(),
            lead in "[ \t\r\n]{0,4}",
            report in any::<String>(),
        ) {
            let full = format!("{lead}{}\n{report}", header(severity));
            let v = parse(&full);
            prop_assert_eq!(v.severity, Some(severity));
            prop_assert_eq!(v.body, report.trim_start());
            prop_assert_eq!(v.unknown, None);
        }
    }
}
