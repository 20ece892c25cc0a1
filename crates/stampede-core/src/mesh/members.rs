//! Who takes part: joins (a snapshot to every newcomer), deaths (fences), and finalization —
//! the one place claims of a dead participant are dropped.
//!
//! **Membership.** The fabric reports every incarnation whose liveliness is present when this
//! one starts, and every later one (`peer_joined`). An incarnation declared dead before this one
//! started is unknown to it — yet a live peer that has not heard of that death yet may still take
//! data over from it. So a snapshot lists the incarnations its sender still takes data from, and
//! this participant learns every incarnation it hears of as a member: listed live, it asks the
//! driver to check its liveliness ([`Event::AskLiveliness`]); heard of as dead (a fence), it is
//! dying at once. Such a member's missing snapshot holds ts_min until it sends one (alive) or is
//! finalized (dead) — after the fence of every peer that listed it live (a peer that never knew it
//! cannot take its data over), by which time their takeovers are in the view. An incarnation the
//! fabric reported waits for every live peer's fence.
//!
//! **The rule for the dead.** A death is learned from the fabric (`peer_dead`) or from any
//! peer's fence of it (gossip: the fabric declared it to someone). On learning it, a participant
//! *fences* the dead incarnation: it takes nothing over from it any more, and says so in its
//! next batch — after every takeover it ever did from it, since its stream is FIFO. It drops the
//! dead one's claims only when every live participant it knows has fenced it: by then every
//! claim that moved from the dead one to a live one is in the view, so nothing the dead one
//! covered is left uncovered. Participants dying together are finalized together (one of them
//! may have handed the other's data on). A carry handed to the dead is released after the same
//! fences, so that data a dead receiver passed on before dying stays covered too.

use crate::mesh::wire::{Change, Peer, Seq, Site, Snapshot, Transmit};
use crate::mesh::{Event, Member, Mesh, MeshRefusal, Message, MoveId, Mutation, Standing};

impl Mesh {
    /// The fabric reports `peer` alive (liveliness). This participant sends it a snapshot of its
    /// contribution, and holds its ts_min until `peer`'s snapshot arrives. A newer incarnation
    /// of a known participant means the older one is dead.
    pub fn peer_joined(&mut self, peer: Peer) -> Result<(), MeshRefusal> {
        self.admit()?;
        let learned = self.learn_peer(peer, true);
        self.settle();
        learned
    }

    /// Makes `peer` a member (a newer incarnation ends an older one; an older one is dead) and
    /// sends it a snapshot. `confirmed`: the fabric reported it.
    pub(super) fn learn_peer(&mut self, peer: Peer, confirmed: bool) -> Result<(), MeshRefusal> {
        if peer.id == self.me.id {
            if peer.incarnation > self.me.incarnation {
                self.expel();
                return Err(MeshRefusal::Expelled);
            }
            if peer.incarnation < self.me.incarnation {
                self.learn_death(peer);
                return Err(MeshRefusal::StaleIncarnation { peer, current: self.me.incarnation });
            }
            return Ok(());
        }
        if let Some(member) = self.members.get_mut(&peer) {
            member.confirmed |= confirmed;
            return Ok(());
        }
        if self.dead_set.contains(&peer) {
            return Err(MeshRefusal::DeadIncarnation { peer });
        }
        let same_id = self.members.keys().find(|p| p.id == peer.id).copied();
        if let Some(known) = same_id.filter(|known| known.incarnation > peer.incarnation) {
            self.learn_death(peer);
            return Err(MeshRefusal::StaleIncarnation { peer, current: known.incarnation });
        }
        if same_id.is_none() && self.members.len() >= self.limits.peers_max {
            return Err(MeshRefusal::TooManyPeers { max: self.limits.peers_max });
        }
        if let Some(older) = same_id {
            self.learn_death(older);
        }
        // What the snapshot says must be exactly what batches up to `self.seq` said.
        self.seal();
        self.members.insert(peer, Member::new(Standing::Live, confirmed));
        let snapshot = self.snapshot(self.fenced());
        self.transmits.push_back(Transmit { to: vec![peer], message: Message::Snapshot(snapshot) });
        self.ask_newcomer(peer);
        Ok(())
    }

    /// This participant's contribution as of its last sealed batch (seal first), with `fenced`.
    fn snapshot(&self, fenced: Vec<Peer>) -> Snapshot {
        Snapshot {
            seq: self.seq,
            claims: self.view.contribution(self.me),
            watermark: self.view.watermark(),
            fenced,
            after: self.after_sealed.iter().map(|(&p, &s)| (p, s)).collect(),
            live: self.live_peers(),
        }
    }

    /// Tells `peer` that this participant fenced it, when a message of `peer` shows it does not
    /// know (the fence was lost in a partition, or went only to live peers): a snapshot fencing
    /// it, which expels it at once ([`Event::Expelled`]: it rejoins as a new incarnation).
    /// Returns whether there was anything to tell: `peer` is dying or remembered dead here, and
    /// the outbox has room.
    pub fn remind(&mut self, peer: Peer) -> bool {
        let dying = self.members.get(&peer).is_some_and(|m| m.standing == Standing::Dying);
        if !(dying || self.dead_set.contains(&peer)) || self.admit().is_err() {
            return false;
        }
        self.seal();
        let snapshot = self.snapshot(vec![peer]);
        self.transmits.push_back(Transmit { to: vec![peer], message: Message::Snapshot(snapshot) });
        true
    }

    /// The fabric declares `peer` dead (liveliness lost, session closed). Its claims are dropped
    /// once every live participant has fenced it (module doc).
    pub fn peer_dead(&mut self, peer: Peer) -> Result<(), MeshRefusal> {
        self.check_alive()?;
        self.learn_death(peer);
        self.settle();
        Ok(())
    }

    /// Fences `peer`: refuses its moves from now on and says so in the next batch.
    pub(super) fn learn_death(&mut self, peer: Peer) {
        if peer == self.me || (peer.id == self.me.id && peer.incarnation > self.me.incarnation) {
            self.expel();
            return;
        }
        match self.members.get_mut(&peer) {
            Some(member) if member.standing == Standing::Live => {
                member.standing = Standing::Dying;
                self.open.fenced.push(peer);
                self.seal_if_full();
            }
            Some(_) => {}
            // Finalized here already.
            None if self.dead_set.contains(&peer) => {}
            // Never a member here: it may still have handed data to a peer that takes it over
            // (module doc), and peers may wait for this participant's fence of it.
            None => {
                if self.members.len() < self.limits.peers_max {
                    self.members.insert(peer, Member::new(Standing::Dying, false));
                } else {
                    self.remember_dead(peer);
                }
                self.open.fenced.push(peer);
                self.seal_if_full();
            }
        }
    }

    /// Records peer `from`'s fences (from its batch or snapshot `seq`): each is also news of a
    /// death.
    pub(super) fn note_fences(&mut self, from: Peer, fenced: &[Peer], seq: Seq) {
        for &dead in fenced {
            self.learn_death(dead);
            if self.expelled {
                return;
            }
            if self.members.get(&dead).is_some_and(|m| m.standing == Standing::Dying) {
                if let Some(member) = self.members.get_mut(&from) {
                    member.fences.entry(dead).or_insert(seq);
                }
            }
        }
    }

    /// Remembers a dead incarnation (bounded: the oldest is forgotten; its late messages are
    /// then refused as unknown). Returns whether it is new.
    fn remember_dead(&mut self, peer: Peer) -> bool {
        if !self.dead_set.insert(peer) {
            return false;
        }
        self.dead.push_back(peer);
        if self.dead.len() > self.limits.dead_remembered_max {
            if let Some(oldest) = self.dead.pop_front() {
                self.dead_set.remove(&oldest);
            }
        }
        true
    }

    /// What this participant has fenced: those dying here and the dead it remembers.
    fn fenced(&self) -> Vec<Peer> {
        let dying = self.members.iter().filter(|(_, m)| m.standing == Standing::Dying).map(|(&p, _)| p);
        dying.chain(self.dead.iter().copied()).take(self.limits.batch_markers_max).collect()
    }

    /// Drops every dying participant once every live one has fenced them all; returns whether it
    /// did (batches waiting on them may now apply).
    pub(super) fn try_finalize(&mut self) -> bool {
        let dying: Vec<Peer> =
            self.members.iter().filter(|(_, m)| m.standing == Standing::Dying).map(|(&p, _)| p).collect();
        if dying.is_empty() {
            return false;
        }
        let live = || self.members.values().filter(|m| m.standing == Standing::Live);
        // A peer's fence counts; a peer whose snapshot did not list an incarnation the fabric
        // never reported here never knew it, so it takes nothing over from it.
        let fenced = |m: &Member, dead: &Peer| {
            m.fences.contains_key(dead)
                || (!self.members[dead].confirmed && m.snapshot && !m.snapshot_live.contains(dead))
        };
        let fenced_by_all = live().all(|m| dying.iter().all(|d| fenced(m, d)));
        if !fenced_by_all && !self.mutated(Mutation::FinalizeWithoutFences) {
            return false;
        }
        // Carries to the dead are released after every fence waited for, everywhere.
        let after: Vec<(Peer, Seq)> = self
            .members
            .iter()
            .filter(|(_, m)| m.standing == Standing::Live)
            .filter_map(|(&p, m)| dying.iter().filter_map(|d| m.fences.get(d)).max().map(|&seq| (p, seq)))
            .collect();
        for dead in &dying {
            self.forget_door_of(*dead);
            self.view.drop_owner(*dead);
            self.members.remove(dead);
            self.remember_dead(*dead);
            self.push_event(Event::Finalized { peer: *dead });
        }
        for member in self.members.values_mut() {
            member.fences.retain(|d, _| !dying.contains(d));
        }
        self.after_sealed.retain(|p, _| !dying.contains(p));
        self.next_move.retain(|to, _| !dying.contains(to));
        let gone: Vec<(Peer, MoveId)> = self.carries.keys().filter(|(to, _)| dying.contains(to)).copied().collect();
        if !gone.is_empty() {
            for dep in after {
                self.add_after(dep);
            }
            for (to, id) in gone {
                self.release_carry(to, id);
            }
        }
        true
    }

    /// Releases own carry `id` to `to` (resolved, or its receiver finalized).
    pub(super) fn release_carry(&mut self, to: Peer, id: MoveId) {
        let Some(ts) = self.carries.remove(&(to, id)) else { return };
        let change = Change { site: Site::Carry { to, id }, ts, delta: -1 };
        self.commit_own(&[change]).expect("a carry held is released");
    }

    /// The open batch must be applied after batch `seq` of `peer` (keeps the highest per peer).
    pub(super) fn add_after(&mut self, (peer, seq): (Peer, Seq)) {
        match self.open.after.iter_mut().find(|(p, _)| *p == peer) {
            Some(entry) => entry.1 = entry.1.max(seq),
            None => self.open.after.push((peer, seq)),
        }
        self.seal_if_full();
    }

    pub(super) fn expel(&mut self) {
        if !self.expelled {
            self.expelled = true;
            self.push_event(Event::Expelled);
        }
    }
}
