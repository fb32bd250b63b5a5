//! The request flags `haul plan` and `haul send` share, and the request they make: a TOML
//! file (`--request`) for repeated jobs, each flag over the file's value.

use std::path::PathBuf;

use anyhow::Context;
use haul_plan::request::{Field, Request};

/// The request: what to move and what the user asks of the transfer.
#[derive(clap::Args, Debug, Clone)]
pub struct RequestArgs {
    /// Source: ftp://[user[:pass]@]host[:port]/path, haul://…, or a local path (a file or a
    /// tree). May come from --request instead.
    pub src: Option<String>,
    /// Destination, in the same forms.
    pub dst: Option<String>,
    /// A request file (TOML: src, dst, size, start_after, deadline, rate, cost_cap,
    /// [require], [weights]; docs/send.md). Flags override its values.
    #[arg(long, value_name = "FILE")]
    pub request: Option<PathBuf>,
    /// Bytes to move, when known (otherwise the source is listed), e.g. 1T.
    #[arg(long)]
    pub size: Option<String>,
    /// Earliest start, a duration from now such as 10m.
    #[arg(long, value_name = "DURATION")]
    pub start_after: Option<String>,
    /// Latest finish, a duration from now such as 30m: a plan predicted to finish later is
    /// refused before anything moves.
    #[arg(long, value_name = "DURATION")]
    pub deadline: Option<String>,
    /// Target rate, e.g. 5gbit: routes and transports predicted below it are not chosen.
    #[arg(long, value_name = "RATE")]
    pub rate: Option<String>,
    /// Cost cap in the units of the --services file's prices (DPMS instead of CPMS).
    #[arg(long)]
    pub cost_cap: Option<u32>,
    /// Every network leg and the data channel must be encrypted (haul:// URLs, TCP).
    #[arg(long)]
    pub encrypted: bool,
    /// Weight α of the rate term (default 1).
    #[arg(long, value_name = "ALPHA")]
    pub weight_rate: Option<f64>,
    /// Weight α of the deadline term (default 1).
    #[arg(long, value_name = "ALPHA")]
    pub weight_deadline: Option<f64>,
    /// Transports to consider, of tcp, plut and udt (default tcp and, where the server
    /// offers it, plut).
    #[arg(long, value_delimiter = ',', value_name = "tcp,plut,udt")]
    pub transports: Vec<String>,
    /// Operator services with their prices: a TOML file of [[relay]] address = "HOST:PORT",
    /// cost = N (docs/send.md).
    #[arg(long, value_name = "FILE")]
    pub services: Option<PathBuf>,
    #[command(flatten)]
    pub route: crate::cmd::route::RouteArgs,
    /// PEM CA certificates for haul:// servers.
    #[arg(long)]
    pub ca: Option<PathBuf>,
    /// History database (default: $XDG_DATA_HOME/haul/history.sqlite).
    #[arg(long)]
    pub history: Option<PathBuf>,
}

impl RequestArgs {
    /// The request: the file's fields, then each flag given over them.
    pub fn request(&self) -> anyhow::Result<Request> {
        let mut r = match &self.request {
            Some(p) => {
                let text = std::fs::read_to_string(p)
                    .with_context(|| format!("reading the request file {}", p.display()))?;
                Request::from_toml(&text, self.src.as_deref(), self.dst.as_deref())
                    .with_context(|| format!("request file {}", p.display()))?
            }
            None => match (&self.src, &self.dst) {
                (Some(s), Some(d)) => Request::new(s, d),
                _ => anyhow::bail!("give SRC and DST, or a --request file that names them"),
            },
        };
        for (field, v) in [
            (Field::Size, &self.size),
            (Field::StartAfter, &self.start_after),
            (Field::Deadline, &self.deadline),
            (Field::Rate, &self.rate),
        ] {
            if let Some(v) = v {
                r.set(field, v)?;
            }
        }
        if let Some(c) = self.cost_cap {
            r.cost_cap = Some(c);
        }
        r.require.encrypted |= self.encrypted;
        if let Some(w) = self.weight_rate {
            r.weights.rate = w;
        }
        if let Some(w) = self.weight_deadline {
            r.weights.deadline = w;
        }
        r.validate()?;
        Ok(r)
    }

    /// The `haul cp` flags every copy of this request takes: the history and the CA file.
    pub fn common_words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(h) = &self.history {
            w.extend(["--history".into(), h.display().to_string()]);
        }
        if let Some(ca) = &self.ca {
            w.extend(["--ca".into(), ca.display().to_string()]);
        }
        w
    }
}
