//! The participant's rules, one scenario each (the seeded simulations drive random ones).

use super::*;
use crate::mesh::MeshLimits;

fn task(ts: Timestamp, delta: i64) -> Update {
    Update { location: Location::Task(1), ts, delta }
}

const ME: Peer = Peer { id: 0, incarnation: 1 };

/// A runtime linked to a mesh that knows no other participant, its door open.
fn alone() -> Participant {
    let mut mesh = Mesh::new(ME, MeshLimits::default());
    mesh.open_door().unwrap();
    let mut p = Participant::default();
    let _ = p.link(mesh).unwrap();
    p
}

/// Alone, a node's claim changes cost no mesh bookkeeping: settling hands nothing, the mirror
/// is off and ts_min is the runtime's own. An input from the fabric first hands the mesh
/// every change since, so a peer meets the runtime's view, and later releases match claims.
#[test]
fn alone_settling_is_free_and_the_mesh_catches_up_before_any_input() {
    let mut p = alone();
    // Alone from the link on: nothing recorded, nothing handed; ts_min moves with the
    // runtime's claims alone.
    p.apply(&[task(3, 1)]).unwrap();
    let _ = p.progress_mut().note_put(9);
    assert_eq!(p.settle(), Settled::default());
    assert_eq!((p.progress().ts_min(), p.mesh().unwrap().ts_min()), (3, 0));
    assert_eq!(p.apply(&[task(5, 1), task(3, -1)]), Ok(Some(5)));
    let _ = p.progress_mut().note_put(20);
    assert_eq!(p.settle(), Settled::default());
    assert!(p.progress_mut().take_outbox().is_empty(), "nothing recorded alone");
    assert_eq!((p.progress().ts_min(), p.mesh().unwrap().ts_min()), (5, 0), "the mesh was handed nothing");

    // A peer arrives: the mesh is handed the claims held first.
    let mesh = p.mesh_mut().unwrap();
    assert_eq!((mesh.ts_min(), mesh.watermark()), (5, 21));
    mesh.peer_joined(Peer { id: 1, incarnation: 1 }).unwrap();
    let _ = p.settle();
    assert_eq!(p.progress().ts_min(), 5, "the mirror is back at the mesh's ts_min");
    p.apply(&[task(5, -1)]).unwrap();
    let _ = p.settle();
    assert_eq!(p.stashed(), 0, "the release matches a claim the mesh holds");
    // The mesh waits for the newcomer's snapshot before its ts_min moves, and the mirror
    // holds the runtime there too.
    assert_eq!((p.mesh().unwrap().ts_min(), p.progress().ts_min()), (5, 5));
}

/// A participant its mesh expelled never goes solo: its ts_min stays where the mesh left it.
#[test]
fn an_expelled_participant_is_never_solo() {
    let mut p = alone();
    p.apply(&[task(3, 1)]).unwrap();
    let _ = p.progress_mut().note_put(50);
    let _ = p.mesh_mut().unwrap().peer_dead(ME);
    let _ = p.settle();
    assert!(!p.mesh().unwrap().alone(), "expelled");
    p.apply(&[task(9, 1), task(3, -1)]).unwrap();
    let _ = p.settle();
    assert_eq!(p.progress().ts_min(), 3, "the mirror holds the runtime where its mesh stopped");
    let _ = p.mesh_mut(); // no catch-up to refuse
}

/// Solo lasts at most `SOLO_SETTLES_MAX` settles: then the mesh is handed what changed.
#[test]
fn solo_hands_the_mesh_what_changed_every_so_many_settles() {
    let mut p = alone();
    for ts in 0..i64::from(SOLO_SETTLES_MAX) {
        p.apply(&[task(ts + 1, 1)]).unwrap();
        if ts > 0 {
            p.apply(&[task(ts, -1)]).unwrap();
        }
        let _ = p.progress_mut().note_put(ts + 1);
        let _ = p.settle();
    }
    let last = i64::from(SOLO_SETTLES_MAX);
    assert_eq!((p.progress().ts_min(), p.mesh().unwrap().ts_min()), (last, last), "caught up");
}
