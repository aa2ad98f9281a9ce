//! The tables the statistics keep their figures in, indexed on the hot
//! path and read by name: [`StageTable`] holds one slot per stage of the
//! trace (its selected stages, then `end_to_end`: the order of
//! [`super::Stats::stage_names`]), filled when the stage first has a
//! value, so that a timeline's stage is counted by its index without a
//! name compared; [`StreamTable`] holds the streams, found per timeline
//! by a hash of the stream's name (no ordered map walked with a string
//! comparison at each level) and read in name order.

use std::collections::HashMap;
use std::ops::Index;
use std::sync::Arc;

use crate::timeline::Name;

use super::{StageStats, StreamStats};

/// The hasher of the stream table (stream names come from our own
/// probes' records; a flood of colliding names costs time, never a
/// wrong figure).
type FastHash = foldhash::fast::RandomState;

/// One slot per stage of the trace; see the module comment.
#[derive(Debug, Clone, Default)]
pub struct StageTable {
    /// The stages' names, shared by every table of a trace.
    names: Arc<[Name]>,
    slots: Vec<Option<StageStats>>,
}

impl StageTable {
    /// No stage counted yet, of the stages named `names`.
    pub(crate) fn new(names: &Arc<[Name]>) -> Self {
        StageTable {
            names: names.clone(),
            slots: vec![None; names.len()],
        }
    }

    /// Stage `i` (of `names`), made by `new` when it is first counted.
    pub(crate) fn slot(
        &mut self,
        i: usize,
        names: &Arc<[Name]>,
        new: impl FnOnce() -> StageStats,
    ) -> &mut StageStats {
        if self.slots.len() != names.len() {
            // (an interval taken as `Default`: its first count sizes it)
            *self = StageTable::new(names);
        }
        self.slots[i].get_or_insert_with(new)
    }

    /// Add `later`'s stages (counted after this table's) to this table's.
    pub(crate) fn absorb(&mut self, later: &StageTable) {
        if self.slots.is_empty() {
            // (a table taken as `Default`: sized by the first it adds)
            *self = StageTable::new(&later.names);
        }
        for (mine, theirs) in self.slots.iter_mut().zip(&later.slots) {
            match (mine.as_mut(), theirs) {
                (_, None) => {}
                (None, Some(t)) => *mine = Some(t.clone()),
                (Some(m), Some(t)) => m.absorb(t),
            }
        }
    }

    /// The stage named `name`, if counted.
    pub fn get(&self, name: &str) -> Option<&StageStats> {
        let i = self.names.iter().position(|n| *n == *name)?;
        self.slots.get(i)?.as_ref()
    }

    pub fn contains_key(&self, name: &str) -> bool {
        self.get(name).is_some()
    }

    /// The stages counted, in the trace's stage order, with their names.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &StageStats)> {
        self.names
            .iter()
            .zip(&self.slots)
            .filter_map(|(n, s)| Some((&**n, s.as_ref()?)))
    }

    /// The stages counted, in the trace's stage order.
    pub fn values(&self) -> impl Iterator<Item = &StageStats> {
        self.slots.iter().flatten()
    }

    /// Stages counted.
    pub fn len(&self) -> usize {
        self.values().count()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl Index<&str> for StageTable {
    type Output = StageStats;
    fn index(&self, name: &str) -> &StageStats {
        self.get(name)
            .unwrap_or_else(|| panic!("no stage {name} counted"))
    }
}

/// The streams' statistics; see the module comment.
#[derive(Debug, Clone, Default)]
pub struct StreamTable {
    /// In the order first seen (an index stays valid).
    entries: Vec<(Name, StreamStats)>,
    index: HashMap<Name, usize, FastHash>,
    /// `entries` in name order.
    sorted: Vec<usize>,
}

impl StreamTable {
    /// The index of stream `name`, its statistics made by `new` when it
    /// is first seen (the second value: it was).
    pub(crate) fn index_of(
        &mut self,
        name: &Name,
        new: impl FnOnce() -> StreamStats,
    ) -> (usize, bool) {
        if let Some(&i) = self.index.get(&**name) {
            return (i, false);
        }
        let i = self.entries.len();
        self.entries.push((name.clone(), new()));
        self.index.insert(name.clone(), i);
        let at = self.sorted.partition_point(|&j| self.entries[j].0 < *name);
        self.sorted.insert(at, i);
        (i, true)
    }

    /// The statistics of the stream at `i` ([`Self::index_of`]).
    pub(crate) fn at_mut(&mut self, i: usize) -> &mut StreamStats {
        &mut self.entries[i].1
    }

    pub fn get(&self, name: &str) -> Option<&StreamStats> {
        self.index.get(name).map(|&i| &self.entries[i].1)
    }

    /// The streams and their statistics in name order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &StreamStats)> {
        self.sorted.iter().map(|&i| {
            let (n, s) = &self.entries[i];
            (&**n, s)
        })
    }

    /// The streams' names in name order.
    pub fn keys(&self) -> impl Iterator<Item = &str> {
        self.iter().map(|(n, _)| n)
    }

    /// The streams' statistics in name order.
    pub fn values(&self) -> impl Iterator<Item = &StreamStats> {
        self.iter().map(|(_, s)| s)
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl<'a> IntoIterator for &'a StreamTable {
    type Item = (&'a str, &'a StreamStats);
    type IntoIter = Box<dyn Iterator<Item = (&'a str, &'a StreamStats)> + 'a>;
    fn into_iter(self) -> Self::IntoIter {
        Box::new(self.iter())
    }
}

impl Index<&str> for StreamTable {
    type Output = StreamStats;
    fn index(&self, name: &str) -> &StreamStats {
        self.get(name)
            .unwrap_or_else(|| panic!("no stream {name} counted"))
    }
}
