//! An agent's stdout, read without a wake-up for each of its writes while
//! it streams.
//!
//! A pipe the runtime's poller watches wakes the runtime at every write
//! into it, read or not: sixteen agents streaming 200 chunks a second are
//! 3,200 wake-ups a second, which cost more than the chunks themselves.
//! So while an agent streams ([`Pipe::rest`], after a streamed update), its
//! pipe leaves the poller and is read again at the next beat, a
//! process-wide instant: every agent that streams is read in one wake-up
//! a beat, whatever it wrote meanwhile. A pipe that stays empty for
//! [`EMPTY_BEATS`] beats goes back to the poller, so an agent that has
//! stopped costs nothing, and what comes after a quiet spell (an answer,
//! a request, the first chunk of a turn) is read at once.

use std::io::Read;
use std::os::fd::OwnedFd;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::unix::AsyncFd;
use tokio::io::{AsyncRead, ReadBuf};
use tokio::time::{Instant, Sleep};

/// How often a streaming agent's pipe is read: streamed text waits at most
/// this long to be read (the bus then holds it up to 8 ms more, and the
/// screen draws at most every 33 ms). 16 ms against 8: 64 agents at 50
/// chunks a second, 5.0-6.0% of a core against 5.6-7.0% (`scripts/soak.sh
/// 20 50 64`, A B A B).
pub(super) const BEAT: Duration = Duration::from_millis(16);

/// Empty beats in a row after which a resting pipe is watched again.
pub(super) const EMPTY_BEATS: u8 = 3;

/// The reading end of an agent's stdout.
pub(super) struct Pipe {
    state: State,
    /// The beat being counted, and the bytes read during it.
    beat: u64,
    bytes: usize,
    /// The beat before held a flood (at least [`FLOOD`] bytes).
    flooding: bool,
}

/// Bytes read in one beat that make a flood: a pipe that had one in the
/// beat before does not rest (an agent writing faster than quorum reads
/// would otherwise wait for the beat each time quorum caught up).
pub(super) const FLOOD: usize = 16 * 1024;

enum State {
    /// In the poller: a write wakes the reading.
    Watched(AsyncFd<File>),
    /// Out of the poller, read without waiting: what is there is read, and
    /// an empty pipe goes back to the poller (or, resting, waits a beat).
    Loose { file: File, empty: Option<u8> },
    /// Out of the poller until the next beat; `empty` beats in a row found
    /// nothing so far.
    Resting {
        file: File,
        sleep: Pin<Box<Sleep>>,
        empty: u8,
    },
    /// Only while moving from one state to another, or after an error.
    Closed,
}

/// The pipe's file, non-blocking.
struct File(std::fs::File);

impl std::os::fd::AsRawFd for File {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.0.as_raw_fd()
    }
}

impl Pipe {
    /// `stdout` taken out of the runtime's own reading, to be read here.
    pub(super) fn new(stdout: tokio::process::ChildStdout) -> std::io::Result<Self> {
        Self::of(stdout.into_owned_fd()?)
    }

    /// The reading end of a pipe, in the runtime's poller.
    fn of(fd: OwnedFd) -> std::io::Result<Self> {
        nonblocking(&fd)?;
        let file = File(std::fs::File::from(fd));
        Ok(Self {
            state: State::Watched(watch(file)?),
            beat: 0,
            bytes: 0,
            flooding: false,
        })
    }

    /// The agent is streaming: the next read waits for the next beat,
    /// with the pipe out of the poller until then.
    pub(super) fn rest(&mut self) {
        let now = std::time::Instant::now();
        if self.floods(now) {
            return;
        }
        let file = match std::mem::replace(&mut self.state, State::Closed) {
            State::Watched(fd) => fd.into_inner(),
            State::Loose { file, .. } => file,
            resting @ State::Resting { .. } => {
                self.state = resting;
                return;
            }
            State::Closed => return,
        };
        self.state = State::Resting {
            file,
            sleep: Box::pin(tokio::time::sleep_until(beat_after(now))),
            empty: 0,
        };
    }

    #[cfg(test)]
    fn watched(&self) -> bool {
        matches!(self.state, State::Watched(_))
    }

    /// Whether, at `at`, the pipe floods: [`FLOOD`] bytes read in this
    /// beat or in the one before.
    fn floods(&mut self, at: std::time::Instant) -> bool {
        self.count(0, at);
        self.flooding || self.bytes >= FLOOD
    }

    /// `n` bytes read at `at`.
    fn count(&mut self, n: usize, at: std::time::Instant) {
        let now = beat_of(at);
        if now != self.beat {
            self.flooding = now == self.beat + 1 && self.bytes >= FLOOD;
            self.beat = now;
            self.bytes = 0;
        }
        self.bytes += n;
    }
}

/// The process's first instant, from which beats are counted.
fn epoch() -> std::time::Instant {
    static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    *EPOCH.get_or_init(std::time::Instant::now)
}

/// The number of the beat `at` falls in.
fn beat_of(at: std::time::Instant) -> u64 {
    let n = at.saturating_duration_since(epoch()).as_nanos() / BEAT.as_nanos();
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// The next beat after `at`: every [`BEAT`] from the process's first, the
/// same instants for every agent's pipe (so their timers fire together).
fn beat_after(at: std::time::Instant) -> Instant {
    let next = beat_of(at).saturating_add(1);
    let nanos = u64::try_from(BEAT.as_nanos()).unwrap_or(u64::MAX);
    (epoch() + Duration::from_nanos(next.saturating_mul(nanos))).into()
}

/// `file` in the runtime's poller, for reading.
fn watch(file: File) -> std::io::Result<AsyncFd<File>> {
    // SAFETY: `File` owns its descriptor, which stays open and the same
    // for as long as it lives (until `into_inner` gives it back).
    unsafe { AsyncFd::register_with_interest(file, tokio::io::Interest::READABLE) }
        .map_err(|e| e.into_parts().1)
}

fn nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

fn read_into(file: &File, buf: &mut ReadBuf<'_>) -> std::io::Result<()> {
    let n = (&file.0).read(buf.initialize_unfilled())?;
    buf.advance(n);
    Ok(())
}

impl AsyncRead for Pipe {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let read = ready!(poll_state(&mut self.state, cx, buf));
        self.count(buf.filled().len() - before, std::time::Instant::now());
        Poll::Ready(read)
    }
}

/// A read from the pipe in `state`, moving it from state to state.
fn poll_state(
    state: &mut State,
    cx: &mut Context<'_>,
    buf: &mut ReadBuf<'_>,
) -> Poll<std::io::Result<()>> {
    loop {
        match state {
            State::Watched(fd) => {
                let mut ready = ready!(fd.poll_read_ready(cx))?;
                if let Ok(read) = ready.try_io(|fd| read_into(fd.get_ref(), buf)) {
                    return Poll::Ready(read);
                }
            }
            State::Resting { sleep, .. } => {
                ready!(sleep.as_mut().poll(cx));
                let State::Resting { file, empty, .. } = std::mem::replace(state, State::Closed)
                else {
                    unreachable!()
                };
                *state = State::Loose {
                    file,
                    empty: Some(empty),
                };
            }
            State::Loose { file, empty } => match read_into(file, buf) {
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    let State::Loose { file, empty } = std::mem::replace(state, State::Closed)
                    else {
                        unreachable!()
                    };
                    *state = match empty {
                        // Resting and still empty: another beat.
                        Some(n) if n + 1 < EMPTY_BEATS => State::Resting {
                            file,
                            sleep: Box::pin(tokio::time::sleep_until(beat_after(
                                std::time::Instant::now(),
                            ))),
                            empty: n + 1,
                        },
                        _ => State::Watched(watch(file)?),
                    };
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                read => {
                    // Whatever came: the next read, if not told to
                    // rest, looks again without waiting.
                    *empty = None;
                    return Poll::Ready(read);
                }
            },
            State::Closed => {
                return Poll::Ready(Err(std::io::Error::other("the agent's stdout is closed")));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tokio::io::AsyncReadExt;

    fn pipe() -> (Pipe, std::fs::File) {
        let (read, write) = nix::unistd::pipe().expect("a pipe");
        (Pipe::of(read).expect("watched"), std::fs::File::from(write))
    }

    #[tokio::test]
    async fn what_is_written_while_it_rests_is_read_at_the_next_beat_in_one_read() {
        let (mut pipe, mut agent) = pipe();
        pipe.rest();
        assert!(!pipe.watched(), "a resting pipe is out of the poller");
        for chunk in ["one\n", "two\n", "three\n"] {
            agent.write_all(chunk.as_bytes()).unwrap();
        }
        let mut buf = [0u8; 64];
        let n = pipe.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"one\ntwo\nthree\n");
    }

    #[tokio::test]
    async fn a_pipe_that_stays_empty_is_watched_again_and_read_when_written() {
        let (mut pipe, mut agent) = pipe();
        pipe.rest();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            agent.write_all(b"answer\n").unwrap();
            agent
        });
        let mut buf = [0u8; 64];
        let n = pipe.read(&mut buf).await.unwrap();
        assert_eq!(&buf[..n], b"answer\n");
        assert!(pipe.watched(), "read as soon as it came, from the poller");
        // Not told to rest: an empty pipe is watched, not polled at beats.
        let agent = writer.join().unwrap();
        let read = tokio::time::timeout(BEAT * 10, pipe.read(&mut buf)).await;
        assert!(read.is_err(), "nothing was written");
        assert!(pipe.watched());
        drop(agent);
    }

    #[tokio::test]
    async fn a_flood_is_read_without_rests_and_a_trickle_after_it_rests() {
        let (mut pipe, _agent) = pipe();
        let beat = |n: u64| epoch() + BEAT * u32::try_from(n).unwrap() + BEAT / 2;
        pipe.count(FLOOD / 2, beat(10));
        assert!(!pipe.floods(beat(10)), "half a flood's bytes in a beat");
        pipe.count(FLOOD / 2, beat(10));
        assert!(pipe.floods(beat(10)), "a flood's bytes in a beat");
        assert!(pipe.floods(beat(11)), "the beat after a flood");
        assert!(!pipe.floods(beat(12)), "a quiet beat after it");
        pipe.count(FLOOD, beat(14));
        assert!(!pipe.floods(beat(16)), "a flood two beats ago");
        pipe.count(FLOOD, beat(1_000_000));
        pipe.rest();
        assert!(!pipe.watched(), "now is not the flood's beat: it rests");
    }

    #[tokio::test]
    async fn the_end_of_the_agents_output_is_read_resting_or_not() {
        for rest in [false, true] {
            let (mut pipe, mut agent) = pipe();
            agent.write_all(b"last\n").unwrap();
            drop(agent);
            if rest {
                pipe.rest();
            }
            let mut out = Vec::new();
            pipe.read_to_end(&mut out).await.unwrap();
            assert_eq!(out, b"last\n", "rest: {rest}");
        }
    }
}
