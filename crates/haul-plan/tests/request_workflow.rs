//! The request (`haul_plan::request`) read from TOML and from flags, and its planning into a
//! workflow (`haul_plan::workflow`) on hand-made module databases with known answers, plus
//! property tests against an independent brute force over every route × transport combination.

use haul_plan::request::{Field, Request, RequestError};
use haul_plan::workflow::Verdict::{
    self, BelowTarget, Chosen, LowerProfit, MissesDeadline, NotEncrypted, NotRelayable, OverCap,
    Unpredicted,
};
use haul_plan::workflow::{
    combined_bps, effective_bps, plan, predicted_seconds, Combination, Estimate, Facts,
    RouteOption, TransportOption, Workflow,
};
use haul_plan::PlanError;
use proptest::prelude::*;

const FULL: &str = r#"
src = "/data/in"
dst = "haul://far:2811/out"
size = "1T"
start_after = "10m"
deadline = "30m"
rate = "5gbit"
cost_cap = 100
[require]
encrypted = true
loss_tolerance = 0.01
[weights]
rate = 2
deadline = 0.5
"#;

/// The field a request error names; panics on a TOML error.
fn field_of(e: RequestError) -> &'static str {
    let RequestError::Field { field, .. } = e else {
        panic!("expected a field error, got {e:?}")
    };
    field
}

#[test]
fn full_request_file_gives_the_right_numbers() {
    let mut want = Request::new("/data/in", "haul://far:2811/out");
    // haul_units::parse_size: a bare `T` is a power of 1024 (`TB` is 10¹²).
    want.size = Some(1 << 40);
    (want.start_after_s, want.deadline_s) = (Some(600.0), Some(1800.0));
    (want.target_bps, want.cost_cap) = (Some(5e9), Some(100));
    (want.require.encrypted, want.require.loss_tolerance) = (true, 0.01);
    (want.weights.rate, want.weights.deadline) = (2.0, 0.5);
    assert_eq!(Request::from_toml(FULL, None, None), Ok(want.clone()));
    assert_eq!(want.window_s(), Some(1200.0));
}

#[test]
fn command_line_src_and_dst_override_the_file() {
    let r = Request::from_toml(FULL, Some("/cli/src"), Some("haul://cli/dst")).expect("valid");
    assert_eq!([&r.src, &r.dst], ["/cli/src", "haul://cli/dst"]);
    assert_eq!(r.size, Some(1 << 40), "the rest still comes from the file");
    let r = Request::from_toml(FULL, Some("/cli/src"), None).expect("valid");
    assert_eq!([&r.src, &r.dst], ["/cli/src", "haul://far:2811/out"]);
    // An empty file with both ends on the command line is the plain request.
    let bare = Request::from_toml("", Some("/a"), Some("/b")).expect("valid");
    assert_eq!(bare, Request::new("/a", "/b"));
}

#[test]
fn missing_src_or_dst_is_an_error_naming_it() {
    for (text, src, dst, want) in [
        ("dst = \"/b\"", None, None, "src"),
        ("src = \"/a\"", None, None, "dst"),
        ("", None, Some("/b"), "src"),
        ("", Some("/a"), None, "dst"),
        ("src = \" \"", None, Some("/b"), "src"),
        ("", Some("/a"), Some(""), "dst"),
    ] {
        let e = Request::from_toml(text, src, dst).expect_err(text);
        assert!(e.to_string().contains(want), "{e}");
        assert_eq!(field_of(e), want, "{text:?} {src:?} {dst:?}");
    }
}

/// Each line is an error: `Field` naming the field, or (`toml:`) a TOML error naming the key.
const BAD: [(&str, &str); 18] = [
    ("colour = \"red\"", "toml:colour"),
    ("[require]\nfast = true", "toml:fast"),
    ("[weights]\nspeed = 1", "toml:speed"),
    ("[extra]\nx = 1", "toml:extra"),
    ("cost_cap = -1", "toml:"),
    ("rate = \"5 apples\"", "rate"),
    ("rate = \"0bit\"", "rate"),
    ("size = \"12 parsecs\"", "size"),
    ("start_after = \"soon\"", "start_after"),
    ("deadline = \"5\"", "deadline"),
    ("deadline = \"0\"", "deadline"),
    ("start_after = \"30m\"\ndeadline = \"10m\"", "deadline"),
    ("start_after = \"10m\"\ndeadline = \"10m\"", "deadline"),
    ("[require]\nloss_tolerance = 1.5", "loss_tolerance"),
    ("[require]\nloss_tolerance = nan", "loss_tolerance"),
    ("[weights]\nrate = -1", "weights.rate"),
    ("[weights]\ndeadline = -0.5", "weights.deadline"),
    ("[require]\nencrypted = \"y\"", "toml:"),
];

#[test]
fn unknown_fields_bad_units_and_out_of_range_values_are_errors_naming_them() {
    for (text, want) in BAD {
        let e = Request::from_toml(text, Some("/a"), Some("/b")).expect_err(text);
        match want.strip_prefix("toml:") {
            Some(key) => {
                let m = e.to_string();
                assert!(m.starts_with("request file: "), "{m}");
                assert!(m.contains(key), "{text:?}: {m}");
                assert!(matches!(e, RequestError::Toml(_)), "{e:?}");
            }
            None => {
                assert!(e.to_string().contains(want), "{text:?}: {e}");
                assert_eq!(field_of(e), want, "{text:?}");
            }
        }
    }
    // The edges of the ranges are fine.
    let edges = "[require]\nloss_tolerance = 1.0\n[weights]\nrate = 0\ndeadline = 0";
    Request::from_toml(edges, Some("/a"), Some("/b")).expect(edges);
}

#[test]
fn wrong_type_errors_name_the_key() {
    for (text, key) in [("cost_cap = \"100\"", "cost_cap"), ("size = 1000", "size")] {
        let e = Request::from_toml(text, Some("/a"), Some("/b")).expect_err(text);
        assert!(e.to_string().contains(key), "{text:?}: {e}");
    }
}

#[test]
fn set_parses_units_and_leaves_the_field_alone_on_error() {
    let mut r = Request::new("/a", "/b");
    r.set(Field::Size, "1TB").unwrap();
    assert_eq!(r.size, Some(1_000_000_000_000));
    r.set(Field::Rate, "125MB/s").unwrap();
    assert_eq!(r.target_bps, Some(1e9));
    r.set(Field::StartAfter, "90s").unwrap();
    r.set(Field::Deadline, "2h").unwrap();
    assert_eq!(r.window_s(), Some(7200.0 - 90.0));
    let mut err = |which, text| field_of(r.set(which, text).unwrap_err());
    assert_eq!(err(Field::Size, "lots"), "size");
    assert_eq!(err(Field::Rate, "fast"), "rate");
    assert_eq!(err(Field::StartAfter, "-1s"), "start_after");
    assert_eq!(err(Field::Deadline, "1 wk"), "deadline");
    assert_eq!((r.size, r.target_bps), (Some(1_000_000_000_000), Some(1e9)));
    assert_eq!((r.start_after_s, r.deadline_s), (Some(90.0), Some(7200.0)));
    // Only a deadline: the window is the deadline.
    let mut d = Request::new("/a", "/b");
    d.set(Field::Deadline, "30m").unwrap();
    assert_eq!(d.window_s(), Some(1800.0));
    // Validate catches what set cannot: a start after the deadline.
    d.set(Field::StartAfter, "1h").unwrap();
    assert_eq!(field_of(d.validate().unwrap_err()), "deadline");
}

const DURATION_UNITS: [&str; 9] = ["ns", "us", "ms", "s", "m", "h", "d", "w", ""];
const RATE_UNITS: [&str; 7] = ["bit", "kbit", "Mbps", "Gb/s", "MB/s", "GiB/s", "M"];
/// Lines that look like a request file's, right or wrong.
const TOML_LIKE: &str = "((src|dst|size|rate|deadline|start_after|cost_cap|encrypted|\
    loss_tolerance|\\[require\\]|\\[weights\\]) ?= ?(\"[0-9.e]{0,4}(m|s|T|gbit|x)?\"|\
    -?[0-9.]{1,4}|true)?\n){0,8}";

/// A number as a flag might carry it, with a unit (sometimes a wrong or missing one).
fn with_unit(units: &'static [&'static str]) -> impl Strategy<Value = Option<String>> {
    let number = prop_oneof![0.0f64..1e6, any::<f64>(), Just(0.0), 1e300f64..1e308];
    prop::option::of((number, prop::sample::select(units)).prop_map(|(v, u)| format!("{v}{u}")))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Whatever the flags set, validating answers Ok or a field error; a valid request's window
    /// is positive and finite.
    #[test]
    fn set_then_validate_never_panics(
        start in with_unit(&DURATION_UNITS),
        deadline in with_unit(&DURATION_UNITS),
        rate in with_unit(&RATE_UNITS),
        size in with_unit(&["", "k", "T", "TB", "x"]),
    ) {
        let mut r = Request::new("/a", "/b");
        for (which, text) in [
            (Field::StartAfter, start), (Field::Deadline, deadline), (Field::Rate, rate),
            (Field::Size, size),
        ] {
            if let Some(Err(e)) = text.map(|t| r.set(which, &t)) {
                prop_assert!(matches!(e, RequestError::Field { .. }), "{:?}", e);
            }
        }
        match r.validate() {
            Ok(()) => {
                let w = r.window_s();
                prop_assert!(w.is_none_or(|w| w.is_finite() && w > 0.0), "window {:?}", w);
                prop_assert!(r.target_bps.is_none_or(|b| b.is_finite() && b > 0.0));
            }
            Err(e) => prop_assert!(matches!(e, RequestError::Field { .. }), "{:?}", e),
        }
    }

    /// Reading any text answers Ok or an error; what it accepts validates.
    #[test]
    fn from_toml_never_panics(text in prop_oneof![any::<String>(), TOML_LIKE], cli: bool) {
        let (src, dst) = if cli { (Some("/a"), Some("/b")) } else { (None, None) };
        if let Ok(r) = Request::from_toml(&text, src, dst) {
            prop_assert_eq!(r.validate(), Ok(()));
        }
    }
}

fn est(bps: Option<f64>) -> Option<Estimate> {
    let source = "history".to_string();
    bps.map(|bps| Estimate { bps, source })
}

fn route(relay: Option<&str>, bps: Option<f64>, encrypted: bool, cost: u32) -> RouteOption {
    let name = relay.map_or("direct".into(), |r| format!("via {r}"));
    let relays = relay.map(String::from).into_iter().collect();
    let estimate = est(bps);
    RouteOption {
        name,
        relays,
        estimate,
        encrypted,
        cost,
    }
}

fn direct(bps: Option<f64>) -> RouteOption {
    route(None, bps, false, 0)
}

fn relay(bps: Option<f64>, encrypted: bool, cost: u32) -> RouteOption {
    route(Some("r1:2811"), bps, encrypted, cost)
}

fn transport(name: &str, bps: Option<f64>, encrypted: bool, relayable: bool) -> TransportOption {
    let (name, estimate) = (name.to_string(), est(bps));
    TransportOption {
        name,
        estimate,
        encrypted,
        relayable,
        per_file_s: 0.0,
    }
}

fn tcp(bps: Option<f64>) -> TransportOption {
    transport("tcp", bps, false, true)
}

fn plut(bps: Option<f64>) -> TransportOption {
    transport("plut", bps, false, false)
}

fn facts(routes: Vec<RouteOption>, transports: Vec<TransportOption>) -> Facts {
    let mut f = Facts::default();
    (f.routes, f.transports) = (routes, transports);
    f
}

fn req() -> Request {
    Request::new("/data/in", "haul://far:2811/out")
}

fn key(c: &Combination) -> (usize, usize) {
    (c.route, c.transport)
}

fn count(w: &Workflow, v: Verdict) -> usize {
    w.combinations.iter().filter(|c| c.verdict == v).count()
}

/// Plans and checks the shape: each route × transport once, one chosen first, the rest by profit.
fn planned(r: &Request, f: &Facts) -> Workflow {
    let w = plan(r, f).expect("plannable");
    let nt = f.transports.len();
    let mut pairs: Vec<_> = w.combinations.iter().map(key).collect();
    pairs.sort_unstable();
    let all: Vec<_> = (0..f.routes.len() * nt).map(|k| (k / nt, k % nt)).collect();
    assert_eq!(pairs, all, "one combination per route × transport");
    match &w.chosen {
        Ok(c) => {
            assert_eq!(count(&w, Chosen), 1);
            assert_eq!(&w.combinations[0], c, "the chosen combination comes first");
            let rest = &w.combinations[1..];
            assert!(rest.windows(2).all(|p| p[0].profit >= p[1].profit));
        }
        Err(_) => assert_eq!(count(&w, Chosen), 0),
    }
    assert_eq!(w.solver, if r.cost_cap.is_some() { "DPMS" } else { "CPMS" });
    w
}

fn combo(w: &Workflow, route: usize, transport: usize) -> &Combination {
    let mut all = w.combinations.iter();
    all.find(|c| key(c) == (route, transport)).expect("listed")
}

/// Every verdict by its initials (`LowerProfit` is `LP`), `/` between transports and a space
/// between routes: `LP/C NR/NR` for two routes with two transports each.
fn grid(w: &Workflow) -> String {
    let mut all: Vec<&Combination> = w.combinations.iter().collect();
    all.sort_by_key(|c| key(c));
    let initials = |c: &&Combination| format!("{:?}", c.verdict).replace(char::is_lowercase, "");
    let names: Vec<String> = all.iter().map(initials).collect();
    // The transport zone holds one module per route and transport.
    let n = w.instance.zones()[1].modules.len() / w.instance.zones()[0].modules.len();
    let rows: Vec<String> = names.chunks(n).map(|r| r.join("/")).collect();
    rows.join(" ")
}

fn chosen(w: &Workflow) -> (usize, usize) {
    key(w.chosen.as_ref().expect("a plan"))
}

fn unmet(w: &Workflow) -> &str {
    w.chosen.as_ref().expect_err("no plan")
}

#[test]
fn direct_tcp_only_is_chosen_by_cpms() {
    let mut f = facts(vec![direct(None)], vec![tcp(Some(4e8))]);
    (f.size, f.setup_s) = (Some(1_000_000_000), 2.5);
    let w = planned(&req(), &f);
    let c = w.chosen.as_ref().unwrap();
    assert_eq!((key(c), &c.verdict, w.solver), ((0, 0), &Chosen, "CPMS"));
    assert_eq!((c.predicted_bps, c.predicted_s), (Some(4e8), Some(22.5)));
    assert_eq!(predicted_seconds(Some(10), Some(40.0), 2.5), Some(4.5));
    assert_eq!(predicted_seconds(Some(1), Some(0.0), 2.5), None);
    assert_eq!(predicted_seconds(None, Some(4e8), 2.5), None);
    assert_eq!((c.cost, c.profit), (0, 1.0));
    assert_eq!(w.terms, ["rate"]);
    // A deadline adds its term, weighted by α_deadline.
    let mut r = req();
    r.set(Field::Deadline, "1h").unwrap();
    r.weights.deadline = 0.25;
    let w = planned(&r, &f);
    assert_eq!(w.terms, ["rate", "deadline"]);
    assert_eq!(w.weights.alpha(), [1.0, 0.25]);
}

#[test]
fn faster_plut_beats_tcp_and_a_better_relay_beats_both() {
    let f = facts(vec![direct(None)], vec![tcp(Some(4e8)), plut(Some(9e8))]);
    let w = planned(&req(), &f);
    assert_eq!(grid(&w), "LP/C");
    let routes = vec![direct(Some(1e8)), relay(Some(8e8), false, 0)];
    let f = facts(routes, vec![tcp(Some(1e8)), plut(Some(2e8))]);
    let w = planned(&req(), &f);
    assert_eq!(grid(&w), "LP/LP C/NR");
    assert_eq!(combo(&w, 1, 0).predicted_bps, Some(8e8));
    assert_eq!(combo(&w, 0, 1).predicted_bps, Some(2e8));
}

#[test]
fn encryption_keeps_only_encrypted_legs() {
    let transports = vec![transport("tcp", Some(3e8), true, true), plut(Some(9e8))];
    let f = facts(vec![direct(None), relay(Some(5e8), true, 0)], transports);
    assert_eq!(chosen(&planned(&req(), &f)), (0, 1), "PLUT if not required");
    let mut r = req();
    r.require.encrypted = true;
    let w = planned(&r, &f);
    assert_eq!(grid(&w), "NE/NE C/NE");
    // Nothing encrypted at all: no plan, and the reason is encryption.
    let f = facts(vec![direct(Some(1e9))], vec![tcp(None), plut(None)]);
    let w = planned(&r, &f);
    assert!(unmet(&w).contains("encrypt"), "{}", unmet(&w));
    assert_eq!(count(&w, NotEncrypted), 2);
}

#[test]
fn encryption_message_with_relays_listed() {
    let routes = vec![direct(Some(1e9)), relay(Some(5e8), false, 0)];
    let f = facts(routes, vec![tcp(Some(4e8)), plut(Some(9e8))]);
    let mut r = req();
    r.require.encrypted = true;
    let w = planned(&r, &f);
    assert_eq!((count(&w, NotEncrypted), count(&w, NotRelayable)), (4, 0));
    assert!(unmet(&w).contains("encrypt"), "{}", unmet(&w));
}

#[test]
fn relayed_tcp_is_not_credited_with_its_direct_rate() {
    let routes = vec![direct(None), relay(Some(4e8), false, 0)];
    let f = facts(routes, vec![tcp(Some(3e8)), plut(Some(6e8))]);
    let w = planned(&req(), &f);
    // Runnable: direct+TCP 300, direct+PLUT 600, relay+TCP 400 Mbit/s; nothing else differs.
    assert_eq!(combo(&w, 1, 0).predicted_bps, Some(4e8));
    assert_eq!(chosen(&w), (0, 1), "{:?}", w.combinations);
}

/// 1 GB, 1 s of setup: TCP at 400 Mbit/s takes 21 s, PLUT at 900 Mbit/s about 9.9 s.
fn deadline_case(start: &str, deadline: &str) -> Workflow {
    let mut f = facts(vec![direct(None)], vec![tcp(Some(4e8)), plut(Some(9e8))]);
    (f.size, f.setup_s) = (Some(1_000_000_000), 1.0);
    let mut r = req();
    r.set(Field::StartAfter, start).unwrap();
    r.set(Field::Deadline, deadline).unwrap();
    r.validate().expect("valid");
    planned(&r, &f)
}

#[test]
fn deadline_picks_the_fastest_that_meets_it_or_says_why_none_does() {
    let w = deadline_case("0", "5s");
    let m = unmet(&w);
    assert!(m.contains("9.9 s, the window is 5.0 s"), "{m}");
    assert_eq!(grid(&w), "MD/MD");
    // The window, not the deadline alone: 60 s after a 55 s wait leaves 5 s.
    assert!(unmet(&deadline_case("55s", "60s")).contains("deadline"));
    assert_eq!(grid(&deadline_case("0", "15s")), "MD/C");
    assert_eq!(grid(&deadline_case("50s", "60s")), "MD/C");
    let w = deadline_case("0", "1m");
    assert_eq!(grid(&w), "LP/C");
    assert_eq!(combo(&w, 0, 0).predicted_s, Some(21.0));
}

#[test]
fn target_rate_above_every_estimate_is_an_error() {
    let f = facts(vec![direct(None)], vec![tcp(Some(4e8)), plut(Some(9e8))]);
    let mut r = req();
    r.set(Field::Rate, "1gbit").unwrap();
    let w = planned(&r, &f);
    assert!(unmet(&w).contains("target rate"), "{}", unmet(&w));
    assert_eq!(grid(&w), "BT/BT");
    r.set(Field::Rate, "500mbit").unwrap();
    assert_eq!(grid(&planned(&r, &f)), "BT/C");
}

#[test]
fn cost_cap_picks_dpms_and_marks_dear_combinations() {
    // Direct at 200 Mbit/s for free, or a paid relay (cost 50) at 800 Mbit/s.
    let paid = relay(Some(8e8), false, 50);
    let transports = vec![tcp(None), plut(Some(3e8))];
    let f = facts(vec![direct(Some(2e8)), paid], transports);
    assert_eq!(chosen(&planned(&req(), &f)), (1, 0), "no cap: the relay");
    let mut r = req();
    for (cap, want) in [
        (10, "LP/C OC/NR"),
        (49, "LP/C OC/NR"),
        (50, "LP/LP C/NR"),
        (100, "LP/LP C/NR"),
    ] {
        r.cost_cap = Some(cap);
        let w = planned(&r, &f);
        assert_eq!(grid(&w), want, "cap {cap}");
        assert_eq!(combo(&w, 1, 0).cost, 50);
        assert_eq!(combo(&w, 0, 0).predicted_bps, Some(2e8));
    }
    // Only the paid route: the cap is below every workflow.
    let mut only_paid = f.clone();
    only_paid.routes.remove(0);
    r.cost_cap = Some(10);
    let w = planned(&r, &only_paid);
    let m = unmet(&w);
    assert!(m.contains("cost cap 10") && m.contains("(50)"), "{m}");
    assert_eq!(grid(&w), "OC/NR");
}

#[test]
fn no_estimates_ties_go_to_the_first_route_and_transport() {
    let transports = vec![tcp(None), plut(None), transport("udt", None, false, false)];
    let f = facts(vec![direct(None), relay(None, false, 0)], transports);
    let mut r = req();
    let w = planned(&r, &f);
    assert_eq!(chosen(&w), (0, 0));
    assert!(w.combinations.iter().all(|c| c.profit == 0.0));
    assert!(w.combinations.iter().all(|c| c.predicted_bps.is_none()));
    r.cost_cap = Some(1000);
    assert_eq!(chosen(&planned(&r, &f)), (0, 0), "DPMS ties too");
    // Without a route or a transport there is nothing to plan.
    let e = plan(&r, &Facts::default()).unwrap_err();
    assert!(matches!(e, PlanError::EmptyZone { zone: 0, .. }), "{e:?}");
    let e = plan(&r, &facts(vec![direct(None)], vec![])).unwrap_err();
    assert!(matches!(e, PlanError::EmptyZone { zone: 1, .. }), "{e:?}");
}

/// Why a combination cannot run, by the rules in their order: relay, encryption, target, deadline.
fn oracle_blocked(r: &Request, f: &Facts, c: &Combination) -> Option<Verdict> {
    let (ro, t) = (&f.routes[c.route], &f.transports[c.transport]);
    let bps = combined_bps(ro, t);
    let late = |n: u64, b: f64, w: f64| f.setup_s + n as f64 * 8.0 / b > w;
    if r.require.encrypted && !(ro.encrypted && t.encrypted) {
        Some(NotEncrypted)
    } else if !ro.relays.is_empty() && !t.relayable {
        Some(NotRelayable)
    } else if bps.is_none() && (r.target_bps.is_some() || r.deadline_s.is_some()) {
        Some(Unpredicted)
    } else if matches!((bps, r.target_bps), (Some(b), Some(g)) if b < g) {
        Some(BelowTarget)
    } else if matches!((f.size, bps, r.window_s()), (Some(n), Some(b), Some(w)) if late(n, b, w)) {
        Some(MissesDeadline)
    } else {
        None
    }
}

/// The weighted profit of a combination predicted at `bps` (Eq. 2.3 with the two terms; the
/// route module's terms are 0, its transport module's are at the combination's rate).
fn oracle_profit(r: &Request, f: &Facts, bps: Option<f64>) -> f64 {
    let all = f
        .routes
        .iter()
        .flat_map(|ro| f.transports.iter().map(move |t| combined_bps(ro, t)));
    let best = all.flatten().fold(0.0, f64::max);
    let reference = r.target_bps.unwrap_or(best);
    let Some(b) = bps.filter(|_| reference > 0.0) else {
        return 0.0;
    };
    let rate = r.weights.rate * (b / reference).min(1.0);
    let fits = |w: f64, n: u64| (w / (f.setup_s + n as f64 * 8.0 / b)).min(1.0);
    match (r.window_s(), f.size) {
        (Some(w), Some(n)) => rate + r.weights.deadline * fits(w, n),
        _ => rate,
    }
}

/// Each combination against the oracles, and the chosen one against a brute force: the most
/// profitable runnable combination within the cap (ties: lowest route, then transport).
fn check_against_brute_force(r: &Request, f: &Facts) -> Result<(), TestCaseError> {
    let w = planned(r, f);
    let cap = r.cost_cap.map_or(u64::MAX, u64::from);
    let mut runnable: Vec<&Combination> = Vec::new();
    for c in &w.combinations {
        let (ro, t) = (&f.routes[c.route], &f.transports[c.transport]);
        let p = oracle_profit(r, f, combined_bps(ro, t));
        prop_assert!((c.profit - p).abs() <= 1e-9 * p.max(1.0), "{:?}: {}", c, p);
        prop_assert_eq!(c.cost, u64::from(ro.cost));
        prop_assert_eq!(c.predicted_bps, combined_bps(ro, t));
        match oracle_blocked(r, f, c) {
            Some(v) => prop_assert_eq!(&c.verdict, &v),
            None if c.cost > cap => prop_assert_eq!(&c.verdict, &OverCap),
            None => {
                prop_assert!(matches!(c.verdict, Chosen | LowerProfit), "{:?}", c);
                runnable.push(c);
            }
        }
    }
    runnable.sort_by_key(|c| (c.route, c.transport));
    let best = runnable.iter().map(|c| c.profit).fold(f64::MIN, f64::max);
    let want = runnable.iter().find(|c| c.profit == best);
    match (&w.chosen, want) {
        (Ok(got), Some(want)) => {
            prop_assert_eq!(got.profit, best);
            prop_assert_eq!(key(got), key(want));
            prop_assert!(got.cost <= cap);
        }
        (Err(_), None) => {}
        (got, want) => prop_assert!(false, "plan {:?}, brute force {:?}", got, want),
    }
    Ok(())
}

/// 1–4 routes (the first direct) and 1–3 transports with optional estimates, random flags and
/// costs; a request with random encryption, cap, size and deadline, target and weights.
fn arb_case() -> impl Strategy<Value = (Request, Facts)> {
    let est = || prop::option::of(1e6f64..1e10);
    let routes = prop::collection::vec((est(), any::<bool>(), any::<bool>(), 0u32..100), 1..=4);
    let transports = prop::collection::vec((est(), any::<bool>(), any::<bool>()), 1..=3);
    let sized = prop::option::weighted(0.4, (1_000_000u64..1_000_000_000_000, 1.0f64..1e4));
    let target = prop::option::weighted(0.3, 1e6f64..1e10);
    let (enc, cap) = (prop::bool::weighted(0.3), prop::option::of(0u32..150));
    let extra = (0.0f64..5.0, 0.0f64..3.0, 0.0f64..3.0);
    let q = (enc, cap, sized, target, extra);
    (routes, transports, q).prop_map(|(routes, transports, q)| {
        let route_of = |(i, (e, relayed, enc, cost))| {
            let name = format!("r{i}:2811");
            route((i > 0 && relayed).then_some(name.as_str()), e, enc, cost)
        };
        let names = ["tcp", "plut", "udt"];
        let transport_of = |((e, enc, relay), name)| transport(name, e, enc, relay);
        let routes = routes.into_iter().enumerate().map(route_of).collect();
        let transports = transports.into_iter().zip(names).map(transport_of);
        let mut f = facts(routes, transports.collect());
        let (encrypted, cap, sized, target, (setup_s, wr, wd)) = q;
        let mut r = req();
        (r.require.encrypted, r.cost_cap, r.target_bps) = (encrypted, cap, target);
        (r.weights.rate, r.weights.deadline, f.setup_s) = (wr, wd, setup_s);
        if let Some((size, deadline)) = sized {
            (f.size, r.deadline_s) = (Some(size), Some(deadline));
        }
        (r, f)
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1024))]

    /// The chosen combination is the most profitable one that can run within the cap.
    #[test]
    fn chosen_matches_brute_force((r, f) in arb_case()) {
        prop_assert_eq!(r.validate(), Ok(()));
        check_against_brute_force(&r, &f)?;
    }
}

#[test]
fn a_cost_per_file_slows_a_transport_on_many_files() {
    // PLUT is faster on bytes, but each of 1,000 files costs it 0.5 s.
    let mut slow_start = plut(Some(9e8));
    slow_start.per_file_s = 0.5;
    let mut f = facts(vec![direct(None)], vec![tcp(Some(4e8)), slow_start]);
    (f.size, f.files) = (Some(1 << 30), 1);
    assert_eq!(chosen(&planned(&req(), &f)), (0, 1), "one file: PLUT");
    f.files = 1000;
    let w = planned(&req(), &f);
    assert_eq!(chosen(&w), (0, 0), "a thousand files: TCP");
    let bits = (1u64 << 33) as f64;
    let want = bits / (bits / 9e8 + 1000.0 * 0.5);
    let got = combo(&w, 0, 1).predicted_bps.unwrap();
    assert!((got - want).abs() < 1e-6 * want, "{got} vs {want}");
    // Unknown sizes leave the rate alone.
    f.size = None;
    assert_eq!(effective_bps(&f, &f.routes[0], &f.transports[1]), Some(9e8));
}
