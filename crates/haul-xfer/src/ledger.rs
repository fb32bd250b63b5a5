//! The ledger of a transfer: every file planned, and which of them arrived. The engine reports
//! success only when it balances, so a file lost anywhere (a worker that died holding its batch,
//! a queue whose lock was poisoned, a bug in giving files back) turns into an error that names it
//! instead of a silent gap in the destination.

use std::collections::BTreeMap;

use crate::error::XferError;

/// Files planned, by destination, and how many of each are still owed.
#[derive(Debug, Default)]
pub struct Ledger {
    /// Destination path → arrivals still owed (a destination may be planned more than once).
    owed: BTreeMap<String, u32>,
    /// Number of files planned.
    planned: usize,
}

impl Ledger {
    /// A ledger owing one arrival for each destination in `dsts`.
    pub fn new<'a>(dsts: impl IntoIterator<Item = &'a str>) -> Ledger {
        let mut l = Ledger::default();
        for d in dsts {
            *l.owed.entry(d.to_string()).or_insert(0) += 1;
            l.planned += 1;
        }
        l
    }

    /// Records that the file at `dst` arrived (moved into place, verified if asked); false if
    /// none was owed there, which the engine treats as a bug of its own.
    pub fn arrived(&mut self, dst: &str) -> bool {
        match self.owed.get_mut(dst) {
            Some(n) if *n > 1 => {
                *n -= 1;
                true
            }
            Some(_) => {
                self.owed.remove(dst);
                true
            }
            None => false,
        }
    }

    /// Files planned.
    pub fn planned(&self) -> usize {
        self.planned
    }

    /// Destinations still owed, in order, each as often as it is owed.
    pub fn missing(&self) -> Vec<String> {
        self.owed
            .iter()
            .flat_map(|(d, &n)| std::iter::repeat_n(d.clone(), n as usize))
            .collect()
    }

    /// True when every file planned arrived.
    pub fn balances(&self) -> bool {
        self.owed.is_empty()
    }

    /// The error that names the files still owed, and what stopped the engine if it failed.
    pub fn not_moved(&self, cause: Option<String>) -> XferError {
        XferError::NotMoved {
            planned: self.planned,
            missing: self.missing(),
            cause,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn balances_only_when_every_planned_file_arrived() {
        let mut l = Ledger::new(["/d/a", "/d/b", "/d/c"]);
        assert_eq!(l.planned(), 3);
        assert!(l.arrived("/d/b"));
        assert!(!l.balances());
        assert_eq!(l.missing(), ["/d/a", "/d/c"]);
        assert!(l.arrived("/d/a"));
        assert!(l.arrived("/d/c"));
        assert!(l.balances());
        assert!(l.missing().is_empty());
    }

    #[test]
    fn an_arrival_nobody_planned_is_refused_and_changes_nothing() {
        let mut l = Ledger::new(["/d/a"]);
        assert!(!l.arrived("/d/x"));
        assert_eq!(l.missing(), ["/d/a"]);
    }

    #[test]
    fn a_destination_planned_twice_is_owed_twice() {
        let mut l = Ledger::new(["/dev/null", "/dev/null"]);
        assert!(l.arrived("/dev/null"));
        assert_eq!(l.missing(), ["/dev/null"]);
        assert!(l.arrived("/dev/null"));
        assert!(l.balances());
        assert!(!l.arrived("/dev/null"), "a third arrival was never owed");
    }
}
