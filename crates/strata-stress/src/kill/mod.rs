//! stub
/// stub
pub fn run(cfg: &crate::RunCfg) -> anyhow::Result<crate::report::Report> { Ok(crate::report::Report::new("kill", cfg.seed)) }
/// stub
pub mod child { /// stub
pub fn main(_s: &str) -> anyhow::Result<()> { Ok(()) } }
