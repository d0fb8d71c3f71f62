//! Desktop notifications through the terminal (`[notify] desktop`): the
//! escape sequence the terminal quorum runs in understands (OSC 9, OSC 777,
//! kitty's OSC 99), passed through tmux when quorum runs inside it, sent
//! only while the terminal does not have the focus. The text is agent
//! output, so untrusted: sanitised, one line, bounded.

use crate::confine::sanitize;
use crate::event::notify::{NotifyKind, Watch};

/// The longest text a desktop notification shows (characters).
const MAX_TEXT: usize = 120;

/// The escape sequence a terminal takes a notification in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// `ESC ] 9 ; text BEL`: iTerm2, WezTerm, Windows Terminal, ghostty,
    /// and the guess for a terminal not known.
    Osc9,
    /// `ESC ] 777 ; notify ; title ; body BEL`: rxvt-unicode, foot, VTE
    /// (GNOME Terminal, Tilix), konsole.
    Osc777,
    /// `ESC ] 99 ; ; text ESC \`: kitty.
    Osc99,
}

/// Where a notification goes: the flavor, and whether it passes through
/// tmux.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Target {
    pub flavor: Flavor,
    pub tmux: bool,
}

impl Target {
    /// The terminal the environment names (`var` reads a variable):
    /// `KITTY_WINDOW_ID`, `TERM_PROGRAM`, `TERM`, `VTE_VERSION`,
    /// `WT_SESSION`; inside tmux (`TMUX`), the terminal tmux runs in, as
    /// tmux passes `TERM_PROGRAM` on. `None`: a terminal that shows none
    /// (the Linux console, `dumb`).
    pub fn detect(var: impl Fn(&str) -> Option<String>) -> Option<Self> {
        let has = |name: &str| var(name).is_some_and(|v| !v.is_empty());
        let term = var("TERM").unwrap_or_default();
        let program = var("TERM_PROGRAM").unwrap_or_default().to_ascii_lowercase();
        let flavor = if has("KITTY_WINDOW_ID") || term.contains("kitty") {
            Flavor::Osc99
        } else if ["iterm.app", "wezterm", "ghostty", "vscode"].contains(&program.as_str())
            || has("WT_SESSION")
            || term.contains("ghostty")
            || term.contains("wezterm")
        {
            Flavor::Osc9
        } else if term.starts_with("rxvt")
            || term.starts_with("foot")
            || has("VTE_VERSION")
            || has("KONSOLE_VERSION")
        {
            Flavor::Osc777
        } else if term == "linux" || term == "dumb" || term.is_empty() {
            return None;
        } else {
            Flavor::Osc9
        };
        Some(Self {
            flavor,
            tmux: has("TMUX"),
        })
    }

    /// The bytes that notify with `text` (made safe here).
    pub fn sequence(self, text: &str) -> Vec<u8> {
        let text = clean(text);
        let seq = match self.flavor {
            Flavor::Osc9 => format!("\x1b]9;{text}\x07"),
            Flavor::Osc777 => format!("\x1b]777;notify;quorum;{text}\x07"),
            Flavor::Osc99 => format!("\x1b]99;;{text}\x1b\\"),
        };
        if self.tmux {
            // tmux's passthrough: every ESC of the sequence doubled.
            format!("\x1bPtmux;{}\x1b\\", seq.replace('\x1b', "\x1b\x1b")).into_bytes()
        } else {
            seq.into_bytes()
        }
    }
}

/// `text` as a terminal may be sent it inside an OSC: no control sequence
/// and no control character at all (ESC, BEL, C1's ST would end or break
/// the sequence), one line, at most [`MAX_TEXT`] characters.
pub fn clean(text: &str) -> String {
    let line: String = sanitize::one_line(text)
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    sanitize::clip(line.trim(), MAX_TEXT)
}

/// What writes a notification's bytes to the terminal.
pub type Write = Box<dyn FnMut(&[u8]) + Send>;

/// How the live screen tells the person: the bell (config `bell`) when a
/// task starts waiting, and desktop notifications of `desktop`'s kinds
/// (`None`: `[notify] desktop = false`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alerts {
    pub bell: bool,
    pub desktop: Option<Vec<NotifyKind>>,
}

/// The screen's desktop notifications: which kinds, where to, and whether
/// the terminal has the focus now.
pub struct Desktop {
    kinds: Vec<NotifyKind>,
    target: Target,
    watch: Watch,
    /// The terminal has the focus (as it last said; true until it says).
    focused: bool,
    /// Sequences to write after the next frame.
    due: Vec<Vec<u8>>,
}

impl Desktop {
    pub fn new(kinds: Vec<NotifyKind>, target: Target) -> Self {
        Self {
            kinds,
            target,
            watch: Watch::new(),
            focused: true,
            due: Vec::new(),
        }
    }

    /// The terminal gained (`true`) or lost the focus.
    pub fn focus(&mut self, focused: bool) {
        self.focused = focused;
    }

    /// Reads `event`; a notification it makes due is queued if its kind
    /// is on and the terminal does not have the focus.
    pub fn observe(&mut self, event: &crate::event::Event) {
        if !Watch::wants(event) {
            return;
        }
        for n in self.watch.observe(event) {
            if !self.focused && self.kinds.contains(&n.event) {
                self.due.push(self.target.sequence(&n.headline()));
            }
        }
    }

    /// The sequences due, taken.
    pub fn take(&mut self) -> Vec<Vec<u8>> {
        std::mem::take(&mut self.due)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |name| {
            pairs
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
        }
    }

    fn flavor(pairs: &[(&str, &str)]) -> Option<Flavor> {
        Target::detect(env(pairs)).map(|t| t.flavor)
    }

    #[test]
    fn the_terminal_is_told_by_its_environment() {
        assert_eq!(flavor(&[("TERM_PROGRAM", "iTerm.app")]), Some(Flavor::Osc9));
        assert_eq!(flavor(&[("TERM_PROGRAM", "WezTerm")]), Some(Flavor::Osc9));
        assert_eq!(flavor(&[("TERM", "xterm-ghostty")]), Some(Flavor::Osc9));
        assert_eq!(flavor(&[("WT_SESSION", "abc")]), Some(Flavor::Osc9));
        assert_eq!(flavor(&[("TERM", "xterm-kitty")]), Some(Flavor::Osc99));
        assert_eq!(
            flavor(&[("TERM", "xterm-256color"), ("KITTY_WINDOW_ID", "1")]),
            Some(Flavor::Osc99)
        );
        assert_eq!(flavor(&[("TERM", "foot")]), Some(Flavor::Osc777));
        assert_eq!(
            flavor(&[("TERM", "rxvt-unicode-256color")]),
            Some(Flavor::Osc777)
        );
        assert_eq!(
            flavor(&[("TERM", "xterm-256color"), ("VTE_VERSION", "7600")]),
            Some(Flavor::Osc777)
        );
        assert_eq!(flavor(&[("TERM", "xterm-256color")]), Some(Flavor::Osc9));
        assert_eq!(flavor(&[("TERM", "linux")]), None);
        assert_eq!(flavor(&[("TERM", "dumb")]), None);
        let t = Target::detect(env(&[("TERM", "tmux-256color"), ("TMUX", "/tmp/x,1,0")])).unwrap();
        assert!(t.tmux);
    }

    #[test]
    fn each_flavor_writes_its_sequence_and_tmux_wraps_it() {
        let t = |flavor, tmux| Target { flavor, tmux }.sequence("done");
        assert_eq!(t(Flavor::Osc9, false), b"\x1b]9;done\x07");
        assert_eq!(t(Flavor::Osc777, false), b"\x1b]777;notify;quorum;done\x07");
        assert_eq!(t(Flavor::Osc99, false), b"\x1b]99;;done\x1b\\");
        assert_eq!(
            t(Flavor::Osc99, true),
            b"\x1bPtmux;\x1b\x1b]99;;done\x1b\x1b\\\x1b\\"
        );
        assert_eq!(
            t(Flavor::Osc9, true),
            b"\x1bPtmux;\x1b\x1b]9;done\x07\x1b\\"
        );
    }

    #[test]
    fn untrusted_text_reaches_the_terminal_as_one_bounded_line() {
        let evil = "a\x1b]52;c;cGF5bG9hZA==\x07b\nc\x07d\u{9c}e\r\tf";
        let seq = Target {
            flavor: Flavor::Osc9,
            tmux: false,
        }
        .sequence(evil);
        let inner = &seq[4..seq.len() - 1];
        assert!(
            inner.iter().all(|&b| b >= 0x20 && b != 0x7f),
            "{:?}",
            String::from_utf8_lossy(&seq)
        );
        assert!(!String::from_utf8_lossy(inner).contains('\u{9c}'));
        let long = "x".repeat(1000);
        assert!(clean(&long).chars().count() <= MAX_TEXT + 1);
    }

    #[test]
    fn notifications_go_out_only_while_the_focus_is_elsewhere() {
        use crate::event::{Event, Summary};
        let progress = |waiting| Event::TaskProgress {
            call_id: "c1".into(),
            task_id: None,
            summary: Summary {
                waiting,
                last_activity: Some("? permission: Delete build/".into()),
                ..Summary::default()
            },
        };
        let started = Event::SubagentStarted {
            call_id: "c1".into(),
            task_id: None,
            agent: crate::event::AgentRef::Acp("fake".into()),
            input: "permission".into(),
            code_review: false,
            background: false,
            session: None,
            batch_id: None,
            queued: false,
            max_cost: None,
        };
        let target = Target {
            flavor: Flavor::Osc9,
            tmux: false,
        };
        let mut d = Desktop::new(NotifyKind::ALL.to_vec(), target);
        d.observe(&started);
        d.observe(&progress(true));
        assert!(d.take().is_empty(), "focused: nothing");
        d.observe(&progress(false));
        d.focus(false);
        d.observe(&progress(true));
        let due = d.take();
        assert_eq!(due.len(), 1);
        assert!(String::from_utf8_lossy(&due[0]).starts_with("\x1b]9;quorum: fake needs you"));
        // A kind that is off stays off.
        let mut d = Desktop::new(vec![NotifyKind::TaskDone], target);
        d.focus(false);
        d.observe(&started);
        d.observe(&progress(true));
        assert!(d.take().is_empty());
    }
}
