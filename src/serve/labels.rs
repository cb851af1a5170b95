//! The concept-label cache: label → embedding, least recently used first out, so building a
//! scope's graph embeds only labels not seen recently. Must not know scopes or stores.

use std::collections::HashMap;

/// Label → embedding, bounded: two generations, the older dropped whole when the newer fills
/// half the capacity; a hit in the older moves the label to the newer (least recently used
/// labels go first).
pub(super) struct LabelCache {
    pub(super) capacity: usize,
    pub(super) new: HashMap<String, Vec<f32>>,
    pub(super) old: HashMap<String, Vec<f32>>,
}

impl LabelCache {
    pub(super) fn new(capacity: usize) -> LabelCache {
        LabelCache { capacity: capacity.max(2), new: HashMap::new(), old: HashMap::new() }
    }

    pub(super) fn contains(&self, label: &str) -> bool {
        self.new.contains_key(label) || self.old.contains_key(label)
    }

    pub(super) fn get(&mut self, label: &str) -> Option<Vec<f32>> {
        self.new.get(label).or_else(|| self.old.get(label)).cloned()
    }

    pub(super) fn insert(&mut self, label: String, v: Vec<f32>) {
        self.old.remove(&label);
        self.new.insert(label, v);
        if self.new.len() >= self.capacity / 2 {
            self.old = std::mem::take(&mut self.new);
        }
    }

    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.new.len() + self.old.len()
    }
}
