//! `haul route SRC DST`: the route a transfer should take, direct or through relays, chosen by
//! maximin over predicted leg throughputs (002 §2.4) that the servers share (`SITE BTC`) and the
//! client's own history adds; `haul cp --route` uses the same choice.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use haul_overlay::gather::{gather, Gathered, Server};
use haul_overlay::route::RouteParams;
use haul_overlay::route::{
    choose, nest_url, risk_factor, Candidate, Graph, HostId, Leg, Reason, Route,
};
use haul_store::{Filter, Outcome, Store};
use haul_tune::predict::{Measurement, Selector};
use haul_xfer::session::{could_carry, Session};
use haul_xfer::tls::ClientTls;
use haul_xfer::{Endpoint, RemoteUrl};

/// Arguments of `haul route`.
#[derive(clap::Args, Debug)]
pub struct Args {
    /// Source: ftp://host[:port]/path, haul://…, or a local path.
    pub src: String,
    /// Destination, in the same forms.
    pub dst: String,
    #[command(flatten)]
    pub choice: RouteArgs,
    /// History database (default: $XDG_DATA_HOME/haul/history.sqlite).
    #[arg(long)]
    pub history: Option<PathBuf>,
    /// PEM CA certificates for haul:// servers.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// Print JSON.
    #[arg(long)]
    pub json: bool,
}

/// How routes are chosen (shared with `haul cp --route`).
#[derive(clap::Args, Debug, Clone)]
pub struct RouteArgs {
    /// Candidate relays: HOST:PORT or ftp://[user:pass@]HOST:PORT, comma-separated.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub relays: Vec<String>,
    /// Split only when the predicted gain over direct exceeds this fraction.
    #[arg(long, default_value_t = 0.5)]
    pub threshold: f64,
    /// Judge each leg of a chain this many recent prediction errors below its prediction
    /// (0: at its prediction, as the thesis does).
    #[arg(long, default_value_t = haul_overlay::route::DEFAULT_RISK, value_name = "Z")]
    pub risk: f64,
    /// The most relays in a chain.
    #[arg(long, default_value_t = 2)]
    pub max_relays: usize,
    /// Aggregating registries to ask first (`haul serve --registry-gather`): HOST:PORT or
    /// ftp://[user:pass@]HOST:PORT, comma-separated or repeated. A relay a registry holds
    /// predictions of is not asked itself; one that is down is skipped with a warning.
    #[arg(long, value_delimiter = ',', value_name = "HOST:PORT,...")]
    pub registry: Vec<String>,
}

/// A chosen route with the URLs that take it.
pub struct Planned {
    /// The choice.
    pub route: Route,
    /// The source URL or path to use.
    pub src: String,
    /// The destination URL or path to use.
    pub dst: String,
    /// What the servers said, and what could not be asked.
    pub gathered: Gathered,
    /// Each candidate relay's learned overhead factor.
    pub discounts: BTreeMap<HostId, f64>,
    /// The logged-in sessions of the gather, when kept ([`plan`]'s `keep`).
    pub sessions: Vec<Session>,
}

/// Relays as given: `host:port` or URLs. A bare `host:port` takes the scheme a copy between
/// `src` and `dst` needs: `gsiftp://` when either end is (a relay acts for the user on a
/// `gsiftp://` hop only when the user logged in to it with GSI), else `ftp://`.
pub fn relay_urls<'a>(
    relays: impl IntoIterator<Item = &'a str>,
    src: &str,
    dst: &str,
) -> anyhow::Result<Vec<RemoteUrl>> {
    let gsi = [src, dst]
        .iter()
        .any(|e| matches!(Endpoint::parse(e), Ok(Endpoint::Remote(u)) if u.gsi));
    let scheme = if gsi { "gsiftp" } else { "ftp" };
    relays.into_iter().map(|r| relay_url(r, scheme)).collect()
}

/// A relay or registry as given: `host:port` (read with `scheme`) or a URL.
pub fn relay_url(s: &str, scheme: &str) -> anyhow::Result<RemoteUrl> {
    let text = if s.contains("://") {
        s.to_string()
    } else {
        format!("{scheme}://{s}/")
    };
    match Endpoint::parse(&text)? {
        Endpoint::Remote(u) => Ok(u),
        Endpoint::Local(_) => anyhow::bail!("{s}: not a server"),
    }
}

/// The client's successful copies of at least 1 MiB.
fn copies(history: &Option<PathBuf>) -> Vec<haul_store::TransferRecord> {
    let path = history.clone().unwrap_or_else(Store::default_path);
    let Ok(store) = Store::open(&path) else {
        return Vec::new();
    };
    store
        .list(&Filter {
            kind: Some("cp".into()),
            outcome: Some(Outcome::Ok),
            ..Filter::default()
        })
        .unwrap_or_default()
        .into_iter()
        .filter(|r| r.bytes >= 1 << 20 && r.duration_s > 0.0)
        .collect()
}

/// Each relay's overhead factor, learned from the client's copies that `--route auto` sent
/// through it alone: the route's prediction against what the copy achieved
/// (`learn_discount`; 1 for a relay with no such copies).
fn discounts(rows: &[haul_store::TransferRecord], relays: &[RemoteUrl]) -> Vec<Candidate> {
    relays
        .iter()
        .map(|u| {
            let id = u.host_port();
            let pairs: Vec<(f64, f64)> = rows
                .iter()
                .filter_map(|r| {
                    let route = r.params.extra.get("route")?;
                    let via = route.get("relays")?.as_array()?;
                    let predicted = route.get("predicted_bps")?.as_f64()?;
                    (via.len() == 1 && via[0].as_str() == Some(id.as_str()))
                        .then(|| (predicted, r.mean_bps()))
                })
                .collect();
            Candidate {
                host: id,
                discount: haul_overlay::route::learn_discount(&pairs),
            }
        })
        .collect()
}

/// The legs the client's own history knows: its direct (not relayed) copies, per ordered pair
/// of hosts, predicted by the selector.
fn local_legs(rows: &[haul_store::TransferRecord]) -> Vec<Leg> {
    // The history names the client's own end `local`, as the route does (`LOCAL`).
    let mut pairs: BTreeMap<(String, String), Vec<Measurement>> = BTreeMap::new();
    for r in rows {
        if super::relayed(r) {
            continue;
        }
        let m = Measurement::new(r.started_at + r.duration_s, r.mean_bps());
        pairs
            .entry((r.source_host.clone(), r.destination_host.clone()))
            .or_default()
            .push(m);
    }
    Selector::default()
        .predict_each(pairs, usize::MAX, super::now_unix())
        .into_iter()
        .map(|((from, to), p)| Leg {
            from,
            to,
            bps: p.bps,
            age_s: p.age_s,
            samples: p.samples,
            err_pct: p.error_pct,
        })
        .collect()
}

/// Chooses the route from `src` to `dst` and gives the URLs that take it: relays nest around
/// the source URL for downloads and third-party copies (the data comes through them) and
/// around the destination URL for uploads.
pub fn plan(
    src: &str,
    dst: &str,
    a: &RouteArgs,
    (history, ca): (&Option<PathBuf>, &Option<PathBuf>),
    keep: bool,
) -> anyhow::Result<Planned> {
    let (s, d) = (Endpoint::parse(src)?, Endpoint::parse(dst)?);
    let mut tls = match ca {
        Some(ca) => Some(ClientTls::from_ca_file(ca).context("--ca")?),
        None => None,
    };
    let relays = relay_urls(a.relays.iter().map(String::as_str), src, dst).context("--relays")?;
    let registries = a
        .registry
        .iter()
        .map(|r| relay_url(r, "ftp"))
        .collect::<anyhow::Result<Vec<_>>>()
        .context("--registry")?;
    let server = |u: &RemoteUrl, end| Server {
        id: u.host_port(),
        url: u.clone(),
        end,
    };
    let mut servers: Vec<Server> = Vec::new();
    for e in [&s, &d] {
        if let Endpoint::Remote(u) = e {
            servers.push(server(u, true));
        }
    }
    servers.extend(relays.iter().map(|u| server(u, false)));
    // gsiftp:// servers are asked under GSI, with the user's proxy.
    if servers
        .iter()
        .map(|s| &s.url)
        .chain(&registries)
        .any(|u| u.gsi)
    {
        let gsi = haul_xfer::gsi::ClientGsi::from_environment()?;
        tls = Some(tls.unwrap_or_default().with_gsi(gsi));
    }
    let rows = copies(history);
    let (gathered, sessions) = gather(
        &servers,
        &registries,
        &local_legs(&rows),
        (tls.as_ref(), keep),
    );
    let graph = Graph::new(gathered.legs.clone())?;
    let candidates = discounts(&rows, &relays);
    let params = RouteParams {
        max_relays: a.max_relays,
        threshold: a.threshold,
        risk: a.risk,
    };
    let route = choose(
        &graph,
        &super::host_id(&s),
        &super::host_id(&d),
        &candidates,
        &params,
    )?;
    let by_id: BTreeMap<HostId, &RemoteUrl> = relays.iter().map(|u| (u.host_port(), u)).collect();
    let chain: Vec<&RemoteUrl> = route
        .relays()
        .iter()
        .filter_map(|r| by_id.get(r).copied())
        .collect();
    let (src_out, dst_out) = through_route(src, dst, &chain)?;
    Ok(Planned {
        route,
        src: src_out,
        dst: dst_out,
        gathered,
        discounts: candidates
            .iter()
            .map(|c| (c.host.clone(), c.discount))
            .collect(),
        sessions,
    })
}

/// The source and destination that take a transfer along `relays` in the route's order, from
/// the source to the destination (as [`Route::relays`] lists them). The URL nests from the
/// client outwards, so around a remote source (a download, or a third-party copy, where the
/// destination server fetches) the relay nearest the destination comes first, and around the
/// destination (an upload) the relay nearest the client, which is the source.
pub fn through_route(
    src: &str,
    dst: &str,
    relays: &[&RemoteUrl],
) -> anyhow::Result<(String, String)> {
    let mut nesting = relays.to_vec();
    if matches!(Endpoint::parse(src)?, Endpoint::Remote(_)) {
        nesting.reverse();
    }
    through(src, dst, &nesting)
}

/// The source and destination that take a transfer through `relays`, in order from the
/// client: relays nest around the source URL for downloads and third-party copies (the data
/// comes through them) and around the destination URL for uploads.
pub fn through(src: &str, dst: &str, relays: &[&RemoteUrl]) -> anyhow::Result<(String, String)> {
    if relays.is_empty() {
        return Ok((src.to_string(), dst.to_string()));
    }
    let mut chain: Vec<String> = relays.iter().map(|u| u.server(true)).collect();
    match (Endpoint::parse(src)?, Endpoint::parse(dst)?) {
        (Endpoint::Remote(u), _) => {
            chain.push(u.server(true));
            Ok((nest_url(&chain, &u.path)?, dst.to_string()))
        }
        (Endpoint::Local(_), Endpoint::Remote(u)) => {
            chain.push(u.server(true));
            Ok((src.to_string(), nest_url(&chain, &u.path)?))
        }
        _ => anyhow::bail!("a route needs a server at one end"),
    }
}

/// `haul cp --route`: the source and destination to copy between, the route chosen when it
/// was `auto`, and then the gather's sessions the copy can log in with ([`first_hops`]).
pub fn for_cp(
    src: &str,
    dst: &str,
    route: &str,
    a: &RouteArgs,
    history: &Option<PathBuf>,
    ca: &Option<PathBuf>,
) -> anyhow::Result<(String, String, Option<Route>, Vec<Session>)> {
    match route {
        "direct" => Ok((src.to_string(), dst.to_string(), None, Vec::new())),
        "auto" => {
            let p = plan(src, dst, a, (history, ca), true)?;
            let sessions = first_hops(p.sessions, &p.src, &p.dst);
            Ok((p.src, p.dst, Some(p.route), sessions))
        }
        list => {
            let relays = relay_urls(list.split(','), src, dst)?;
            let refs: Vec<&RemoteUrl> = relays.iter().collect();
            let (s, d) = through(src, dst, &refs)?;
            Ok((s, d, None, Vec::new()))
        }
    }
}

/// Of the gather's `sessions`, the ones the copy from `src` to `dst` can log in with (its
/// first hop at each remote end, [`could_carry`]); the others are quit. GSI sessions are
/// quit too: the copy's own login sets the data channels' protection.
fn first_hops(sessions: Vec<Session>, src: &str, dst: &str) -> Vec<Session> {
    let ends: Vec<RemoteUrl> = [src, dst]
        .into_iter()
        .filter_map(|e| match Endpoint::parse(e) {
            Ok(Endpoint::Remote(u)) => Some(u),
            _ => None,
        })
        .collect();
    let mut kept = Vec::new();
    for s in sessions {
        if !s.url().gsi && ends.iter().any(|e| could_carry(s.url(), e)) {
            kept.push(s);
        } else {
            s.quit();
        }
    }
    kept
}

/// Why, in words.
fn reason(r: &Route) -> String {
    let pct = |g: f64| format!("{:+.0} %", g * 100.0);
    match &r.reason {
        Reason::DirectOnly => "no chain is predicted faster than direct".into(),
        Reason::BelowThreshold { gain, .. } => {
            format!(
                "the best chain's predicted gain ({}) is under the threshold",
                pct(*gain)
            )
        }
        Reason::Split { gain } => format!("predicted gain over direct {}", pct(*gain)),
        Reason::DirectDown => "direct is predicted down (an outage)".into(),
        Reason::NoDirectPrediction => "direct has no prediction; this chain has".into(),
        Reason::Unreachable => "no route has a prediction: direct, untried".into(),
    }
}

fn mbit(bps: f64) -> String {
    format!("{:.1} Mbit/s", bps / 1e6)
}

/// Runs `haul route`.
pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let p = plan(
        &args.src,
        &args.dst,
        &args.choice,
        (&args.history, &args.ca),
        false,
    )?;
    let mut out = std::io::stdout().lock();
    if args.json {
        let legs: Vec<_> = p
            .route
            .legs
            .iter()
            .map(|l| {
                serde_json::json!({"from": l.from, "to": l.to, "bps": l.bps,
                    "age_s": l.age_s, "samples": l.samples, "err_pct": l.err_pct,
                    "judged_bps": l.bps * risk_factor(l.err_pct, args.choice.risk)})
            })
            .collect();
        let j = serde_json::json!({
            "hops": p.route.hops,
            "discounts": p.discounts,
            "relays": p.route.relays(),
            "predicted_bps": p.route.predicted_bps,
            "direct_bps": p.route.direct_bps,
            "gain": p.route.gain,
            "risk": args.choice.risk,
            "reason": reason(&p.route),
            "source": haul_overlay::redact(&p.src),
            "destination": haul_overlay::redact(&p.dst),
            "legs": legs,
            "notes": p.gathered.notes,
        });
        writeln!(out, "{}", serde_json::to_string_pretty(&j)?)?;
        return Ok(ExitCode::SUCCESS);
    }
    let via = if p.route.relays().is_empty() {
        "direct".to_string()
    } else {
        format!("via {}", p.route.relays().join(", "))
    };
    writeln!(out, "route: {} ({via})", p.route.hops.join(" -> "))?;
    writeln!(out, "why:   {}", reason(&p.route))?;
    let judged = match args.choice.risk {
        z if z > 0.0 && !p.route.relays().is_empty() => {
            format!(" (legs judged {z} recent errors below their predictions)")
        }
        _ => String::new(),
    };
    writeln!(
        out,
        "predicted {}{judged}; direct {}",
        mbit(p.route.predicted_bps),
        p.route.direct_bps.map_or("unknown".into(), mbit)
    )?;
    for l in &p.route.legs {
        let err = l
            .err_pct
            .map_or(String::new(), |e| format!(", recent error {e:.0} %"));
        writeln!(
            out,
            "  leg {} -> {}: {} ({} samples, newest {:.0} s old{err})",
            l.from,
            l.to,
            mbit(l.bps),
            l.samples,
            l.age_s
        )?;
    }
    writeln!(
        out,
        "use:   haul cp {} {}",
        haul_overlay::redact(&p.src),
        haul_overlay::redact(&p.dst)
    )?;
    for n in &p.gathered.notes {
        writeln!(out, "note:  {n}")?;
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::{relay_url, relay_urls, through_route};

    #[test]
    fn a_route_nests_its_relays_from_the_client_outwards() {
        let (r1, r2) = (
            relay_url("r1:2811", "ftp").unwrap(),
            relay_url("r2:2811", "ftp").unwrap(),
        );
        // The route s -> r1 -> r2 -> client: the client asks r2, r2 asks r1, r1 fetches from s.
        let (s, d) = through_route("ftp://s:2811/d/f", "/tmp/f", &[&r1, &r2]).unwrap();
        assert_eq!(s, "ftp://r2:2811/ftp://r1:2811/ftp://s:2811/d/f");
        assert_eq!(d, "/tmp/f");
        // A third-party copy s -> r1 -> r2 -> t: t fetches from r2.
        let (s, _) = through_route("ftp://s:2811/f", "ftp://t:2811/f", &[&r1, &r2]).unwrap();
        assert_eq!(s, "ftp://r2:2811/ftp://r1:2811/ftp://s:2811/f");
        // The route client -> r1 -> r2 -> t: the client sends to r1, r1 to r2, r2 to t.
        let (s, d) = through_route("/tmp/f", "ftp://t:2811/d/f", &[&r1, &r2]).unwrap();
        assert_eq!(
            (s.as_str(), d.as_str()),
            ("/tmp/f", "ftp://r1:2811/ftp://r2:2811/ftp://t:2811/d/f")
        );
    }

    #[test]
    fn a_bare_relay_takes_gsiftp_when_either_end_is_gsiftp() {
        let given = ["r1:2811", "ftp://r2:2812", "haul://r3:2813"];
        for (src, dst, gsi) in [
            ("gsiftp://a:2811/f", "/tmp/f", true),
            ("/tmp/f", "gsiftp://a:2811/f", true),
            ("ftp://a:2811/f", "/tmp/f", false),
            ("haul://a:2811/f", "/tmp/f", false),
        ] {
            let r = relay_urls(given, src, dst).unwrap();
            assert_eq!(r[0].gsi, gsi, "{src} -> {dst}");
            assert_eq!((r[0].host.as_str(), r[0].port), ("r1", 2811));
            // Relays given as URLs keep their own scheme.
            assert!(!r[1].gsi && !r[1].tls);
            assert!(r[2].tls);
        }
        assert!(relay_urls(["/tmp/local"], "ftp://a/f", "/tmp/f").is_err());
    }
}
