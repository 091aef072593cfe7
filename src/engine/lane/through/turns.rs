//! The mover's turns (src/engine/lane/through.rs): the connections ready
//! to move, queued per user (the one who pays for them: `payer`), and
//! served a round at a time, one connection of each user a round. A user
//! with many connections ready gets no more of the mover than a user with
//! one: each connection of the many waits its user's turns, not the
//! others' users'. No engine types: any item with an id.

use std::collections::{HashSet, VecDeque};

/// Items ready, by user, each queued once (by its id) until it is taken.
pub(crate) struct Turns<T> {
    users: VecDeque<(u32, VecDeque<(usize, T)>)>,
    queued: HashSet<usize>,
}

impl<T> Default for Turns<T> {
    fn default() -> Self {
        Turns {
            users: VecDeque::new(),
            queued: HashSet::new(),
        }
    }
}

impl<T> Turns<T> {
    pub(crate) fn is_empty(&self) -> bool {
        self.queued.is_empty()
    }

    /// `item` (id `id`) ready, at the back of `user`'s queue; nothing if it
    /// is queued already. A user with nothing queued comes last.
    pub(crate) fn push(&mut self, user: u32, id: usize, item: T) {
        if !self.queued.insert(id) {
            return;
        }
        match self.users.iter_mut().find(|(u, _)| *u == user) {
            Some((_, q)) => q.push_back((id, item)),
            None => self.users.push_back((user, VecDeque::from([(id, item)]))),
        }
    }

    /// One round: the first item of each user's queue, in the users'
    /// order, each taken out (pushed again by the caller if it has more:
    /// then it is its user's last). The users keep their order.
    pub(crate) fn round(&mut self) -> Vec<(u32, usize, T)> {
        let mut out = Vec::with_capacity(self.users.len());
        for (user, q) in &mut self.users {
            if let Some((id, item)) = q.pop_front() {
                self.queued.remove(&id);
                out.push((*user, id, item));
            }
        }
        self.users.retain(|(_, q)| !q.is_empty());
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// B's 40 items ready before A's one: A's comes in the first round, and
    /// B's each once in 40 rounds, in order; an item pushed twice is queued
    /// once.
    #[test]
    fn each_user_gets_one_turn_a_round_however_many_items_it_has() {
        let mut t = Turns::default();
        for i in 0..40 {
            t.push(65534, i, format!("B{i}"));
        }
        t.push(65534, 3, "B3 again".to_string());
        t.push(61021, 100, "A".to_string());
        let first = t.round();
        println!("the first round: {first:?}");
        assert_eq!(
            first.iter().map(|x| x.2.as_str()).collect::<Vec<_>>(),
            ["B0", "A"]
        );
        let mut bs = vec![];
        while !t.is_empty() {
            let r = t.round();
            assert_eq!(r.len(), 1, "only B's left: one a round");
            bs.push(r[0].1);
        }
        assert_eq!(bs, (1..40).collect::<Vec<_>>());
    }

    /// An item pushed again after its turn goes behind its user's others,
    /// and its user keeps its place among the users.
    #[test]
    fn an_item_with_more_goes_behind_its_users_others() {
        let mut t = Turns::default();
        t.push(1, 10, ());
        t.push(1, 11, ());
        t.push(2, 20, ());
        let r = t.round();
        assert_eq!(r.iter().map(|x| x.1).collect::<Vec<_>>(), [10, 20]);
        t.push(1, 10, ());
        t.push(2, 20, ());
        let r = t.round();
        println!("the second round: {r:?}");
        assert_eq!(r.iter().map(|x| x.1).collect::<Vec<_>>(), [11, 20]);
        let r = t.round();
        assert_eq!(r.iter().map(|x| x.1).collect::<Vec<_>>(), [10]);
        assert!(t.is_empty());
    }
}
