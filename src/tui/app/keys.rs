//! The keys: what each one does in each mode of the app (live, replay,
//! watch), in a question's form, the side panel and an opened box.

use std::time::Instant;

use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers, MouseEventKind};

use super::{App, Input, Mode, WHEEL_ROWS};
use crate::event::{Op, slash_names};
use crate::tui::findings_view::{FindingsView, Target, ViewKey};
use crate::tui::view::Opened;

impl App {
    /// Keys of a question open in a box: they edit its draft, and Enter,
    /// Esc and Ctrl+C send the answer.
    fn form_key(&mut self, key: KeyEvent) -> bool {
        let (Some(draft), Mode::Live { ops, .. }) = (&mut self.view.form, &self.mode) else {
            return false;
        };
        match draft.key(key) {
            crate::tui::form::FormKey::Ignored => false,
            crate::tui::form::FormKey::Handled => true,
            crate::tui::form::FormKey::Answer(answer) => {
                let _ = ops.send(Op::Elicit {
                    call_id: draft.call_id.clone(),
                    request_id: draft.request_id.clone(),
                    answer,
                });
                true
            }
        }
    }

    pub fn handle(&mut self, input: Input) {
        match input {
            Input::Key(key) if key.kind != KeyEventKind::Release => self.key(key),
            Input::Key(_) | Input::Resize => {}
            Input::Quit => self.quit = true,
            Input::HungUp => (self.quit, self.hung_up) = (true, true),
            Input::Focus(focused) => self.focus(focused),
            Input::Mouse(m) => {
                let now = self.now();
                match m.kind {
                    MouseEventKind::ScrollUp => self.view.scroll(&self.state, -WHEEL_ROWS, now),
                    MouseEventKind::ScrollDown => self.view.scroll(&self.state, WHEEL_ROWS, now),
                    _ => {}
                }
            }
            Input::Paste(text) if self.view.findings.is_some() => {
                if let Some(view) = &mut self.view.findings {
                    view.paste(&text);
                }
            }
            Input::Paste(text) => {
                if let Mode::Live { composer, .. } = &mut self.mode {
                    composer.end_completion();
                    composer.insert(&text.replace("\r\n", "\n").replace('\r', "\n"));
                }
            }
        }
    }

    /// Alt+↑/↓: moves the focus to the box before (`up`) or after; past the
    /// newest box the focus goes back to the composer.
    fn move_focus(&mut self, up: bool) {
        let boxes = self.state.focusable();
        // Where the focus would go among the boxes, oldest first.
        let at = |f: usize| boxes.partition_point(|&i| i < f);
        let next = match (self.view.focus, up) {
            (None, true) => boxes.last().copied(),
            (None, false) => None,
            (Some(f), true) => at(f).checked_sub(1).map(|k| boxes[k]).or(Some(f)),
            (Some(f), false) => boxes.get(at(f + 1)).copied(),
        };
        self.view.focus = next;
        if let Some(i) = next {
            self.view.show_cell(i);
        }
    }

    fn open_cell(&mut self, i: usize) {
        if let Some(header) = self.state.batch_at(i) {
            let target = self.target_of(header);
            self.view.findings = Some(FindingsView::new(header, target));
            return;
        }
        if let Some(crate::tui::state::Cell {
            kind: crate::tui::state::CellKind::Subagent(b),
            ..
        }) = self.state.cells.get(i)
        {
            self.view.opened = Some(Opened::new(b.call_id.clone()));
            self.state.pin_detail(Some(i));
            self.read_back(i);
        }
    }

    /// Where a review's follow-up goes: the writer of the branch it
    /// judged (a task, or a foreground call: `/msg` takes both), else the
    /// agent the person names (the last one named, or
    /// the first agent, offered).
    fn target_of(&self, header: &crate::tui::state::BatchHeader) -> Target {
        let writer = header
            .branch
            .as_deref()
            .and_then(|b| Some((b, self.state.branch_writer(b)?)));
        match writer {
            Some((branch, (task, agent))) => Target::Writer {
                task,
                agent,
                branch: branch.to_string(),
            },
            None => Target::Ask {
                default: self
                    .last_named
                    .clone()
                    .or_else(|| self.state.agents.first().cloned())
                    .unwrap_or_default(),
            },
        }
    }

    /// Keys of the findings view; a follow-up it sends goes out as the
    /// person's message.
    fn findings_key(&mut self, key: KeyEvent) -> bool {
        let Some(view) = &mut self.view.findings else {
            return false;
        };
        match view.key(key) {
            ViewKey::Ignored => return false,
            ViewKey::Handled => {}
            ViewKey::Close => self.view.findings = None,
            ViewKey::Send { text, what } => {
                self.banner_back = Some(self.banner.take());
                if let Mode::Live { ops, .. } = &self.mode {
                    if let Some(name) = text
                        .strip_prefix('@')
                        .and_then(|t| t.split_whitespace().next())
                    {
                        self.last_named = Some(name.to_string());
                    }
                    let _ = ops.send(Op::Submit(text));
                    self.banner = Some(what);
                } else {
                    self.banner = Some("nothing is sent from a replay".into());
                }
                self.view.findings = None;
            }
        }
        true
    }

    /// Keys of an opened box: scrolling, and Esc back.
    fn opened_key(&mut self, key: KeyEvent) -> bool {
        let Some(opened) = &mut self.view.opened else {
            return false;
        };
        match key.code {
            KeyCode::Esc | KeyCode::Char('q') => {
                self.view.opened = None;
                self.state.pin_detail(None);
            }
            KeyCode::Up => opened.scroll_by(-1),
            KeyCode::Down => opened.scroll_by(1),
            KeyCode::PageUp => opened.scroll_by(-opened.page()),
            KeyCode::PageDown | KeyCode::Char(' ') => opened.scroll_by(opened.page()),
            KeyCode::Home => opened.scroll = 0,
            KeyCode::End => opened.end(),
            // Ctrl+C still quits.
            KeyCode::Char('c') if key.modifiers.contains(KeyModifiers::CONTROL) => return false,
            _ => {}
        }
        true
    }

    /// Shows or hides what each agent spent, in the side panel (shown
    /// with it).
    fn toggle_spend(&mut self) {
        self.view.spend_open = !self.view.spend_open;
        if self.view.spend_open {
            self.view.set_panel(Some(true));
        }
    }

    /// Keys of the focused side panel.
    fn panel_key(&mut self, key: KeyEvent) -> bool {
        let Some(selected) = self.view.panel_focus else {
            return false;
        };
        let count = self.state.tasks.len();
        let task = self.state.tasks.get(selected).cloned();
        match key.code {
            KeyCode::Esc | KeyCode::Tab => self.view.panel_focus = None,
            KeyCode::Up => self.view.panel_focus = Some(selected.saturating_sub(1)),
            KeyCode::Down => {
                self.view.panel_focus = Some((selected + 1).min(count.saturating_sub(1)))
            }
            KeyCode::Enter => {
                if let Some(i) = task.and_then(|t| self.state.box_index(&t.call_id)) {
                    self.open_cell(i);
                }
            }
            KeyCode::Char('m') => {
                if let (Some(task), Mode::Live { composer, .. }) = (task, &mut self.mode) {
                    // A draft stays, after the command.
                    let draft = composer.take();
                    composer.insert(&format!("/msg {} ", task.task_id));
                    composer.insert(draft.trim_start_matches(&format!("/msg {} ", task.task_id)));
                    self.view.panel_focus = None;
                }
            }
            KeyCode::Char('c') if !key.modifiers.contains(KeyModifiers::CONTROL) => {
                if let (Some(task), Mode::Live { ops, .. }) = (task, &self.mode)
                    && task.summary.state == crate::event::TaskState::Running
                {
                    let _ = ops.send(Op::CancelTask(task.task_id));
                }
            }
            KeyCode::Char('$') => self.toggle_spend(),
            // Ctrl+C still quits.
            KeyCode::Char('c') => return false,
            _ => {}
        }
        true
    }

    /// A key pressed: to the opened box, the side panel or the question
    /// that takes it, else to completion, the focus, the view, and the
    /// mode's own keys.
    fn key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        if let Some(banner) = self.banner_back.take() {
            self.banner = banner;
        }
        // Any key but Ctrl+C/Ctrl+D takes back a quit question.
        if !(ctrl && matches!(key.code, KeyCode::Char('c') | KeyCode::Char('d'))) {
            self.quit_asked = None;
        }
        if self.findings_key(key)
            || self.opened_key(key)
            || self.panel_key(key)
            || self.form_key(key)
        {
            return;
        }
        let composer_empty = match &self.mode {
            Mode::Live { composer, .. } => composer.is_empty(),
            _ => true,
        };
        if self.complete_key(key) || self.focus_key(key, composer_empty) || self.view_key(key) {
            return;
        }
        match &self.mode {
            Mode::Live { .. } => self.live_key(key),
            Mode::Replay(_) => self.replay_key(key),
            Mode::Watch { .. } => self.watch_key(key),
            Mode::Still => {}
        }
    }

    /// Tab completes an `@agent` or a `/command` at the cursor; any other
    /// key ends a completion. True when Tab completed.
    fn complete_key(&mut self, key: KeyEvent) -> bool {
        let Mode::Live { composer, .. } = &mut self.mode else {
            return false;
        };
        if key.code != KeyCode::Tab {
            composer.end_completion();
            false
        } else {
            key.modifiers.is_empty()
                && composer.complete_with(
                    &self.state.agents,
                    &slash_names(),
                    &self.state.agent_commands,
                    &self.state.model_choices,
                )
        }
    }

    /// Keys that move the focus between boxes, open the focused one, or
    /// give the keys to the side panel. True when the key was taken.
    fn focus_key(&mut self, key: KeyEvent, composer_empty: bool) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        match key.code {
            // Focus between boxes: Alt+↑/↓ (or Ctrl+↑/↓).
            KeyCode::Up if alt || ctrl => self.move_focus(true),
            KeyCode::Down if alt || ctrl => self.move_focus(false),
            KeyCode::Enter if composer_empty && key.modifiers.is_empty() => {
                let Some(i) = self.view.focus else {
                    return false;
                };
                self.open_cell(i);
            }
            KeyCode::Esc if self.view.focus.is_some() => self.view.focus = None,
            // `$`: the spending agent by agent, in the side panel.
            KeyCode::Char('$') if composer_empty && !self.state.spending.by_agent.is_empty() => {
                self.toggle_spend();
            }
            // Tab: the side panel takes the keys.
            KeyCode::Tab
                if !self.state.tasks.is_empty() && matches!(self.mode, Mode::Live { .. }) =>
            {
                self.view.set_panel(Some(true));
                let running = self
                    .state
                    .tasks
                    .iter()
                    .rposition(|t| t.summary.state == crate::event::TaskState::Running);
                self.view.panel_focus = Some(running.unwrap_or(self.state.tasks.len() - 1));
                self.view.focus = None;
            }
            _ => return false,
        }
        true
    }

    /// Keys that move the view, in every mode. True when the key was taken.
    fn view_key(&mut self, key: KeyEvent) -> bool {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::PageUp => {
                let now = self.now();
                self.view.page_up(&self.state, now)
            }
            KeyCode::PageDown => {
                let now = self.now();
                self.view.page_down(&self.state, now)
            }
            KeyCode::Home if ctrl => self.view.home(),
            KeyCode::End if ctrl => self.view.end(),
            KeyCode::Char('t') if ctrl => self.view.toggle_panel(self.cols),
            _ => return false,
        }
        true
    }

    /// The live screen's keys: quitting, cancelling, answering, sending;
    /// the rest edit the draft.
    fn live_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let Mode::Live { composer, ops, .. } = &mut self.mode else {
            return;
        };
        match key.code {
            KeyCode::Char('c') | KeyCode::Char('d') if ctrl && composer.is_empty() => {
                // With tasks running, ask once.
                let running = self.state.running();
                if running == 0 || self.quit_asked.is_some() {
                    self.quit = true;
                } else {
                    self.quit_asked = Some(format!(
                        "{running} task{} running: Ctrl+C again quits and cancels them",
                        if running == 1 { "" } else { "s" }
                    ));
                }
            }
            KeyCode::Char('c') if ctrl => composer.clear(),
            // The engine cancels the running chat turn first, else this call.
            KeyCode::Esc => {
                let call_id = self.state.latest_running_call().unwrap_or_default();
                let _ = ops.send(Op::Cancel(call_id));
            }
            // The newest nested sub-agent its agent lets be cancelled alone.
            KeyCode::Char('x') if ctrl => {
                if let Some((call_id, child_id)) = self.state.cancellable_child() {
                    let _ = ops.send(Op::CancelChild { call_id, child_id });
                }
            }
            KeyCode::Char(c @ '1'..='9')
                if composer.is_empty() && self.state.pending_permission().is_some() =>
            {
                if let Some((call_id, request_id, options)) = self.state.pending_permission() {
                    let index = c as usize - '1' as usize;
                    if index < options {
                        let _ = ops.send(Op::Answer {
                            call_id,
                            request_id,
                            option: Some(index),
                        });
                    }
                }
            }
            KeyCode::Enter
                if !key
                    .modifiers
                    .intersects(KeyModifiers::ALT | KeyModifiers::SHIFT) =>
            {
                let text = composer.submit();
                if !text.trim().is_empty() {
                    // The loop ends when the engine is gone; nothing to do here.
                    let _ = ops.send(Op::Submit(text));
                    self.view.end();
                }
            }
            _ => self.edit_key(key),
        }
    }

    /// Keys that edit the live screen's draft and move its cursor (Home
    /// and End scroll the transcript while there is nothing to edit).
    fn edit_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let alt = key.modifiers.contains(KeyModifiers::ALT);
        let width = self.composer_width();
        let Mode::Live { composer, .. } = &mut self.mode else {
            return;
        };
        match key.code {
            KeyCode::Char('j') if ctrl => composer.insert("\n"),
            KeyCode::Enter => composer.insert("\n"),
            KeyCode::Backspace if alt => composer.delete_word(),
            KeyCode::Backspace => composer.backspace(),
            KeyCode::Delete => composer.delete(),
            KeyCode::Left if ctrl || alt => composer.word_left(),
            KeyCode::Right if ctrl || alt => composer.word_right(),
            KeyCode::Char('b') if alt => composer.word_left(),
            KeyCode::Char('f') if alt => composer.word_right(),
            KeyCode::Left => composer.left(),
            KeyCode::Right => composer.right(),
            KeyCode::Char('b') if ctrl => composer.left(),
            KeyCode::Char('f') if ctrl => composer.right(),
            KeyCode::Up => composer.up(width),
            KeyCode::Down => composer.down(width),
            KeyCode::Char('a') if ctrl => composer.line_start(),
            KeyCode::Char('e') if ctrl => composer.line_end(),
            KeyCode::Char('u') if ctrl => composer.kill_to_line_start(),
            KeyCode::Char('k') if ctrl => composer.kill_to_line_end(),
            KeyCode::Char('w') if ctrl => composer.delete_word(),
            KeyCode::Home if composer.is_empty() => self.view.home(),
            KeyCode::End if composer.is_empty() => self.view.end(),
            KeyCode::Home => composer.line_start(),
            KeyCode::End => composer.line_end(),
            KeyCode::Char(c) if !ctrl => composer.insert(c.encode_utf8(&mut [0; 4])),
            _ => {}
        }
    }

    /// A replay's keys: pause, step, speed, skip to the end, move the
    /// view, quit.
    fn replay_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        let instant = Instant::now();
        let Mode::Replay(player) = &mut self.mode else {
            return;
        };
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('c') if ctrl => self.quit = true,
            KeyCode::Char(' ') => {
                let paused = !player.paused();
                player.set_paused(paused, instant);
            }
            KeyCode::Char('n') | KeyCode::Right => {
                if let Some(event) = player.step(instant) {
                    self.on_event(event);
                }
            }
            KeyCode::Char('+') | KeyCode::Char('=') => player.scale_speed(2.0, instant),
            KeyCode::Char('-') => player.scale_speed(0.5, instant),
            // `e`: the replay's end, everything played at once.
            KeyCode::Char('e') => {
                for event in player.to_end() {
                    self.on_event(event);
                }
                self.view.end();
            }
            // Home and End move the view only, as in the live screen:
            // End goes to the newest line and follows it.
            KeyCode::End => self.view.end(),
            KeyCode::Home => self.view.home(),
            KeyCode::Tab | KeyCode::Char('t') => self.view.toggle_panel(self.cols),
            _ => {}
        }
    }

    /// `quorum watch`'s keys, read-only: they move the view, open boxes,
    /// and quit.
    fn watch_key(&mut self, key: KeyEvent) {
        let ctrl = key.modifiers.contains(KeyModifiers::CONTROL);
        match key.code {
            KeyCode::Char('q') | KeyCode::Esc => self.quit = true,
            KeyCode::Char('c') | KeyCode::Char('d') if ctrl => self.quit = true,
            KeyCode::End => self.view.end(),
            KeyCode::Home => self.view.home(),
            KeyCode::Tab | KeyCode::Char('t') => self.view.toggle_panel(self.cols),
            _ => {}
        }
    }
}
