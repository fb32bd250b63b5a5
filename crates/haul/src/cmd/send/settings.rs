//! The settings a `haul send` copy runs with (streams, socket buffer) and where they came from.

/// The settings the transfer runs with, and where they came from.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Settings {
    /// TCP streams per file (`-p`); None: haul cp's default.
    pub parallelism: Option<u32>,
    /// Socket buffer (`--tcp-buffer`); None: the kernel's autotuning.
    pub tcp_buffer: Option<u64>,
    /// Where they came from.
    pub source: String,
}

impl Settings {
    /// These settings when `keep`, else haul cp's defaults (a re-plan to another transport).
    pub fn only_if(self, keep: bool) -> Settings {
        if keep {
            self
        } else {
            Settings {
                parallelism: None,
                tcp_buffer: None,
                source: "haul cp's defaults (re-planned to another transport)".into(),
            }
        }
    }

    /// The `haul cp` flags that apply them.
    pub fn words(&self) -> Vec<String> {
        let mut w = Vec::new();
        if let Some(p) = self.parallelism {
            w.extend(["-p".into(), p.to_string()]);
        }
        if let Some(b) = self.tcp_buffer {
            w.extend(["--tcp-buffer".into(), b.to_string()]);
        }
        w
    }
}
