//! What `haul plan` and `haul send` print: the plan with each zone's module, its profit terms
//! and where they came from, the cost, the alternatives and why they lost, the predicted time;
//! for `haul send` also the profile, predicted against achieved and the time of each stage.

use haul_plan::request::Request;
use haul_plan::workflow::{Combination, Verdict, Workflow};
use serde_json::{json, Value};

use super::facts::Found;
use super::probe::{ProbeRun, Settings};
use super::Stages;
use crate::cmd::cp::Copied;
use crate::cmd::{human_bytes, human_rate};

fn secs(s: Option<f64>) -> String {
    s.map_or("unknown".into(), |s| format!("{s:.1} s"))
}

fn rate(b: Option<f64>) -> String {
    b.map_or("unknown".into(), human_rate)
}

/// The request in one line.
fn request_line(req: &Request, found: &Found) -> String {
    let mut parts = vec![match found.facts.size {
        Some(n) => format!(
            "{} in {} file{}",
            human_bytes(n),
            found.files,
            if found.files == 1 { "" } else { "s" }
        ),
        None => "size unknown".into(),
    }];
    if let Some(s) = req.start_after_s {
        parts.push(format!("start after {s:.1} s"));
    }
    if let Some(d) = req.deadline_s {
        parts.push(format!("deadline {d:.1} s"));
    }
    if let Some(b) = req.target_bps {
        parts.push(format!("target {}", human_rate(b)));
    }
    if let Some(c) = req.cost_cap {
        parts.push(format!("cost cap {c}"));
    }
    if req.require.encrypted {
        parts.push("encrypted".into());
    }
    parts.join("; ")
}

/// A combination's name: `route + transport`.
fn name(found: &Found, c: &Combination) -> String {
    format!(
        "{} + {}",
        found.facts.routes[c.route].name, found.facts.transports[c.transport].name
    )
}

/// The plan as lines of text.
fn plan_lines(req: &Request, found: &Found, wf: &Workflow) -> Vec<String> {
    let mut out = vec![
        format!("haul plan: {} -> {}", req.src, req.dst),
        format!("  request: {}", request_line(req, found)),
    ];
    match &wf.chosen {
        Ok(c) => {
            out.push(format!(
                "  plan ({} over {} zones, {} modules): profit {:.3}, cost {}",
                wf.solver,
                wf.instance.zone_count(),
                wf.instance.module_count(),
                c.profit,
                c.cost
            ));
            for (zone, idx) in wf.instance.zones().iter().zip(wf.modules_of(c)) {
                let m = &zone.modules[idx];
                let terms: Vec<String> = wf
                    .terms
                    .iter()
                    .zip(&m.profit)
                    .map(|(n, t)| format!("{n} {:.2} [{}]", t.value, t.source))
                    .collect();
                out.push(format!(
                    "    {:<10} {:<24} {}",
                    zone.name,
                    m.id,
                    terms.join("; ")
                ));
            }
            out.push(format!(
                "  predicted: {}, {}",
                rate(c.predicted_bps),
                secs(c.predicted_s)
            ));
        }
        Err(why) => out.push(format!("  cannot be met: {why}")),
    }
    let others: Vec<&Combination> = wf
        .combinations
        .iter()
        .filter(|c| c.verdict != Verdict::Chosen)
        .collect();
    if !others.is_empty() {
        out.push("  alternatives:".into());
        for c in others {
            out.push(format!(
                "    {:<34} profit {:.3}  cost {:<4} predicted {}, {}  {}",
                name(found, c),
                c.profit,
                c.cost,
                rate(c.predicted_bps),
                secs(c.predicted_s),
                c.verdict.text()
            ));
        }
    }
    for n in &found.notes {
        out.push(format!("  note: {n}"));
    }
    out
}

fn combination_json(found: &Found, c: &Combination) -> Value {
    json!({
        "route": found.facts.routes[c.route].name,
        "relays": found.facts.routes[c.route].relays,
        "transport": found.facts.transports[c.transport].name,
        "profit": c.profit,
        "cost": c.cost,
        "predicted_bps": c.predicted_bps,
        "predicted_s": c.predicted_s,
        "verdict": c.verdict.text(),
    })
}

/// The plan as JSON.
fn plan_json(req: &Request, found: &Found, wf: &Workflow) -> Value {
    let zones: Vec<Value> = wf
        .instance
        .zones()
        .iter()
        .map(|z| {
            json!({
                "name": z.name,
                "modules": z.modules.iter().map(|m| json!({
                    "id": m.id,
                    "cost": m.cost,
                    "terms": wf.terms.iter().zip(&m.profit).map(|(n, t)| json!({
                        "name": n, "value": t.value, "source": t.source,
                    })).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({
        "source": req.src,
        "destination": req.dst,
        "request": {
            "size": found.facts.size,
            "files": found.files,
            "start_after_s": req.start_after_s,
            "deadline_s": req.deadline_s,
            "target_bps": req.target_bps,
            "cost_cap": req.cost_cap,
            "encrypted": req.require.encrypted,
            "weights": {"rate": req.weights.rate, "deadline": req.weights.deadline},
        },
        "solver": wf.solver,
        "weights": wf.weights.alpha(),
        "terms": wf.terms,
        "zones": zones,
        "chosen": wf.chosen.as_ref().ok().map(|c| combination_json(found, c)),
        "refused": wf.chosen.as_ref().err(),
        "combinations": wf.combinations.iter().map(|c| combination_json(found, c)).collect::<Vec<_>>(),
        "pair": [found.pair.0, found.pair.1],
        "notes": found.notes,
    })
}

/// Prints `haul plan`'s answer.
pub fn print_plan(
    req: &Request,
    found: &Found,
    wf: &Workflow,
    discover_s: f64,
    as_json: bool,
) -> anyhow::Result<()> {
    if as_json {
        let mut v = plan_json(req, found, wf);
        v["discover_s"] = json!(discover_s);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for l in plan_lines(req, found, wf) {
            println!("{l}");
        }
    }
    Ok(())
}

/// Prints why `haul send` moved nothing.
pub fn print_refusal(
    req: &Request,
    found: &Found,
    wf: &Workflow,
    why: &str,
    stages: &Stages,
    as_json: bool,
) -> anyhow::Result<()> {
    if as_json {
        let mut v = plan_json(req, found, wf);
        v["outcome"] = json!("refused");
        v["stages"] = json!(stages);
        println!("{}", serde_json::to_string_pretty(&v)?);
    } else {
        for l in plan_lines(req, found, wf) {
            eprintln!("{l}");
        }
        eprintln!("haul send: refused before moving any data: {why}");
    }
    Ok(())
}

/// A finished `haul send`.
pub struct Sent<'a> {
    pub req: &'a Request,
    pub found: &'a Found,
    pub wf: &'a Workflow,
    pub chosen: &'a Combination,
    pub settings: &'a Settings,
    pub probes: &'a [ProbeRun],
    pub copied: &'a Copied,
    pub attempts: &'a [super::Attempt],
    pub stages: &'a Stages,
}

impl Sent<'_> {
    fn achieved_bps(&self) -> f64 {
        self.copied.summary.mean_bps()
    }

    /// Seconds from the request to the end of the transfer, waiting excluded.
    fn total_s(&self) -> f64 {
        let s = self.stages;
        s.discover_s + s.profile_s + s.plan_s + s.transfer_s
    }

    /// Whether the deadline (counted from the request) was met.
    fn deadline_met(&self) -> Option<bool> {
        self.req
            .deadline_s
            .map(|d| self.stages.wait_s + self.total_s() <= d)
    }

    fn json(&self) -> Value {
        let s = &self.copied.summary;
        let mut v = plan_json(self.req, self.found, self.wf);
        v["outcome"] = json!("ok");
        v["settings"] = json!(self.settings);
        v["probes"] = json!(self.probes);
        v["attempts"] = json!(self.attempts);
        v["stages"] = json!(self.stages);
        v["transfer"] = json!({
            "source": self.copied.args.src,
            "destination": self.copied.args.dst,
            "files": s.files,
            "bytes": s.bytes,
            "duration_s": s.duration_s,
            "throughput_bps": self.achieved_bps(),
            "verified_files": s.verified,
            "checksum": s.checksum,
            "parallelism": self.copied.opts.parallelism,
            // The last copy's: after a re-plan the first choice did not finish the transfer.
            "transport": self.attempts.last().map_or(
                self.found.facts.transports[self.chosen.transport].name.as_str(),
                |a| a.transport.as_str(),
            ),
            "tuning": self.copied.tuning,
        });
        v["predicted_bps"] = json!(self.chosen.predicted_bps);
        v["predicted_s"] = json!(self.chosen.predicted_s);
        v["achieved_bps"] = json!(self.achieved_bps());
        v["total_s"] = json!(self.total_s());
        v["deadline_met"] = json!(self.deadline_met());
        v
    }

    /// Prints the report: JSON, or the plan and a summary unless quiet.
    pub fn print(&self, as_json: bool, quiet: bool) -> anyhow::Result<()> {
        if as_json {
            println!("{}", serde_json::to_string_pretty(&self.json())?);
            return Ok(());
        }
        if quiet {
            return Ok(());
        }
        let s = &self.copied.summary;
        let verify = match &s.checksum {
            Some(a) => format!("{} of {} verified ({a})", s.verified, s.files),
            None => "nothing to verify (memory-to-memory)".into(),
        };
        println!(
            "haul send: {} files, {} in {:.2} s, {}; {verify}",
            s.files,
            human_bytes(s.bytes),
            s.duration_s,
            human_rate(self.achieved_bps())
        );
        println!(
            "  plan: {} ({}); predicted {}, {}; achieved {}, {:.1} s",
            name(self.found, self.chosen),
            self.wf.solver,
            rate(self.chosen.predicted_bps),
            secs(self.chosen.predicted_s),
            human_rate(self.achieved_bps()),
            s.duration_s
        );
        if self.attempts.len() > 1 {
            for (i, a) in self.attempts.iter().enumerate() {
                println!(
                    "  {} {}: {} + {}, {} in {:.1} s{}",
                    if a.trial { "trial" } else { "copy" },
                    i + 1,
                    a.route,
                    a.transport,
                    human_bytes(a.bytes),
                    a.seconds,
                    a.stopped.as_ref().map_or(String::new(), |w| {
                        format!("; {}: {w}", if a.trial { "stopped" } else { "re-planned" })
                    })
                );
            }
        }
        for c in self
            .wf
            .combinations
            .iter()
            .filter(|c| c.verdict != Verdict::Chosen)
        {
            println!(
                "  not chosen: {} (predicted {}): {}",
                name(self.found, c),
                rate(c.predicted_bps),
                c.verdict.text()
            );
        }
        let words = self.settings.words();
        println!(
            "  settings: {} ({})",
            if words.is_empty() {
                "haul cp's defaults".into()
            } else {
                words.join(" ")
            },
            self.settings.source
        );
        if !self.probes.is_empty() {
            let moved: u64 = self.probes.iter().map(|p| p.bytes).sum();
            println!(
                "  profile: {} probes, {} memory to memory",
                self.probes.len(),
                human_bytes(moved)
            );
        }
        let st = self.stages;
        println!(
            "  stages: discover {:.2} s, profile {:.2} s, plan {:.3} s, transfer {:.2} s; total {:.2} s",
            st.discover_s,
            st.profile_s,
            st.plan_s,
            st.transfer_s,
            self.total_s()
        );
        if let Some(met) = self.deadline_met() {
            println!(
                "  deadline: {} ({:.1} s of {:.1} s)",
                if met { "met" } else { "MISSED" },
                st.wait_s + self.total_s(),
                self.req.deadline_s.unwrap_or(0.0)
            );
        }
        for n in &self.found.notes {
            println!("  note: {n}");
        }
        Ok(())
    }
}
