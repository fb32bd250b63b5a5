//! Property test: any valid record survives insert → get and serde JSON unchanged.

use haul_store::{Outcome, Params, Sample, Store, TransferRecord};
use proptest::prelude::*;
use serde_json::Value;

fn json_leaf() -> impl Strategy<Value = Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        "[a-z0-9 ]{0,8}".prop_map(Value::String),
    ]
}

fn json_value() -> impl Strategy<Value = Value> {
    json_leaf().prop_recursive(2, 8, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z]{1,6}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

fn params() -> impl Strategy<Value = Params> {
    (
        (
            any::<Option<u32>>(),
            any::<Option<u32>>(),
            any::<Option<u32>>(),
        ),
        (
            prop::option::of(0..=i64::MAX as u64),
            prop::option::of(0..=i64::MAX as u64),
        ),
        (
            prop::option::of("[a-z0-9]{1,8}"),
            prop::option::of("[a-z]{1,5}"),
        ),
        json_value(),
    )
        .prop_map(
            |(
                (parallelism, concurrency, pipelining),
                (tcp_buffer, block_size),
                (checksum, transport),
                extra,
            )| {
                Params {
                    parallelism,
                    concurrency,
                    pipelining,
                    tcp_buffer,
                    block_size,
                    checksum,
                    transport,
                    extra,
                }
            },
        )
}

fn sample() -> impl Strategy<Value = Sample> {
    (0.0..1e6f64, 0..=i64::MAX as u64, 0.0..1e12f64).prop_map(|(t_s, bytes, bps)| Sample {
        t_s,
        bytes,
        bps,
    })
}

fn record() -> impl Strategy<Value = TransferRecord> {
    (
        ("[a-z]{1,8}", -1e10..1e10f64, 0.0..1e7f64),
        (".{0,20}", ".{0,20}", "[a-z0-9.:]{1,20}", "[a-z0-9.:]{1,20}"),
        params(),
        (0..=i64::MAX as u64, 0..=i64::MAX as u64),
        prop_oneof![
            Just(Outcome::Ok),
            Just(Outcome::Failed),
            Just(Outcome::Interrupted)
        ],
        prop::option::of(".{0,30}"),
        prop::collection::vec(sample(), 0..10),
    )
        .prop_map(
            |(
                (kind, started_at, duration_s),
                (source, destination, source_host, destination_host),
                params,
                (files, bytes),
                outcome,
                error,
                samples,
            )| {
                TransferRecord {
                    id: None,
                    kind,
                    started_at,
                    duration_s,
                    source,
                    destination,
                    source_host,
                    destination_host,
                    params,
                    files,
                    bytes,
                    outcome,
                    error,
                    samples,
                }
            },
        )
}

proptest! {
    #[test]
    fn records_round_trip_through_sqlite_and_json(r in record()) {
        let mut store = Store::open_in_memory().expect("open");
        let id = store.insert(&r).expect("insert");
        let got = store.get(id).expect("get").expect("present");
        let expected = TransferRecord { id: Some(id), ..r };
        prop_assert_eq!(&got, &expected);
        let text = serde_json::to_string(&got).expect("encode");
        let back: TransferRecord = serde_json::from_str(&text).expect("decode");
        prop_assert_eq!(back, expected);
    }
}
