//! The real terminal: raw mode and the alternate screen, restored on quit,
//! error and panic; a thread that turns terminal events into [`Input`].

use std::io::{self, Stdout};

use ratatui::Terminal;
use ratatui::backend::CrosstermBackend;
use ratatui::crossterm::event::{
    self, DisableBracketedPaste, DisableFocusChange, DisableMouseCapture, EnableBracketedPaste,
    EnableFocusChange, EnableMouseCapture,
};
use ratatui::crossterm::execute;
use ratatui::crossterm::terminal::{
    EnterAlternateScreen, LeaveAlternateScreen, disable_raw_mode, enable_raw_mode,
};
use tokio::sync::mpsc;

use super::app::Input;

pub type Term = Terminal<CrosstermBackend<Stdout>>;

/// Owns the terminal's raw mode; restores it when dropped.
pub struct TerminalGuard {
    pub terminal: Term,
}

/// Puts the terminal back as it was. Safe to call more than once.
pub fn restore() {
    let _ = disable_raw_mode();
    let _ = execute!(
        io::stdout(),
        DisableBracketedPaste,
        DisableFocusChange,
        DisableMouseCapture,
        LeaveAlternateScreen,
        ratatui::crossterm::cursor::Show
    );
}

impl TerminalGuard {
    pub fn enter() -> io::Result<Self> {
        // A panic restores the terminal before its message is printed.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            restore();
            previous(info);
        }));
        enable_raw_mode()?;
        let mut stdout = io::stdout();
        if let Err(e) = execute!(
            stdout,
            EnterAlternateScreen,
            EnableMouseCapture,
            EnableBracketedPaste,
            EnableFocusChange
        ) {
            restore();
            return Err(e);
        }
        let terminal = Terminal::new(CrosstermBackend::new(stdout)).inspect_err(|_| restore())?;
        Ok(Self { terminal })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
    }
}

/// Reads terminal events on a thread of their own; SIGTERM and SIGHUP
/// (the terminal closed) arrive as [`Input::Quit`], so the app ends the way
/// it does on `q`, and the terminal is restored.
pub fn spawn_input_reader() -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            crate::runtime::cancel::termination_signal().await;
            let _ = tx.send(Input::Quit);
        });
    }
    std::thread::spawn(move || {
        loop {
            let input = match event::read() {
                Ok(event::Event::Key(k)) => Input::Key(k),
                Ok(event::Event::Mouse(m)) => Input::Mouse(m),
                Ok(event::Event::Paste(p)) => Input::Paste(p),
                Ok(event::Event::Resize(..)) => Input::Resize,
                Ok(event::Event::FocusGained) => Input::Focus(true),
                Ok(event::Event::FocusLost) => Input::Focus(false),
                Err(e) => {
                    tracing::error!("reading the terminal failed: {e}");
                    return;
                }
            };
            if tx.send(input).is_err() {
                return;
            }
        }
    });
    rx
}
