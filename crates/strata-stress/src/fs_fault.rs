//! stub
/// stub
pub fn run(cfg: &crate::RunCfg) -> crate::report::Report { crate::report::Report::new("fs-fault", cfg.seed) }
