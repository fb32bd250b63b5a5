//! GridFTP server (haul serve).
