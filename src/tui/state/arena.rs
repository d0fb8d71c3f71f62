//! An arena's comparison (`arena_compared`): one cell, a table with a row
//! per writer; a later comparison of the same batch replaces it.

use super::{CellKind, State};
use crate::event::arena::Comparison;

/// The comparison box's data.
#[derive(Debug, Clone, PartialEq)]
pub struct ArenaCell {
    pub batch_id: String,
    pub comparison: Comparison,
}

impl State {
    pub(super) fn on_arena_compared(&mut self, batch_id: &str, comparison: &Comparison) {
        let mut comparison = comparison.clone();
        let clean = |s: &mut String| *s = crate::confine::sanitize::one_line(s);
        clean(&mut comparison.task);
        clean(&mut comparison.reason);
        for row in &mut comparison.rows {
            for s in [&mut row.agent, &mut row.label, &mut row.branch] {
                clean(s);
            }
            if let Some(f) = &mut row.failed {
                clean(f);
            }
        }
        let cell = ArenaCell {
            batch_id: batch_id.to_string(),
            comparison,
        };
        let earlier = self
            .cells
            .iter()
            .position(|c| matches!(&c.kind, CellKind::Arena(a) if a.batch_id == batch_id));
        match earlier {
            Some(i) => *self.touch(i) = CellKind::Arena(Box::new(cell)),
            None => {
                self.push(CellKind::Arena(Box::new(cell)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::Event;
    use crate::event::arena::ArenaRow;
    use crate::tui::state::fixtures::*;

    #[test]
    fn a_comparison_is_one_cell_replaced_by_a_later_one_of_its_batch() {
        let mut s = State::new();
        let row = |agent: &str| ArenaRow {
            agent: agent.into(),
            label: "c1".into(),
            branch: "quorum/c1-x".into(),
            ..ArenaRow::default()
        };
        let compared = |rows| Event::ArenaCompared {
            batch_id: "b1".into(),
            comparison: Comparison::decide("x", rows),
        };
        apply(&mut s, 1, compared(vec![row("a\u{1b}[2J")]));
        apply(&mut s, 2, compared(vec![row("a"), row("b")]));
        assert_eq!(s.cells.len(), 1);
        let CellKind::Arena(a) = &s.cells[0].kind else {
            panic!("{:?}", s.cells[0].kind)
        };
        assert_eq!(a.comparison.rows.len(), 2);
    }
}
