use super::*;

fn life(ttl: Option<u64>, idle: Option<u64>) -> LifetimeRecord {
    Limits {
        ttl_secs: ttl,
        idle_stop_secs: idle,
    }
    .record(Timestamp(0))
}

fn sample(at_s: u64, packets: u64, execs: u32, verified: Option<u64>) -> Sample {
    Sample {
        at: Timestamp(at_s * 1000),
        sent_packets: Some(packets),
        exec_sessions: Some(execs),
        last_verified: verified.map(|v| Timestamp(v * 1000)),
    }
}

fn at(s: u64) -> Timestamp {
    Timestamp(s * 1000)
}

#[test]
fn the_time_to_live_deletes_at_its_end_and_not_before() {
    let l = life(Some(60), None);
    assert_eq!(l.expires, Some(at(60)));
    assert_eq!(decide(at(59), &l, None), Decision::Keep);
    assert_eq!(decide(at(60), &l, None), Decision::Expire);
    // Running or stopped, busy or not.
    let a = Activity::first(&sample(0, 1, 1, None));
    assert_eq!(decide(at(61), &l, Some(&a)), Decision::Expire);
    // Control: no time to live, no end.
    assert_eq!(
        decide(at(1_000_000), &life(None, None), Some(&a)),
        Decision::Keep
    );
}

#[test]
fn expiry_wins_over_idle() {
    let l = life(Some(10), Some(5));
    let a = Activity::first(&sample(0, 0, 0, None));
    assert_eq!(
        decide(at(7), &l, Some(&a)),
        Decision::IdleStop { idle_secs: 7 }
    );
    assert_eq!(decide(at(10), &l, Some(&a)), Decision::Expire);
}

#[test]
fn a_sandbox_that_sends_nothing_and_runs_nothing_stops_after_its_limit() {
    let l = life(None, Some(30));
    let mut a = Activity::first(&sample(0, 100, 0, None));
    for s in 1..30 {
        a.observe(&sample(s, 100, 0, None));
        assert_eq!(decide(at(s), &l, Some(&a)), Decision::Keep, "at {s}");
    }
    a.observe(&sample(30, 100, 0, None));
    assert_eq!(
        decide(at(30), &l, Some(&a)),
        Decision::IdleStop { idle_secs: 30 }
    );
    // Control: not running, never idle-stopped.
    assert_eq!(decide(at(100), &l, None), Decision::Keep);
}

#[test]
fn a_packet_from_it_restarts_the_idle_clock() {
    let l = life(None, Some(30));
    let mut a = Activity::first(&sample(0, 100, 0, None));
    a.observe(&sample(20, 101, 0, None));
    a.observe(&sample(40, 101, 0, None));
    assert_eq!(decide(at(40), &l, Some(&a)), Decision::Keep);
    a.observe(&sample(50, 101, 0, None));
    assert_eq!(
        decide(at(50), &l, Some(&a)),
        Decision::IdleStop { idle_secs: 30 }
    );
}

#[test]
fn an_exec_session_keeps_it_awake() {
    let l = life(None, Some(30));
    let mut a = Activity::first(&sample(0, 100, 0, None));
    for s in 1..=100 {
        a.observe(&sample(s, 100, 1, None));
    }
    assert_eq!(decide(at(100), &l, Some(&a)), Decision::Keep);
    a.observe(&sample(130, 100, 0, None));
    assert_eq!(
        decide(at(130), &l, Some(&a)),
        Decision::IdleStop { idle_secs: 30 }
    );
}

#[test]
fn the_canary_s_packets_and_commands_do_not_count() {
    let l = life(None, Some(30));
    let mut a = Activity::first(&sample(0, 100, 0, Some(0)));
    // A verification whose verdict lands in the same look as its packets.
    a.observe(&sample(10, 140, 1, Some(10)));
    // One that straddles two looks: packets first, the verdict next.
    a.observe(&sample(20, 180, 0, Some(10)));
    a.observe(&sample(21, 190, 0, Some(21)));
    a.observe(&sample(30, 190, 0, Some(21)));
    assert_eq!(
        decide(at(30), &l, Some(&a)),
        Decision::IdleStop { idle_secs: 30 }
    );
    // Control: the same packets with no verification are the guest's.
    let mut b = Activity::first(&sample(0, 100, 0, Some(0)));
    b.observe(&sample(20, 180, 0, Some(0)));
    b.observe(&sample(21, 190, 0, Some(0)));
    b.observe(&sample(30, 190, 0, Some(0)));
    assert_eq!(decide(at(30), &l, Some(&b)), Decision::Keep);
    assert_eq!(b.active_at(), at(21));
}

#[test]
fn what_cannot_be_measured_is_never_idle() {
    let l = life(None, Some(5));
    let mut a = Activity::first(&sample(0, 0, 0, None));
    let blind = Sample {
        sent_packets: None,
        ..sample(100, 0, 0, None)
    };
    a.observe(&blind);
    assert_eq!(decide(at(100), &l, Some(&a)), Decision::Keep);
    let no_execs = Sample {
        exec_sessions: None,
        ..sample(200, 0, 0, None)
    };
    a.observe(&no_execs);
    assert_eq!(decide(at(200), &l, Some(&a)), Decision::Keep);
}
