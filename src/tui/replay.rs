//! Replays recorded events on a virtual clock: real time scaled by a speed,
//! with pause, single steps and a jump to the end.

use std::time::{Duration, Instant};

use crate::event::Stamped;

pub const MIN_SPEED: f64 = 0.125;
pub const MAX_SPEED: f64 = 64.0;

pub struct Player {
    events: Vec<Stamped>,
    next: usize,
    speed: f64,
    paused: bool,
    /// Virtual time (ms) at `base`.
    base_t: u64,
    base: Instant,
}

impl Player {
    pub fn new(events: Vec<Stamped>, speed: f64, now: Instant) -> Self {
        let base_t = events.first().map_or(0, |e| e.t);
        Self {
            events,
            next: 0,
            speed: speed.clamp(MIN_SPEED, MAX_SPEED),
            paused: false,
            base_t,
            base: now,
        }
    }

    pub fn total(&self) -> usize {
        self.events.len()
    }

    /// How many events were played.
    pub fn position(&self) -> usize {
        self.next
    }

    pub fn finished(&self) -> bool {
        self.next >= self.events.len()
    }

    pub fn paused(&self) -> bool {
        self.paused
    }

    pub fn speed(&self) -> f64 {
        self.speed
    }

    /// The virtual time now, in ms.
    pub fn clock(&self, now: Instant) -> u64 {
        if self.paused || self.finished() {
            return self.base_t;
        }
        let real = now.saturating_duration_since(self.base).as_secs_f64() * 1000.0;
        self.base_t + (real * self.speed) as u64
    }

    fn rebase(&mut self, now: Instant) {
        self.base_t = self.clock(now);
        self.base = now;
    }

    pub fn set_paused(&mut self, paused: bool, now: Instant) {
        self.rebase(now);
        self.paused = paused;
    }

    /// Multiplies the speed by `factor`, within [`MIN_SPEED`, `MAX_SPEED`].
    pub fn scale_speed(&mut self, factor: f64, now: Instant) {
        self.rebase(now);
        self.speed = (self.speed * factor).clamp(MIN_SPEED, MAX_SPEED);
    }

    /// When the next event is due, unless paused or done.
    pub fn deadline(&self) -> Option<Instant> {
        if self.paused {
            return None;
        }
        let next = self.events.get(self.next)?;
        let wait = next.t.saturating_sub(self.base_t) as f64 / self.speed;
        Some(self.base + Duration::from_secs_f64(wait / 1000.0))
    }

    /// The next event if it is due at `now`.
    pub fn due(&mut self, now: Instant) -> Option<Stamped> {
        if self.paused {
            return None;
        }
        let next = self.events.get(self.next)?;
        if next.t > self.clock(now) {
            return None;
        }
        self.next += 1;
        Some(next.clone())
    }

    /// Pauses and plays exactly one event.
    pub fn step(&mut self, now: Instant) -> Option<Stamped> {
        self.set_paused(true, now);
        let event = self.events.get(self.next)?.clone();
        self.next += 1;
        self.base_t = self.base_t.max(event.t);
        Some(event)
    }

    /// Plays every remaining event at once.
    pub fn to_end(&mut self) -> Vec<Stamped> {
        let rest = self.events[self.next..].to_vec();
        self.next = self.events.len();
        if let Some(last) = rest.last() {
            self.base_t = self.base_t.max(last.t);
        }
        rest
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;

    fn events(times: &[u64]) -> Vec<Stamped> {
        times
            .iter()
            .map(|&t| {
                Stamped::new(
                    t,
                    Event::UserMessage {
                        text: t.to_string(),
                    },
                )
            })
            .collect()
    }

    #[test]
    fn plays_on_the_scaled_clock() {
        let start = Instant::now();
        let mut p = Player::new(events(&[100, 1100, 3100]), 2.0, start);
        assert_eq!(p.due(start).map(|e| e.t), Some(100), "first event at once");
        assert_eq!(p.due(start), None);
        assert_eq!(p.deadline(), Some(start + Duration::from_millis(500)));
        assert_eq!(p.due(start + Duration::from_millis(499)), None);
        assert_eq!(
            p.due(start + Duration::from_millis(500)).map(|e| e.t),
            Some(1100)
        );
    }

    #[test]
    fn pause_step_and_end() {
        let start = Instant::now();
        let mut p = Player::new(events(&[0, 1000, 2000, 3000]), 1.0, start);
        p.set_paused(true, start);
        assert_eq!(p.deadline(), None);
        assert_eq!(
            p.due(start + Duration::from_secs(10)),
            None,
            "paused plays nothing"
        );
        assert_eq!(p.step(start).map(|e| e.t), Some(0));
        assert_eq!(p.step(start).map(|e| e.t), Some(1000));
        assert_eq!(
            p.clock(start + Duration::from_secs(5)),
            1000,
            "paused clock stands"
        );
        assert_eq!(p.to_end().len(), 2);
        assert!(p.finished());
        assert_eq!(p.step(start), None);
    }

    #[test]
    fn speed_is_bounded() {
        let start = Instant::now();
        let mut p = Player::new(events(&[0]), 1.0, start);
        for _ in 0..20 {
            p.scale_speed(2.0, start);
        }
        assert_eq!(p.speed(), MAX_SPEED);
        for _ in 0..40 {
            p.scale_speed(0.5, start);
        }
        assert_eq!(p.speed(), MIN_SPEED);
    }
}
