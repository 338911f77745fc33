//! stub
/// stub
pub fn run(cfg: &crate::RunCfg) -> anyhow::Result<crate::report::Report> { Ok(crate::report::Report::new("limits", cfg.seed)) }
