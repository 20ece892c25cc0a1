//! The clients' liveliness tokens as the node sees them (zenoh's liveliness, modelled): a token
//! is declared before its session's `Open`; the node drops it a lease after the last keep-alive
//! of a client that fell silent (stopped, cut off), and soon after a client withdraws it (it
//! ended its session, or was killed) — once the link heals, if it was cut. A dropped token ends
//! its session on the node (`Desk::close`), as the node's liveliness subscriber does.

use super::world::{Event, World};
use super::LEASE_US;

/// Between two keep-alives of a client's zenoh session (a quarter lease).
pub(super) const KEEPALIVE_US: u64 = LEASE_US / 4;

/// A client session's liveliness token, as the node sees it.
pub(super) struct Token {
    pub(super) client: usize,
    /// The node its session is on.
    pub(super) node: usize,
    pub(super) life: u32,
    pub(super) declared_at: u64,
    /// Since when its client sends nothing (stopped, cut off, killed while cut off).
    pub(super) silent_since: Option<u64>,
    /// Counts the silences, so that an expiry of an earlier one is ignored.
    pub(super) silence: u64,
    /// Its client withdrew it while cut off: the node learns it once the link heals (or the
    /// token expires first).
    pub(super) withdrawn: bool,
}

impl World {
    /// The node closes the session whose token went (if it still serves it).
    pub(super) fn token_gone(&mut self, session: &str) {
        let Some(token) = self.tokens.remove(session) else { return };
        if let Some(node) = &self.nodes[token.node] {
            node.close_session(session);
        }
    }

    /// A client withdraws the token of `session`: gone on the node after a message's delay, or
    /// a lease after its last keep-alive if the link is cut.
    pub(super) fn withdraw(&mut self, session: &str, client: usize) {
        if self.procs[client].cut {
            self.silence(session);
            if let Some(token) = self.tokens.get_mut(session) {
                token.withdrawn = true;
            }
            return;
        }
        let due = self.now + self.delay();
        self.at(due, Event::Withdrawn { session: session.to_owned() });
    }

    /// The token of `session` falls silent now (if not already): the node drops it a lease after
    /// the last keep-alive its client sent.
    fn silence(&mut self, session: &str) {
        let Some(token) = self.tokens.get_mut(session) else { return };
        if token.silent_since.is_some() {
            return;
        }
        let phase = self.procs[token.client].phase;
        let last = match self.now.checked_sub(phase) {
            Some(since) => self.now - since % KEEPALIVE_US,
            None => token.declared_at,
        }
        .max(token.declared_at);
        token.silent_since = Some(self.now);
        token.silence += 1;
        let silence = token.silence;
        self.at(last + LEASE_US, Event::Expire { session: session.to_owned(), silence });
    }

    /// The tokens of client `client`'s current life fall silent (it stopped, or its link is cut).
    pub(super) fn silence_client(&mut self, client: usize) {
        let life = self.procs[client].life;
        let sessions: Vec<String> =
            self.tokens.iter().filter(|(_, t)| t.client == client && t.life == life).map(|(s, _)| s.clone()).collect();
        for session in sessions {
            self.silence(&session);
        }
    }

    /// Client `client` speaks again (if it is neither stopped nor cut off).
    pub(super) fn unsilence_client(&mut self, client: usize) {
        let (proc, life) = (&self.procs[client], self.procs[client].life);
        if proc.stopped || proc.cut {
            return;
        }
        let mut withdrawn = Vec::new();
        for (session, token) in self.tokens.iter_mut().filter(|(_, t)| t.client == client) {
            match token.withdrawn {
                true => withdrawn.push(session.clone()),
                false if token.life == life => token.silent_since = None,
                false => {}
            }
        }
        for session in withdrawn {
            let due = self.now + self.delay();
            self.at(due, Event::Withdrawn { session });
        }
    }

    /// Client `client` is killed: its tokens go (at once on an open link, a lease later if cut
    /// off), and what its application held with them.
    pub(super) fn kill_client(&mut self, client: usize) {
        let life = self.procs[client].life;
        let sessions: Vec<String> =
            self.tokens.iter().filter(|(_, t)| t.client == client && t.life == life).map(|(s, _)| s.clone()).collect();
        for session in sessions {
            self.withdraw(&session, client);
        }
        let proc = &mut self.procs[client];
        proc.life += 1;
        proc.pending = None;
        proc.stopped = false;
        proc.killed = true;
        self.clients[client].restart();
    }
}
