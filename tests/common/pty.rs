//! A pseudo-terminal for quorum's TUI: what it writes is collected as it
//! comes, and read back as a screen by a terminal emulator (`vt100`).

use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the screen may take to show what is awaited.
const PATIENCE: Duration = Duration::from_secs(30);

/// Whether `done` holds within `limit` (checked every 25 ms).
pub fn wait_until(limit: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + limit;
    while !done() {
        if Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(25));
    }
    true
}

pub struct Terminal {
    /// `None` once hung up.
    master: Option<std::fs::File>,
    /// Set to hang up: the reader lets go of its end.
    hung_up: Arc<std::sync::atomic::AtomicBool>,
    slave: std::os::fd::OwnedFd,
    output: Arc<Mutex<Vec<u8>>>,
    cols: u16,
    rows: u16,
}

impl Terminal {
    /// A terminal `cols` wide and `rows` high.
    pub fn open(cols: u16, rows: u16) -> Terminal {
        let size = nix::pty::Winsize {
            ws_row: rows,
            ws_col: cols,
            ws_xpixel: 0,
            ws_ypixel: 0,
        };
        let pty = nix::pty::openpty(Some(&size), None).unwrap();
        // The program must not hold this end open: closing it is how
        // the terminal hangs up.
        nix::fcntl::fcntl(
            &pty.master,
            nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC),
        )
        .unwrap();
        let master = std::fs::File::from(pty.master);
        let output = Arc::new(Mutex::new(Vec::new()));
        let mut reader = master.try_clone().unwrap();
        let sink = output.clone();
        let hung_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop = hung_up.clone();
        std::thread::spawn(move || {
            use std::os::fd::AsFd;
            let mut buf = [0u8; 65536];
            // Read as it comes, looking every 50 ms for a hang-up.
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let mut fds = [nix::poll::PollFd::new(
                    reader.as_fd(),
                    nix::poll::PollFlags::POLLIN,
                )];
                match nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(50u8)) {
                    Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                    Ok(_) => {}
                    Err(_) => break,
                }
                match std::io::Read::read(&mut reader, &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => sink.lock().unwrap().extend_from_slice(&buf[..n]),
                }
            }
        });
        Terminal {
            master: Some(master),
            hung_up,
            slave: pty.slave,
            output,
            cols,
            rows,
        }
    }

    /// The terminal's end for the program: its stdin, stdout.
    pub fn slave(&self) -> Stdio {
        Stdio::from(self.slave.try_clone().unwrap())
    }

    /// Starts `command` on this terminal (its stdin and stdout), as a
    /// 256-colour xterm, its stderr going to `stderr`.
    pub fn spawn(
        &self,
        command: &mut std::process::Command,
        stderr: impl Into<Stdio>,
    ) -> std::process::Child {
        command
            .env("TERM", "xterm-256color")
            .stdin(self.slave())
            .stdout(self.slave())
            .stderr(stderr)
            .spawn()
            .unwrap()
    }

    /// Everything written to the terminal so far.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.output.lock().unwrap()).into_owned()
    }

    /// Waits until the output has `text` (anywhere, also in what was
    /// drawn over since).
    pub fn wait_for(&self, text: &str) {
        assert!(
            // The screen as drawn, too: a redraw that changes only some
            // cells of a line does not write the line's text again.
            wait_until(PATIENCE, || self.output().contains(text)
                || self.screen().contents().contains(text)),
            "the screen never showed {text:?}; it shows:\n{}",
            self.screen().contents()
        );
    }

    pub fn type_keys(&self, keys: &[u8]) {
        let master = self.master.as_ref().expect("the terminal is there");
        std::io::Write::write_all(&mut &*master, keys).unwrap();
    }

    /// Closes the terminal, as a terminal window closed: the program's end
    /// reads nothing from then on. No signal is sent (that is the kernel's
    /// to send, and only to a terminal's session).
    pub fn hang_up(&mut self) {
        self.hung_up
            .store(true, std::sync::atomic::Ordering::Relaxed);
        self.master = None;
    }

    /// The screen as a terminal shows it after everything written so far.
    pub fn screen(&self) -> vt100::Screen {
        let mut parser = vt100::Parser::new(
            self.rows.try_into().unwrap(),
            self.cols.try_into().unwrap(),
            0,
        );
        parser.process(&self.output.lock().unwrap());
        parser.screen().clone()
    }

    /// Waits until the screen shows what `done` looks for; the screen then.
    pub fn wait_for_screen(&self, done: impl Fn(&vt100::Screen) -> bool) -> vt100::Screen {
        let mut screen = self.screen();
        let shown = wait_until(PATIENCE, || {
            screen = self.screen();
            done(&screen)
        });
        assert!(shown, "the screen never showed it:\n{}", screen.contents());
        screen
    }

    /// The terminal was given back: raw mode's alternate screen and mouse
    /// reporting are switched off after the last frame.
    pub fn assert_restored(&self) {
        // The program may have ended before this end read its last bytes.
        wait_until(PATIENCE, || {
            let out = self.output();
            out.rfind("\x1b[?1049l") > out.rfind("\x1b[?1049h")
        });
        let out = self.output();
        let left = out
            .rfind("\x1b[?1049l")
            .expect("the alternate screen was left");
        let entered = out
            .rfind("\x1b[?1049h")
            .expect("the alternate screen was entered");
        assert!(left > entered, "left the alternate screen last");
        assert!(
            out[entered..].contains("\x1b[?1000l"),
            "mouse reporting off"
        );
    }
}
