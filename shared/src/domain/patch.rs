//! What a change asks of a field that may be absent.

/// Keep the current value, clear it, or set a new one: a field left out of a request,
/// sent as `null`, or sent with a value.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Patch<T> {
    #[default]
    Keep,
    Clear,
    Set(T),
}

impl<T: Clone> Patch<T> {
    /// The value `current` becomes.
    pub fn apply(self, current: &Option<T>) -> Option<T> {
        match self {
            Patch::Keep => current.clone(),
            Patch::Clear => None,
            Patch::Set(value) => Some(value),
        }
    }
}

impl<T> Patch<T> {
    pub fn is_keep(&self) -> bool {
        matches!(self, Patch::Keep)
    }
}

#[cfg(test)]
mod tests {
    use super::Patch;

    #[test]
    fn a_patch_keeps_clears_or_sets() {
        assert_eq!(Patch::Keep.apply(&Some(3)), Some(3));
        assert_eq!(Patch::<i32>::Clear.apply(&Some(3)), None);
        assert_eq!(Patch::Set(4).apply(&None), Some(4));
    }
}
