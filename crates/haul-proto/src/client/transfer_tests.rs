//! Unit and property tests of [`Transfers`]: scripted servers, the window, command order,
//! markers, failures mid-pipeline, aborts and replies out of sequence.

use std::collections::VecDeque;

use proptest::prelude::*;

use super::*;

fn r(code: u16, text: &str) -> Reply {
    Reply::new(code, text)
}

fn get(path: &str) -> FileOp {
    FileOp::new(Direction::Get, path)
}

fn put(path: &str) -> FileOp {
    FileOp::new(Direction::Put, path)
}

fn with_cksm(mut op: FileOp) -> FileOp {
    op.cksm = Some("MD5".into());
    op
}

/// Every command due now, as written on the wire.
fn drain(t: &mut Transfers) -> Vec<String> {
    std::iter::from_fn(|| t.poll_command())
        .map(|c| c.to_string())
        .collect()
}

/// Feeds replies (which must all be accepted), collecting every event including left-over ones.
fn feed(t: &mut Transfers, replies: &[Reply]) -> Vec<FileEvent> {
    let mut out = Vec::new();
    for reply in replies {
        let ev = t.handle_reply(reply.clone());
        out.extend(ev.unwrap_or_else(|e| panic!("{reply}: {e}")));
        out.extend(std::iter::from_fn(|| t.poll_event()));
    }
    out
}

fn perf(bytes: u64) -> Reply {
    let m = PerfMarker {
        timestamp: 1.5,
        stripe_index: 0,
        stripe_bytes: bytes,
        total_stripes: 1,
    };
    Reply::multi(112, m.to_lines())
}

#[test]
fn window_is_respected() {
    let mut t = Transfers::new(2);
    for p in ["/a", "/b", "/c", "/d"] {
        t.push(with_cksm(get(p)));
    }
    assert_eq!(t.window(), 2);
    let sent = drain(&mut t);
    assert_eq!(
        sent,
        ["RETR /a", "CKSM MD5 0 -1 /a", "RETR /b", "CKSM MD5 0 -1 /b"]
    );
    assert_eq!((t.in_flight(), t.outstanding(), t.pending()), (2, 4, 4));
    let evs = feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert_eq!(
        evs,
        [
            FileEvent::DataStart {
                file: 0,
                reused: false
            },
            FileEvent::Moved { file: 0 }
        ]
    );
    // The file is in flight until its CKSM is answered.
    assert!(drain(&mut t).is_empty());
    let evs = feed(&mut t, &[r(213, "ABCDEF")]);
    let want = [
        FileEvent::Checksum {
            file: 0,
            digest: "ABCDEF".into(),
        },
        FileEvent::Done { file: 0 },
    ];
    assert_eq!(evs, want);
    assert_eq!(drain(&mut t), ["RETR /c", "CKSM MD5 0 -1 /c"]);
    assert!(drain(&mut t).is_empty());
    for _ in 0..3 {
        feed(&mut t, &[r(125, "reuse"), r(226, "ok"), r(213, "x")]);
        drain(&mut t);
        assert!(t.in_flight() <= 2);
    }
    assert!(t.is_done());
    assert_eq!((t.in_flight(), t.outstanding(), t.pending()), (0, 0, 0));
}

#[test]
fn window_zero_means_one() {
    let mut t = Transfers::new(0);
    t.push(get("/a"));
    t.push(get("/b"));
    assert_eq!(drain(&mut t), ["RETR /a"]);
    let evs = feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert_eq!(evs.last(), Some(&FileEvent::Done { file: 0 }));
    assert_eq!(drain(&mut t), ["RETR /b"]);
}

#[test]
fn commands_of_a_file_in_order() {
    let mut t = Transfers::new(4);
    let mut op = with_cksm(get("/g"));
    op.restart = Some(RangeSet::parse("0-100,200-300").unwrap());
    op.eret = Some((5, 10));
    assert_eq!(t.push(op), 0);
    let mut op = with_cksm(put("/p"));
    op.restart = Some(RangeSet::parse("0-7").unwrap());
    op.eret = Some((1, 2)); // ignored for Put
    assert_eq!(t.push(op), 1);
    assert_eq!(t.push(put("/q")), 2);
    let sent = drain(&mut t);
    let want = [
        "REST 0-100,200-300",
        "ERET P 5 10 /g",
        "CKSM MD5 0 -1 /g",
        "REST 0-7",
        "STOR /p",
        "CKSM MD5 0 -1 /p",
        "STOR /q",
    ];
    assert_eq!(sent, want);
    let script = [
        r(350, "rest ok"),
        r(150, "go"),
        r(226, "done"),
        r(213, "d1"),
        r(350, "rest ok"),
        r(150, "go"),
        r(226, "done"),
        r(213, "d2"),
        r(125, "reuse"),
        r(250, "done"),
    ];
    let evs = feed(&mut t, &script);
    let done: Vec<_> = evs
        .iter()
        .filter_map(|e| match e {
            FileEvent::Done { file } => Some(*file),
            _ => None,
        })
        .collect();
    assert_eq!(done, [0, 1, 2]);
    assert!(t.is_done());
}

#[test]
fn markers_are_reported_and_bad_ones_ignored() {
    let mut t = Transfers::new(1);
    t.push(put("/m"));
    drain(&mut t);
    let script = [
        r(111, "Range Marker 0-10"),
        perf(10),
        r(150, "go"),
        r(111, "Range Marker 10-20,30-40"),
        r(111, "Range Marker nonsense"),
        r(112, "Perf Marker with no fields"),
        r(110, "MARK 100 = 100"),
        r(120, "later"),
        perf(40),
        r(226, "ok"),
    ];
    let evs = feed(&mut t, &script);
    let rm = |s: &str| FileEvent::RestartMarker {
        file: 0,
        ranges: RangeSet::parse(s).unwrap(),
    };
    let pm = |b| FileEvent::Perf {
        file: 0,
        marker: PerfMarker::from_lines(&perf(b).lines).unwrap(),
    };
    let want = vec![
        rm("0-10"),
        pm(10),
        FileEvent::DataStart {
            file: 0,
            reused: false,
        },
        rm("10-20,30-40"),
        pm(40),
        FileEvent::Moved { file: 0 },
        FileEvent::Done { file: 0 },
    ];
    assert_eq!(evs, want);
}

#[test]
fn markers_to_rest_and_cksm_are_skipped() {
    let mut t = Transfers::new(1);
    let mut op = with_cksm(put("/m"));
    op.restart = Some(RangeSet::parse("0-1").unwrap());
    t.push(op);
    drain(&mut t);
    let script = [
        r(111, "Range Marker 0-10"),
        r(350, "ok"),
        r(150, "go"),
        r(226, "ok"),
        perf(1),
        r(213, "abc"),
    ];
    let evs = feed(&mut t, &script);
    assert_eq!(evs.len(), 4, "{evs:?}");
    assert!(matches!(evs[0], FileEvent::DataStart { .. }));
    assert!(t.is_done());
}

#[test]
fn a_failure_mid_pipeline_lets_the_next_file_proceed() {
    let mut t = Transfers::new(3);
    for p in ["/a", "/b", "/c"] {
        t.push(with_cksm(get(p)));
    }
    assert_eq!(drain(&mut t).len(), 6);
    let script = [
        r(150, "go"),
        r(226, "ok"),
        r(213, "aa"),
        r(550, "/b: No such file or directory."),
        r(550, "/b: No such file or directory."),
        r(125, "go"),
        r(226, "ok"),
        r(213, "cc"),
    ];
    let evs = feed(&mut t, &script);
    let want = vec![
        FileEvent::DataStart {
            file: 0,
            reused: false,
        },
        FileEvent::Moved { file: 0 },
        FileEvent::Checksum {
            file: 0,
            digest: "aa".into(),
        },
        FileEvent::Done { file: 0 },
        FileEvent::Failed {
            file: 1,
            command: Command::Retr("/b".into()),
            reply: r(550, "/b: No such file or directory."),
        },
        FileEvent::DataStart {
            file: 2,
            reused: true,
        },
        FileEvent::Moved { file: 2 },
        FileEvent::Checksum {
            file: 2,
            digest: "cc".into(),
        },
        FileEvent::Done { file: 2 },
    ];
    assert_eq!(evs, want);
    assert!(t.is_done());
}

#[test]
fn a_transfer_failing_after_its_data_phase() {
    let mut t = Transfers::new(2);
    t.push(with_cksm(put("/a")));
    t.push(put("/b"));
    drain(&mut t);
    let evs = feed(
        &mut t,
        &[
            r(150, "go"),
            r(451, "disk full"),
            r(213, "late"),
            r(150, "go"),
        ],
    );
    assert_eq!(
        evs[1],
        FileEvent::Failed {
            file: 0,
            command: Command::Stor("/a".into()),
            reply: r(451, "disk full"),
        }
    );
    assert_eq!(evs.len(), 3, "the CKSM reply is consumed silently: {evs:?}");
    assert_eq!(t.in_flight(), 1);
    assert_eq!(t.pending(), 1);
}

#[test]
fn a_refused_rest_still_drains_the_transfer() {
    let mut t = Transfers::new(2);
    let mut op = with_cksm(get("/a"));
    op.restart = Some(RangeSet::parse("0-5").unwrap());
    t.push(op);
    t.push(get("/b"));
    assert_eq!(drain(&mut t).len(), 4);
    let evs = feed(&mut t, &[r(501, "bad ranges")]);
    let want = FileEvent::Failed {
        file: 0,
        command: Command::Rest(Restart::Ranges(RangeSet::parse("0-5").unwrap())),
        reply: r(501, "bad ranges"),
    };
    assert_eq!(evs, [want]);
    // The pipelined RETR moves the whole file: DataStart lets the driver drain it.
    let evs = feed(&mut t, &[r(150, "go"), perf(3), r(226, "ok"), r(213, "d")]);
    assert_eq!(
        evs,
        [FileEvent::DataStart {
            file: 0,
            reused: false
        }]
    );
    let evs = feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert_eq!(evs.last(), Some(&FileEvent::Done { file: 1 }));
    assert!(t.is_done());
}

/// An upload's `ALLO` goes first; any answer but `452` leaves the file going, and a `452`
/// fails it while its pipelined `STOR` is still drained.
#[test]
fn allo_goes_before_an_upload_and_only_452_fails_it() {
    let mut t = Transfers::new(2);
    let mut op = with_cksm(put("/a"));
    op.allocate = Some(3_000_000);
    op.restart = Some(RangeSet::parse("0-5").unwrap());
    t.push(op);
    let mut got = get("/g");
    got.allocate = Some(7);
    t.push(got);
    assert_eq!(
        drain(&mut t),
        [
            "ALLO 3000000",
            "REST 0-5",
            "STOR /a",
            "CKSM MD5 0 -1 /a",
            "RETR /g"
        ]
    );
    let evs = feed(
        &mut t,
        &[
            r(502, "ALLO not implemented"),
            r(350, "ok"),
            r(150, "go"),
            r(226, "ok"),
            r(213, "d"),
        ],
    );
    assert_eq!(evs.last(), Some(&FileEvent::Done { file: 0 }));
    feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert!(t.is_done());

    let mut op = put("/b");
    op.allocate = Some(1 << 40);
    t.push(op);
    assert_eq!(drain(&mut t), ["ALLO 1099511627776", "STOR /b"]);
    let evs = feed(&mut t, &[r(452, "no space")]);
    let want = FileEvent::Failed {
        file: 2,
        command: Command::Allo(1 << 40),
        reply: r(452, "no space"),
    };
    assert_eq!(evs, [want]);
    let evs = feed(&mut t, &[r(150, "go"), r(426, "lost")]);
    assert_eq!(
        evs,
        [FileEvent::DataStart {
            file: 2,
            reused: false
        }]
    );
    assert!(t.is_done());
}

#[test]
fn commands_not_yet_written_are_dropped_after_a_failure() {
    let mut t = Transfers::new(1);
    let mut op = with_cksm(get("/a"));
    op.restart = Some(RangeSet::parse("0-5").unwrap());
    t.push(op);
    t.push(get("/b"));
    assert_eq!(
        t.poll_command().map(|c| c.to_string()).as_deref(),
        Some("REST 0-5")
    );
    feed(&mut t, &[r(502, "no REST")]);
    assert_eq!(drain(&mut t), ["RETR /b"], "no RETR nor CKSM for /a");
}

#[test]
fn abort_with_426_then_226() {
    let mut t = Transfers::new(2);
    t.push(with_cksm(get("/a")));
    t.push(get("/b"));
    drain(&mut t);
    assert_eq!(t.abort(), None, "no transfer in its data phase yet");
    feed(&mut t, &[r(150, "go")]);
    assert_eq!(t.abort(), Some(Command::Abor));
    assert_eq!(t.abort(), None, "already aborting");
    assert_eq!(t.outstanding(), 4);
    let evs = feed(&mut t, &[perf(5), r(426, "aborted")]);
    assert_eq!(evs.len(), 1, "the marker still counts: {evs:?}");
    let evs = feed(&mut t, &[r(226, "ABOR ok"), r(213, "late digest")]);
    assert_eq!(evs, [FileEvent::Aborted { file: 0 }]);
    let evs = feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert_eq!(evs.last(), Some(&FileEvent::Done { file: 1 }));
    assert!(t.is_done());
}

#[test]
fn abort_after_the_transfer_finished_first() {
    let mut t = Transfers::new(1);
    t.push(put("/a"));
    t.push(put("/b"));
    drain(&mut t);
    feed(&mut t, &[r(125, "go")]);
    assert_eq!(t.abort(), Some(Command::Abor));
    let evs = feed(&mut t, &[r(226, "finished anyway")]);
    assert!(evs.is_empty(), "no Moved for an aborted transfer: {evs:?}");
    assert_eq!(t.in_flight(), 1);
    assert!(drain(&mut t).is_empty(), "the ABOR's reply is still due");
    let evs = feed(&mut t, &[r(226, "ABOR ok")]);
    assert_eq!(evs, [FileEvent::Aborted { file: 0 }]);
    assert_eq!(drain(&mut t), ["STOR /b"]);
}

#[test]
fn abort_of_a_failed_files_unwanted_transfer() {
    let mut t = Transfers::new(1);
    let mut op = get("/a");
    op.restart = Some(RangeSet::parse("0-5").unwrap());
    t.push(op);
    drain(&mut t);
    feed(&mut t, &[r(501, "no"), r(150, "go")]);
    assert_eq!(t.abort(), Some(Command::Abor));
    let evs = feed(&mut t, &[r(426, "cut"), r(225, "ABOR ok")]);
    assert_eq!(evs, [FileEvent::Aborted { file: 0 }]);
    assert!(t.is_done());
}

#[test]
fn a_refused_abor_is_unexpected_but_ends_the_abort() {
    let mut t = Transfers::new(1);
    t.push(get("/a"));
    drain(&mut t);
    feed(&mut t, &[r(150, "go")]);
    t.abort().unwrap();
    feed(&mut t, &[r(426, "cut")]);
    let e = t.handle_reply(r(502, "no ABOR")).unwrap_err();
    assert_eq!(
        e,
        TransferError::Unexpected {
            file: 0,
            command: Command::Abor,
            reply: r(502, "no ABOR")
        }
    );
    assert!(t.is_done());
}

#[test]
fn unsolicited_replies_change_nothing() {
    let mut t = Transfers::new(1);
    let e = t.handle_reply(r(421, "bye")).unwrap_err();
    assert_eq!(e, TransferError::Unsolicited(r(421, "bye")));
    assert!(e.to_string().contains("421"));
    t.push(get("/a"));
    // Pushed but not written: a reply still answers nothing.
    assert!(matches!(
        t.handle_reply(r(150, "go")),
        Err(TransferError::Unsolicited(_))
    ));
    assert_eq!((t.pending(), t.outstanding()), (1, 0));
    drain(&mut t);
    let evs = feed(&mut t, &[r(150, "go"), r(226, "ok")]);
    assert_eq!(evs.len(), 3);
    assert!(matches!(
        t.handle_reply(r(226, "again")),
        Err(TransferError::Unsolicited(_))
    ));
    assert!(t.is_done());
}

/// Plays `script` against one file `op`; returns the first error.
fn first_error(op: FileOp, script: &[Reply]) -> TransferError {
    let mut t = Transfers::new(1);
    t.push(op);
    drain(&mut t);
    for reply in script {
        if let Err(e) = t.handle_reply(reply.clone()) {
            // The file counts as failed: no Done, whatever comes next.
            while t.outstanding() > 0 {
                let _ = t.handle_reply(r(226, "x"));
                let _ = t.handle_reply(r(213, "x"));
                assert_eq!(t.poll_event(), None);
            }
            assert!(t.is_done());
            return e;
        }
        assert!(!matches!(t.poll_event(), Some(FileEvent::Failed { .. })));
    }
    panic!("no error from {script:?}");
}

#[test]
fn replies_out_of_sequence_are_unexpected() {
    let mut rest = with_cksm(get("/a"));
    rest.restart = Some(RangeSet::parse("0-1").unwrap());
    let cases: Vec<(FileOp, Vec<Reply>, &str)> = vec![
        (rest.clone(), vec![r(150, "go")], "REST 0-1"),
        (rest, vec![r(350, "ok"), r(350, "again")], "RETR /a"),
        (with_cksm(get("/a")), vec![r(226, "no 150")], "RETR /a"),
        (put("/a"), vec![r(150, "go"), r(150, "again")], "STOR /a"),
        (put("/a"), vec![r(150, "go"), r(350, "eh")], "STOR /a"),
        (
            with_cksm(get("/a")),
            vec![r(150, "go"), r(226, "ok"), r(150, "cksm?")],
            "CKSM MD5 0 -1 /a",
        ),
    ];
    for (op, script, cmd) in cases {
        match first_error(op, &script) {
            TransferError::Unexpected { command, reply, .. } => {
                assert_eq!(command.to_string(), cmd, "{script:?}");
                assert_eq!(Some(&reply), script.last());
            }
            e => panic!("{e}"),
        }
    }
}

#[test]
fn cksm_failures_and_digests() {
    let mut t = Transfers::new(2);
    t.push(with_cksm(get("/a")));
    t.push(with_cksm(get("/b")));
    drain(&mut t);
    let evs = feed(
        &mut t,
        &[
            r(150, "go"),
            r(226, "ok"),
            r(500, "CKSM unknown"),
            r(150, "go"),
            r(226, "ok"),
        ],
    );
    assert_eq!(
        evs[2],
        FileEvent::Failed {
            file: 0,
            command: with_cksm(get("/a")).command(Kind::Cksm),
            reply: r(500, "CKSM unknown"),
        }
    );
    let multi = Reply::multi(213, vec!["digest follows".into(), "  0A1b  ".into()]);
    let evs = feed(&mut t, &[multi]);
    assert_eq!(
        evs,
        [
            FileEvent::Checksum {
                file: 1,
                digest: "0A1b".into()
            },
            FileEvent::Done { file: 1 }
        ]
    );
    assert!(t.is_done());
}

#[test]
fn pipeline_push_next_goes_behind_the_front() {
    let mut p = Pipeline::new();
    p.push_next("first");
    p.push("b");
    p.push("c");
    p.push_next("abor");
    assert_eq!(
        p.iter().copied().collect::<Vec<_>>(),
        ["first", "abor", "b", "c"]
    );
}

// ---- properties ----

/// A reply code worth trying: the ones the machine tells apart, then anything.
fn code() -> impl Strategy<Value = u16> {
    prop_oneof![
        3 => prop::sample::select(vec![
            110u16, 111, 112, 120, 125, 150, 200, 213, 225, 226, 250, 350, 421, 426, 451, 500,
            501, 550,
        ]),
        1 => 100u16..600,
    ]
}

fn text() -> impl Strategy<Value = Vec<String>> {
    prop_oneof![
        Just(vec!["Range Marker 0-10,20-30".to_string()]),
        Just(vec!["Range Marker 5-".to_string()]),
        Just(perf(9).lines),
        Just(vec!["0a1b2c".to_string()]),
        Just(vec![String::new()]),
        "[ -~]{0,20}".prop_map(|s| vec![s]),
    ]
}

#[derive(Debug, Clone)]
enum Step {
    Poll,
    Abort,
    Reply(u16, Vec<String>),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        2 => Just(Step::Poll),
        1 => Just(Step::Abort),
        6 => (code(), text()).prop_map(|(c, t)| Step::Reply(c, t)),
    ]
}

fn file_op() -> impl Strategy<Value = FileOp> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(g, rest, ck, er, allo)| {
            let mut op = FileOp::new(if g { Direction::Get } else { Direction::Put }, "/f");
            op.restart = rest.then(|| RangeSet::parse("0-4").unwrap());
            op.cksm = ck.then(|| "ADLER32".to_string());
            op.eret = er.then_some((1, 2));
            op.allocate = allo.then_some(5);
            op
        })
}

/// Checks the bounds every state must keep.
fn bounded(t: &Transfers, pushed: usize) {
    assert!(t.slots.len() <= pushed);
    assert!(t.pipeline.len() <= 5 * t.slots.len());
    assert!(t.in_flight() <= t.window);
}

proptest! {
    #[test]
    fn hostile_replies_never_panic_nor_grow_the_queue(
        window in 1usize..4,
        ops in prop::collection::vec(file_op(), 0..6),
        steps in prop::collection::vec(step(), 0..80),
    ) {
        let mut t = Transfers::new(window);
        let pushed = ops.len();
        for op in ops {
            t.push(op);
        }
        for s in steps {
            match s {
                Step::Poll => {
                    t.poll_command();
                }
                Step::Abort => {
                    let before = t.pipeline.len();
                    if t.abort().is_some() {
                        prop_assert_eq!(t.pipeline.len(), before + 1);
                    }
                }
                Step::Reply(code, lines) => {
                    let (slots, cmds) = (t.slots.len(), t.pipeline.len());
                    let res = t.handle_reply(Reply::multi(code, lines));
                    prop_assert!(t.slots.len() <= slots);
                    prop_assert!(t.pipeline.len() <= cmds);
                    if let Err(TransferError::Unsolicited(_)) = res {
                        prop_assert_eq!((t.slots.len(), t.pipeline.len()), (slots, cmds));
                    }
                    while t.poll_event().is_some() {}
                }
            }
            bounded(&t, pushed);
        }
    }
}

/// How a well-behaved server answers one file.
#[derive(Debug, Clone)]
struct Plan {
    rest_ok: bool,
    /// None: the transfer is refused at once.
    data: Option<(bool, u8)>,
    transfer_ok: bool,
    cksm_ok: bool,
    abort: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::bool::weighted(0.8),
        prop::option::weighted(0.8, (any::<bool>(), 0u8..3)),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.8),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(rest_ok, data, transfer_ok, cksm_ok, abort)| Plan {
            rest_ok,
            data,
            transfer_ok,
            cksm_ok,
            abort,
        })
}

/// The replies to one command as the well-behaved server gives them.
fn answer(cmd: &Command, plan: &Plan) -> Vec<Reply> {
    match cmd {
        // Advisory either way: a server that does not take ALLO fails nothing.
        Command::Allo(_) if plan.rest_ok => vec![r(200, "ok")],
        Command::Allo(_) => vec![r(502, "not implemented")],
        Command::Rest(_) if plan.rest_ok => vec![r(350, "ok")],
        Command::Rest(_) => vec![r(501, "bad")],
        Command::Cksm { .. } if plan.cksm_ok => vec![r(213, "abc")],
        Command::Cksm { .. } => vec![r(550, "no")],
        _ => match plan.data {
            None => vec![r(550, "refused")],
            Some((reused, markers)) => {
                let mut v = vec![r(if reused { 125 } else { 150 }, "go")];
                v.extend((0..markers).map(|i| r(111, &format!("Range Marker {i}-{}", i + 1))));
                v.push(if plan.transfer_ok {
                    r(226, "ok")
                } else {
                    r(426, "lost")
                });
                v
            }
        },
    }
}

proptest! {
    #[test]
    fn a_well_behaved_server_finishes_every_file_once(
        window in 1usize..4,
        files in prop::collection::vec((file_op(), plan()), 0..8),
    ) {
        let mut t = Transfers::new(window);
        for (op, _) in &files {
            t.push(op.clone());
        }
        // Commands written and not yet answered, each with its file's plan; replies due.
        let mut written: VecDeque<(Command, usize)> = VecDeque::new();
        let mut due: VecDeque<Reply> = VecDeque::new();
        let mut ends: Vec<Vec<&'static str>> = vec![Vec::new(); files.len()];
        let mut file_of_cmd = 0;
        let mut guard = 0;
        while !t.is_done() {
            guard += 1;
            prop_assert!(guard < 1000, "no progress");
            while let Some(c) = t.poll_command() {
                written.push_back((c, file_of_cmd));
                file_of_cmd = next_file(&t, &files, file_of_cmd);
            }
            prop_assert!(t.in_flight() <= window);
            if due.is_empty() {
                let (cmd, file) = written.pop_front().expect("a command is outstanding");
                due.extend(answer(&cmd, &files[file].1));
            }
            let reply = due.pop_front().expect("a reply is due");
            let ev = t.handle_reply(reply).expect("a well-behaved reply");
            let mut evs: Vec<FileEvent> = ev.into_iter().collect();
            evs.extend(std::iter::from_fn(|| t.poll_event()));
            for ev in evs {
                match ev {
                    FileEvent::DataStart { file, .. } => {
                        ends[file].push("data");
                        if files[file].1.abort {
                            prop_assert_eq!(t.abort(), Some(Command::Abor));
                            let end = due.pop_back().expect("the transfer's final reply");
                            due.clear();
                            due.push_back(if end.code == 226 { end } else { r(426, "cut") });
                            due.push_back(r(226, "ABOR ok"));
                        }
                    }
                    FileEvent::Moved { file } => ends[file].push("moved"),
                    FileEvent::Checksum { file, .. } => ends[file].push("cksm"),
                    FileEvent::Done { file } => ends[file].push("done"),
                    FileEvent::Failed { file, .. } => ends[file].push("failed"),
                    FileEvent::Aborted { file } => ends[file].push("aborted"),
                    FileEvent::RestartMarker { .. } | FileEvent::Perf { .. } => {}
                }
            }
        }
        prop_assert!(written.is_empty() && due.is_empty());
        for (i, e) in ends.iter().enumerate() {
            let finals = e.iter().filter(|s| matches!(**s, "done" | "failed")).count();
            let aborted = e.contains(&"aborted");
            prop_assert!(finals + usize::from(aborted) >= 1, "file {} ended without an event: {:?}", i, e);
            prop_assert!(finals <= 1, "file {}: {:?}", i, e);
            if e.contains(&"done") {
                prop_assert_eq!(e.last(), Some(&"done"));
                prop_assert!(!aborted);
                prop_assert!(e.contains(&"moved"));
                prop_assert_eq!(e.contains(&"cksm"), files[i].0.cksm.is_some());
            }
        }
    }
}

/// The file whose commands are written next, after a command of `file` was written.
fn next_file(t: &Transfers, files: &[(FileOp, Plan)], file: usize) -> usize {
    let i = file - t.base;
    match t.slots.get(i) {
        Some(s) if s.next_kind().is_some() => file,
        _ => (file + 1).min(files.len()),
    }
}
