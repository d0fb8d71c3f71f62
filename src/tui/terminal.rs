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
    /// Dropped by the guard: not at all once the terminal has hung up.
    pub terminal: std::mem::ManuallyDrop<Term>,
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
        Ok(Self {
            terminal: std::mem::ManuallyDrop::new(terminal),
        })
    }
}

impl Drop for TerminalGuard {
    fn drop(&mut self) {
        restore();
        // ratatui's own drop shows a hidden cursor again, and says on
        // stderr when it cannot: on a terminal that hung up it cannot, and
        // there is nothing left to restore.
        if !is_hung_up() {
            // SAFETY: dropped once, here, and never used after.
            unsafe { std::mem::ManuallyDrop::drop(&mut self.terminal) }
        }
    }
}

/// Reads terminal events on a thread of their own; SIGTERM, SIGHUP and a
/// terminal that hung up without it ([`ended`]) arrive as
/// [`Input::Quit`] and [`Input::HungUp`], so the app ends the way it does
/// on `q`, and the terminal is restored (if it is still there).
pub fn spawn_input_reader() -> mpsc::UnboundedReceiver<Input> {
    let (tx, rx) = mpsc::unbounded_channel();
    {
        let tx = tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(ended().await);
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

/// How the terminal's session ends without a key: SIGTERM or SIGHUP
/// ([`Input::Quit`]), or the terminal hanging up ([`Input::HungUp`]).
pub async fn ended() -> Input {
    tokio::select! {
        _ = crate::runtime::cancel::termination_signal() => Input::Quit,
        () = hung_up() => Input::HungUp,
    }
}

/// Resolves when the terminal hangs up: closed, with no SIGHUP for quorum
/// (the kernel sends it to a terminal's session leader only, which may
/// outlive it ignoring it: `perf`, a debugger; or quorum's terminal is not
/// its session's). crossterm's reader would read nothing from it on and
/// on, at 100 % of a core. Watched by one thread for the whole process
/// (the picker's and the TUI's wait share it) that waits in `poll(2)` for
/// the hang-up alone; never, when there is no terminal.
async fn hung_up() {
    use std::sync::OnceLock;
    static HUNG_UP: OnceLock<tokio::sync::watch::Receiver<bool>> = OnceLock::new();
    let mut hung_up = HUNG_UP
        .get_or_init(|| {
            let (tx, rx) = tokio::sync::watch::channel(false);
            #[cfg(unix)]
            std::thread::spawn(move || {
                if wait_for_hangup() {
                    let _ = tx.send(true);
                }
            });
            #[cfg(not(unix))]
            drop(tx);
            rx
        })
        .clone();
    if hung_up.wait_for(|gone| *gone).await.is_err() {
        std::future::pending::<()>().await;
    }
}

/// Waits for the terminal crossterm reads (stdin, else `/dev/tty`) to
/// hang up; `false` when there is none to wait on.
#[cfg(unix)]
fn wait_for_hangup() -> bool {
    hangup_within(nix::poll::PollTimeout::NONE)
}

/// Whether the terminal has hung up: what a frame that could not be drawn
/// is forgiven for (the hang-up's [`Input::HungUp`] may come after it).
pub fn is_hung_up() -> bool {
    #[cfg(unix)]
    return hangup_within(nix::poll::PollTimeout::ZERO);
    #[cfg(not(unix))]
    false
}

/// Whether the terminal hangs up within `timeout`.
#[cfg(unix)]
fn hangup_within(timeout: nix::poll::PollTimeout) -> bool {
    use std::io::IsTerminal;
    use std::os::fd::{AsFd, OwnedFd};
    use std::sync::OnceLock;

    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    // Found once, while it is there: a terminal that hung up is no
    // terminal to `isatty(3)`.
    static TTY: OnceLock<Option<OwnedFd>> = OnceLock::new();
    let tty = TTY.get_or_init(|| {
        let stdin = std::io::stdin();
        if stdin.is_terminal() {
            stdin.as_fd().try_clone_to_owned().ok()
        } else {
            std::fs::File::open("/dev/tty").ok().map(OwnedFd::from)
        }
    });
    let Some(tty) = tty else {
        return false;
    };
    let gone = PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL;
    loop {
        // No event asked for: poll(2) tells a hang-up and an error anyway.
        let mut fds = [PollFd::new(tty.as_fd(), PollFlags::empty())];
        match poll(&mut fds, timeout) {
            Ok(_) if fds[0].revents().is_some_and(|r| r.intersects(gone)) => return true,
            Ok(0) if timeout != PollTimeout::NONE => return false,
            Ok(_) | Err(nix::errno::Errno::EINTR) => continue,
            Err(_) => return false,
        }
    }
}
