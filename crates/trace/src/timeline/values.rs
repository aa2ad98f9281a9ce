//! The values a [`super::Timeline`] is made of that cost no allocation per
//! packet: a [`Name`] (a stream's or destination's name, made once when
//! the name is first seen and shared by reference count from then on) and
//! [`PerHop`] (one value per hop of the profile, held inline: a profile
//! has at most [`MAX_HOPS`] hops).

use std::borrow::Borrow;
use std::fmt;
use std::ops::{Deref, DerefMut};
use std::sync::Arc;

use super::MAX_HOPS;

/// A name made once and shared: cloning it counts a reference, comparing
/// two clones of one name compares their pointers first. Reads as a
/// `str` (`&*name`, `name.len()`, `name == "tap0"`).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<str>);

impl Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for Name {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name(Arc::from(s))
    }
}

impl From<String> for Name {
    fn from(s: String) -> Self {
        Name(Arc::from(s))
    }
}

impl From<Name> for String {
    fn from(n: Name) -> Self {
        n.0.to_string()
    }
}

impl PartialEq<str> for Name {
    fn eq(&self, other: &str) -> bool {
        &*self.0 == other
    }
}

impl PartialEq<&str> for Name {
    fn eq(&self, other: &&str) -> bool {
        &*self.0 == *other
    }
}

impl PartialEq<String> for Name {
    fn eq(&self, other: &String) -> bool {
        *self.0 == **other
    }
}

impl PartialEq<Name> for String {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl PartialEq<Name> for &str {
    fn eq(&self, other: &Name) -> bool {
        **self == *other.0
    }
}

impl fmt::Display for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Name {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.0, f)
    }
}

/// One value per hop, inline (at most [`MAX_HOPS`]): reads and writes as
/// a slice of its hops' values (`hops[i]`, `hops.iter()`, `hops.len()`).
#[derive(Clone, Copy)]
pub struct PerHop<T: Copy + Default> {
    len: u8,
    items: [T; MAX_HOPS],
}

impl<T: Copy + Default> PerHop<T> {
    /// `n` hops of the default value (`None` for optional values).
    pub fn new(n: usize) -> Self {
        assert!(n <= MAX_HOPS, "{n} hops, at most {MAX_HOPS} are held");
        PerHop {
            len: n as u8,
            items: [T::default(); MAX_HOPS],
        }
    }
}

impl<T: Copy + Default> Default for PerHop<T> {
    /// No hops.
    fn default() -> Self {
        Self::new(0)
    }
}

impl<T: Copy + Default> Deref for PerHop<T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        &self.items[..usize::from(self.len)]
    }
}

impl<T: Copy + Default> DerefMut for PerHop<T> {
    fn deref_mut(&mut self) -> &mut [T] {
        &mut self.items[..usize::from(self.len)]
    }
}

impl<T: Copy + Default> FromIterator<T> for PerHop<T> {
    /// The values in order; more than [`MAX_HOPS`] is a bug (no profile
    /// has them) and panics.
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut p = PerHop::new(0);
        for v in iter {
            assert!(usize::from(p.len) < MAX_HOPS, "more than {MAX_HOPS} hops");
            p.items[usize::from(p.len)] = v;
            p.len += 1;
        }
        p
    }
}

impl<T: Copy + Default> From<Vec<T>> for PerHop<T> {
    fn from(v: Vec<T>) -> Self {
        v.into_iter().collect()
    }
}

impl<T: Copy + Default> From<&[T]> for PerHop<T> {
    fn from(v: &[T]) -> Self {
        v.iter().copied().collect()
    }
}

impl<T: Copy + Default + PartialEq> PartialEq for PerHop<T> {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl<T: Copy + Default + Eq> Eq for PerHop<T> {}

impl<T: Copy + Default + PartialEq> PartialEq<Vec<T>> for PerHop<T> {
    fn eq(&self, other: &Vec<T>) -> bool {
        **self == **other
    }
}

impl<T: Copy + Default + PartialEq> PartialEq<[T]> for PerHop<T> {
    fn eq(&self, other: &[T]) -> bool {
        **self == *other
    }
}

impl<T: Copy + Default + fmt::Debug> fmt::Debug for PerHop<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&**self, f)
    }
}

impl<'a, T: Copy + Default> IntoIterator for &'a PerHop<T> {
    type Item = &'a T;
    type IntoIter = std::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_name_compares_with_text_and_its_clones() {
        let n = Name::from("tap0");
        let c = n.clone();
        assert_eq!(n, c);
        assert_eq!(n, "tap0");
        assert_eq!("tap0", n);
        let owned = String::from("tap0");
        assert_eq!(n, owned);
        let next = Name::from("tap1");
        assert!(n < next);
        assert_eq!(format!("{n} {n:?}"), "tap0 \"tap0\"");
        assert_eq!(n.len(), 4);
    }

    #[test]
    fn per_hop_values_read_as_a_slice_of_their_hops() {
        let mut p: PerHop<Option<u64>> = PerHop::new(3);
        assert_eq!(p, vec![None, None, None]);
        p[1] = Some(7);
        assert_eq!(p.iter().flatten().count(), 1);
        let q: PerHop<Option<u64>> = vec![None, Some(7), None].into();
        assert_eq!(p, q);
        assert_eq!(format!("{q:?}"), "[None, Some(7), None]");
        assert!(PerHop::<u8>::default().is_empty());
    }

    #[test]
    #[should_panic(expected = "more than")]
    fn more_hops_than_a_profile_has_is_refused() {
        let _: PerHop<u8> = (0..=MAX_HOPS as u8).collect();
    }
}
