//! The client's session rules, each stepped through by hand.

use super::*;
use stampede_core::Op;

const LEASE: Duration = Duration::from_secs(4);

/// A request that may hold something on the node and is not released (a detach) asked to
/// wait `wait`, and a request that holds nothing on the node (`ts_min`).
fn get_and_plain(session: &mut ClientSession, wait: Duration) -> (Call, Call) {
    let get = session.call(&Op::Detach { connection: 1 }.into(), wait, None);
    let plain = session.call(&Op::TsMin.into(), wait, None);
    assert!(get.holds_on_node && !get.releasable && !plain.holds_on_node);
    (get, plain)
}

#[test]
fn a_reply_that_may_hold_something_is_taken_only_within_half_the_lease() {
    let mut session = ClientSession::new(LEASE);
    let (get, plain) = get_and_plain(&mut session, Duration::ZERO);
    let half = LEASE.mul_f64(LEASE_SHARE);
    assert_eq!(session.reading(&get, true, half), Reading::Take);
    assert_eq!(session.reading(&get, true, half + Duration::from_millis(1)), Reading::Late);
    assert_eq!(session.reading(&plain, true, LEASE * 10), Reading::Take, "a reply that holds nothing stands");
    assert_eq!(session.reading(&get, false, LEASE), Reading::Late, "lost for a whole lease");
    assert_eq!(session.reading(&get, false, half), Reading::Lost { end_session: true });
    assert_eq!(session.reading(&plain, false, half), Reading::Lost { end_session: false });
    assert!(session.reading(&get, false, half).ends_session(), "what the lost reply carried goes back");
    assert!(!session.reading(&plain, false, half).ends_session());
    assert!(session.reading(&get, true, LEASE).ends_session(), "late");
}

/// Whether `session` sends `call` again after a try that ended `taken` after its first send.
fn retries(session: &ClientSession, call: &Call, lost: bool, taken: Duration, closed: bool) -> bool {
    session.retry(&mut call.clone(), lost, taken, closed).is_some()
}

/// A retry of a get is timed from the first send: it waits only for what is left of the
/// reply deadline, is not sent once that passed, and its reply read past it is late — the
/// node may be ending the session by then.
#[test]
fn a_retry_is_judged_from_the_first_send() {
    let mut session = ClientSession::new(LEASE);
    let (get, plain) = get_and_plain(&mut session, Duration::ZERO);
    let half = LEASE.mul_f64(LEASE_SHARE);
    let early = Duration::from_millis(10);
    assert_eq!(session.try_timeout(&get, Duration::ZERO), half);
    assert_eq!(session.try_timeout(&get, half - early), early, "what is left of the deadline");
    assert_eq!(session.try_timeout(&plain, half), QUERY_MARGIN - half, "what is left of its own deadline");
    assert!(retries(&session, &get, true, half - early, false));
    assert!(!retries(&session, &get, true, half, false), "its deadline passed");
    assert!(retries(&session, &plain, true, half, false), "its longer deadline has not");
    let plain_long = session.call(&Op::TsMin.into(), LEASE * 10, None);
    assert!(!retries(&session, &plain_long, true, LEASE, false), "a lease passed");
    let plain_short = session.call(&Op::TsMin.into(), Duration::ZERO, None);
    let tight = ClientSession::new(QUERY_MARGIN * 4);
    assert!(!retries(&tight, &plain_short, true, QUERY_MARGIN, false), "no call outlives its deadline");
    // The retry's own reply came quickly, but `half + early` after the first send.
    assert_eq!(session.reading(&get, true, half + early), Reading::Late);
}

/// A reply that may hold something is delivered only in time, while the client is open and
/// its session lives; an error or a reply that holds nothing stands whenever it comes.
#[test]
fn a_reply_reaches_the_caller_only_in_time_and_while_its_session_lives() {
    let mut session = ClientSession::new(LEASE);
    let (get, plain) = get_and_plain(&mut session, Duration::ZERO);
    let (early, late) = (Duration::from_millis(10), LEASE);
    let open = Standing::default();
    let paused = session.call(&Op::QueueGet { connection: 1, wait_us: 0 }.into(), Duration::ZERO, Some(Duration::ZERO));
    let half = LEASE.mul_f64(LEASE_SHARE);
    assert_eq!(
        session.conclude(&paused, Answer::Outcome, half, open),
        Verdict::Late,
        "past half the lease: the session may be gone"
    );
    assert_eq!(session.conclude(&paused, Answer::Lost, half, open), Verdict::Lost { end_session: true });
    let closed = Standing { closed: true, ended: false };
    let ended = Standing { closed: false, ended: true };
    assert_eq!(session.conclude(&get, Answer::Outcome, early, open), Verdict::Deliver);
    assert_eq!(session.conclude(&get, Answer::Outcome, late, open), Verdict::Late);
    assert_eq!(session.conclude(&get, Answer::Outcome, early, ended), Verdict::SessionEnded);
    assert_eq!(session.conclude(&get, Answer::Outcome, early, closed), Verdict::ClientClosed);
    assert_eq!(session.conclude(&get, Answer::Outcome, late, closed), Verdict::ClientClosed);
    assert_eq!(session.conclude(&get, Answer::Lost, early, open), Verdict::Lost { end_session: true });
    assert_eq!(session.conclude(&get, Answer::Lost, late, open), Verdict::Late);
    assert_eq!(session.conclude(&get, Answer::Error, late, ended), Verdict::NodeError);
    assert_eq!(session.conclude(&plain, Answer::Outcome, late * 10, ended), Verdict::Deliver);
    assert_eq!(session.conclude(&plain, Answer::Lost, early, open), Verdict::Lost { end_session: false });
    assert!(Verdict::Late.ends_session() && !Verdict::SessionEnded.ends_session());
}

/// The floor is the lowest call under way, whatever order calls end in; with none, the next
/// number.
#[test]
fn the_floor_is_the_lowest_call_under_way() {
    let mut session = ClientSession::new(LEASE);
    assert_eq!(session.floor(), 1);
    let (get, plain) = get_and_plain(&mut session, Duration::ZERO);
    assert_eq!(session.floor(), get.seq);
    session.conclude(&plain, Answer::Outcome, Duration::ZERO, Standing::default());
    assert_eq!(session.floor(), get.seq, "the get is still under way");
    session.conclude(&get, Answer::Lost, Duration::ZERO, Standing::default());
    assert_eq!(session.floor(), plain.seq + 1, "none under way: the next number");
}

#[test]
fn numbers_rise_and_acknowledgements_are_bounded_per_header() {
    let mut session = ClientSession::new(LEASE);
    assert_eq!(session.call(&Request::Open { user: None, password: None }, Duration::ZERO, None).seq, 0);
    let seqs: Vec<u64> = (0..ACKS_MAX + 5).map(|_| session.call(&Op::TsMin.into(), Duration::ZERO, None).seq).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1));
    seqs.iter().for_each(|&seq| session.read(seq));
    session.read(0);
    assert_eq!(session.acks().len(), ACKS_MAX);
    assert_eq!(session.acks().len(), 5, "the rest go with the next header");
    assert!(session.acks().is_empty());
}

/// A call's headers carry its number, the acknowledgements due and what is reported; an
/// outcome confirms what its first try reported, not a retry's additions, and an error or a
/// lost reply confirms nothing.
#[test]
fn an_outcome_confirms_what_the_first_try_reported() {
    let mut session = ClientSession::new(LEASE);
    let consumed = |number| Consumed { connection: 3, ts: number as i64, until: false, number };
    let reports = |numbers: &[u64]| Reports {
        opened: Vec::new(),
        consumed: numbers.iter().map(|&n| consumed(n)).collect(),
        released: Vec::new(),
    };
    let (mut get, plain) = get_and_plain(&mut session, Duration::ZERO);
    session.conclude(&plain, Answer::Outcome, Duration::ZERO, Standing::default());
    let first = session.header(Some(&mut get), "s", [7; 16], Op::TsMin.into(), reports(&[1]));
    assert_eq!((first.seq, first.acks.clone(), first.consumed.len()), (get.seq, vec![plain.seq], 1));
    let retry = session.header(Some(&mut get), "s", [7; 16], Op::TsMin.into(), reports(&[1, 2]));
    assert_eq!((retry.seq, retry.acks.len(), retry.consumed.len()), (get.seq, 0, 2), "each ack said once");
    assert_eq!(get.confirmed(Answer::Outcome), Some(&reports(&[1])), "the first try's, not the retry's");
    assert_eq!((get.confirmed(Answer::Error), get.confirmed(Answer::Lost)), (None, None));
    let send = session.header(None, "s", [7; 16], Op::TsMin.into(), Reports::default());
    assert_eq!(send.seq, 0, "a request no reply is waited for is not numbered");
}

#[test]
fn a_retry_needs_a_lost_numbered_reply_an_open_client_and_time_within_the_lease() {
    let mut session = ClientSession::new(LEASE);
    let open = session.call(&Request::Open { user: None, password: None }, Duration::ZERO, None);
    let (get, plain) = get_and_plain(&mut session, Duration::ZERO);
    let short = Duration::from_millis(10);
    assert!(!retries(&session, &open, true, short, false), "unnumbered");
    assert!(!retries(&session, &get, false, short, false), "answered");
    assert!(!retries(&session, &get, true, short, true), "closed");
    assert!(!retries(&session, &plain, true, LEASE, false), "a lease passed");
    assert!(!retries(&session, &Call { tries: REQUEST_RETRIES, ..get.clone() }, true, short, false), "no retries left");
    assert!(retries(&session, &get, true, short, false));
}

/// A get given a timeout gives up on its reply `REPLY_GRACE` after the caller's deadline,
/// whatever the node does, and is released rather than ending the session: its number rides
/// on every header until an outcome of a call whose first try carried it confirms it. A
/// reply of a get read past that bound is released too; an error releases nothing.
#[test]
fn a_get_given_up_on_is_released_and_its_session_lives() {
    let mut session = ClientSession::new(LEASE);
    let timeout = Duration::from_millis(20);
    let get = session.call(&Op::QueueGet { connection: 1, wait_us: 20_000 }.into(), timeout, Some(timeout));
    assert!(get.releasable && get.holds_on_node);
    assert_eq!(session.try_timeout(&get, Duration::ZERO), timeout + REPLY_GRACE, "the bound, not half the lease");
    assert!(!retries(&session, &get, true, timeout + REPLY_GRACE, false), "no try past the bound");
    let open = Standing::default();
    assert_eq!(session.conclude(&get, Answer::Lost, timeout + REPLY_GRACE, open), Verdict::Released);
    assert!(!Verdict::Released.ends_session());
    assert_eq!(session.released().collect::<Vec<_>>(), vec![get.seq]);

    let late = session.call(
        &Op::Get { connection: 2, selector: 0.into(), wait_us: 0 }.into(),
        Duration::ZERO,
        Some(Duration::ZERO),
    );
    let header = |session: &mut ClientSession, call: &mut Call| {
        session.header(Some(call), "s", [0; 16], Op::TsMin.into(), Reports::default())
    };
    let mut next = session.call(&Op::TsMin.into(), Duration::ZERO, None);
    assert_eq!(header(&mut session, &mut next).released, vec![get.seq], "the next header carries it");
    assert_eq!(session.conclude(&late, Answer::Outcome, REPLY_GRACE * 2, open), Verdict::Released, "read too late");
    let mut refused = session.call(&Op::TsMin.into(), Duration::ZERO, None);
    assert_eq!(header(&mut session, &mut refused).released, vec![get.seq, late.seq]);
    assert_eq!(session.conclude(&refused, Answer::Error, Duration::ZERO, open), Verdict::NodeError);
    assert_eq!(session.released().count(), 2, "an error confirms nothing");
    assert_eq!(session.conclude(&next, Answer::Outcome, Duration::ZERO, open), Verdict::Deliver);
    assert_eq!(session.released().collect::<Vec<_>>(), vec![late.seq], "what next's first try carried is confirmed");
    let closed = Standing { closed: true, ended: false };
    let gone = session.call(&Op::QueueGet { connection: 1, wait_us: 0 }.into(), Duration::ZERO, Some(Duration::ZERO));
    assert_eq!(session.conclude(&gone, Answer::Lost, REPLY_GRACE, closed), Verdict::ClientClosed);
}

/// Past `RELEASED_MAX` unconfirmed releases a get given up on ends its session, as any
/// request that may hold something does.
#[test]
fn releases_are_bounded() {
    let mut session = ClientSession::new(LEASE);
    let open = Standing::default();
    for _ in 0..RELEASED_MAX {
        let get =
            session.call(&Op::QueueGet { connection: 1, wait_us: 0 }.into(), Duration::ZERO, Some(Duration::ZERO));
        assert_eq!(session.conclude(&get, Answer::Lost, REPLY_GRACE, open), Verdict::Released);
    }
    let get = session.call(&Op::QueueGet { connection: 1, wait_us: 0 }.into(), Duration::ZERO, Some(Duration::ZERO));
    assert_eq!(session.conclude(&get, Answer::Lost, REPLY_GRACE, open), Verdict::Lost { end_session: true });
    assert_eq!(session.released().count(), RELEASED_MAX);
}
