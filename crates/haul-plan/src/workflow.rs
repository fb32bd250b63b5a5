//! From what is known about a transfer to its workflow: the module database of a request (the
//! routes and transports a transfer can take, each with an estimate and where it came from) is
//! laid out as a TSWOP instance with two zones, route then transport, and solved with CPMS (no
//! cost cap) or DPMS (a cap). Requirements and combinations that cannot work are dependency
//! edges left out, so the solver only sees workflows that can run: PLUT and UDT are not relayed,
//! an unencrypted leg cannot carry an encrypted request, and a combination predicted to miss the
//! deadline or the target rate, or not predicted at all when there is one to check, is not
//! joined. Every combination is also reported, chosen or not,
//! with why.

use crate::request::Request;
use crate::{cpms, dpms, Edge, Instance, Module, PlanError, Term, Weights, Zone};

/// An estimate of a rate with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Estimate {
    /// Bits per second.
    pub bps: f64,
    /// Where it came from, e.g. "history: median of 5 copies, newest 2 h old".
    pub source: String,
}

/// A route the data can take: direct, or through relays.
#[derive(Debug, Clone, PartialEq)]
pub struct RouteOption {
    /// How the report names it: "direct", "via r1:2811".
    pub name: String,
    /// The relays in order from the client (empty for direct).
    pub relays: Vec<String>,
    /// The route's predicted rate (its narrowest leg), when there is one.
    pub estimate: Option<Estimate>,
    /// Every leg is encrypted (haul:// throughout).
    pub encrypted: bool,
    /// What the operator charges for it (paid relays), and 0 for direct.
    pub cost: u32,
}

/// A data-channel transport both ends offer.
#[derive(Debug, Clone, PartialEq)]
pub struct TransportOption {
    /// `tcp`, `plut` or `udt`.
    pub name: String,
    /// Its rate on this pair, direct, when known.
    pub estimate: Option<Estimate>,
    /// Its data channel is encrypted.
    pub encrypted: bool,
    /// It can run through relays (only MODE E over TCP is relayed).
    pub relayable: bool,
    /// Seconds each file costs beyond its bytes (a PLUT session per file; 0 for pipelined
    /// MODE E).
    pub per_file_s: f64,
}

/// The module database of one request.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Facts {
    /// Routes, direct first.
    pub routes: Vec<RouteOption>,
    /// Transports, the default (TCP) first.
    pub transports: Vec<TransportOption>,
    /// Bytes to move, when known.
    pub size: Option<u64>,
    /// Files to move (0 counts as 1).
    pub files: u64,
    /// Seconds every workflow spends before data flows (listing, connecting), added to the
    /// predicted time.
    pub setup_s: f64,
}

/// Why a combination of route and transport was not chosen.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// This is the plan.
    Chosen,
    /// It could run, but the plan's profit is higher (or equal, and the plan comes first).
    LowerProfit,
    /// Together with the cheapest way through the other zones it costs more than the cap.
    OverCap,
    /// Only MODE E over TCP is relayed.
    NotRelayable,
    /// A leg or the data channel is not encrypted and the request requires it.
    NotEncrypted,
    /// Its predicted time is past the deadline.
    MissesDeadline,
    /// Its predicted rate is below the target.
    BelowTarget,
    /// Nothing predicts it, and the request has a deadline or a target to check.
    Unpredicted,
}

impl Verdict {
    /// The verdict in words, for the report.
    pub fn text(&self) -> &'static str {
        match self {
            Verdict::Chosen => "chosen",
            Verdict::LowerProfit => "lower profit",
            Verdict::OverCap => "over the cost cap",
            Verdict::NotRelayable => "not relayed (only MODE E over TCP runs through relays)",
            Verdict::NotEncrypted => "not encrypted on every leg",
            Verdict::MissesDeadline => "predicted past the deadline",
            Verdict::BelowTarget => "predicted below the target rate",
            Verdict::Unpredicted => "no prediction to check the deadline or target rate against",
        }
    }
}

/// One combination of route and transport, as the report lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct Combination {
    /// Index into [`Facts::routes`].
    pub route: usize,
    /// Index into [`Facts::transports`].
    pub transport: usize,
    /// Its weighted profit, Σ 𝒫 over its two modules.
    pub profit: f64,
    /// Its cost.
    pub cost: u64,
    /// Its predicted rate, when either the transport or the route has an estimate.
    pub predicted_bps: Option<f64>,
    /// Predicted seconds from start to end, with the size known.
    pub predicted_s: Option<f64>,
    /// Chosen, or why not.
    pub verdict: Verdict,
}

/// The answer to a request.
#[derive(Debug, Clone)]
pub struct Workflow {
    /// The TSWOP instance the solver saw (zones "route" and "transport").
    pub instance: Instance,
    /// α for the instance's profit terms.
    pub weights: Weights,
    /// The names of the profit terms, in the order of every module's vector.
    pub terms: Vec<&'static str>,
    /// "CPMS" (no cost cap) or "DPMS".
    pub solver: &'static str,
    /// Every combination, best profit first; the chosen one is marked.
    pub combinations: Vec<Combination>,
    /// The chosen combination, or why nothing can be: the request cannot be met.
    pub chosen: Result<Combination, String>,
    /// Transports per route: the transport zone holds one module per route and transport.
    width: usize,
}

impl Workflow {
    /// The modules of a combination in the instance: its route in zone 0, its transport on
    /// that route in zone 1.
    pub fn modules_of(&self, c: &Combination) -> [usize; 2] {
        [c.route, c.route * self.width + c.transport]
    }
}

/// The predicted rate of a route with a transport: direct, the transport's own estimate on the
/// pair (the route's when the transport has none); through relays, the route's narrowest leg
/// (relays carry TCP, which is what their predictions measure).
pub fn combined_bps(route: &RouteOption, transport: &TransportOption) -> Option<f64> {
    combined_estimate(route, transport).map(|e| e.bps)
}

/// The estimate [`combined_bps`] reads: direct, the transport's (else the route's); through
/// relays, the route's.
pub fn combined_estimate<'a>(
    route: &'a RouteOption,
    transport: &'a TransportOption,
) -> Option<&'a Estimate> {
    if route.relays.is_empty() {
        transport.estimate.as_ref().or(route.estimate.as_ref())
    } else {
        route.estimate.as_ref()
    }
}

/// The rate a route with a transport is predicted to deliver on these files: [`combined_bps`]
/// slowed by the transport's cost per file, when the size is known.
pub fn effective_bps(
    facts: &Facts,
    route: &RouteOption,
    transport: &TransportOption,
) -> Option<f64> {
    let bps = combined_bps(route, transport)?;
    match facts.size {
        Some(n) if n > 0 && bps > 0.0 && transport.per_file_s > 0.0 => {
            let bits = n as f64 * 8.0;
            Some(bits / (bits / bps + facts.files.max(1) as f64 * transport.per_file_s))
        }
        _ => Some(bps),
    }
}

/// Seconds to move `size` bytes at `bps` after `setup_s`.
pub fn predicted_seconds(size: Option<u64>, bps: Option<f64>, setup_s: f64) -> Option<f64> {
    match (size, bps) {
        (Some(n), Some(b)) if b > 0.0 => Some(setup_s + n as f64 * 8.0 / b),
        _ => None,
    }
}

/// The profit terms of one module: `rate` (its estimate over the reference rate, capped at 1;
/// 0 without an estimate) and, with a deadline, `deadline` (the share of the window its
/// predicted time fits in, capped at 1; 0 without an estimate).
fn terms_for(est: Option<&Estimate>, reference: f64, req: &Request, facts: &Facts) -> Vec<Term> {
    let mut v = vec![match est {
        Some(e) if reference > 0.0 => Term::new((e.bps / reference).min(1.0), e.source.clone()),
        _ => Term::new(0.0, "no data"),
    }];
    if let Some(w) = req.window_s() {
        let t = predicted_seconds(facts.size, est.map(|e| e.bps), facts.setup_s);
        v.push(match (t, est) {
            (Some(t), Some(e)) => Term::new((w / t).min(1.0), e.source.clone()),
            _ => Term::new(0.0, "no data"),
        });
    }
    v
}

/// Why a combination cannot run, or `None` when it can.
fn blocked(req: &Request, facts: &Facts, r: &RouteOption, t: &TransportOption) -> Option<Verdict> {
    if req.require.encrypted && !(r.encrypted && t.encrypted) {
        return Some(Verdict::NotEncrypted);
    }
    if !r.relays.is_empty() && !t.relayable {
        return Some(Verdict::NotRelayable);
    }
    let bps = effective_bps(facts, r, t);
    if bps.is_none() && (req.target_bps.is_some() || req.deadline_s.is_some()) {
        return Some(Verdict::Unpredicted);
    }
    if let (Some(b), Some(target)) = (bps, req.target_bps) {
        if b < target {
            return Some(Verdict::BelowTarget);
        }
    }
    if let (Some(s), Some(w)) = (
        predicted_seconds(facts.size, bps, facts.setup_s),
        req.window_s(),
    ) {
        if s > w {
            return Some(Verdict::MissesDeadline);
        }
    }
    None
}

/// Plans a request: builds the two-zone instance, solves it, and lists every combination.
///
/// Zone `route` holds the routes; zone `transport` one module per route and transport (`tcp`,
/// `tcp via r1`), joined by an edge only to its own route and only when the combination can
/// run. The rate and deadline terms sit on the transport modules, computed at the combination's
/// rate ([`effective_bps`]); route modules carry terms of 0 and the route's price. Summing a
/// route's rate and a transport's rate (one module each) would credit a relayed transfer with
/// the transport's direct rate, which it does not get.
pub fn plan(req: &Request, facts: &Facts) -> Result<Workflow, PlanError> {
    // The reference of the rate term: the target, or the best estimate of any combination.
    let best = facts
        .routes
        .iter()
        .flat_map(|r| {
            facts
                .transports
                .iter()
                .map(move |t| effective_bps(facts, r, t))
        })
        .flatten()
        .fold(0.0, f64::max);
    let reference = req.target_bps.unwrap_or(best);
    let mut terms = vec!["rate"];
    let mut alpha = vec![req.weights.rate];
    if req.window_s().is_some() {
        terms.push("deadline");
        alpha.push(req.weights.deadline);
    }
    let weights = Weights::new(alpha)?;
    let zero = || {
        terms
            .iter()
            .map(|_| Term::new(0.0, "counted with the transport on this route"))
            .collect::<Vec<_>>()
    };
    let routes = facts
        .routes
        .iter()
        .map(|r| Module::new(&r.name, zero(), r.cost))
        .collect();
    let (transports, edges, mut combinations) = modules(req, facts, &weights, reference);
    let instance_zones = vec![
        Zone::new("route", routes),
        Zone::new("transport", transports),
    ];
    let instance = Instance::new(instance_zones, &edges)?;
    let (solver, solved) = match req.cost_cap {
        None => ("CPMS", cpms(&instance, &weights)),
        Some(cap) => ("DPMS", dpms(&instance, &weights, u64::from(cap))),
    };
    let chosen = match solved {
        Ok(p) => {
            let per_route = facts.transports.len();
            for c in &mut combinations {
                if c.route == p.modules[0] && c.route * per_route + c.transport == p.modules[1] {
                    c.verdict = Verdict::Chosen;
                }
            }
            combinations
                .iter()
                .find(|c| c.verdict == Verdict::Chosen)
                .cloned()
                .ok_or_else(|| "the solver's plan is not a combination".to_string())
        }
        Err(PlanError::NoPath { .. }) => Err(unmet(req, &combinations)),
        Err(PlanError::OverCap { cap, cheapest }) => Err(format!(
            "the cost cap {cap} is below the cheapest workflow that can run ({cheapest})"
        )),
        Err(e) => return Err(e),
    };
    if let Some(cap) = req.cost_cap {
        for c in &mut combinations {
            if c.verdict == Verdict::LowerProfit && c.cost > u64::from(cap) {
                c.verdict = Verdict::OverCap;
            }
        }
    }
    combinations.sort_by(|a, b| {
        (b.verdict == Verdict::Chosen)
            .cmp(&(a.verdict == Verdict::Chosen))
            .then(b.profit.total_cmp(&a.profit))
    });
    Ok(Workflow {
        instance,
        weights,
        terms,
        solver,
        combinations,
        chosen,
        width: facts.transports.len(),
    })
}

/// The transport zone's modules (one per route and transport), the edges of the combinations
/// that can run, and every combination with its profit, cost, prediction and verdict.
fn modules(
    req: &Request,
    facts: &Facts,
    weights: &Weights,
    reference: f64,
) -> (Vec<Module>, Vec<Edge>, Vec<Combination>) {
    let mut transports = Vec::new();
    let mut edges = Vec::new();
    let mut combinations = Vec::new();
    for (ri, r) in facts.routes.iter().enumerate() {
        for (ti, t) in facts.transports.iter().enumerate() {
            let bps = effective_bps(facts, r, t);
            let source = if r.relays.is_empty() {
                t.estimate.as_ref().or(r.estimate.as_ref())
            } else {
                r.estimate.as_ref()
            };
            let est = bps.zip(source).map(|(bps, e)| Estimate {
                bps,
                source: e.source.clone(),
            });
            let id = if r.relays.is_empty() {
                t.name.clone()
            } else {
                format!("{} {}", t.name, r.name)
            };
            let m = Module::new(id, terms_for(est.as_ref(), reference, req, facts), 0);
            let verdict = blocked(req, facts, r, t);
            if verdict.is_none() {
                edges.push(Edge {
                    zone: 0,
                    from: ri,
                    to: transports.len(),
                });
            }
            combinations.push(Combination {
                route: ri,
                transport: ti,
                profit: weights.profit(&m).unwrap_or(0.0),
                cost: u64::from(r.cost),
                predicted_bps: bps,
                predicted_s: predicted_seconds(facts.size, bps, facts.setup_s),
                verdict: verdict.unwrap_or(Verdict::LowerProfit),
            });
            transports.push(m);
        }
    }
    (transports, edges, combinations)
}

/// Why no combination can run, from the best-predicted one.
fn unmet(req: &Request, combos: &[Combination]) -> String {
    let fastest = combos
        .iter()
        .filter(|c| !matches!(c.verdict, Verdict::NotRelayable | Verdict::NotEncrypted))
        .filter_map(|c| c.predicted_bps.map(|b| (b, c)))
        .max_by(|a, b| a.0.total_cmp(&b.0));
    if req.require.encrypted && combos.iter().all(|c| c.verdict == Verdict::NotEncrypted) {
        return "encryption is required and no route with a transport is encrypted on every leg \
                (use haul:// URLs and relays)"
            .into();
    }
    match (fastest, req.window_s(), req.target_bps) {
        (Some((_, c)), Some(w), _) if c.verdict == Verdict::MissesDeadline => format!(
            "the deadline cannot be met: the fastest workflow is predicted to take {:.1} s, the \
             window is {w:.1} s",
            c.predicted_s.unwrap_or(f64::NAN)
        ),
        (Some((b, _)), _, Some(t)) => format!(
            "the target rate cannot be met: the fastest workflow is predicted at {:.1} Mbit/s, \
             the target is {:.1} Mbit/s",
            b / 1e6,
            t / 1e6
        ),
        _ if combos.iter().any(|c| c.verdict == Verdict::Unpredicted) => {
            "nothing predicts this transfer, so its deadline or target rate cannot be checked \
             (haul send probes first; haul plan uses the history alone)"
                .into()
        }
        _ => "no route and transport can run together".into(),
    }
}
