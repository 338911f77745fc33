//! stub
/// stub
pub fn generate(_d: &std::path::Path) -> anyhow::Result<usize> { Ok(0) }
