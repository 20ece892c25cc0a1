//! Any sequence of inputs — membership churn, local changes, moves, and messages from any
//! incarnation with any content (negative, zero, huge or overflowing counts and sequence numbers,
//! sites a peer may not report) — is applied or refused with a reason: nothing panics, and ts_min
//! never decreases. (`PROPTEST_CASES` runs more cases.)

use proptest::collection::vec;
use proptest::prelude::*;

use super::*;
use crate::progress::{Location, Update};
use crate::time::{INFINITY, TS_MAX};

#[derive(Clone, Debug)]
enum Input {
    Joined(Peer),
    Dead(Peer),
    Message(Peer, Message),
    Local(Vec<Update>),
    Move(Peer, Timestamp),
    Accept(Peer, MoveId, Vec<Update>),
    Decline(Peer, MoveId),
    OpenDoor,
    CloseDoor,
    Poll,
}

fn peer() -> impl Strategy<Value = Peer> {
    (0u64..4, 1u64..3).prop_map(|(id, incarnation)| Peer { id, incarnation })
}

fn ts() -> impl Strategy<Value = Timestamp> {
    prop_oneof![8 => -2i64..12, 1 => Just(INFINITY), 1 => Just(TS_MAX), 1 => Just(i64::MIN)]
}

fn count() -> impl Strategy<Value = i64> {
    prop_oneof![8 => -3i64..4, 1 => Just(i64::MAX), 1 => Just(i64::MIN), 1 => Just(CLAIM_COUNT_MAX)]
}

fn seq() -> impl Strategy<Value = Seq> {
    prop_oneof![8 => 0u64..8, 1 => Just(u64::MAX)]
}

fn location() -> impl Strategy<Value = Location> {
    prop_oneof![
        (0u64..3).prop_map(Location::Task),
        (0u64..3).prop_map(Location::Queue),
        Just(Location::Watermark),
        Just(Location::Peer(0)),
    ]
}

fn change() -> impl Strategy<Value = Change> {
    let site = prop_oneof![
        location().prop_map(Site::Local),
        Just(Site::Door),
        (peer(), 0u64..3).prop_map(|(to, id)| Site::Carry { to, id }),
    ];
    (site, ts(), count()).prop_map(|(site, ts, delta)| Change { site, ts, delta })
}

fn update() -> impl Strategy<Value = Update> {
    (location(), ts(), count()).prop_map(|(location, ts, delta)| Update { location, ts, delta })
}

fn moves() -> impl Strategy<Value = Vec<MoveRef>> {
    vec((peer(), 0u64..3).prop_map(|(mover, id)| MoveRef { mover, id }), 0..2)
}

fn message() -> impl Strategy<Value = Message> {
    let snapshot = (seq(), vec(change(), 0..4), ts(), vec(peer(), 0..2), vec((peer(), seq()), 0..2), vec(peer(), 0..3))
        .prop_map(|(seq, claims, watermark, fenced, after, live)| {
            Message::Snapshot(Snapshot { seq, claims, watermark, fenced, after, live })
        });
    let batch = (seq(), vec(change(), 0..4), ts(), moves(), moves(), vec(peer(), 0..2), vec((peer(), seq()), 0..2))
        .prop_map(|(seq, changes, watermark, took, declined, fenced, after)| {
            Message::Batch(Batch { seq, changes, watermark, took, declined, fenced, after })
        });
    let pause = seq().prop_map(|after| Message::Pause { after });
    let paused = (seq(), ts()).prop_map(|(after, ts_min)| Message::Paused { after, ts_min });
    let opened = (seq(), seq()).prop_map(|(after, seq)| Message::Opened { after, seq });
    prop_oneof![3 => batch, 3 => snapshot, 1 => pause, 1 => paused, 1 => opened]
}

fn input() -> impl Strategy<Value = Input> {
    prop_oneof![
        2 => peer().prop_map(Input::Joined),
        1 => peer().prop_map(Input::Dead),
        8 => (peer(), message()).prop_map(|(from, m)| Input::Message(from, m)),
        2 => vec(update(), 0..3).prop_map(Input::Local),
        1 => (peer(), ts()).prop_map(|(to, ts)| Input::Move(to, ts)),
        1 => (peer(), 0u64..3, vec(update(), 0..2)).prop_map(|(from, id, u)| Input::Accept(from, id, u)),
        1 => (peer(), 0u64..3).prop_map(|(from, id)| Input::Decline(from, id)),
        1 => Just(Input::OpenDoor),
        1 => Just(Input::CloseDoor),
        2 => Just(Input::Poll),
    ]
}

proptest! {
    /// No input sequence panics, and the published ts_min never goes back.
    #[test]
    fn no_input_panics_and_ts_min_never_goes_back(inputs in vec(input(), 0..60)) {
        let limits = MeshLimits { pending_batches_max: 4, contribution_entries_max: 8, ..MeshLimits::default() };
        let mut mesh = Mesh::new(Peer { id: 0, incarnation: 1 }, limits);
        let mut ts_min = mesh.ts_min();
        for input in inputs {
            let _ = match input {
                Input::Joined(peer) => mesh.peer_joined(peer),
                Input::Dead(peer) => mesh.peer_dead(peer),
                Input::Message(from, message) => mesh.handle_message(from, message),
                Input::Local(updates) => mesh.apply_local(&updates),
                Input::Move(to, ts) => mesh.send_move(to, ts).map(drop),
                Input::Accept(from, id, updates) => mesh.accept_move(from, id, &updates),
                Input::Decline(from, id) => mesh.decline_move(from, id),
                Input::OpenDoor => mesh.open_door().map(drop),
                Input::CloseDoor => mesh.close_door().map(drop),
                Input::Poll => {
                    while mesh.poll_transmit().is_some() {}
                    while mesh.poll_event().is_some() {}
                    Ok(())
                }
            };
            prop_assert!(mesh.ts_min() >= ts_min);
            ts_min = mesh.ts_min();
        }
    }
}
