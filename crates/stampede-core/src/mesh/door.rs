//! Doors opened and given back at any time, with nobody to sponsor them: the *pause round*
//! (docs/PROTOCOL.md, "Doors").
//!
//! A door is a claim every view includes, so a root task started at or above it is covered
//! everywhere. A new one must therefore be at or above every view's ts_min when it reaches that
//! view — and views differ, each behind or ahead of the others by messages in flight. So a
//! participant opening its door ([`Mesh::open_door`]) first asks every member to **pause**: each
//! holds its published ts_min where it is and answers with it (`Paused`). Once every member has
//! answered or is dead, the door opens at the highest answer (or this participant's own ts_min,
//! if higher), in a sealed batch named to the members by `Opened`; each member ends its pause once
//! that batch's claims are applied in its view — the door holds the view from then on. A member
//! learned during the round is asked too (after its snapshot); one learned after the door opened
//! gets it in its snapshot, and its view publishes nothing before that snapshot is in.
//!
//! **Guarantees.** A door never reaches a live view above it (so it is never refused); every pause
//! ends — when the door's batch is applied, when its asker is finalized, or never begins for a
//! stale (duplicate) request; a round ends once every member answered or died. A door is given
//! back by a release like any other ([`Mesh::close_door`]); one asked to close while its round runs
//! closes right after it opens, so no pause waits for a door that never comes. Pauses are bounded
//! by the members (one per asking peer), rounds by one per participant.

use std::collections::BTreeSet;

use crate::mesh::wire::{Change, Message, Peer, Seq, Site, Transmit};
use crate::mesh::{Mesh, MeshRefusal, Mutation, Standing};
use crate::time::Timestamp;

/// A round opening this participant's door.
#[derive(Debug)]
pub(super) struct Opening {
    /// The last batch sealed when the round began: it names the round.
    after: Seq,
    /// Members asked that have neither answered nor been finalized.
    waiting: BTreeSet<Peer>,
    /// Every member asked (they are told when the door opens).
    asked: BTreeSet<Peer>,
    /// The highest ts_min answered.
    highest: Timestamp,
    /// The door is to be given back as soon as it opens.
    close: bool,
}

/// This participant's ts_min held for a peer's door.
#[derive(Clone, Copy, Debug)]
pub(super) struct Pause {
    /// The asker's round.
    after: Seq,
    /// The ts_min this participant answered, and holds its own at or below.
    at: Timestamp,
    /// The asker's batch that opened the door, once `Opened` said so.
    until: Option<Seq>,
}

impl Mesh {
    /// Opens this participant's door: at once when no other participant is a member, else
    /// through a pause round (module doc). Returns the door when it is open, `None` while the
    /// round waits for answers (the door shows in [`join_floor`](Mesh::join_floor) when it
    /// opens). Calling it again while a round runs or a door is open changes nothing.
    pub fn open_door(&mut self) -> Result<Option<Timestamp>, MeshRefusal> {
        self.admit()?;
        if self.door.is_some() {
            return Ok(self.door);
        }
        if let Some(opening) = &mut self.opening {
            opening.close = false;
            return Ok(None);
        }
        // The round is named by the last batch sealed before it: a door of an earlier round
        // came in a batch up to it.
        self.seal();
        let mut asked: BTreeSet<Peer> = self.members.keys().copied().collect();
        if self.mutated(Mutation::OpenWithoutPause) {
            asked.clear();
        }
        if !asked.is_empty() {
            let to = asked.iter().copied().collect();
            self.transmits.push_back(Transmit { to, message: Message::Pause { after: self.seq } });
        }
        self.opening = Some(Opening { after: self.seq, waiting: asked.clone(), asked, highest: 0, close: false });
        self.settle();
        Ok(self.door)
    }

    /// Gives this participant's door back (a release like any other claim): root tasks may no
    /// longer start here until a door opens again. Returns whether a door was open; while a
    /// round runs, the door closes as soon as it opens.
    pub fn close_door(&mut self) -> Result<bool, MeshRefusal> {
        self.admit()?;
        if let Some(opening) = &mut self.opening {
            opening.close = true;
            return Ok(false);
        }
        let Some(door) = self.door.take() else { return Ok(false) };
        self.commit_own(&[Change { site: Site::Door, ts: door, delta: -1 }]).expect("the door held is released");
        self.settle();
        Ok(true)
    }

    /// The members this participant's running pause round still waits for (neither answered nor
    /// finalized); empty without a round. A driver fences one that stays silent too long: its
    /// death ends the wait.
    pub fn unanswered(&self) -> Vec<Peer> {
        self.opening.as_ref().map(|opening| opening.waiting.iter().copied().collect()).unwrap_or_default()
    }

    /// A member learned while this participant's round runs is asked too (its snapshot went
    /// first).
    pub(super) fn ask_newcomer(&mut self, peer: Peer) {
        let Some(opening) = &mut self.opening else { return };
        opening.waiting.insert(peer);
        opening.asked.insert(peer);
        let message = Message::Pause { after: opening.after };
        self.transmits.push_back(Transmit { to: vec![peer], message });
    }

    /// A door message from member `from` (`Pause`, `Paused`, `Opened`).
    pub(super) fn door_message(&mut self, from: Peer, message: Message) -> Result<(), MeshRefusal> {
        let ts_min = self.ts_min;
        let member = self.members.get_mut(&from).expect("checked member");
        match message {
            Message::Pause { after } => {
                if member.standing != Standing::Live {
                    return Err(MeshRefusal::DeadIncarnation { peer: from });
                }
                // A round whose door opened already (a copy delivered late) pauses nothing: its
                // door is in the view or was given back.
                let at = if member.opened.is_some_and(|opened| after <= opened) {
                    ts_min
                } else {
                    match member.pause {
                        Some(pause) if pause.after == after => pause.at,
                        _ => {
                            member.pause = Some(Pause { after, at: ts_min, until: None });
                            ts_min
                        }
                    }
                };
                self.transmits.push_back(Transmit { to: vec![from], message: Message::Paused { after, ts_min: at } });
            }
            Message::Paused { after, ts_min } => {
                if let Some(opening) = self.opening.as_mut().filter(|o| o.after == after) {
                    if opening.waiting.remove(&from) {
                        opening.highest = opening.highest.max(ts_min);
                    }
                }
            }
            Message::Opened { after, seq } => {
                member.opened = member.opened.max(Some(after));
                if let Some(pause) = member.pause.as_mut().filter(|p| p.after == after) {
                    pause.until = Some(seq);
                }
            }
            Message::Snapshot(_) | Message::Batch(_) => unreachable!("door messages only"),
        }
        Ok(())
    }

    /// A finalized member is not waited for any more. (A pause for a member only fenced stays:
    /// its batches still apply here until it is finalized, its door's included, and data it
    /// handed to a peer that has not fenced it yet may still come here covered by that door.)
    pub(super) fn forget_door_of(&mut self, peer: Peer) {
        if let Some(opening) = &mut self.opening {
            opening.waiting.remove(&peer);
        }
    }

    /// Ends every pause whose door's batch has its claims applied here.
    pub(super) fn end_pauses(&mut self) {
        for member in self.members.values_mut() {
            if member.pause.is_some_and(|p| p.until.is_some_and(|seq| member.claimed >= seq)) {
                member.pause = None;
            }
        }
    }

    /// The lowest ts_min this participant answered a pause with and still holds.
    pub(super) fn paused_at(&self) -> Timestamp {
        self.members.values().filter_map(|m| m.pause.map(|p| p.at)).fold(crate::time::INFINITY, Timestamp::min)
    }

    /// Opens the door once every member asked answered or is gone: at the highest answer or
    /// this participant's own ts_min, in a batch of its own that the members asked are told of.
    pub(super) fn try_open(&mut self) {
        let Some(opening) = self.opening.as_ref().filter(|o| o.waiting.is_empty()) else { return };
        let (after, close) = (opening.after, opening.close);
        let door = opening.highest.max(self.ts_min);
        let to: Vec<Peer> = opening.asked.iter().copied().filter(|p| self.members.contains_key(p)).collect();
        // At or above ts_min, so refused only when the contribution is full: the round stays
        // answered, and the door opens at a later input.
        if self.commit_own(&[Change { site: Site::Door, ts: door, delta: 1 }]).is_err() {
            return;
        }
        self.opening = None;
        self.door = Some(door);
        self.seal();
        if !to.is_empty() {
            self.transmits.push_back(Transmit { to, message: Message::Opened { after, seq: self.seq } });
        }
        if close {
            self.door = None;
            self.commit_own(&[Change { site: Site::Door, ts: door, delta: -1 }]).expect("the door just opened");
        }
    }
}
