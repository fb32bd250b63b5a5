//! Unit and property tests of the control codec and state machines.

use proptest::prelude::*;

use super::*;
use crate::params::TransportKind;
use crate::ProfileError;

fn pump_to_server(c: &mut Client, s: &mut Server) -> Vec<ServerEvent> {
    s.feed(&c.transmit()).expect("server feed")
}

fn pump_to_client(s: &mut Server, c: &mut Client) -> Vec<ClientEvent> {
    c.feed(&s.transmit()).expect("client feed")
}

#[test]
fn full_control_flow_reaches_done_on_both_sides() {
    let params = ProfileParams {
        streams: 3,
        transport: TransportKind::Udt,
        ..Default::default()
    };
    let mut c = Client::new(params.clone());
    let mut s = Server::new();
    assert!(pump_to_client(&mut s, &mut c).is_empty());
    assert_eq!(c.state(), ClientState::AwaitHandshake);
    assert!(pump_to_server(&mut c, &mut s).is_empty());
    assert!(pump_to_client(&mut s, &mut c).is_empty());
    let ev = pump_to_server(&mut c, &mut s);
    assert_eq!(ev, vec![ServerEvent::Configure(Box::new(params.clone()))]);
    s.params_accepted(params.clone()).unwrap();
    assert!(pump_to_client(&mut s, &mut c).is_empty());
    assert_eq!(
        pump_to_server(&mut c, &mut s),
        vec![ServerEvent::CreateStreams]
    );
    s.listening(vec![5001, 5002, 5003]).unwrap();
    let ev = pump_to_client(&mut s, &mut c);
    assert_eq!(
        ev,
        vec![ClientEvent::ConnectStreams {
            params: Box::new(params),
            ports: vec![5001, 5002, 5003]
        }]
    );
    c.streams_connected().unwrap();
    assert_eq!(pump_to_server(&mut c, &mut s), vec![ServerEvent::Start]);
    s.started().unwrap();
    assert_eq!(
        pump_to_client(&mut s, &mut c),
        vec![ClientEvent::StartTransfer]
    );
    c.transfer_done().unwrap();
    assert_eq!(pump_to_server(&mut c, &mut s), vec![ServerEvent::End]);
    s.ended().unwrap();
    assert_eq!(
        pump_to_client(&mut s, &mut c),
        vec![ClientEvent::TransferEnded]
    );
    let sent = SideReport {
        streams: vec![StreamSide {
            bytes: 10,
            seconds: 1.0,
            ..Default::default()
        }],
        duration_s: 1.0,
    };
    c.send_results(sent.clone()).unwrap();
    assert_eq!(
        pump_to_server(&mut c, &mut s),
        vec![ServerEvent::Exchange(sent)]
    );
    let got = SideReport {
        streams: vec![StreamSide {
            bytes: 9,
            seconds: 1.1,
            lost: Some(1),
            ..Default::default()
        }],
        duration_s: 1.1,
    };
    s.results(got.clone()).unwrap();
    assert!(pump_to_client(&mut s, &mut c).is_empty());
    assert_eq!(pump_to_server(&mut c, &mut s), vec![ServerEvent::Finished]);
    assert_eq!(s.state(), ServerState::Finished);
    assert_eq!(
        pump_to_client(&mut s, &mut c),
        vec![ClientEvent::Finished(got)]
    );
    assert_eq!(c.state(), ClientState::Finished);
}

#[test]
fn version_mismatch_sends_error_and_fails() {
    let mut s = Server::new();
    let _ = s.transmit();
    let hello = Msg::Handshake(Hello {
        version: 99,
        software: "future".into(),
    });
    let err = s.feed(&hello.to_bytes()).unwrap_err();
    assert!(err.to_string().contains("version 99"), "{err}");
    assert_eq!(s.state(), ServerState::Failed);
    let mut d = Decoder::new();
    d.feed(&s.transmit());
    assert!(matches!(d.next_msg(), Ok(Some(Msg::Error(r))) if r.contains("version")));
}

#[test]
fn out_of_order_message_is_a_protocol_error_with_an_error_reply() {
    let mut c = Client::new(ProfileParams::default());
    let err = c.feed(&Msg::Start.to_bytes()).unwrap_err();
    assert!(
        matches!(err, ProfileError::Protocol(ref m) if m.contains("PROFILING_START")),
        "{err}"
    );
    assert_eq!(c.state(), ClientState::Failed);
    assert_eq!(c.transmit()[0], code::ERROR);
}

#[test]
fn peer_error_is_reported_as_remote() {
    let mut c = Client::new(ProfileParams::default());
    let err = c
        .feed(&Msg::Error("transport udt is not available".into()).to_bytes())
        .unwrap_err();
    assert!(matches!(err, ProfileError::Remote(ref m) if m.contains("udt")));
}

#[test]
fn wrong_number_of_ports_fails_the_client() {
    let mut c = Client::new(ProfileParams {
        streams: 2,
        ..Default::default()
    });
    let mut s = Server::new();
    pump_to_client(&mut s, &mut c);
    pump_to_server(&mut c, &mut s);
    pump_to_client(&mut s, &mut c);
    pump_to_server(&mut c, &mut s);
    s.params_accepted(ProfileParams {
        streams: 2,
        ..Default::default()
    })
    .unwrap();
    pump_to_client(&mut s, &mut c);
    pump_to_server(&mut c, &mut s);
    s.listening(vec![1]).unwrap();
    assert!(c.feed(&s.transmit()).is_err());
}

#[test]
fn driver_calls_in_the_wrong_state_are_rejected() {
    let mut c = Client::new(ProfileParams::default());
    assert!(c.transfer_done().is_err());
    let mut s = Server::new();
    assert!(s.started().is_err());
}

#[test]
fn oversized_frame_is_rejected_before_buffering() {
    let mut d = Decoder::new();
    d.feed(&[code::PARAMS, 0xff, 0xff, 0xff, 0xff]);
    assert!(d.next_msg().is_err());
}

fn arb_msg() -> impl Strategy<Value = Msg> {
    prop_oneof![
        Just(Msg::CtrlChanEst),
        (any::<u16>(), "[a-z0-9 .]{0,20}").prop_map(|(v, s)| Msg::Handshake(Hello {
            version: v,
            software: s
        })),
        (1u32..64, 0.1f64..100.0, proptest::option::of(1u64..1 << 26)).prop_map(|(p, d, l)| {
            Msg::Params(Box::new(ProfileParams {
                streams: p,
                duration_s: d,
                block: l,
                ..Default::default()
            }))
        }),
        proptest::collection::vec(any::<u16>(), 0..8).prop_map(Msg::CreateStreams),
        Just(Msg::Start),
        Just(Msg::End),
        proptest::collection::vec((any::<u32>(), 0.0f64..1e4), 0..4).prop_map(|v| Msg::Exchange(
            SideReport {
                streams: v
                    .into_iter()
                    .map(|(b, s)| StreamSide {
                        bytes: u64::from(b),
                        seconds: s,
                        ..Default::default()
                    })
                    .collect(),
                duration_s: 1.5,
            }
        )),
        Just(Msg::Done),
        ".{0,40}".prop_map(Msg::Error),
    ]
}

proptest! {
    #[test]
    fn every_message_round_trips_through_split_feeds(msgs in proptest::collection::vec(arb_msg(), 1..6), cut in 0usize..200) {
        let mut bytes = Vec::new();
        for m in &msgs {
            m.encode(&mut bytes);
        }
        let cut = cut.min(bytes.len());
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for part in [&bytes[..cut], &bytes[cut..]] {
            d.feed(part);
            while let Some(m) = d.next_msg().expect("decode") {
                got.push(m);
            }
        }
        prop_assert_eq!(got, msgs);
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
        let mut d = Decoder::new();
        d.feed(&bytes);
        while let Ok(Some(_)) = d.next_msg() {}
        let _ = Server::new().feed(&bytes);
        let _ = Client::new(ProfileParams::default()).feed(&bytes);
    }

    #[test]
    fn framed_garbage_never_panics(ty in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..256)) {
        let mut bytes = vec![ty];
        bytes.extend_from_slice(&(payload.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&payload);
        let mut d = Decoder::new();
        d.feed(&bytes);
        let _ = d.next_msg();
        let _ = Server::new().feed(&bytes);
    }
}
